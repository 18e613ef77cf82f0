"""`ascend-doctor bench --compare`: two recorded results, which operator got slower, by how much."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from checks.bench_compare import (
    MAX_DOCUMENT_BYTES,
    CompareError,
    change_text,
    compare,
    load,
    summary,
    validate,
)
from checks.cli.bench_view import render, render_comparison
from checks.terminal import make_console


def _document(device: str, times: dict[str, float], copy: float = 20.0,
              matmul: float = 0.4, shapes: dict[str, str] | None = None) -> dict[str, Any]:
    return {"schema": "ascend-doctor-bench/1", "model": "m", "architecture": "qwen3_5_moe",
            "device": "cpu", "device_name": device, "torch": "2.13.0", "dtype": "bfloat16",
            "peaks": {"copy_gb_per_s": copy, "matmul_tflop_per_s": matmul,
                      "copy_shape": "256 MiB", "matmul_shape": "[2048,2048] x [2048,2048]"},
            "operators": [{"name": name, "median_s": t, "shape": (shapes or {}).get(name, "s"),
                           "dtype": "bfloat16", "bytes": 1000, "flops": 10,
                           "gb_per_s": 1e-6 / t, "tflop_per_s": 1e-11 / t,
                           "pct_of_roofline": 50.0, "bound": "memory"}
                          for name, t in times.items()]}


BEFORE = _document("box A", {"gemv attn.q_proj": 100e-6, "attention decode 4096 ctx": 2e-3,
                             "rmsnorm 1 tokens": 10e-6, "deltanet recurrent step": 50e-6,
                             "gemv lm_head": 5e-3})
AFTER = _document("box B", {"gemv attn.q_proj": 150e-6, "attention decode 4096 ctx": 2.1e-3,
                            "rmsnorm 1 tokens": 8e-6, "gemv lm_head": 5e-3,
                            "expert swiglu 8 tokens": 1e-3},
                  copy=15.0, shapes={"gemv lm_head": "other"})


def test_which_operators_got_slower_and_by_how_much() -> None:
    result = compare(AFTER, BEFORE, slower_pct=10)
    assert result.other == "box A cpu 2.13.0"
    assert [d.name for d in result.slower] == ["gemv attn.q_proj"]
    by_name = {d.name: d for d in result.deltas}
    assert by_name["gemv attn.q_proj"].ratio == pytest.approx(1.5)
    assert by_name["attention decode 4096 ctx"].ratio == pytest.approx(1.05)  # within 10%
    assert by_name["rmsnorm 1 tokens"].ratio == pytest.approx(0.8)
    assert by_name["deltanet recurrent step"].now_s is None  # not measured here
    assert by_name["expert swiglu 8 tokens"].then_s is None  # not measured there
    assert by_name["gemv lm_head"].shape_changed
    assert result.deltas[0].name == "gemv attn.q_proj"  # slowest first
    assert {p.name: p.ratio for p in result.peaks} == pytest.approx({"copy": 0.75,
                                                                     "matmul": 1.0})
    assert summary(result) == ("1 operators more than 10% slower than on box A cpu 2.13.0: "
                               "gemv attn.q_proj +50% slower")
    assert [d.name for d in compare(AFTER, BEFORE, slower_pct=1).slower] == [
        "gemv attn.q_proj", "attention decode 4096 ctx"]


@pytest.mark.parametrize(("ratio", "text"), [(1.5, "+50% slower"), (0.8, "-20% faster"),
                                             (1.002, "="), (None, "-")])
def test_change_text(ratio: float | None, text: str) -> None:
    assert change_text(ratio) == text


def test_the_comparison_renders_every_operator_and_the_peaks() -> None:
    out = io.StringIO()
    console = make_console(out)
    render(AFTER, console)
    render_comparison(compare(AFTER, BEFORE), console)
    text = out.getvalue()
    assert "gemv attn.q_proj" in text and "+50% slower" in text
    assert "peak copy (GB/s)" in text and "not measured" in text and "shape differs" in text
    assert "1 operators more than 10% slower" in text


@pytest.mark.parametrize("bad", [
    [], {"schema": "other/1"}, {"schema": "ascend-doctor-bench/1"},
    {"schema": "ascend-doctor-bench/1", "operators": [{"name": "x"}]},
    {"schema": "ascend-doctor-bench/1", "operators": [{"name": "x", "median_s": -1}]},
    {"schema": "ascend-doctor-bench/1", "operators": [{"name": 3, "median_s": 1}]},
])
def test_a_document_that_is_not_a_result_is_refused(bad: Any) -> None:
    with pytest.raises(CompareError, match=r"other\.json"):
        validate(bad, "other.json")


def test_loading_names_the_file(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_text(json.dumps(BEFORE))
    assert load(good)["device_name"] == "box A"
    with pytest.raises(CompareError, match=r"absent\.json"):
        load(tmp_path / "absent.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(CompareError, match="not JSON"):
        load(tmp_path / "bad.json")
    huge = tmp_path / "huge.json"
    huge.write_bytes(b" " * (MAX_DOCUMENT_BYTES + 1))
    with pytest.raises(CompareError, match="larger than"):
        load(huge)


def test_text_from_the_other_machine_is_shown_not_obeyed() -> None:
    hostile = _document("\x1b[2J[red]box[/red]", {"gemv \x1b]0;x\x07attn": 1e-6})
    out = io.StringIO()
    render_comparison(compare(AFTER, hostile), make_console(out))
    assert "\x1b" not in out.getvalue() and "[red]box[/red]" in out.getvalue()
