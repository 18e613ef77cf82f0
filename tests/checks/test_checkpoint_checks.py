from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from checks.builtin.checkpoint import checkpoint_format, derived_range, fp8_scales
from checks.context import Context
from checks.model import Finding
from checks.policy import load_policy
from probes.inventory import NpuReading
from probes.live import LiveHost
from tests.fp8_fixtures import (
    Tensors,
    bf16_model_tensors,
    encode_scales,
    fp8_model_tensors,
    model_config,
    write_model,
)

Q0 = "model.layers.0.self_attn.q_proj"
O1 = "model.layers.1.self_attn.o_proj"
SHARD2 = "model-00002-of-00002.safetensors"


def ctx_for(model: Path | None, chips: list[str] | None = None,
            policy_text: str = "", tmp_path: Path | None = None) -> Context:
    policy = None
    if policy_text and tmp_path is not None:
        policy = tmp_path / "policy.yaml"
        policy.write_text(policy_text)
    ctx = Context(LiveHost(root="/", env={}), load_policy(policy), model_dir=model)
    if chips is not None:  # prime the shared npu fact instead of running npu-smi
        reading = NpuReading("info", {"chips": [{"name": n} for n in chips]})
        ctx.fact("npu", lambda: reading)
    return ctx


def text_of(finding: Finding) -> str:
    return finding.summary + "\n" + "\n".join(finding.evidence)


def with_scale(tensors: Tensors, name: str, edit: float, at: tuple[int, int] = (0, 0),
               dtype: str = "BF16") -> Tensors:
    """Decode the fixture's scales, plant one value and re-encode them."""
    scales = np.full((2, 3), 2e-4, dtype=np.float32) if "q_proj" in name else \
        np.full((3, 2), 2e-4, dtype=np.float32)
    scales[at] = edit
    tensors[name] = encode_scales(scales, dtype)
    return tensors


@pytest.fixture
def healthy(tmp_path: Path) -> Path:
    return write_model(tmp_path / "fp8", fp8_model_tensors())


def test_no_model_skips() -> None:
    ctx = ctx_for(None)
    assert fp8_scales(ctx).status == "skip" and "--model" in fp8_scales(ctx).summary
    assert checkpoint_format(ctx).status == "skip"


def test_healthy_fp8_passes(healthy: Path) -> None:
    finding = fp8_scales(ctx_for(healthy))
    assert finding.status == "pass", finding
    assert "4 FP8 weights" in finding.summary
    assert any("derived" in e for e in finding.evidence)


@pytest.mark.parametrize("dtype", ["F32", "F16"])
def test_fp32_and_fp16_scales_pass(tmp_path: Path, dtype: str) -> None:
    model = write_model(tmp_path / "m", fp8_model_tensors(scale_dtype=dtype))
    finding = fp8_scales(ctx_for(model))
    assert finding.status == "pass" and dtype in text_of(finding)


def test_bf16_model(tmp_path: Path) -> None:
    model = write_model(tmp_path / "bf16", bf16_model_tensors(), model_config(fp8=False))
    ctx = ctx_for(model)
    scales = fp8_scales(ctx)
    assert scales.status == "skip" and "not an FP8 checkpoint" in scales.summary
    fmt = checkpoint_format(ctx)
    assert fmt.status == "pass", fmt
    assert "precision: BF16" in fmt.evidence and "shards: 2" in fmt.evidence


@pytest.mark.parametrize(("value", "word"), [(float("nan"), "NaN"), (0.0, "zero"),
                                             (-1e-4, "negative"), (float("inf"), "infinite")])
def test_bad_scale_values_fail(tmp_path: Path, value: float, word: str) -> None:
    tensors = with_scale(fp8_model_tensors(), f"{O1}.weight_scale_inv", value, at=(2, 1))
    finding = fp8_scales(ctx_for(write_model(tmp_path / "m", tensors)))
    assert finding.status == "fail"
    assert f"{O1}.weight_scale_inv: 1 {word}" in finding.summary


def test_missing_scale_fails(tmp_path: Path) -> None:
    tensors = fp8_model_tensors()
    del tensors[f"{Q0}.weight_scale_inv"]
    finding = fp8_scales(ctx_for(write_model(tmp_path / "m", tensors)))
    assert finding.status == "fail"
    assert f"{Q0}.weight: has no {Q0}.weight_scale_inv" in finding.summary


def test_wrong_scale_shape_fails(tmp_path: Path) -> None:
    tensors = fp8_model_tensors()
    # a grid computed with floor division misses the ragged 64-column block
    tensors[f"{Q0}.weight_scale_inv"] = encode_scales(np.full((2, 2), 2e-4), "BF16")
    finding = fp8_scales(ctx_for(write_model(tmp_path / "m", tensors)))
    assert finding.status == "fail"
    assert f"{Q0}.weight_scale_inv: shape [2, 2], expected [2, 3]" in finding.summary


def test_wrong_scale_dtype_fails(tmp_path: Path) -> None:
    tensors = fp8_model_tensors()
    tensors[f"{Q0}.weight_scale_inv"] = (np.ones((2, 3), dtype=np.int8), "I8")
    finding = fp8_scales(ctx_for(write_model(tmp_path / "m", tensors)))
    assert finding.status == "fail" and "dtype I8" in finding.summary


def test_outlier_scale_warns(tmp_path: Path) -> None:
    tensors = with_scale(fp8_model_tensors(), f"{Q0}.weight_scale_inv", 2e-4 * 5000)
    finding = fp8_scales(ctx_for(write_model(tmp_path / "m", tensors)))
    assert finding.status == "warn", finding
    assert f"{Q0}.weight_scale_inv: 1 outliers" in finding.summary


def test_policy_range_is_used(tmp_path: Path, healthy: Path) -> None:
    policy = "checkpoint:\n  fp8_scale_max: 1.0e-4\n"
    finding = fp8_scales(ctx_for(healthy, policy_text=policy, tmp_path=tmp_path))
    assert finding.status == "fail" and "outside [" in finding.summary
    assert any("policy checkpoint.fp8_scale_" in e for e in finding.evidence)


def test_derived_range_fp16_overflow(tmp_path: Path) -> None:
    low, high, _ = derived_range("float16")
    assert high == pytest.approx(65504 / 448) and low == pytest.approx(2.0**-15)
    config = model_config()
    config["torch_dtype"] = "float16"
    tensors = with_scale(fp8_model_tensors(), f"{O1}.weight_scale_inv", 200.0, dtype="F32")
    finding = fp8_scales(ctx_for(write_model(tmp_path / "m", tensors, config)))
    assert finding.status == "fail" and f"{O1}.weight_scale_inv: 1 outside" in finding.summary


def test_worst_tensors_are_listed_top_five(tmp_path: Path) -> None:
    tensors = fp8_model_tensors(layers=4)
    for i in range(4):
        for proj in ("q_proj", "o_proj"):
            with_scale(tensors, f"model.layers.{i}.self_attn.{proj}.weight_scale_inv", 0.0)
    config = model_config()
    finding = fp8_scales(ctx_for(write_model(tmp_path / "m", tensors, config)))
    assert finding.status == "fail"
    assert finding.summary.startswith("8 of 8 FP8 weights")
    assert sum(": 1 zero" in e for e in finding.evidence) == 5
    assert "... and 3 more tensors" in finding.evidence


def test_fp8_weight_listed_as_not_converted_warns(tmp_path: Path) -> None:
    config = model_config()
    config["quantization_config"]["modules_to_not_convert"].append(Q0)
    finding = fp8_scales(ctx_for(write_model(tmp_path / "m", fp8_model_tensors(), config)))
    assert finding.status == "warn" and "modules_to_not_convert" in finding.summary


def test_format_missing_shard_fails(healthy: Path) -> None:
    (healthy / SHARD2).unlink()
    ctx = ctx_for(healthy, chips=["Ascend950PR"])
    finding = checkpoint_format(ctx)
    assert finding.status == "fail" and f"shard {SHARD2} named by the index is missing" in \
        finding.summary
    # the scales still there are checked; the missing shard's are named as unchecked
    scales = fp8_scales(ctx)
    assert scales.status == "warn" and SHARD2 in text_of(scales)


def test_format_truncated_shard_fails(healthy: Path) -> None:
    shard = healthy / SHARD2
    shard.write_bytes(shard.read_bytes()[:-100])
    ctx = ctx_for(healthy, chips=["Ascend950PR"])
    finding = checkpoint_format(ctx)
    assert finding.status == "fail"
    assert f"shard {SHARD2} is" in finding.summary and "truncated" in finding.summary
    scales = fp8_scales(ctx)  # the last tensor of the shard lost its tail
    assert scales.status in ("pass", "fail") and "error" not in scales.summary.lower()


def test_unreadable_scale_bytes_fail_fp8_scales(tmp_path: Path) -> None:
    tensors = fp8_model_tensors()
    model = write_model(tmp_path / "m", {f"{Q0}.weight": tensors[f"{Q0}.weight"],
                                         f"{Q0}.weight_scale_inv":
                                         tensors[f"{Q0}.weight_scale_inv"]}, shards=1)
    shard = model / "model.safetensors"
    blob = shard.read_bytes()
    header_end = 8 + int.from_bytes(blob[:8], "little")
    shard.write_bytes(blob[: header_end + 4])  # keeps 4 of the data bytes: no tensor is whole
    finding = fp8_scales(ctx_for(model))
    assert finding.status == "fail" and "truncated" in finding.summary


def test_format_healthy_fp8_on_950_passes(healthy: Path) -> None:
    finding = checkpoint_format(ctx_for(healthy, chips=["Ascend950PR"]))
    assert finding.status == "pass", finding
    assert "precision: FP8 (block 128x128)" in finding.evidence
    assert "architecture: qwen3_moe (Qwen3MoeForCausalLM)" in finding.evidence
    total = next(e for e in finding.evidence if e.startswith("total size: "))
    assert re.fullmatch(r"total size: [0-9,]+ bytes \([0-9.]+ GiB\)", total), total


@pytest.mark.parametrize(("chip", "family"), [("910B4", "A2"), ("910B3", "A2"),
                                              ("Ascend910", "A3")])
def test_format_fp8_on_a2_a3_fails(healthy: Path, chip: str, family: str) -> None:
    finding = checkpoint_format(ctx_for(healthy, chips=[chip, chip]))
    assert finding.status == "fail"
    assert f"FP8 checkpoint on {family} NPUs" in finding.summary
    assert "msModelSlim W8A8" in finding.remedy and "--quantization ascend" in finding.remedy


def test_format_fp8_without_npu_warns(healthy: Path) -> None:
    finding = checkpoint_format(ctx_for(healthy))  # env={}: no npu-smi on PATH
    assert finding.status == "warn"
    assert "COMPAT.yaml fp8_support" in finding.summary and "convert to BF16" in finding.remedy
    assert finding.summary not in finding.evidence  # one problem: said once, not twice


def test_format_lists_several_problems_one_per_line(healthy: Path) -> None:
    (healthy / SHARD2).unlink()
    finding = checkpoint_format(ctx_for(healthy))  # a missing shard and FP8 with no NPU here
    assert finding.status == "fail" and "missing" in finding.summary
    assert finding.summary in finding.evidence  # the failure, and the warning under it
    assert any("fp8_support" in e for e in finding.evidence)


def test_format_unknown_architecture_warns(tmp_path: Path) -> None:
    config = model_config(fp8=False, model_type="gpt_oss", architecture="GptOssForCausalLM")
    model = write_model(tmp_path / "m", bf16_model_tensors(), config)
    finding = checkpoint_format(ctx_for(model))
    assert finding.status == "warn" and "gpt_oss" in finding.summary
    assert "qwen3_5_moe" in finding.summary


def test_format_broken_config_fails(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("not json")
    ctx = ctx_for(tmp_path)
    finding = checkpoint_format(ctx)
    assert finding.status == "fail" and "config.json: not valid JSON" in finding.summary
    assert fp8_scales(ctx).status == "skip"


def test_checks_are_registered() -> None:
    from checks.registry import all_checks

    ids = {c.id: c.category for c in all_checks()}
    assert ids["checkpoint.fp8-scales"] == "checkpoint"
    assert ids["checkpoint.format"] == "checkpoint"
