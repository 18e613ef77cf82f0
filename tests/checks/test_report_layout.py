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


def test_a_long_summary_is_cut_after_a_whole_clause_and_points_to_verbose() -> None:
    """Five known issues make a summary of 700 characters: the report keeps the clauses that fit
    and says --verbose shows the rest; a short one is untouched."""
    from checks.cli.report_terminal import BRIEF_CHARS, brief

    clauses = [f"known issue {n}: " + "x" * 130 for n in range(5)]
    long = "; ".join(clauses)
    cut = brief(long)
    assert len(cut) <= BRIEF_CHARS + 30 and cut.endswith("(more: --verbose)")
    assert cut.startswith(f"{clauses[0]}; {clauses[1]}; …")
    assert brief("driver 24.1.rc2; firmware 7.5") == "driver 24.1.rc2; firmware 7.5"
    one = "y" * (BRIEF_CHARS + 50)
    assert brief(one) == one  # a single clause is never cut mid-way


def test_the_verbose_report_keeps_the_whole_summary() -> None:
    import io
    from types import SimpleNamespace

    from checks.cli.ansi import Writer
    from checks.cli.report_terminal import _verbose_result, result_lines
    from checks.model import Finding, Result

    long = "; ".join(f"reason{n} " + "z" * 120 for n in range(6))
    check = SimpleNamespace(id="serving.support", title="t", category="c",
                            playbook_id="serving.support")
    result = Result.of(check, Finding("warn", long), 1.0)  # type: ignore[arg-type]
    line = next(result_lines([result]))
    assert line[-1][0].endswith("(more: --verbose)")
    stream = io.StringIO()
    _verbose_result(result, Writer(stream, False, 2000))
    assert "reason5" in stream.getvalue()
