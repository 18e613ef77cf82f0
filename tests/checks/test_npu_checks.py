from __future__ import annotations

from pathlib import Path

import pytest
from conftest import CORPUS_DIR, FakeRoot

from checks.builtin.npu import npu_health, npu_temperature
from checks.context import Context
from checks.policy import load_policy
from probes.live import LiveHost

PATH = "/usr/local/bin:/usr/bin:/bin"  # npu-smi from the fake root, `cat` from this machine
HEALTH_032 = CORPUS_DIR / "npu-smi" / "032-info-t-health-alarm-multi-errorcode.txt"


def corpus(name_prefix: str) -> Path:
    return next((CORPUS_DIR / "npu-smi").glob(f"{name_prefix}-*.txt"))


def machine(fake_root: FakeRoot, info: str | Path, health: Path | None = None,
            exit_code: int = 0) -> Context:
    """A fake root whose npu-smi prints `info` for `npu-smi info` (a corpus file or text)."""
    text_file = info if isinstance(info, Path) else fake_root.file("/srv/info.txt", info)
    health_case = f'  "info -t health"*) cat "{health}" ;;\n' if health else ""
    fake_root.script("/usr/local/bin/npu-smi",
                     f'case "$*" in\n{health_case}  "info") cat "{text_file}"; '
                     f"exit {exit_code} ;;\nesac\n")
    host = LiveHost(root=str(fake_root.path), env={"PATH": PATH})
    return Context(host, load_policy())


def test_healthy_a2_passes(fake_root: FakeRoot) -> None:
    ctx = machine(fake_root, corpus("014"))
    health = npu_health(ctx)
    assert health.status == "pass" and "8 chip(s) report OK" in health.summary
    temp = npu_temperature(ctx)
    assert temp.status == "pass"
    assert "hottest chip 39 °C" in temp.summary


def test_warning_chips_warn_and_name_the_chip(fake_root: FakeRoot) -> None:
    ctx = machine(fake_root, corpus("004"), health=HEALTH_032)
    finding = npu_health(ctx)
    assert finding.status == "warn"
    assert "Warning" in finding.summary and "NPU" in finding.summary
    assert any("-t health" in line for line in finding.evidence)


def test_alarm_chip_fails_with_its_error_codes(fake_root: FakeRoot) -> None:
    ctx = machine(fake_root, corpus("064"), health=HEALTH_032)
    finding = npu_health(ctx)
    assert finding.status == "fail"
    assert "Alarm" in finding.summary
    codes = [line for line in finding.evidence if line.count("0x") >= 1]
    assert codes, finding.evidence


@pytest.mark.parametrize(("sample", "cause"), [("057", "another container")])
def test_npu_smi_error_fails_with_known_cause(fake_root: FakeRoot, sample: str,
                                              cause: str) -> None:
    ctx = machine(fake_root, corpus(sample), exit_code=1)
    finding = npu_health(ctx)
    assert finding.status == "fail"
    assert "-8020" in finding.summary
    assert cause in finding.remedy


def test_dcmi_8005_names_the_container_mistake(fake_root: FakeRoot) -> None:
    ctx = machine(fake_root, "dcmi module initialize failed. ret is -8005\n", exit_code=1)
    finding = npu_temperature(ctx)
    assert finding.status == "fail"
    assert "container" in finding.remedy


def test_no_npu_smi_skips_with_the_reason(fake_root: FakeRoot) -> None:
    ctx = Context(LiveHost(root=str(fake_root.path), env={"PATH": "/usr/bin"}), load_policy())
    for fn in (npu_health, npu_temperature):
        finding = fn(ctx)
        assert finding.status == "skip"
        assert "not found" in finding.summary


def test_hung_npu_smi_fails(fake_root: FakeRoot) -> None:
    fake_root.script("/usr/local/bin/npu-smi", "sleep 30\n")
    host = LiveHost(root=str(fake_root.path), env={"PATH": PATH})
    ctx = Context(host, load_policy(), timeout_s=0.5)
    finding = npu_health(ctx)
    assert finding.status == "fail" and "hung" in finding.summary


def _hot_table(temp_c: int) -> str:
    text = corpus("014").read_text()
    return text.replace("| 87.2        33 ", f"| 87.2        {temp_c} ", 1)


@pytest.mark.parametrize(("temp_c", "status"), [(84, "pass"), (85, "warn"), (94, "warn"),
                                                (95, "fail"), (101, "fail")])
def test_temperature_thresholds(fake_root: FakeRoot, temp_c: int, status: str) -> None:
    ctx = machine(fake_root, _hot_table(temp_c))
    finding = npu_temperature(ctx)
    assert finding.status == status
    if status != "pass":
        assert f"NPU 0 chip 0 (910B4) {temp_c} °C" in finding.summary


def test_temperature_thresholds_follow_the_policy(fake_root: FakeRoot, tmp_path: Path) -> None:
    ctx = machine(fake_root, _hot_table(70))
    policy = tmp_path / "p.yaml"
    policy.write_text("npu:\n  temperature_warn_c: 60\n")
    ctx.policy = load_policy(policy)
    assert npu_temperature(ctx).status == "warn"


def test_npu_smi_runs_one_call_at_a_time(tmp_path: Path) -> None:
    """facts/PATHS.md §6: npu-smi must not run from several threads at once."""
    import threading

    from checks.builtin import facts
    from probes.host import CommandResult
    from probes.inventory import run_npu_smi

    active, most = [0], [0]
    guard = threading.Lock()

    class SlowHost:
        def run(self, argv: list[str], timeout_s: float | None = None) -> CommandResult:
            with guard:
                active[0] += 1
                most[0] = max(most[0], active[0])
            threading.Event().wait(0.02)
            with guard:
                active[0] -= 1
            return CommandResult(tuple(argv), "exited", 0, "")

    ctx = Context(SlowHost(), load_policy())  # type: ignore[arg-type]
    callers = [threading.Thread(target=run_npu_smi, args=(ctx.host, ["info", "-t", "health"]))
               for _ in range(4)]
    callers.append(threading.Thread(target=facts.npu, args=(ctx,)))
    for t in callers:
        t.start()
    for t in callers:
        t.join(10)
    assert most[0] == 1


def test_waiting_for_another_npu_smi_call_counts_against_the_timeout() -> None:
    from probes.host import CommandResult
    from probes.inventory import NPU_SMI_LOCK, run_npu_smi

    class NeverRun:
        def run(self, argv: list[str], timeout_s: float | None = None) -> CommandResult:
            raise AssertionError("ran while another call held npu-smi")

    with NPU_SMI_LOCK:  # another thread's npu-smi call, hung
        result = run_npu_smi(NeverRun(), ["info"], timeout_s=0.05)  # type: ignore[arg-type]
    assert result.outcome == "timeout" and "still running" in result.error
