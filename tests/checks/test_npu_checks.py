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


def machine(fake_root: FakeRoot, info: str | Path, health: Path | str | None = None,
            exit_code: int = 0, memory: str | None = None) -> Context:
    """A fake root whose npu-smi prints `info` for `npu-smi info` (a corpus file or text),
    `health` for `-t health` and `memory` for `-t memory` (anything else: usage, exit 1)."""
    text_file = info if isinstance(info, Path) else fake_root.file("/srv/info.txt", info)
    if isinstance(health, str):
        health = fake_root.file("/srv/health.txt", health)
    health_case = f'  "info -t health"*) cat "{health}" ;;\n' if health else ""
    memory_file = fake_root.file("/srv/memory.txt", memory) if memory is not None else None
    memory_case = f'  "info -t memory"*) cat "{memory_file}" ;;\n' if memory_file else ""
    fake_root.script("/usr/local/bin/npu-smi",
                     f'case "$*" in\n{health_case}{memory_case}  "info") cat "{text_file}"; '
                     f"exit {exit_code} ;;\n"
                     '  *) echo "Usage: npu-smi info" >&2; exit 1 ;;\nesac\n')
    host = LiveHost(root=str(fake_root.path), env={"PATH": PATH})
    return Context(host, load_policy())


def test_healthy_a2_passes(fake_root: FakeRoot) -> None:
    ctx = machine(fake_root, corpus("014"))
    health = npu_health(ctx)
    assert health.status == "pass" and "8 chips report OK" in health.summary
    temp = npu_temperature(ctx)
    assert temp.status == "pass" and health.rules == temp.rules == ()
    assert "hottest chip 39 °C" in temp.summary


def test_warning_chips_warn_and_name_the_chip(fake_root: FakeRoot) -> None:
    ctx = machine(fake_root, corpus("004"), health=HEALTH_032)
    finding = npu_health(ctx)
    assert finding.status == "warn" and finding.rules == ("health-warning",)
    assert "Warning" in finding.summary and "NPU" in finding.summary
    assert any("-t health" in line for line in finding.evidence)


def test_alarm_chip_fails_with_its_error_codes(fake_root: FakeRoot) -> None:
    ctx = machine(fake_root, corpus("064"), health=HEALTH_032)
    finding = npu_health(ctx)
    assert finding.status == "fail" and "health-alarm" in finding.rules
    assert "Alarm" in finding.summary
    codes = [line for line in finding.evidence if line.count("0x") >= 1]
    assert codes, finding.evidence


@pytest.mark.parametrize(("sample", "cause"), [("057", "another container")])
def test_npu_smi_error_fails_with_known_cause(fake_root: FakeRoot, sample: str,
                                              cause: str) -> None:
    ctx = machine(fake_root, corpus(sample), exit_code=1)
    finding = npu_health(ctx)
    assert finding.status == "fail" and finding.rules == ("npu-smi-error",)
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
        assert finding.status == "skip" and finding.rules == ("no-npu",)
        assert "not found" in finding.summary


def test_hung_npu_smi_fails(fake_root: FakeRoot) -> None:
    fake_root.script("/usr/local/bin/npu-smi", "sleep 30\n")
    host = LiveHost(root=str(fake_root.path), env={"PATH": PATH})
    ctx = Context(host, load_policy(), timeout_s=0.5)
    finding = npu_health(ctx)
    assert finding.status == "fail" and "hung" in finding.summary
    assert finding.rules == ("npu-smi-hung",)


def test_a_table_without_chips_skips(fake_root: FakeRoot) -> None:
    header = "".join(corpus("014").read_text().splitlines(keepends=True)[:6])
    for fn in (npu_health, npu_temperature):
        finding = fn(machine(fake_root, header))
        assert finding.status == "skip" and finding.rules == ("no-chips",), finding


def _table(temps_c: dict[int, int | str] | None = None,
           health: dict[int, str] | None = None) -> str:
    """Corpus 014 (8 x 910B4 at 33-39 °C) with some cards' temperature or health changed."""
    lines = corpus("014").read_text().splitlines(keepends=True)
    for npu, temp_c in (temps_c or {}).items():
        row = next(i for i, ln in enumerate(lines) if ln.startswith(f"| {npu}     910B4"))
        cells = lines[row].split("|")
        power, _, *rest = cells[3].split()
        cells[3] = f" {power:<11} {temp_c:<17} {' '.join(rest):<22}"
        lines[row] = "|".join(cells)
    for npu, word in (health or {}).items():
        row = next(i for i, ln in enumerate(lines) if ln.startswith(f"| {npu}     910B4"))
        lines[row] = lines[row].replace("| OK            |", f"| {word:<13} |", 1)
    return "".join(lines)


def _memory(hbm_c: int) -> str:
    """`npu-smi info -t memory -i N -c C` of a 910B4 (keys of corpus 062)."""
    return "".join(f"\t{key:<30} : {value}\n" for key, value in (
        ("NPU ID", 0), ("DDR Capacity(MB)", 0), ("DDR Clock Speed(MHz)", 0),
        ("HBM Capacity(MB)", 32768), ("HBM Clock Speed(MHz)", 1600),
        ("HBM Temperature(C)", hbm_c), ("HBM Manufacturer ID", "0x5A")))


def _health(status: str, codes: str) -> str:
    return (f"\tHealth Status                  : {status}\n"
            f"\tError Code                     : {codes}\n"
            "\tError Information              : NA\n")


@pytest.mark.parametrize("temp_c", [85, 95, 101])
def test_no_fixed_chip_threshold_a_hot_box_of_equals_passes(fake_root: FakeRoot,
                                                             temp_c: int) -> None:
    ctx = machine(fake_root, _table({n: temp_c for n in range(8)}))
    finding = npu_temperature(ctx)
    assert finding.status == "pass", finding.summary
    assert f"hottest chip {temp_c} °C" in finding.summary


def test_a_chip_far_above_its_peers_warns(fake_root: FakeRoot) -> None:
    ctx = machine(fake_root, _table({0: 56}))  # the others are 33-39 °C, median 37
    finding = npu_temperature(ctx)
    assert finding.status == "warn" and finding.rules == ("hotter-than-peers",)
    assert finding.summary == ("NPU 0 chip 0: 56 °C, 19 °C above the median of the 7 other "
                               "chips (37 °C)")


def test_a_chip_a_little_above_its_peers_passes(fake_root: FakeRoot) -> None:
    assert npu_temperature(machine(fake_root, _table({0: 51}))).status == "pass"


def test_peer_margin_follows_the_policy(fake_root: FakeRoot, tmp_path: Path) -> None:
    ctx = machine(fake_root, _table({0: 51}))
    policy = tmp_path / "p.yaml"
    policy.write_text("npu:\n  temperature_above_peers_warn_c: 10\n")
    ctx.policy = load_policy(policy)
    assert npu_temperature(ctx).status == "warn"


@pytest.mark.parametrize(("hbm_c", "status"), [(63, "pass"), (95, "pass"), (96, "fail")])
def test_hbm_temperature_against_the_documented_alarm(fake_root: FakeRoot, hbm_c: int,
                                                      status: str) -> None:
    ctx = machine(fake_root, _table(), memory=_memory(hbm_c))
    finding = npu_temperature(ctx)
    assert finding.status == status
    if status == "fail":
        assert f"HBM {hbm_c} °C, above the 95 °C HBM alarm" in finding.summary
        assert finding.rules == ("hbm-alarm",)
    else:
        assert f"HBM at most {hbm_c} °C (alarm above 95 °C)" in finding.summary


def _without_temperature_column() -> str:
    """Corpus 014 as a driver that prints no Temp(C) column."""
    lines = corpus("014").read_text().splitlines(keepends=True)
    out = []
    for line in lines:
        cells = line.split("|")
        if len(cells) > 3 and "Temp(C)" in cells[3]:
            cells[3] = cells[3].replace("Temp(C)", "       ")
        elif len(cells) > 3 and "910B4" in cells[1]:
            power, _temp, *rest = cells[3].split()
            cells[3] = f" {power:<11} {'':<17} {' '.join(rest):<22}"
        out.append("|".join(cells))
    return "".join(out)


@pytest.mark.parametrize("printed", ["NA", "-"])
def test_a_chip_without_a_temperature_contributes_no_pass(fake_root: FakeRoot,
                                                          printed: str) -> None:
    finding = npu_temperature(machine(fake_root, _table({3: printed})))
    assert finding.status == "warn" and finding.rules == ("no-temperature",)
    assert finding.summary.startswith("NPU 3 chip 0: npu-smi printed no temperature")
    assert "the other chips: no thermal alarm, hottest chip 39 °C" in finding.summary
    assert any(line.startswith("NPU 3 chip 0 (910B4): temperature not printed")
               for line in finding.evidence)


def test_no_temperature_on_any_chip_skips(fake_root: FakeRoot) -> None:
    for info in (_table({n: "NA" for n in range(8)}), _without_temperature_column()):
        finding = npu_temperature(machine(fake_root, info))
        assert finding.status == "skip" and finding.rules == ("no-temperature",), finding
        assert "no temperature for any of the 8 chips" in finding.summary


def test_a_blind_chip_is_named_beside_a_worse_finding(fake_root: FakeRoot) -> None:
    finding = npu_temperature(machine(fake_root, _table({0: 56, 3: "NA"})))
    assert finding.status == "warn"
    assert finding.rules == ("hotter-than-peers", "no-temperature")
    assert "NPU 3 chip 0: npu-smi printed no temperature for it" in finding.evidence


def test_hbm_temperature_not_printed_is_said(fake_root: FakeRoot) -> None:
    finding = npu_temperature(machine(fake_root, corpus("014")))
    assert finding.status == "pass" and "no HBM temperature read" in finding.summary
    assert any("HBM not read (`npu-smi info -t memory -i 0 -c 0` exited with code 1" in line
               for line in finding.evidence), finding.evidence


@pytest.mark.parametrize(("code", "status", "meaning"), [
    ("80E00209", "fail", "HBM temperature above 95 °C (alarm)"),
    ("80E0020B", "fail", "HBM fatal high-temperature alarm"),
    ("80E20207", "warn", "SoC non-fatal high-temperature alarm"),
    ("80DE0207", "warn", "DDR chip non-fatal high-temperature alarm"),
])
def test_thermal_fault_codes_from_health(fake_root: FakeRoot, code: str, status: str,
                                         meaning: str) -> None:
    ctx = machine(fake_root, _table(health={3: "Alarm"}), health=_health("Alarm", code))
    finding = npu_temperature(ctx)
    assert finding.status == status and finding.rules == ("thermal-alarm-code",)
    assert finding.summary.startswith(f"NPU 3 chip 0: fault 0x{code}: {meaning}")


def test_other_fault_codes_are_not_thermal(fake_root: FakeRoot) -> None:
    ctx = machine(fake_root, _table(health={3: "Alarm"}), health=HEALTH_032)
    assert npu_temperature(ctx).status == "pass"


def test_unreadable_codes_of_a_chip_not_ok_warn(fake_root: FakeRoot) -> None:
    ctx = machine(fake_root, _table(health={3: "Warning"}))  # -t health: usage, exit 1
    finding = npu_temperature(ctx)
    assert finding.status == "warn" and finding.rules == ("thermal-codes-unread",)
    assert finding.summary.startswith("NPU 3 chip 0: thermal alarm codes not read (health "
                                      "Warning, ")


@pytest.mark.parametrize("word", ["UNKNOWN", "NA"])
def test_health_that_could_not_be_read_warns(fake_root: FakeRoot, word: str) -> None:
    ctx = machine(fake_root, _table(health={2: word}))
    finding = npu_health(ctx)
    assert finding.status == "warn" and finding.rules == ("health-unread",)
    assert f"NPU 2 chip 0 (910B4) {word} (health could not be read)" in finding.summary
    assert npu_temperature(ctx).status == "warn"  # and its thermal codes are unknown too


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
