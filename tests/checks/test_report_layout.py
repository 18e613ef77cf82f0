"""The doctor's terminal report as a newcomer reads it: one blank line between its parts."""

from __future__ import annotations

from pathlib import Path

import pytest
from machines import demo_recording

from checks.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_a_run_with_nothing_to_fix_has_no_double_blank_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--from", str(demo_recording(tmp_path)), "--only", "npu.health"]) == 0
    out = capsys.readouterr().out
    assert "to fix:" not in out
    assert "\n\n\n" not in out
    assert "\n\n1 check: 1 passed" in out


def test_a_replay_does_not_advise_options_a_replay_refuses(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recording = str(demo_recording(tmp_path))
    main(["--from", recording, "--only", "npu.health"])
    out = capsys.readouterr().out
    assert "target: the recorded shell — " in out
    assert "--env-file FILE" not in out and "ascend-doctor bundle --pid PID" in out
    # the advice it replaced is refused in a replay
    assert main(["--from", recording, "--pid", "1"]) == 3
    assert "leave out --pid and --env-file" in capsys.readouterr().err
