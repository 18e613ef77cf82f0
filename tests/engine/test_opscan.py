"""The operator-coverage scan: traced on the meta device from a config alone, judged by this
process's dispatcher (probed) or by a torch_npu registry (predicted)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from engine.config import load_config
from engine.errors import EngineError
from engine.tools.npu_registry import Registry, parse_table
from engine.tools.opcoverage import OpRow
from engine.tools.opscan import CoverageReport, choose_judge, predict_for, scan, scan_path
from tests.engine.tiny_configs import FAMILIES, write

ROOT = Path(__file__).resolve().parent.parent.parent
QWEN36_FP8 = ROOT / "tests" / "data" / "models" / "Qwen3.6-35B-A3B-FP8"


def row(report: CoverageReport, op: str) -> OpRow:
    found = [r for r in report.rows if r.op == op]
    assert found, f"{op} not among {[r.op for r in report.rows]}"
    return found[0]


def ops(report: CoverageReport) -> set[str]:
    return {r.op for r in report.rows}


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("fp8", [False, True], ids=["bf16", "fp8-resident"])
def test_every_architecture_is_traced_and_covered_on_the_cpu(tmp_path: Path, family: str,
                                                             fp8: bool) -> None:
    report = scan_path(write(tmp_path, family, fp8), "cpu",
                       fp8_mode="resident" if fp8 else "dequantize")
    assert report.warnings == ()
    assert not report.predicted and report.device == "cpu"
    assert {"mm", "embedding", "rsqrt"} <= ops(report)
    assert all(r.prefill + r.decode > 0 and r.sites for r in report.rows)
    if "moe" in family or family in ("mixtral", "qwen3_next"):
        assert any("route" in s.where for s in row(report, "topk").sites)
    if family.startswith(("qwen3_next", "qwen3_5")):
        solve = row(report, "linalg_solve_triangular")  # the chunked delta rule, prefill only
        assert solve.decode == 0 and "chunked_delta_rule" in solve.sites[0].where
        assert {u.label for u in report.layers} == {"deltanet+moe", "attention+moe"}
    if fp8:
        shift = row(report, "__ilshift__.Scalar")
        assert report.fp8_mode == "resident" and "_dequantize" in shift.sites[0].where


def test_counts_are_for_the_whole_model(tmp_path: Path) -> None:
    """Tiny llama, 2 layers: per step 7 projections a layer plus lm_head reach mm; RMSNorm
    runs twice a layer plus once at the end; attention's two batched products a layer."""
    report = scan_path(write(tmp_path, "llama"), "cpu")
    assert (row(report, "mm").prefill, row(report, "mm").decode) == (2 * 7 + 1, 2 * 7 + 1)
    assert row(report, "rsqrt").decode == 2 * 2 + 1
    assert row(report, "bmm").decode == 2 * 2
    assert row(report, "embedding").decode == 1
    sites = {s.where: s for s in row(report, "rsqrt").sites}
    assert sites["rms_norm"].layers == "attention+mlp x2" and sites["rms_norm"].count == 8
    assert "Decoder.forward > rms_norm" in sites  # the final norm, outside the layers


def test_qk_norms_are_counted_per_layer(tmp_path: Path) -> None:
    report = scan_path(write(tmp_path, "qwen3"), "cpu")
    assert row(report, "rsqrt").decode == 2 * 2 + 1 + 2 * 2  # + q and k norm per layer


@pytest.fixture(scope="module")
def cuda_only() -> Iterator[Any]:
    """An operator with a kernel for CUDA (and Meta, so it traces) but none for the CPU."""
    lib = torch.library.Library("opscan_test", "DEF")
    lib.define("cuda_only(Tensor x) -> Tensor")
    lib.impl("cuda_only", lambda x: x.clone(), "CUDA")
    lib.impl("cuda_only", lambda x: torch.empty_like(x), "Meta")
    yield torch.ops.opscan_test.cuda_only
    lib._destroy()


def _plant(monkeypatch: pytest.MonkeyPatch, op: Any) -> None:
    import engine.model
    import engine.moe

    original = engine.model.swiglu

    def swiglu_then_op(x: torch.Tensor, weights: Any) -> torch.Tensor:
        return op(original(x, weights))

    monkeypatch.setattr(engine.model, "swiglu", swiglu_then_op)
    monkeypatch.setattr(engine.moe, "swiglu", swiglu_then_op)


@pytest.mark.parametrize("family", ["llama", "qwen3_5_moe"])
def test_an_operator_without_a_kernel_is_reported_with_its_module(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cuda_only: Any, family: str) -> None:
    _plant(monkeypatch, cuda_only)
    report = scan_path(write(tmp_path, family), "cpu")
    assert [r.op for r in report.warnings] == ["opscan_test::cuda_only"]
    planted = report.warnings[0]
    assert planted.kernel.status == "missing" and "no CPU kernel" in planted.kernel.detail
    where = planted.sites[0]
    if family == "llama":  # the dense MLP, called from the block's feed-forward
        assert where.where == "Block.feed_forward" and where.layers == "attention+mlp x2"
        assert (planted.prefill, planted.decode) == (2, 2)
    else:  # each routed expert of each MoE layer
        assert "SparseMoe" in where.where
    document = report.document()
    assert document["warnings"] == 1
    assert document["operators"][0]["op"] == "opscan_test::cuda_only"


def test_a_planted_operator_is_missing_on_the_npu_too(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cuda_only: Any) -> None:
    _plant(monkeypatch, cuda_only)
    report = scan_path(write(tmp_path, "llama"), "npu", torch_npu="2.5.1")
    planted = row(report, "opscan_test::cuda_only")
    assert planted.kernel.status == "missing"
    assert "not in torch_npu's registries" in planted.kernel.detail


# -- prediction from a planted registry ---------------------------------------------------------

PLANTED_TABLE = """\
#@ source op-plugin: planted for the test
#@ versions: 2.1 2.2 2.3
linear official op_api=all
silu official op_api=2.3+
view torch_npu native=all
npu_rms_norm custom op_api=2.2+
"""


@pytest.fixture()
def planted() -> Registry:
    return parse_table(PLANTED_TABLE.splitlines(), "planted")


def _predicted(tmp_path: Path, registry: Registry, version: str) -> CoverageReport:
    config = load_config(write(tmp_path, "llama"))
    return scan(config, predict_for(version, f"torch_npu {version}", registry))


def test_prediction_follows_the_registry(tmp_path: Path, planted: Registry) -> None:
    report = _predicted(tmp_path, planted, "2.2.0")
    assert report.predicted
    linear = row(report, "linear")  # registered whole: its t and mm never reach the NPU
    assert linear.kernel.status == "native" and linear.whole
    assert linear.decode == 2 * 7 + 1
    assert "mm" not in ops(report) and "t" not in ops(report)
    silu = row(report, "silu")  # listed for 2.3 and later only
    assert silu.kernel.status == "fallback"
    assert "2.3+ only, not torch 2.2" in silu.kernel.detail
    assert row(report, "view").kernel.status == "native"
    rsqrt = row(report, "rsqrt")  # not listed, has a CPU kernel: torch_npu's fallback runs it
    assert rsqrt.kernel.status == "fallback" and "not in torch_npu's registries" in \
        rsqrt.kernel.detail
    assert row(report, "transpose.int").kernel.status == "composite"
    fused = {f.name: f for f in report.fused}
    assert fused["npu_rms_norm"].status == "available"
    assert any("planted for the test" in note for note in report.notes)


def test_prediction_for_another_line_and_beyond_the_registry(tmp_path: Path,
                                                             planted: Registry) -> None:
    assert row(_predicted(tmp_path, planted, "2.3.1"), "silu").kernel.status == "native"
    old = _predicted(tmp_path, planted, "2.1.0.post4")
    assert {f.name: f.status for f in old.fused} == {"npu_rms_norm": "unavailable"}
    beyond = row(_predicted(tmp_path, planted, "2.9.0"), "silu")
    assert beyond.kernel.status == "native" and "newer than the registry's 2.3" in \
        beyond.kernel.detail


def test_the_shipped_registry_predicts_the_demo_model(tmp_path: Path) -> None:
    report = scan_path(write(tmp_path, "mixtral", fp8=True), "npu", torch_npu="2.5.1",
                       fp8_mode="resident")
    assert report.predicted and "torch 2.5 line" in report.target
    assert report.warnings == ()
    assert row(report, "scaled_dot_product_attention").whole  # op-plugin registers it whole
    assert any("517f2e7d0f202f38b76310706cb977ca2388ad21" in n for n in report.notes)


def test_a_35b_config_is_scanned_without_weights() -> None:
    report = scan_path(QWEN36_FP8, "npu", torch_npu="2.6.0", fp8_mode="resident")
    assert report.num_layers == 40
    assert {(u.index, u.label, u.stands_for) for u in report.layers} == {
        (0, "deltanet+moe", 30), (3, "attention+moe", 10)}
    experts = [s for s in row(report, "matmul").sites if "swiglu" in s.where]
    assert experts and report.warnings == ()


def test_bad_requests_are_engine_errors(tmp_path: Path) -> None:
    with pytest.raises(EngineError, match="not a version"):
        choose_judge("npu", torch_npu="latest")
    with pytest.raises(EngineError, match="not one of"):
        choose_judge("tpu")
    if not torch.backends.cuda.is_built():
        with pytest.raises(EngineError, match="built without CUDA"):
            choose_judge("cuda")
    with pytest.raises(EngineError, match=r"config\.json"):
        scan_path(tmp_path / "absent", "cpu")


def test_a_config_claiming_millions_of_experts_is_refused_before_building(
        tmp_path: Path) -> None:
    from engine.config import parse_config
    from tests.engine.tiny_configs import config

    document = config("qwen3_moe")
    document["num_experts"] = 10**7
    with pytest.raises(EngineError, match="30,000,020 tensors"):
        scan(parse_config(document, "huge/config.json"), choose_judge("cpu"))
