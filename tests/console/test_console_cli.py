"""`ascend-console` command line: help, defaults, one-line usage errors with exit code 3."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from console.chat.local import DEMO_DIR_ENV
from console.recording import Recorder
from console.ui.cli import main, parse_options


def test_help_reads_well() -> None:
    out = subprocess.run([sys.executable, "-m", "console.ui.cli", "--help"], capture_output=True,
                         text=True, timeout=60, check=True).stdout
    for word in ("--model PATH", "--demo-model KIND", "--interval SECONDS", "--replay FILE",
                 "--read-only", "make demo", "keys (from the prompt too):", "--version",
                 "--endpoint-model NAME", "--endpoint-api-key-env NAME, --api-key-env NAME"):
        assert word in out


def test_defaults_open_the_demo_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DEMO_DIR_ENV, raising=False)
    options = parse_options([])
    assert options.model is not None
    assert options.model.demo_kind == "smollm2-moe-fp8"
    assert options.model.path.parts[-2:] == ("demo-assets", "smollm2-moe-fp8")
    assert options.interval_s == 2.0 and options.root == "/" and not options.read_only


def test_demo_dir_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(DEMO_DIR_ENV, str(tmp_path))
    options = parse_options(["--demo-model", "qwen3-moe-fp8-tiny", "--device", "cpu",
                             "--dtype", "float32"])
    assert options.model is not None
    assert options.model.path == tmp_path / "qwen3-moe-fp8-tiny"
    assert (options.model.device, options.model.dtype) == ("cpu", "float32")


def test_model_replay_and_flags(tmp_path: Path) -> None:
    recording = tmp_path / "r.db"
    Recorder(recording).close()  # --replay refuses what is not a recording
    options = parse_options(["--model", str(tmp_path), "--replay", str(recording),
                             "--read-only", "--interval", "0.5", "--root", str(tmp_path)])
    assert options.model is not None and options.model.path == tmp_path
    assert options.model.demo_kind is None
    assert options.replay == recording and options.read_only
    assert options.root == str(tmp_path) and options.npu_timeout_s == pytest.approx(1.25)
    assert parse_options(["--no-model"]).model is None


@pytest.mark.parametrize("argv", [
    ["--interval", "0"],
    ["--interval", "soon"],
    ["--device", "tpu"],
    ["--demo-model", "llama-70b"],
    ["--model", "/nonexistent/model"],
    ["--replay", "/nonexistent.db"],
    ["--record", "x.db", "--read-only"],
    ["--model", "/tmp", "--demo-model", "smollm2"],
    ["--root", "/nonexistent/root"],
    ["--bogus"],
])
def test_bad_arguments_are_one_line_and_exit_3(argv: list[str],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("ascend-console: ")


@pytest.mark.parametrize(("argv", "meant"), [
    (["--mdoel", "/models/x"], "--model"),
    (["--endpont", "http://127.0.0.1:8000/v1"], "--endpoint"),
    (["--device", "npuu"], "npu"),
])
def test_a_typo_says_what_was_meant(argv: list[str], meant: str,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"(did you mean {meant}?)" in err


def test_a_bad_policy_file_is_exit_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("- not a mapping\n")
    assert main(["--policy", str(policy), "--no-model"]) == 3
    assert str(policy) in capsys.readouterr().err


def test_record_with_or_without_a_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ASCEND_CONSOLE_RECORDINGS", str(tmp_path / "recs"))
    given = parse_options(["--no-model", "--record", str(tmp_path / "box.db")])
    assert given.record == tmp_path / "box.db"
    assert given.recordings_dir == tmp_path / "recs"
    default = parse_options(["--no-model", "--record"])
    assert default.record is not None and default.record.parent == tmp_path / "recs"
    assert default.record.suffix == ".sqlite" and default.record.name.endswith("Z.sqlite")
    assert parse_options(["--no-model"]).record is None
    assert main(["--record", "--read-only"]) == 3
