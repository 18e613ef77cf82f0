"""Rows and rules learnt from field incidents of batches 8-9 (issue #25, tune3): each fires on
the incident's shape and on a variant in its scope (another model of the family, another
release or spelling), and stays quiet on the healthy twin the thread names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from serving_fixtures import (
    DEEPSEEK_V3,
    DEEPSEEK_V4,
    GLM4_MOE,
    QWEN2,
    QWEN3,
    QWEN3_5,
    QWEN3_5_MOE,
    QWEN3_NEXT,
    QWEN3_VL,
    described,
    known,
    model,
    served,
    support_finding,
)

from checks.builtin.serving_features import command_features
from checks.builtin.serving_flags import serving_flags
from checks.model import Finding
from probes.target.argv import json_flag

QWEN2_5_OMNI = model("qwen2_5_omni", "Qwen2_5OmniModel")
GEMMA4 = model("gemma4_unified", "Gemma4UnifiedForConditionalGeneration")
FP8 = {"quantization_config": {"quant_method": "fp8"}}
MTP = ["--speculative-config", '{"method":"mtp","num_speculative_tokens":1}']
MTP_EAGER = ["--speculative-config",
             '{"method":"mtp","num_speculative_tokens":1,"enforce_eager":true}']
FULL_DECODE_ONLY = ["--compilation-config", '{"cudagraph_mode":"FULL_DECODE_ONLY"}']


def support(tmp_path: Path, args: list[str], release: str, config: dict[str, Any],
            chip: str = "A2", quant_type: str = "") -> Finding:
    return support_finding(tmp_path, args, release, config, chip, files=described(quant_type))


def flags(tmp_path: Path, args: list[str], release: str, config: dict[str, Any],
          chip: str = "A3") -> Finding:
    with served(tmp_path, args, release=release, config=config, chip=chip) as ctx:
        return serving_flags(ctx)


# -- serving.support: known-issue rows ---------------------------------------------------------


def test_deepseek_v3_on_0_7_1rc1_fails_with_the_cuda_rope_issue(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#206 (V3) and #122 (R1, the same type); fixed in 0.7.3rc1 (#72)."""
    args = ["--tensor-parallel-size", "32", "--distributed-executor-backend", "ray"]
    hit = support(tmp_path / "a", args, "0.7.1rc1", DEEPSEEK_V3)
    r1 = support(tmp_path / "b", ["-tp", "16"], "0.7.1rc1", DEEPSEEK_V3)
    twin = support(tmp_path / "c", args, "0.7.3rc1", DEEPSEEK_V3)
    assert hit.status == "fail" and known(hit, "Torch not compiled with CUDA enabled")
    assert known(r1, "Torch not compiled with CUDA enabled")
    assert "Torch not compiled with CUDA" not in twin.summary


def test_qwen2_5_omni_in_graph_mode_on_0_9_2rc1_fails(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#1760: serve it with --enforce-eager."""
    hit = support(tmp_path / "a", [], "0.9.2rc1", QWEN2_5_OMNI)
    twin = support(tmp_path / "b", ["--enforce-eager"], "0.9.2rc1", QWEN2_5_OMNI)
    assert hit.status == "fail" and known(hit, "Qwen2.5-Omni does not start in graph mode")
    assert "Qwen2.5-Omni" not in twin.summary


def test_full_decode_only_on_qwen2_family_in_0_11_0rc1_warns(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#4178 (Qwen2.5, Qwen2.5-VL, Qwen3-VL)."""
    hit = support(tmp_path / "a", FULL_DECODE_ONLY, "0.11.0rc1", QWEN2)
    vl = support(tmp_path / "b", FULL_DECODE_ONLY, "0.11.0rc1", QWEN3_VL)
    twin = support(tmp_path / "c", [], "0.11.0rc1", QWEN2)
    words = "do not work with cudagraph_mode FULL_DECODE_ONLY"
    assert known(hit, words) and known(vl, words)
    assert words not in twin.summary


def test_glm4_moe_mtp_with_full_decode_only_on_0_13_0rc1_warns(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#6085: the two only fail together."""
    args = ["--data-parallel-size", "2", "--tensor-parallel-size", "8",
            "--enable-expert-parallel"]
    hit = support(tmp_path / "a", [*args, *FULL_DECODE_ONLY, *MTP], "0.13.0rc1", GLM4_MOE,
                  chip="A3")
    twin = support(tmp_path / "b", [*args, *MTP], "0.13.0rc1", GLM4_MOE, chip="A3")
    assert known(hit, "cannot capture FULL_DECODE_ONLY graphs")
    assert "cannot capture FULL_DECODE_ONLY" not in twin.summary


def test_a_w8a8_qwen3_vl_on_0_17_0_fails_and_0_18_0rc1_is_quiet(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#7538, fixed by #7383 before v0.18.0rc1."""
    args = ["--quantization", "ascend"]
    hit = support(tmp_path / "a", args, "0.17.0", QWEN3_VL, quant_type="W8A8")
    twin = support(tmp_path / "b", args, "0.18.0rc1", QWEN3_VL, quant_type="W8A8")
    plain = support(tmp_path / "c", [], "0.17.0", QWEN3_VL)
    assert hit.status == "fail" and known(hit, "W8A8 Qwen3-VL checkpoint fails to load")
    assert "W8A8 Qwen3-VL" not in twin.summary and "W8A8 Qwen3-VL" not in plain.summary


def test_deepseek_v4_mtp_drafter_in_graph_mode_on_0_20_2rc1_fails(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#10005 (910B3) and #10209 (910B4-1); both workarounds quiet it."""
    args = ["--tensor-parallel-size", "8", "--enable-expert-parallel", "--quantization", "ascend"]
    hit = support(tmp_path / "a", [*args, *MTP], "0.20.2rc1", DEEPSEEK_V4, quant_type="W8A8")
    drafter_eager = support(tmp_path / "b", [*args, *MTP_EAGER], "0.20.2rc1", DEEPSEEK_V4,
                            quant_type="W8A8")
    all_eager = support(tmp_path / "c", [*args, *MTP, "--enforce-eager"], "0.20.2rc1",
                        DEEPSEEK_V4, quant_type="W8A8")
    words = "does not come up with its drafter in graph mode"
    assert hit.status == "fail" and known(hit, words)
    assert words not in drafter_eager.summary and words not in all_eager.summary


def test_the_speculative_graph_feature_follows_the_drafter_switch() -> None:
    def features(args: list[str]) -> list[str]:
        names = ("--speculative-config", "--compilation-config")
        found = {n: f for n in names if (f := json_flag(tuple(args), n)) is not None}
        return command_features(tuple(args), found, {})

    assert "speculative-graph" in features(MTP)
    assert "speculative-graph" not in features(MTP_EAGER)
    assert "speculative-graph" not in features([*MTP, "--enforce-eager"])
    assert "speculative-graph" not in features([])


def test_a_native_fp8_checkpoint_other_than_deepseek_v4_on_0_23_0_fails(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#14467 (Qwen3.8-27B-FP8) via #14466; DeepSeek-V4 is the one
    native FP8 checkpoint the release routes right."""
    words = "Native FP8 checkpoints other than DeepSeek-V4"
    hit = support(tmp_path / "a", ["-tp", "1"], "0.23.0", {**QWEN3_5, **FP8}, chip="A5_950")
    moe = support(tmp_path / "b", ["-tp", "2"], "0.23.0", {**QWEN3_5_MOE, **FP8})
    twin = support(tmp_path / "c", ["-tp", "1"], "0.23.0", QWEN3_5, chip="A5_950")
    dsv4 = support(tmp_path / "d", ["-tp", "8"], "0.23.0", {**DEEPSEEK_V4, **FP8})
    assert hit.status == "fail" and known(hit, words) and known(moe, words)
    assert words not in twin.summary and words not in dsv4.summary


def test_gemma4_in_graph_mode_on_a2_with_0_23_0_warns(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#17041: every graph mode failed on 910B3, eager is left."""
    words = "Gemma 4 cannot be served in any graph mode"
    hit = support(tmp_path / "a", ["-tp", "1"], "0.23.0", GEMMA4)
    full = support(tmp_path / "b", ["-tp", "2", *FULL_DECODE_ONLY], "0.23.0", GEMMA4)
    twin = support(tmp_path / "c", ["-tp", "1", "--enforce-eager"], "0.23.0", GEMMA4)
    other = support(tmp_path / "d", ["-tp", "2"], "0.23.0",
                    model("gemma4", "Gemma4ForConditionalGeneration"))
    assert known(hit, words) and known(full, words) and known(other, words)
    assert words not in twin.summary


# -- serving.support: a support row ------------------------------------------------------------


def test_a_qwen3_embedding_before_0_9_2rc1_is_unsupported(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#2123: pooling needs vLLM/vLLM-Ascend v0.9.2rc1 (#1734)."""
    hit = support(tmp_path / "a", ["--task", "embed"], "0.9.0rc1", QWEN3)
    runner = support(tmp_path / "b", ["--task", "embedding"], "0.9.1", QWEN3)
    twin = support(tmp_path / "c", ["--task", "embed"], "0.9.2rc1", QWEN3)
    assert hit.status == "fail" and "unsupported" in hit.rules
    assert "Qwen3 pooling models" in hit.summary and "Qwen3 pooling models" in runner.summary
    assert "Qwen3 pooling models" not in twin.summary


# -- serving.flags ------------------------------------------------------------------------------

LAYERWISE = ('{{"kv_connector": "MooncakeLayerwiseConnector", "kv_buffer_device": "npu", '
             '"kv_role": "{}"}}')


def pd_node(role: str, prefix_caching: bool) -> list[str]:
    cache = ["--enable-prefix-caching", "--mamba-cache-mode", "align"] if prefix_caching else []
    return ["--tensor-parallel-size", "4", *cache,
            "--kv-transfer-config", LAYERWISE.format(role)]


def test_mamba_prefix_caching_on_a_pd_node_before_0_18_0_warns(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#7722 (prefill node, 0.17.0rc1) and #7944 (decode, 0.18.0rc1)."""
    prefill = flags(tmp_path / "a", pd_node("kv_producer", True), "0.17.0rc1", QWEN3_5_MOE)
    decode = flags(tmp_path / "b", pd_node("kv_consumer", True), "0.18.0rc1", QWEN3_NEXT)
    twin = flags(tmp_path / "c", pd_node("kv_producer", False), "0.17.0rc1", QWEN3_5_MOE)
    assert prefill.status == "warn"
    assert prefill.rules == decode.rules == ("mamba-prefix-cache-pd-layerwise-before-0180",)
    assert "mamba-prefix-cache-pd-layerwise-before-0180" not in twin.rules


def test_mamba_prefix_caching_from_0_18_0_warns_on_decode_nodes_only(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#7814 / #7796: prefill nodes supported, decode nodes not."""
    decode = flags(tmp_path / "a", pd_node("kv_consumer", True), "0.18.0", QWEN3_5)
    later = flags(tmp_path / "b", pd_node("kv_consumer", True), "0.19.0", QWEN3_5_MOE)
    prefill = flags(tmp_path / "c", pd_node("kv_producer", True), "0.18.0", QWEN3_5_MOE)
    assert decode.rules == later.rules == ("mamba-prefix-cache-pd-decode",)
    assert "mamba-prefix-cache-pd-decode" not in prefill.rules
    assert prefill.status == "pass", prefill.summary


def test_qwen3_5_apc_mtp_and_async_scheduling_on_0_19_0_fails(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#9482 (fixed on main by #9456)."""
    mtp3 = ["--speculative-config", '{"method": "mtp", "num_speculative_tokens": 3}']
    args = ["--enable-prefix-caching", *mtp3]
    hit = flags(tmp_path / "a", [*args, "--async-scheduling"], "0.19.0", QWEN3_5_MOE, chip="A2")
    dense = flags(tmp_path / "b", [*args, "--async-scheduling"], "0.19.0", QWEN3_5, chip="A2")
    twin = flags(tmp_path / "c", args, "0.19.0", QWEN3_5_MOE, chip="A2")
    assert hit.status == "fail"
    assert hit.rules == dense.rules == ("hybrid-apc-mtp-async-scheduling-0190",)
    assert "hybrid-apc-mtp-async-scheduling-0190" not in twin.rules
