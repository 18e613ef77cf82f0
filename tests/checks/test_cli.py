"""`ascend-doctor` as a user meets it: sub-commands, inputs, exit codes, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CORPUS_DIR, FakeRoot

from checks.cli import main

ROOT = Path(__file__).resolve().parents[2]
CORPUS = CORPUS_DIR / "npu-smi"


def corpus(prefix: str) -> Path:
    return next(CORPUS.glob(f"{prefix}-*"))


def npu_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, object]]:
    code = main(["npu", *argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(("sample", "kind", "count_key", "count"), [
    ("014", "info", "chips", 8),
    ("065", "info", "processes", 1),
    ("015", "mapping", "rows", 16),
    ("012", "usages", "blocks", 1),
    ("041", "watch", "columns", 9),
    ("061", "proc-mem", "chips", 2),
])
def test_npu_from_file_detects_the_kind(capsys: pytest.CaptureFixture[str], sample: str,
                                        kind: str, count_key: str, count: int) -> None:
    code, doc = npu_json(capsys, "--from-file", str(corpus(sample)))
    assert code == 0
    assert doc["schema"] == "ascend-npu/1" and doc["kind"] == kind
    assert len(doc[count_key]) == count  # type: ignore[arg-type]


@pytest.mark.parametrize(("sample", "code_value"), [("057", -8020), ("031", None)])
def test_npu_error_outputs_exit_2(capsys: pytest.CaptureFixture[str], sample: str,
                                  code_value: int | None) -> None:
    code, doc = npu_json(capsys, "--from-file", str(corpus(sample)))
    assert code == 2 and doc["kind"] == "error"
    assert doc.get("code") == code_value


def test_npu_from_stdin(capsys: pytest.CaptureFixture[str],
                        monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO(corpus("014").read_text()))
    code, doc = npu_json(capsys, "--from-file", "-")
    assert code == 0 and len(doc["chips"]) == 8  # type: ignore[arg-type]


def test_not_an_npu_smi_output_is_one_line_exit_3(capsys: pytest.CaptureFixture[str]) -> None:
    sample = corpus("033")
    assert main(["npu", "--from-file", str(sample)]) == 3
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(sample) in err and "not an npu-smi output" in err


def test_missing_input_file_is_one_line_exit_3(capsys: pytest.CaptureFixture[str],
                                               tmp_path: Path) -> None:
    assert main(["npu", "--from-file", str(tmp_path / "nope.txt")]) == 3
    err = capsys.readouterr().err.strip()
    assert "nope.txt" in err and "No such file" in err and "\n" not in err


def test_npu_live_under_a_root(fake_root: FakeRoot, capsys: pytest.CaptureFixture[str],
                               monkeypatch: pytest.MonkeyPatch) -> None:
    fake_root.script("/usr/local/bin/npu-smi", f'cat "{corpus("065")}"\n')
    monkeypatch.setenv("PATH", "/usr/local/bin:/usr/bin:/bin")
    code, doc = npu_json(capsys, "--root", str(fake_root.path))
    assert code == 0 and doc["layout"] == "hbm-a3"


def test_npu_without_npu_smi_says_why(fake_root: FakeRoot, capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/usr/local/bin")
    code, doc = npu_json(capsys, "--root", str(fake_root.path))
    assert code == 2 and "npu-smi not found on PATH" in str(doc["error"])


def test_npu_from_the_demo_recording(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from build_demo_assets import build_a2
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    recording = build_a2(tmp_path)
    code, doc = npu_json(capsys, "--from", str(recording))
    assert code == 0 and len(doc["chips"]) == 8  # type: ignore[arg-type]
    assert main(["npu", "--from", str(recording)]) == 0
    assert "910B4" in capsys.readouterr().out


def test_from_and_root_exclude_each_other(capsys: pytest.CaptureFixture[str],
                                          tmp_path: Path) -> None:
    assert main(["npu", "--from", str(tmp_path), "--root", str(tmp_path)]) == 3
    assert "exclude each other" in capsys.readouterr().err


def test_bad_policy_is_exit_3_naming_the_key(capsys: pytest.CaptureFixture[str],
                                            tmp_path: Path) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text("npu:\n  temprature_fail_c: 90\n")
    assert main(["--policy", str(policy)]) == 3
    assert "npu.temprature_fail_c" in capsys.readouterr().err


def test_unknown_check_id_is_exit_3(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--only", "npu.helth"]) == 3
    assert "unknown check id npu.helth" in capsys.readouterr().err


def test_missing_model_dir_is_exit_3(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["--model", str(tmp_path / "none")]) == 3
    assert "--model" in capsys.readouterr().err


def test_bad_argument_is_exit_3(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["--bogus"])
    assert stop.value.code == 3


def test_list_names_every_check(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for check_id in ("versions.parity", "logging.level", "pcie.contention", "npu.health",
                     "npu.temperature", "devices.nodes", "cann.environment",
                     "checkpoint.format", "checkpoint.fp8-scales"):
        assert check_id in out


def test_explain_renders_a_playbook(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "logging.level"]) == 0
    out = capsys.readouterr().out
    assert "What you see" in out and "ASCEND_GLOBAL_LOG_LEVEL" in out


def test_explain_unknown_suggests(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "garbled-output"]) == 3
    assert "symptom.garbled-output" in capsys.readouterr().out


def test_playbooks_search_by_symptom(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["playbooks", "garbled", "output"]) == 0
    first = next(line for line in capsys.readouterr().out.splitlines() if "symptom." in line)
    assert "symptom.garbled-output" in first


def installed_program(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`ascend-doctor --root /`: this machine, judged as this shell over `/` (an explicit
    target: without one the program would judge whatever server runs on this machine)."""
    return subprocess.run([sys.executable, "-m", "checks.cli", "--root", "/"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120)


def test_the_installed_program_runs_on_this_machine() -> None:
    """As a new user: no NPU here, so NPU checks skip with the reason and the exit code is 0."""
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "NO_COLOR": "1"}
    out = installed_program(env)
    assert out.returncode == 0, out.stderr
    assert "SKIP  npu.health" in out.stdout and "npu-smi not found" in out.stdout
    assert "Traceback" not in out.stderr
    helped = subprocess.run([sys.executable, "-m", "checks.cli", "--help"], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0 and "exit codes" in helped.stdout


def test_every_registered_check_has_its_playbook() -> None:
    import playbooks
    from checks.registry import all_checks

    for check in all_checks():
        book = playbooks.get(check.playbook_id)
        assert book.kind == "check" and check.id in book.checks, check.id


def test_the_exit_skips_the_final_collections_once(monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """main leaves the run's objects to the OS at exit (gc.freeze at exit), registered once
    however often it is called."""
    import gc

    from checks import cli

    registered: list[object] = []
    monkeypatch.setattr(cli, "_QUICK_EXIT", [])
    monkeypatch.setattr(cli.atexit, "register", registered.append)
    for _ in range(3):
        main(["list"])
    capsys.readouterr()
    assert registered == [gc.freeze]


def test_a_run_that_exits_quickly_still_writes_everything(tmp_path: Path) -> None:
    code = ("import sys, checks.cli as c\n"
            f"sys.exit(c.main(['--root', {str(tmp_path)!r}, '--junit', "
            f"{str(tmp_path / 'r.xml')!r}]))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode in (0, 1, 2), out.stderr
    assert " checks: " in out.stdout.rstrip().splitlines()[-1]
    assert (tmp_path / "r.xml").read_text().rstrip().endswith("</testsuite>")


def test_one_exit_code_enum_and_one_usage_error_serve_both_tools() -> None:
    import console.cli
    from checks import errors

    assert console.cli.UsageError is errors.UsageError
    assert [int(code) for code in errors.ExitCode] == [0, 1, 2, 3, 130]
    assert errors.exit_code_for(errors.UsageError("x")) is errors.ExitCode.USAGE
    assert errors.exit_code_for(KeyboardInterrupt()) is errors.ExitCode.INTERRUPTED
    assert errors.exit_code_for(BrokenPipeError()) is errors.ExitCode.OK
