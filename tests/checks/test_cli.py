"""`ascend-doctor` as a user meets it: sub-commands, inputs, exit codes, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CORPUS_DIR, FakeRoot
from machines import demo_recording

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
    recording = demo_recording(tmp_path)
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
    import console.ui.cli
    from checks import errors

    assert console.ui.cli.UsageError is errors.UsageError
    assert [int(code) for code in errors.ExitCode] == [0, 1, 2, 3, 130]
    assert errors.exit_code_for(errors.UsageError("x")) is errors.ExitCode.USAGE
    assert errors.exit_code_for(KeyboardInterrupt()) is errors.ExitCode.INTERRUPTED
    assert errors.exit_code_for(BrokenPipeError()) is errors.ExitCode.OK


# --- reports as short as `flutter doctor`, and the options both tools share ---------------------


def test_counts_say_one_warning_not_one_warnings() -> None:
    from checks.cli.report_terminal import count_words

    counts = {"pass": 1, "warn": 1, "fail": 2, "skip": 0, "error": 1}
    assert count_words(counts) == ["1 passed", "1 warning", "2 failed", "1 error"]  # type: ignore[arg-type]
    assert count_words({**counts, "warn": 2, "error": 3}) == [  # type: ignore[arg-type]
        "1 passed", "2 warnings", "2 failed", "3 errors"]


def test_a_run_that_selects_no_check_exits_3(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--only", "npu.health", "--skip", "npu.health"]) == 3
    captured = capsys.readouterr()
    assert "leave no check to run" in captured.err and "no problems found" not in captured.out


def test_version_of_both_tools(capsys: pytest.CaptureFixture[str]) -> None:
    from console.ui.cli import make_parser

    for parse in (lambda: main(["--version"]), lambda: make_parser().parse_args(["--version"])):
        with pytest.raises(SystemExit) as stop:
            parse()
        assert stop.value.code == 0
    out = capsys.readouterr().out.split()
    assert out[0] == "ascend-doctor" and out[2] == "ascend-console" and out[1] == out[3]


def test_help_has_examples_and_lists_each_command_once(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "examples:" in out and "ascend-doctor --pid 4242" in out
    for command in ("list", "explain ID", "playbooks [TEXT]", "bundle", "ops", "bench"):
        assert sum(line.lstrip().startswith(command) for line in out.splitlines()) == 1, command


def test_explain_piped_prints_the_markdown_whole(capsys: pytest.CaptureFixture[str]) -> None:
    """People paste it into tickets: no list item cut at the width of a terminal."""
    import playbooks

    assert main(["explain", "versions.parity"]) == 0
    out = capsys.readouterr().out
    book = playbooks.get("versions.parity")
    assert out.startswith(f"# {book.title}\n")
    for line in book.body.splitlines():
        assert line.rstrip() in out  # every line as written, however long


def test_the_console_takes_the_doctors_endpoint_option_names() -> None:
    from console.ui.cli import parse_options

    url = "http://127.0.0.1:8000/v1"
    new = parse_options(["--endpoint", url, "--endpoint-model", "qwen",
                         "--endpoint-metrics", "http://127.0.0.1:9000/metrics"])
    old = parse_options(["--endpoint", url, "--model", "qwen",
                         "--metrics-url", "http://127.0.0.1:9000/metrics"])
    assert new.endpoint == old.endpoint and new.endpoint is not None
    assert new.endpoint.model == "qwen"
    assert new.serving_metrics_url == old.serving_metrics_url == "http://127.0.0.1:9000/metrics"


@pytest.mark.parametrize(("load", "cores", "threads", "says"), [
    (3.4, 2, 2, "busy: load average 3.4 over 2 cores"),
    (1.2, 16, 16, "16 threads on 16 cores while other work ran"),
    (0.1, 16, 16, ""),
    (1.2, 16, 8, ""),
    (None, 16, 16, ""),
])
def test_bench_says_when_the_box_was_busy(load: float | None, cores: int, threads: int,
                                          says: str) -> None:
    from checks.busy import busy_note

    note = busy_note(load, cores, threads)
    assert (says in note) if says else note == ""


def test_the_report_names_the_endpoint_a_vllm_target_serves() -> None:
    from checks.cli.report_terminal import endpoint_hint
    from checks.model import Result
    from probes.target.model import ServingArgs, shell_target
    from probes.target.parts import ProcessInfo

    def target(*cmdline: str) -> object:
        from dataclasses import replace

        return replace(shell_target("x"), kind="process",
                       process=ProcessInfo(4242, ("python3", "/usr/bin/vllm", *cmdline)),
                       serving=ServingArgs(server="vllm"))

    skipped = [Result("endpoint.health", "t", "endpoint", "skip", "no --endpoint URL given",
                      (), "", "endpoint.health", 0.0)]
    hint = endpoint_hint(target("serve", "/m", "--port", "8100"), skipped)  # type: ignore[arg-type]
    assert "--endpoint http://127.0.0.1:8100/v1" in hint
    assert "8101/v1" in endpoint_hint(target("serve", "/m", "--port=8101"), skipped)  # type: ignore[arg-type]
    assert endpoint_hint(target("serve", "/m"), skipped) == ""  # type: ignore[arg-type]  # no default assumed
    ran = [Result("endpoint.health", "t", "endpoint", "pass", "ok", (), "", "", 0.0)]
    assert endpoint_hint(target("serve", "/m", "--port", "8100"), ran) == ""  # type: ignore[arg-type]
    # an --endpoint on another port of this machine: the verdicts are about two processes
    served = target("serve", "/m", "--port", "8100")
    other = endpoint_hint(served, ran, "http://127.0.0.1:9000/v1")  # type: ignore[arg-type]
    assert "port 9000" in other and "another process" in other
    assert endpoint_hint(served, ran, "http://localhost:8100/v1") == ""  # type: ignore[arg-type]
