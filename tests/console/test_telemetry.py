from __future__ import annotations

import time
from pathlib import Path

import pytest

from console.history import History
from console.snapshots import NpuSnapshot
from console.sources import add_history, chip_history_key
from console.telemetry import NOT_FOUND, Sampler, sample_host, sample_npu
from probes.live import LiveHost
from tests.conftest import CORPUS_DIR, FakeRoot

NPU_SMI = CORPUS_DIR / "npu-smi"
A2_8 = "014-info-25.0.rc1.1-910B4-8cards-noproc.txt"
A3_DUAL = "065-info-25.2.0-A3-Ascend910-4chips-mixed-proc-peerfixture.txt"
DUO = "049-info-25.2.0-300IDuo-310P3-2chips-same-busid-PARTIAL.txt"
USAGES_1CHIP = "012-info-t-usages-910-DDR-HBM.txt"
USAGES_2CHIPS = "013-info-t-usages-310P-2chips-DVPP.txt"
ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin"}


def _fake_npu_smi(fake_root: FakeRoot, info: str, usages: str | None = None,
                  usages_hbm_bw: int | None = None) -> LiveHost:
    """A fake npu-smi printing corpus outputs: the table for `info`, usages for `-t usages`."""
    info_file = NPU_SMI / info
    body = 'if [ "$1 $2" = "info -t" ]; then\n'
    if usages is None:
        body += '  echo "Error: usages not supported" >&2; exit 1\n'
    else:
        text = (NPU_SMI / usages).read_text()
        if usages_hbm_bw is not None:
            text = text.replace("HBM Bandwidth Usage Rate(%)    : 0",
                                f"HBM Bandwidth Usage Rate(%)    : {usages_hbm_bw}")
        fake = fake_root.file("/corpus/usages.txt", text)
        body += f'  cat "{fake}"; exit 0\n'
    body += f'fi\ncat "{info_file}"\n'
    fake_root.script("/usr/local/bin/npu-smi", body)
    return LiveHost(root=str(fake_root.path), env=ENV)


def test_a2_eight_chips_with_usages(fake_root: FakeRoot) -> None:
    host = _fake_npu_smi(fake_root, A2_8, USAGES_1CHIP, usages_hbm_bw=71)
    snap = sample_npu(host, timeout_s=5)
    assert snap.ok and snap.error is None
    assert len(snap.chips) == 8
    first = snap.chips[0]
    assert (first.npu_id, first.chip_id, first.key) == (0, 0, "0/0")
    assert first.name == "910B4" and first.health == "OK"
    assert first.temperature_c == 33 and first.power_w == 87.2
    assert (first.hbm_used_mb, first.hbm_total_mb) == (2654, 32768)
    assert first.hbm_bandwidth_percent == 71.0
    assert first.aicore_percent == 0
    assert snap.processes == () and snap.processes_known
    assert snap.sample_duration_s >= 0


def test_a3_dual_die_processes_and_keys(fake_root: FakeRoot) -> None:
    host = _fake_npu_smi(fake_root, A3_DUAL, USAGES_2CHIPS)
    snap = sample_npu(host, timeout_s=5)
    assert snap.ok
    assert [c.key for c in snap.chips] == ["0/0", "0/1", "1/0", "1/1"]
    assert snap.chips[1].power_w is None  # the second die prints "-"
    assert snap.chips[3].hbm_used_mb == 10568
    # 310P usages have no HBM bandwidth line: None, never 0
    assert all(c.hbm_bandwidth_percent is None for c in snap.chips)
    assert [(p.npu_id, p.chip_id, p.pid, p.name, p.memory_mb) for p in snap.processes] == [
        (1, 1, 990711, "python", 7746)]


def test_300i_duo_has_ddr_not_hbm(fake_root: FakeRoot) -> None:
    host = _fake_npu_smi(fake_root, DUO)  # usages fail: the table still counts
    snap = sample_npu(host, timeout_s=5)
    assert snap.ok and len(snap.chips) == 2
    chip = snap.chips[0]
    assert chip.name == "310P3" and chip.hbm_used_mb is None and chip.hbm_total_mb is None
    assert (chip.memory_used_mb, chip.memory_total_mb) == (1529, 44280)
    assert chip.hbm_bandwidth_percent is None
    assert not snap.processes_known


def test_no_npu_smi_on_path(fake_root: FakeRoot) -> None:
    snap = sample_npu(LiveHost(root=str(fake_root.path), env=ENV), timeout_s=5)
    assert not snap.ok
    assert snap.error == NOT_FOUND == "npu-smi not found on PATH"
    assert snap.chips == ()


def test_npu_smi_error_text_is_kept(fake_root: FakeRoot) -> None:
    error = (NPU_SMI / "057-error-8020-device-used.txt").read_text()
    fake = fake_root.file("/corpus/err.txt", error)
    fake_root.script("/usr/local/bin/npu-smi", f'cat "{fake}"\nexit 1\n')
    snap = sample_npu(LiveHost(root=str(fake_root.path), env=ENV), timeout_s=5)
    assert not snap.ok and snap.error
    assert "8020" in snap.error


def test_hanging_npu_smi_times_out(fake_root: FakeRoot) -> None:
    fake_root.script("/usr/local/bin/npu-smi", "sleep 30\n")
    started = time.monotonic()
    snap = sample_npu(LiveHost(root=str(fake_root.path), env=ENV), timeout_s=1)
    assert time.monotonic() - started < 10  # well short of the 30 s hang
    assert not snap.ok and snap.error is not None and "timed out after 1 s" in snap.error


def test_hanging_usages_stay_within_the_budget(fake_root: FakeRoot) -> None:
    info = NPU_SMI / A2_8
    fake_root.script("/usr/local/bin/npu-smi",
                     f'if [ "$2" = "-t" ]; then sleep 30; fi\ncat "{info}"\n')
    started = time.monotonic()
    snap = sample_npu(LiveHost(root=str(fake_root.path), env=ENV), timeout_s=1)
    assert time.monotonic() - started < 10  # well short of the 30 s hang
    assert snap.ok and len(snap.chips) == 8
    assert all(c.hbm_bandwidth_percent is None for c in snap.chips)


def test_sample_host_uses_nearest_existing_parent(tmp_path: Path) -> None:
    missing = tmp_path / "not" / "yet" / "logs"
    sample_host(None)  # the CPU meter's first call has no interval behind it (None)
    snap = sample_host(str(missing), clock=lambda: 123.0)
    assert snap.taken_at == 123.0
    assert snap.log_dir == str(tmp_path)
    assert snap.log_disk_total_mb is not None and snap.log_disk_total_mb > 0
    assert snap.log_disk_free_mb is not None
    assert 0 < snap.mem_used_mb <= snap.mem_total_mb
    # the process's first sample has no interval behind it (None); the next one has
    later = sample_host(str(missing))
    assert later.cpu_percent is not None and later.cpu_percent >= 0.0
    assert sample_host(None).log_dir is None


def _snap(t: float, error: str | None = None) -> NpuSnapshot:
    return NpuSnapshot(t, (), (), True, error, 0.1)


def test_sampler_keeps_last_good_and_goes_stale() -> None:
    now = [100.0]
    sampler = Sampler(interval_s=2.0, stale_after_intervals=3, clock=lambda: now[0])
    assert sampler.age_s() is None and not sampler.is_stale()
    sampler.update(_snap(100.0))
    now[0] = 105.0
    assert sampler.age_s() == 5.0 and not sampler.is_stale()
    sampler.update(_snap(105.0, error="`npu-smi info` timed out after 5 s"))
    assert sampler.last_good is not None and sampler.last_good.taken_at == 100.0
    assert sampler.latest is not None and "timed out" in (sampler.latest.error or "")
    now[0] = 106.5
    assert sampler.is_stale()
    assert sampler.is_stale(now=106.0) is False  # exactly 3 x interval is not yet stale
    sampler.update(_snap(106.5))
    assert not sampler.is_stale() and sampler.latest is not None and sampler.latest.ok


def test_sampler_with_only_failures_is_not_stale() -> None:
    sampler = Sampler(interval_s=2.0, clock=lambda: 1000.0)
    sampler.update(_snap(0.0, error=NOT_FOUND))
    assert sampler.last_good is None and not sampler.is_stale()


def test_history_is_bounded_per_key_and_in_keys() -> None:
    history = History(maxlen=10, max_keys=3)
    for i in range(1000):
        history.add("0/0:temperature_c", float(i), float(i))
    assert history.values("0/0:temperature_c") == [float(i) for i in range(990, 1000)]
    assert history.latest("0/0:temperature_c") == 999.0
    history.add("0/0:temperature_c", 1000.0, None)  # no reading: no point
    assert len(history.values("0/0:temperature_c")) == 10
    for key in ("a", "b", "c", "d"):
        history.add(key, 0.0, 1.0)
    assert len(history.keys()) == 3 and "0/0:temperature_c" not in history
    assert len(history) == 3
    assert history.points("d") == [(0.0, 1.0)] and history.values("missing") == []


def test_history_rejects_empty_bounds() -> None:
    with pytest.raises(ValueError):
        History(maxlen=0)


def test_history_fed_from_snapshots(fake_root: FakeRoot) -> None:
    host = _fake_npu_smi(fake_root, A3_DUAL, USAGES_2CHIPS)
    history = History(maxlen=5)
    for _ in range(2):
        add_history(history, sample_npu(host, timeout_s=5))
    assert history.values(chip_history_key("1/1", "hbm_used_mb")) == [10568.0, 10568.0]
    assert history.values("0/1:power_w") == []  # "-" in the table: no point, not zero
    add_history(history, NpuSnapshot(1.0, (), (), False, NOT_FOUND, 0.0))
    assert len(history.values("0/0:temperature_c")) == 2


def _health(status: str, codes: str) -> str:
    return (f"\tHealth Status                  : {status}\n"
            f"\tError Code                     : {codes}\n"
            "\tError Information              : NA\n")


def _box_with_unhealthy_chips(fake_root: FakeRoot) -> tuple[LiveHost, Path]:
    """Corpus 014 with NPU 2 in Alarm (its -t health: the HBM over-temperature code) and NPU 5
    in Warning (its -t health fails); every call npu-smi gets is logged."""
    table = (NPU_SMI / A2_8).read_text()
    for npu, word in ((2, "Alarm"), (5, "Warning")):
        row = next(ln for ln in table.splitlines() if ln.startswith(f"| {npu}     910B4"))
        table = table.replace(row, row.replace("| OK            |", f"| {word:<13} |", 1))
    info = fake_root.file("/corpus/info.txt", table)
    alarm = fake_root.file("/corpus/health2.txt", _health("Alarm", "80E00209"))
    log = fake_root.path.parent / "calls.log"
    fake_root.script("/usr/local/bin/npu-smi", (
        f'echo "$*" >> "{log}"\n'
        'case "$*" in\n'
        f'  "info") cat "{info}" ;;\n'
        f'  "info -t health -i 2 -c 0") cat "{alarm}" ;;\n'
        '  *) echo "Error: not supported" >&2; exit 1 ;;\n'
        'esac\n'))
    return LiveHost(root=str(fake_root.path), env=ENV), log


def test_health_codes_are_read_only_for_chips_that_are_not_ok(fake_root: FakeRoot) -> None:
    from checks.policy import load_policy
    from console.alerts import evaluate

    host, log = _box_with_unhealthy_chips(fake_root)
    snap = sample_npu(host, timeout_s=5)
    health_calls = [ln for ln in log.read_text().splitlines() if "-t health" in ln]
    assert health_calls == ["info -t health -i 2 -c 0", "info -t health -i 5 -c 0"]
    chips = {c.key: c for c in snap.chips}
    assert chips["0/0"].fault_codes == () and chips["0/0"].codes_unread is None
    assert chips["2/0"].fault_codes == ("80E00209",)
    assert chips["5/0"].fault_codes is None
    assert chips["5/0"].codes_unread is not None
    assert chips["5/0"].codes_unread.startswith("health Warning, `npu-smi info -t health")
    alerts = {a.key: a for a in evaluate(snap, None, load_policy(), snap.taken_at, 60.0, None)}
    hot = alerts["temperature:2/0"]  # the doctor's rule: the HBM alarm code fails
    assert hot.level == "fail"
    assert hot.message == "NPU 2/0: fault 0x80E00209: HBM temperature above 95 °C (alarm)"
    unread = alerts["temperature:5/0"]
    assert unread.level == "warn" and "thermal alarm codes not read" in unread.message
    assert "temperature:0/0" not in alerts


def test_a_healthy_box_costs_no_health_call(fake_root: FakeRoot) -> None:
    log = fake_root.path.parent / "calls.log"
    fake_root.script("/usr/local/bin/npu-smi",
                     f'echo "$*" >> "{log}"\ncat "{NPU_SMI / A2_8}"\n')
    snap = sample_npu(LiveHost(root=str(fake_root.path), env=ENV), timeout_s=5)
    assert all(c.fault_codes == () for c in snap.chips)
    assert not [ln for ln in log.read_text().splitlines() if "health" in ln]


def test_health_codes_past_the_budget_are_unread_not_waited_for(fake_root: FakeRoot) -> None:
    from console.telemetry import sample_fault_codes
    from probes.npu_smi import parse_info

    host, log = _box_with_unhealthy_chips(fake_root)
    info = parse_info(host.run(["npu-smi", "info"]).stdout)
    found = sample_fault_codes(host, info.chips, deadline=time.monotonic())
    assert found[(2, 0)] == (None, "health Alarm, not read within the sample's time")
    assert found[(0, 0)] == ((), None)
    assert "-t health" not in log.read_text()
