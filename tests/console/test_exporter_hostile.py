"""An NPU-Exporter answer written to hurt: NaN values, a hundred thousand chips, odd ids."""

from __future__ import annotations

from console.exporter import MAX_CHIPS, snapshot_from_exposition
from probes.prometheus import parse


def _expo(lines: list[str]) -> object:
    return parse("\n".join(lines) + "\n")


def test_nan_and_infinite_values_are_unknown_not_a_blank_panel() -> None:
    expo = _expo(['npu_chip_info_temperature{id="0"} NaN',
                  'npu_chip_info_hbm_used_memory{id="0"} +Inf',
                  'npu_chip_info_power{id="0"} NaN',
                  'npu_chip_info_utilization{id="0"} 42',
                  'npu_chip_info_process_info{id="0",process_id="17"} NaN',
                  'npu_chip_info_process_info{id="0",process_id="²"} 5'])
    snap = snapshot_from_exposition(expo, "node:8082", 0.0, 0.1)  # type: ignore[arg-type]
    assert snap.ok
    chip = snap.chips[0]
    assert chip.temperature_c is None and chip.hbm_used_mb is None and chip.power_w is None
    assert chip.aicore_percent == 42
    assert [(p.pid, p.memory_mb) for p in snap.processes] == [(17, None), (0, 5)]


def test_a_hundred_thousand_chips_are_refused_with_a_line() -> None:
    lines = [f'npu_chip_info_temperature{{id="{i}"}} 40' for i in range(127_000)]
    expo = _expo(lines)
    snap = snapshot_from_exposition(expo, "node:8082", 0.0, 0.1)  # type: ignore[arg-type]
    assert not snap.ok and snap.error is not None and f"more than {MAX_CHIPS} chips" in snap.error
    assert snap.chips == ()


def test_ids_that_are_not_ascii_numbers_name_no_chip() -> None:
    expo = _expo(['npu_chip_info_temperature{id="²"} 40',
                  'npu_chip_info_temperature{id="' + "9" * 5000 + '"} 40',
                  'npu_chip_info_temperature{id="3"} 40'])
    snap = snapshot_from_exposition(expo, "node:8082", 0.0, 0.1)  # type: ignore[arg-type]
    assert [c.npu_id for c in snap.chips] == [3]


def test_a_million_series_are_cut_at_the_sample_cap() -> None:
    from probes.prometheus import parse as parse_capped

    text = "".join(f'vllm:x{{i="{i}"}} 1\n' for i in range(2_000)) + "bad line {\n"
    expo = parse_capped(text, max_samples=500)
    assert len(expo.samples) == 500
    assert expo.problems[-1] == "more than 500 samples: the rest not read"
    clean = parse_capped("".join(f'a{{i="{i}"}} 1\n' for i in range(600)), max_samples=500)
    assert len(clean.samples) == 500 and clean.problems
