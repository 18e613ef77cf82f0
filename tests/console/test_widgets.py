"""The console panels, each mounted alone in a tiny host app and fed snapshots built from the
real npu-smi corpus."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from rich.text import Text
from textual.app import App, ComposeResult
from textual.widget import Widget
from textual.widgets import DataTable, Input, Sparkline, Static

from checks.thermal import ThermalLimits
from console.history import History
from console.msprof import OpConflict
from console.pressure import (
    UNKNOWN_CAUSES,
    PressureLimits,
    PressureRow,
    ZeroCauses,
    causes_note,
    pressure_rows,
)
from console.snapshots import (
    Alert,
    ChipSample,
    EngineSnapshot,
    HostSnapshot,
    NpuSnapshot,
    ProcessSample,
    chip_key,
)
from console.sources import temperature_history_key
from console.ui.widgets.alerts import AlertsPanel, format_clock
from console.ui.widgets.engine_panel import EnginePanel
from console.ui.widgets.host import HostPanel
from console.ui.widgets.npu import LEVEL_STYLES, NpuPanel, sparkline
from console.ui.widgets.pressure import HEURISTIC_LABEL, PressurePanel
from probes.inventory import parse_output
from probes.npu_smi import NpuInfo
from probes.virt import VirtReading

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "npu-smi"
A2_8_CHIPS = "014-info-25.0.rc1.1-910B4-8cards-noproc.txt"
A3_DUAL_DIE = "065-info-25.2.0-A3-Ascend910-4chips-mixed-proc-peerfixture.txt"
DUO_300I = "049-info-25.2.0-300IDuo-310P3-2chips-same-busid-PARTIAL.txt"
SIZE = (120, 40)
NOW = 1_700_000_000.0
THERMAL = ThermalLimits(hbm_alarm_c=95.0, above_peers_warn_c=15.0)


# -- corpus -> snapshots ----------------------------------------------------------------------

def corpus_snapshot(filename: str, taken_at: float = NOW - 1.5,
                    bandwidth: dict[str, float] | None = None,
                    temperatures: dict[str, int] | None = None) -> NpuSnapshot:
    """An NpuSnapshot from one corpus file (optionally overriding some chips' readings)."""
    info = parse_output((CORPUS / filename).read_text()).parsed
    assert isinstance(info, NpuInfo)
    chips = []
    for row in info.chips:
        key = chip_key(row.npu_id, row.chip_id)
        temperature = (temperatures or {}).get(key, row.temperature_c)
        chips.append(ChipSample(
            row.npu_id, row.chip_id, row.name, row.health, temperature, row.power_w,
            row.aicore_percent, row.hbm_used_mb, row.hbm_total_mb,
            (bandwidth or {}).get(key), key, row.memory_used_mb, row.memory_total_mb))
    processes = tuple(ProcessSample(p.npu_id, p.chip_id, p.pid, p.name, p.memory_mb)
                      for p in info.processes)
    return NpuSnapshot(taken_at, tuple(chips), processes, info.processes_known, None, 0.42)


def error_snapshot(reason: str) -> NpuSnapshot:
    return NpuSnapshot(NOW, (), (), False, reason, 0.01)


def engine_snapshot(**changes: Any) -> EngineSnapshot:
    fields: dict[str, Any] = dict(
        taken_at=NOW, device="cpu", dtype="bfloat16", architecture="Qwen3MoeForCausalLM",
        fp8_mode="dequantise at load", fused_ops=("rms_norm", "rope"), ttft_s=0.125,
        prefill_tokens_per_s=512.0, decode_tokens_per_s=23.5, kv_cache_bytes=64 * 1024 * 1024,
        kv_tokens_used=512, max_seq_len=2048, kv_layout="[layers, 2, heads, seq, dim]",
        kv_alignment_bytes=512)
    fields.update(changes)
    return EngineSnapshot(**fields)


def temperature_history(snapshot: NpuSnapshot, points: int = 10) -> History:
    history = History()
    for step in range(points):
        for chip in snapshot.chips:
            base = chip.temperature_c or 0
            history.add(temperature_history_key(chip.key), NOW - points + step, base + step % 4)
    return history


# -- host app ---------------------------------------------------------------------------------

class Host(App[None]):
    """Mounts one widget and nothing else."""

    def __init__(self, widget: Widget) -> None:
        super().__init__()
        self.widget = widget

    def compose(self) -> ComposeResult:
        yield self.widget


def plain(cell: object) -> str:
    return cell.plain if isinstance(cell, Text) else str(cell)


def rows(table: DataTable[Any]) -> list[list[str]]:
    return [[plain(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


def static_text(widget: Widget, selector: str) -> str:
    content = widget.query_one(selector, Static).content
    return content.plain if isinstance(content, Text) else str(content)


def rendered(widget: Widget, selector: str) -> str:
    """What a Static shows as text (works for rich Tables too, by rendering them)."""
    from rich.console import Console
    console = Console(width=100, record=True)
    console.print(widget.query_one(selector, Static).content)
    return console.export_text()


# -- NpuPanel ---------------------------------------------------------------------------------

async def test_npu_panel_shows_every_a2_chip() -> None:
    panel = NpuPanel(THERMAL)
    snapshot = corpus_snapshot(A2_8_CHIPS)
    async with Host(panel).run_test(size=SIZE) as pilot:
        panel.show(snapshot, temperature_history(snapshot), NOW, stale=False)
        await pilot.pause()
        table = panel.query_one("#npu-chips", DataTable)
        shown = rows(table)
        assert len(shown) == 8
        assert shown[0][:5] == ["0", "0", "910B4", "OK", "33 °C"]
        assert shown[0][5] == "87.2 W"
        assert shown[0][7] == "2654 / 32768 MB (8%)"
        # ten points of temperature history, then the range the blocks stand for
        assert all(len(r[8].split()[0]) == 10 and r[8].endswith("°C") for r in shown)
        status = static_text(panel, "#npu-status")
        assert "8 chips" in status and "1.5 s old" in status and "STALE" not in status
        assert "no processes" in static_text(panel, "#npu-process-note")


async def test_npu_panel_a3_dual_die_and_processes_with_filter() -> None:
    panel = NpuPanel(THERMAL)
    snapshot = corpus_snapshot(A3_DUAL_DIE)
    async with Host(panel).run_test(size=SIZE) as pilot:
        panel.show(snapshot, History(), NOW, stale=False)
        await pilot.pause()
        chips = rows(panel.query_one("#npu-chips", DataTable))
        assert [(r[0], r[1]) for r in chips] == [("0", "0"), ("0", "1"), ("1", "0"), ("1", "1")]
        assert chips[1][5] == "–"  # the second die prints no power: shown as absent, not 0
        processes = panel.query_one("#npu-processes", DataTable)
        assert rows(processes) == [["1", "1", "990711", "python", "7746 MB"]]

        panel.query_one("#npu-filter", Input).focus()
        await pilot.press(*"vllm")
        await pilot.pause()
        assert processes.row_count == 0
        assert "0 of 1 processes match 'vllm'" in static_text(panel, "#npu-process-note")

        panel.query_one("#npu-filter", Input).value = "9907"
        await pilot.pause()
        assert rows(processes)[0][2] == "990711"
        # a new sample keeps the filter applied
        panel.show(snapshot, History(), NOW, stale=False)
        await pilot.pause()
        assert processes.row_count == 1


async def test_npu_panel_300i_duo_shows_ddr_and_unknown_processes() -> None:
    panel = NpuPanel(THERMAL)
    async with Host(panel).run_test(size=SIZE) as pilot:
        panel.show(corpus_snapshot(DUO_300I), History(), NOW, stale=False)
        await pilot.pause()
        chips = rows(panel.query_one("#npu-chips", DataTable))
        assert [r[2] for r in chips] == ["310P3", "310P3"]
        assert chips[0][7] == "1529 / 44280 MB (3%)"
        assert "process list unknown" in static_text(panel, "#npu-process-note")


async def test_npu_panel_colours_hot_chips_by_policy() -> None:
    panel = NpuPanel(THERMAL)
    snapshot = corpus_snapshot(A2_8_CHIPS, temperatures={"2/0": 88, "5/0": 97})
    async with Host(panel).run_test(size=SIZE) as pilot:
        panel.show(snapshot, History(), NOW, stale=False)
        await pilot.pause()
        table = panel.query_one("#npu-chips", DataTable)
        temps = [table.get_row_at(i)[4] for i in range(table.row_count)]
        # the doctor's rule: far above the other chips warns; there is no fixed "fail" degree
        assert isinstance(temps[5], Text) and temps[5].style == LEVEL_STYLES["warn"]
        assert isinstance(temps[2], Text) and temps[2].style == LEVEL_STYLES["warn"]
        assert isinstance(temps[0], Text) and temps[0].style == LEVEL_STYLES["ok"]
        assert panel.chip_level(snapshot.chips[5]) == "warn"


async def test_npu_panel_stale_marker_and_age() -> None:
    panel = NpuPanel(THERMAL)
    snapshot = corpus_snapshot(A2_8_CHIPS, taken_at=NOW - 42)
    async with Host(panel).run_test(size=SIZE) as pilot:
        panel.show(snapshot, History(), NOW, stale=True)
        await pilot.pause()
        status = static_text(panel, "#npu-status")
        assert status.startswith(" STALE ") and "42.0 s old" in status
        assert panel.query_one("#npu-status").has_class("-stale")
        assert panel.query_one("#npu-chips", DataTable).row_count == 8  # last data kept
        panel.show(snapshot, History(), NOW - 40, stale=False)
        await pilot.pause()
        assert "STALE" not in static_text(panel, "#npu-status")


async def test_npu_panel_without_npu_says_why_and_shows_nothing_fake() -> None:
    panel = NpuPanel(THERMAL)
    async with Host(panel).run_test(size=SIZE) as pilot:
        panel.show(corpus_snapshot(A2_8_CHIPS), History(), NOW, stale=False)
        panel.show(error_snapshot("npu-smi not found on PATH"), History(), NOW, stale=False)
        await pilot.pause()
        assert static_text(panel, "#npu-status") == "no NPU found: npu-smi not found on PATH"
        assert panel.query_one("#npu-chips", DataTable).row_count == 0
        assert panel.query_one("#npu-processes", DataTable).row_count == 0


def test_levels_and_sparkline() -> None:
    assert sparkline([1, 2, 3, 4, 5, 6, 7, 8]) == "▁▂▃▄▅▆▇█"
    assert sparkline([5, 5]) == "▁▁" and sparkline([]) == ""
    assert len(sparkline(list(range(100)), width=16)) == 16


# -- PressurePanel ----------------------------------------------------------------------------

LIMITS = PressureLimits(high_percent=60.0, low_percent=30.0, idle_percent=10.0)


def conflict(operator: str, bank: float, group: float) -> OpConflict:
    return OpConflict(operator, "ResourceConflictRatio.csv", 4, bank, group, 0.1, None,
                      max(bank, group))


def pressure_of(snapshot: NpuSnapshot, causes: ZeroCauses = UNKNOWN_CAUSES) -> list[PressureRow]:
    return pressure_rows([(snapshot, causes)], LIMITS)


async def test_pressure_panel_heuristic_and_msprof_profile() -> None:
    panel = PressurePanel()
    npu = corpus_snapshot(A3_DUAL_DIE, bandwidth={"0/0": 82.0, "0/1": 5.0, "1/0": 40.0})
    conflicts = [conflict("Add", 0.02, 0.01), conflict("MatMulV3", 0.31, 0.12)]
    async with Host(panel).run_test(size=SIZE) as pilot:
        panel.show(pressure_of(npu), "a note", conflicts)
        await pilot.pause()
        assert static_text(panel, "#pressure-heuristic") == HEURISTIC_LABEL
        chips = rows(panel.query_one("#pressure-chips", DataTable))
        assert chips[0] == ["NPU 0/0", "82 %", "0 %", "suggests memory-bound"]
        assert chips[1][3] == "idle, or host/launch-bound"
        assert chips[3][1] == "–" and chips[3][3].startswith("not sampled")
        assert static_text(panel, "#pressure-chips-note") == "a note"
        assert "from the msprof profile (--msprof), not live" in static_text(
            panel, "#pressure-msprof")
        ops = rows(panel.query_one("#pressure-conflicts", DataTable))
        assert [r[0] for r in ops] == ["MatMulV3", "Add"] and ops[0][1] == "31.0%"
        assert not panel.query("#pressure-kv")  # the KV cache is the engine panel's


async def test_pressure_panel_never_suggests_live_bank_conflicts() -> None:
    panel = PressurePanel()
    npu = corpus_snapshot(A2_8_CHIPS, bandwidth={"0/0": 82.0})
    async with Host(panel).run_test(size=SIZE) as pilot:
        panel.show(pressure_of(npu), "", None)
        await pilot.pause()
        assert "bank" not in str(panel.border_title).lower()
        assert not panel.query_one("#pressure-msprof").display
        assert not panel.query_one("#pressure-conflicts").display
        note = static_text(panel, "#pressure-msprof-note")
        assert note.startswith("bank conflicts are not measured live") and "--msprof DIR" in note


async def test_pressure_panel_without_npu_data() -> None:
    panel = PressurePanel()
    async with Host(panel).run_test(size=SIZE) as pilot:
        panel.show([], "no NPU data: npu-smi not found on PATH", None)
        await pilot.pause()
        assert "no NPU data: npu-smi not found" in static_text(panel, "#pressure-chips-note")
        assert not panel.query_one("#pressure-chips").display


async def test_pressure_panel_names_a_documented_zero_instead_of_idle() -> None:
    panel = PressurePanel()
    npu = corpus_snapshot(A2_8_CHIPS, bandwidth={"0/0": 0.0})
    vm = ZeroCauses((), VirtReading("KVM", "/sys/class/dmi/id/product_name: KVM"))
    async with Host(panel).run_test(size=SIZE) as pilot:
        panel.show(pressure_of(npu, vm), causes_note([vm]), None)
        await pilot.pause()
        chips = rows(panel.query_one("#pressure-chips", DataTable))
        assert chips[0][3] == "HBM-BW reads 0 in a VM pass-through: not judged"
        assert "idle" not in chips[0][3]
        assert "a VM (KVM" in static_text(panel, "#pressure-chips-note")

# -- HostPanel, EnginePanel, AlertsPanel -------------------------------------------------------

async def test_host_panel() -> None:
    panel = HostPanel()
    snapshot = HostSnapshot(NOW, 12.5, 6144.0, 16384.0, "/var/log/ascend", 71680.0, 102400.0,
                            cpu_cores_percent=(0.0, 100.0, 50.0, 0.0))
    async with Host(panel).run_test(size=SIZE) as pilot:
        panel.show(snapshot)
        await pilot.pause()
        text = static_text(panel, "#host-lines")
        assert "CPU" in text and "12.5 %" in text and "busiest core 100 %" in text
        assert "cores▁█▅▁" in text.replace(" ", "")  # one block per core, 0 to 100 %
        assert "6.0 GiB / 16.0 GiB" in text and "37.5 %" in text
        # the disk's percent is used space, and so is the size beside it
        assert "30.0 %" in text and "30.0 GiB / 100.0 GiB · 70.0 GiB free" in text
        panel.show(HostSnapshot(NOW, None, 1.0, 2.0, None, None, None))
        await pilot.pause()
        text = static_text(panel, "#host-lines")
        assert "not measured" in text
        assert "CPU  measuring" in text  # the first sample has no interval: not "0.0 %"


async def test_engine_panel_with_and_without_model() -> None:
    panel = EnginePanel()
    history = History()
    for i, rate in enumerate((20.0, 22.0, 23.5)):
        history.add("engine:decode_tokens_per_s", NOW + i, rate)
    async with Host(panel).run_test(size=SIZE) as pilot:
        panel.show(None, history)
        await pilot.pause()
        assert static_text(panel, "#engine-facts") == "no model loaded"
        panel.show(engine_snapshot(), history)
        await pilot.pause()
        facts = rendered(panel, "#engine-facts")
        for expected in ("cpu · bfloat16 · Qwen3MoeForCausalLM", "dequantise at load",
                         "rms_norm, rope", "TTFT 125 ms", "prefill 512.0 tok/s",
                         "decode 23.5 tok/s", "64.0 MiB, 25% (512 / 2048 positions)",
                         "[layers, 2, heads, seq, dim]"):
            assert expected in " ".join(facts.split())
        assert "512 B base address (informational: no vendor source" in facts
        assert list(panel.query_one("#engine-decode-trend", Sparkline).data or []) == [
            20.0, 22.0, 23.5]
        # the sparkline's scale: its lowest and highest bars
        assert static_text(panel, "#engine-decode-label") == "decode 20.0–23.5 tok/s"
        panel.show(engine_snapshot(fp8_mode="resident",
                                   fp8_decode="torch path: ASCEND_DOCTOR_CPU_KERNEL=0"), history)
        await pilot.pause()
        assert "resident (torch path: ASCEND_DOCTOR_CPU_KERNEL=0)" in rendered(panel,
                                                                           "#engine-facts")
        assert "CPU kernel" not in rendered(panel, "#engine-facts")  # no layer runs there
        panel.show(engine_snapshot(kernel_layers="30 of 30 layers (30 whole)"), history)
        await pilot.pause()
        assert "CPU kernel 30 of 30 layers (30 whole)" in " ".join(
            rendered(panel, "#engine-facts").split())


async def test_alerts_panel_newest_first() -> None:
    panel = AlertsPanel()
    alerts = [
        Alert(NOW - 60, "temperature:0/0", "warn", "NPU 0/0 temperature at or above 85 °C",
              "88 °C"),
        Alert(NOW, "health:1/0", "fail", "NPU 1/0 health is Alarm", "Alarm"),
    ]
    async with Host(panel).run_test(size=SIZE) as pilot:
        panel.show([])
        await pilot.pause()
        assert static_text(panel, "#alerts-empty") == "no alerts raised"
        panel.show(alerts)
        await pilot.pause()
        shown = rows(panel.query_one("#alerts-table", DataTable))
        assert shown[0] == [format_clock(NOW), "FAIL", "NPU 1/0 health is Alarm", "Alarm"]
        assert shown[1][1:] == ["WARN", "NPU 0/0 temperature at or above 85 °C", "88 °C"]
        assert not panel.query_one("#alerts-empty").display


# -- snapshot ---------------------------------------------------------------------------------

@pytest.mark.parametrize("filename", [A2_8_CHIPS])
def test_npu_panel_snapshot(snap_compare: Any, filename: str) -> None:
    panel = NpuPanel(THERMAL)
    snapshot = corpus_snapshot(filename, temperatures={"5/0": 97, "2/0": 88})

    async def run_before(pilot: Any) -> None:
        await pilot.pause()
        panel.show(snapshot, temperature_history(snapshot, 16), NOW, stale=False)
        await pilot.pause()

    assert snap_compare(Host(panel), terminal_size=SIZE, run_before=run_before)


async def test_npu_panel_shows_names_verbatim_not_as_markup() -> None:
    panel = NpuPanel(THERMAL)
    base = corpus_snapshot(A3_DUAL_DIE)
    odd = ProcessSample(0, 0, 4242, "[bold]python[/bold] serve.py", 128)
    snapshot = NpuSnapshot(base.taken_at, base.chips, (odd,), True, None, 0.1)
    async with Host(panel).run_test(size=SIZE) as pilot:
        panel.show(snapshot, History(), NOW, stale=False)
        await pilot.pause()
        assert rows(panel.query_one("#npu-processes", DataTable))[0][3] == (
            "[bold]python[/bold] serve.py")
