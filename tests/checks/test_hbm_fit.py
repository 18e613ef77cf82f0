from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import CORPUS_DIR

from checks.builtin.hbm_fit import (
    MB,
    KvShape,
    Plan,
    attention_layers,
    chips_used,
    dequantised_weight_bytes,
    dequantises_fp8,
    hbm_fit,
    judge,
    kv_shape,
    mb,
    weight_bytes_by_dtype,
    weight_share_bytes,
)
from checks.context import Context
from checks.model import Finding
from checks.policy import load_policy
from probes.checkpoint import TensorInfo, parse_config
from probes.host import CommandResult
from probes.inventory import NpuReading, parse_output, unavailable
from probes.live import LiveHost
from tests.fp8_fixtures import bf16_model_tensors, fp8_model_tensors, model_config, write_model

A2_8X32 = "014-info-25.0.rc1.1-910B4-8cards-noproc.txt"  # 2654 / 32768 MB used per chip
A3_4X64 = "065-info-25.2.0-A3-Ascend910-4chips-mixed-proc-peerfixture.txt"
A2_FREE_MB = 32768 - 2654


def reading(name: str) -> NpuReading:
    return parse_output((CORPUS_DIR / "npu-smi" / name).read_text())


def ctx_for(model: Path | None, npu: NpuReading | None, tmp_path: Path, policy: str = "",
            env: dict[str, str] | None = None) -> Context:
    policy_file = None
    if policy:
        policy_file = tmp_path / "policy.yaml"
        policy_file.write_text(policy)
    ctx = Context(LiveHost(root="/", env=env or {}), load_policy(policy_file), model_dir=model)
    if npu is not None:  # prime the shared npu fact instead of running npu-smi
        ctx.fact("npu", lambda: npu)
    return ctx


def text_of(finding: Finding) -> str:
    return finding.summary + "\n" + "\n".join(finding.evidence) + "\n" + finding.remedy


def bf16_model(tmp_path: Path, **config: Any) -> Path:
    return write_model(tmp_path / "bf16", bf16_model_tensors(),
                       {**model_config(fp8=False), **config})


# -- pure arithmetic ----------------------------------------------------------------------


def test_weight_bytes_per_dtype_and_dequantised() -> None:
    tensors = [TensorInfo("a", "BF16", (4, 4), "s", 0, 32),
               TensorInfo("b", "F8_E4M3", (8, 8), "s", 32, 96),
               TensorInfo("c", "BF16", (2,), "s", 96, 100)]
    by_dtype = weight_bytes_by_dtype(tensors)
    assert by_dtype == {"BF16": 36, "F8_E4M3": 64}
    assert dequantised_weight_bytes(by_dtype) == 36 + 128


def test_kv_bytes_per_token_qwen3_30b() -> None:
    config = parse_config({"num_hidden_layers": 48, "num_attention_heads": 32,
                           "num_key_value_heads": 4, "head_dim": 128,
                           "torch_dtype": "bfloat16"})
    shape = kv_shape(config)
    assert shape == KvShape(48, 4, 128, 2)
    assert shape.bytes_per_token() == 96 * 1024  # facts/model/ARCH.md: 96 KiB per token
    assert shape.bytes_per_token(chips=2) == 48 * 1024
    assert shape.bytes_per_token(chips=8) == 24 * 1024  # 4 KV heads replicated: one per chip


def test_hybrid_counts_only_full_attention_layers() -> None:
    types = ["linear_attention"] * 3 + ["full_attention"]
    qwen35 = parse_config({"model_type": "qwen3_5_moe",
                           "text_config": {"num_hidden_layers": 40, "layer_types": types * 10,
                                           "num_key_value_heads": 2, "head_dim": 256,
                                           "num_attention_heads": 16}})
    layers, why = attention_layers(qwen35)
    assert layers == 10 and "hybrid" in why and "layer_types" in why
    qwen_next = parse_config({"model_type": "qwen3_next", "num_hidden_layers": 48,
                              "full_attention_interval": 4})
    layers, why = attention_layers(qwen_next)
    assert layers == 12 and "full_attention_interval 4" in why
    shape = kv_shape(qwen35)
    assert shape is not None and shape.bytes_per_token() == 10 * 2 * 2 * 256 * 2


def test_kv_shape_needs_the_config_fields() -> None:
    assert kv_shape(parse_config({"num_hidden_layers": 4})) is None
    derived = kv_shape(parse_config({"num_hidden_layers": 2, "hidden_size": 256,
                                     "num_attention_heads": 4}))
    assert derived == KvShape(2, 4, 64, 2)


def test_plan_largest_context_and_judge() -> None:
    plan = Plan(free_bytes=1000 * MB, weight_bytes=400 * MB, reserve_bytes=100 * MB,
                kv_bytes_per_token=MB // 4, max_seq_len=1000, batch_size=2)
    assert plan.kv_room_bytes == 500 * MB
    assert plan.kv_bytes == 500 * MB and plan.headroom_bytes == 0
    assert plan.largest_context == 1000
    assert judge(plan, warn_free_mb=0) == "pass"
    assert judge(plan, warn_free_mb=1) == "warn"
    longer = Plan(1000 * MB, 400 * MB, 100 * MB, MB // 4, 1001, 2)
    assert judge(longer, 0) == "fail" and longer.largest_context == 1000
    too_big = Plan(1000 * MB, 950 * MB, 100 * MB, MB, 1, 1)
    assert judge(too_big, 0) == "fail" and too_big.largest_context == 0


def test_weight_share_and_chip_selection() -> None:
    assert weight_share_bytes(10, 3) == 4
    chips = reading(A3_4X64).info.chips  # type: ignore[union-attr]
    assert chips_used(chips, None) == list(chips)
    assert [c.hbm_used_mb for c in chips_used(chips, (1, 3, 9))] == [2876, 10568]


def test_fp8_dequantised_everywhere_but_950() -> None:
    assert dequantises_fp8("910B4") and dequantises_fp8("Ascend910")
    assert not dequantises_fp8("Ascend950PR")


# -- the check ----------------------------------------------------------------------------


def test_fits_passes_with_largest_context(tmp_path: Path) -> None:
    finding = hbm_fit(ctx_for(bf16_model(tmp_path), reading(A2_8X32), tmp_path))
    assert finding.status == "pass", finding
    text = text_of(finding)
    assert "fits on 8 x 910B4" in finding.summary and "largest context" in finding.summary
    assert "tensor parallel over 8 chip(s)" in text
    assert f"{A2_FREE_MB:,} MB free" in text
    assert "weights as stored" in text and "BF16" in text
    assert "2 attention layers x 2 x 1 KV heads x 128 head_dim x 2 bytes" in text


def test_weights_and_reserve_too_big_fail(tmp_path: Path) -> None:
    ctx = ctx_for(bf16_model(tmp_path), reading(A2_8X32), tmp_path,
                  "hbm_fit:\n  runtime_reserve_mb: 40000\n")
    finding = hbm_fit(ctx)
    assert finding.status == "fail", finding
    assert "weights + reserve do not fit" in finding.summary
    assert "more chips" in finding.remedy


def test_context_too_long_fails_with_largest_context(tmp_path: Path) -> None:
    # 48 layers x 2 x 8 KV heads x 128 x 2 bytes = 192 KiB/token, 24 KiB per chip over 8 chips
    model = bf16_model(tmp_path, num_hidden_layers=48, num_key_value_heads=8)
    ctx = ctx_for(model, reading(A2_8X32), tmp_path, "hbm_fit:\n  max_seq_len: 2000000\n")
    finding = hbm_fit(ctx)
    assert finding.status == "fail", finding
    room_bytes = (A2_FREE_MB - 4096) * MB - weight_share_bytes(
        sum(weight_bytes_by_dtype(_tensor_infos(model)).values()), 8)
    largest = room_bytes // (24 * 1024)
    assert f"largest context that fits is {largest:,} tokens" in finding.summary
    assert f"--max-model-len {largest:,}" in finding.remedy


def _tensor_infos(model: Path) -> list[TensorInfo]:
    from probes.checkpoint import read_model_dir

    return list(read_model_dir(LiveHost(root="/", env={}), str(model)).tensors.values())


def test_little_headroom_warns(tmp_path: Path) -> None:
    ctx = ctx_for(bf16_model(tmp_path), reading(A2_8X32), tmp_path,
                  f"hbm_fit:\n  runtime_reserve_mb: {A2_FREE_MB - 1000}\n")
    finding = hbm_fit(ctx)
    assert finding.status == "warn", finding
    assert "little headroom" in finding.summary and "hbm_free_warn_mb" in finding.summary


def test_visible_devices_limit_the_chips(tmp_path: Path) -> None:
    model = bf16_model(tmp_path)
    both = hbm_fit(ctx_for(model, reading(A3_4X64), tmp_path,
                           env={"ASCEND_RT_VISIBLE_DEVICES": "0,1"}))
    assert both.status == "pass", both
    text = text_of(both)
    assert "2 x Ascend910 of 4 (ASCEND_RT_VISIBLE_DEVICES=0,1)" in text
    assert "tensor parallel over 2 chip(s)" in text
    assert f"{65536 - 3133:,} MB free" in text  # the tightest of the two
    busy = hbm_fit(ctx_for(model, reading(A3_4X64), tmp_path,
                           env={"ASCEND_RT_VISIBLE_DEVICES": "3"}))
    assert f"{65536 - 10568:,} MB free" in text_of(busy)
    every = hbm_fit(ctx_for(model, reading(A3_4X64), tmp_path))
    assert "4 x Ascend910 of 4 (all chips" in text_of(every)


def test_fp8_judged_at_bf16_size_on_a2(tmp_path: Path) -> None:
    model = write_model(tmp_path / "fp8", fp8_model_tensors())
    finding = hbm_fit(ctx_for(model, reading(A2_8X32), tmp_path))
    assert finding.status == "pass", finding
    text = text_of(finding)
    assert "resident as FP8" in text and "dequantised to BF16 (judged" in text
    failing = hbm_fit(ctx_for(model, reading(A2_8X32), tmp_path,
                              "hbm_fit:\n  runtime_reserve_mb: 40000\n"))
    assert failing.status == "fail"
    assert "keep the FP8 weights resident" in failing.remedy


def test_no_model_skips(tmp_path: Path) -> None:
    finding = hbm_fit(ctx_for(None, reading(A2_8X32), tmp_path))
    assert finding.status == "skip" and finding.summary == "no --model given"


def test_no_npu_skips_with_the_reason(tmp_path: Path) -> None:
    missing = unavailable(CommandResult(("npu-smi", "info"), "not_found"), "no NPU driver tools")
    finding = hbm_fit(ctx_for(bf16_model(tmp_path), missing, tmp_path))
    assert finding.status == "skip" and "not found" in finding.summary
    busy = hbm_fit(ctx_for(bf16_model(tmp_path), reading("057-error-8020-device-used.txt"),
                           tmp_path))
    assert busy.status == "skip" and "-8020" in busy.summary


def test_no_npu_still_says_what_the_model_needs(tmp_path: Path) -> None:
    missing = unavailable(CommandResult(("npu-smi", "info"), "not_found"), "no NPU driver tools")
    model = bf16_model(tmp_path)
    policy = "hbm_fit:\n  max_seq_len: 1000\n  batch_size: 2\n  runtime_reserve_mb: 10\n"
    finding = hbm_fit(ctx_for(model, missing, tmp_path, policy))
    need = next(e for e in finding.evidence if e.startswith("needed on one chip: "))
    infos = _tensor_infos(model)
    weights = sum(t.nbytes for t in infos)
    shape = kv_shape(parse_config(json.loads((model / "config.json").read_text())))
    assert shape is not None
    kv = shape.bytes_per_token() * 1000 * 2
    assert f"{mb(weights)} weights + {mb(10 * MB)} reserve + {mb(kv)} KV" in need
    assert f"= {mb(weights + 10 * MB + kv)}" in need


@pytest.mark.parametrize("corpus", ["001-info-20.2.0-310-atlas800-3000.txt",
                                    "049-info-25.2.0-300IDuo-310P3-2chips-same-busid-PARTIAL.txt"])
def test_no_hbm_figures_skip(tmp_path: Path, corpus: str) -> None:
    finding = hbm_fit(ctx_for(bf16_model(tmp_path), reading(corpus), tmp_path))
    assert finding.status == "skip" and finding.summary == "no HBM figures in npu-smi"


def test_visible_devices_leaving_no_chip_skip(tmp_path: Path) -> None:
    finding = hbm_fit(ctx_for(bf16_model(tmp_path), reading(A2_8X32), tmp_path,
                              env={"ASCEND_RT_VISIBLE_DEVICES": ""}))
    assert finding.status == "skip" and "no chip" in finding.summary


def test_registered() -> None:
    from checks.registry import all_checks

    found = {c.id: c for c in all_checks()}
    assert found["npu.hbm-fit"].category == "npu"
    assert found["npu.hbm-fit"].title == "Will the model fit in HBM"
