"""Fifth harvest C (issue 25): fixes the vLLM-Ascend release notes of v0.15.0rc1 .. v0.18.0 list,
as known issues of the release before each. Every row fires on a realistic `vllm serve` line of
an affected release, fires on a variant (another spelling of the switch, another model of the
family or another affected release) and stays quiet on the healthy twin (the fixed release, or
the feature off)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from serving_fixtures import (
    DEEPSEEK_V3,
    GLM5,
    QWEN2,
    QWEN2_5_VL,
    QWEN3,
    QWEN3_5,
    QWEN3_MOE,
    QWEN3_NEXT,
    QWEN3_VL,
    described,
    model,
    support_finding,
)

from checks.model import Finding

GLM46V = model("glm4v_moe", "Glm4vMoeForConditionalGeneration")


def spec(method: str) -> list[str]:
    return ["--speculative-config", json.dumps({"method": method, "num_speculative_tokens": 1})]


def kv(connector: str, **extra: Any) -> list[str]:
    return ["--kv-transfer-config",
            json.dumps({"kv_connector": connector, "kv_role": "kv_both", **extra})]


def extra(**config: Any) -> list[str]:
    return ["--additional-config", json.dumps(config)]


MTP = spec("mtp")
EAGLE3 = spec("eagle3")
FULL_DECODE_ONLY = ["--compilation-config", '{"cudagraph_mode":"FULL_DECODE_ONLY"}']
MOONCAKE = kv("MooncakeConnectorV1")
POOL = kv("AscendStoreConnector")
POOL_IN_MULTI = kv("MultiConnector", kv_connector_extra_config={"connectors": [
    {"kv_connector": "MooncakeConnectorV1"}, {"kv_connector": "AscendStoreConnector"}]})
LAYERWISE = kv("MooncakeLayerwiseConnector")
ASCEND_QUANT = ["--quantization", "ascend"]


@dataclass(frozen=True)
class Shape:
    """One deployment: its command line, vllm_ascend release, config.json, chip, msModelSlim
    type (a quant_model_description.json beside the model) and environment."""
    args: list[str]
    release: str
    config: dict[str, Any]
    chip: str = "A2"
    quant_type: str = ""
    env: dict[str, str] = field(default_factory=dict)


def support(tmp_path: Path, shape: Shape) -> Finding:
    return support_finding(tmp_path, shape.args, shape.release, shape.config, shape.chip,
                           shape.env, described(shape.quant_type))


# row id -> (words of its symptom, affected shape, variant, healthy twin)
ROWS: dict[str, tuple[str, Shape, Shape, Shape]] = {
    "mtp-pd-full-graph-d-nodes-fix-0160rc1": (
        "not supported on every D node in full graph mode",
        Shape([*MTP, *MOONCAKE, *FULL_DECODE_ONLY], "0.14.0rc1", DEEPSEEK_V3, "A3"),
        Shape([*spec("deepseek_mtp"), *MOONCAKE, *FULL_DECODE_ONLY], "0.15.0rc1", DEEPSEEK_V3,
              "A3"),
        Shape([*MTP, *MOONCAKE, *FULL_DECODE_ONLY], "0.16.0rc1", DEEPSEEK_V3, "A3")),
    "deepseek-v31-accuracy-fix-0150rc1": (
        "DeepSeek-V3.1 (model type deepseek_v3",
        Shape(["-tp", "16", "--enable-expert-parallel"], "0.14.0rc1", DEEPSEEK_V3, "A3"),
        Shape(["--tensor-parallel-size", "8", *ASCEND_QUANT], "0.14.0rc1", DEEPSEEK_V3, "A2",
              "W8A8_DYNAMIC"),
        Shape(["-tp", "16", "--enable-expert-parallel"], "0.15.0rc1", DEEPSEEK_V3, "A3")),
    "cp-spec-decode-accuracy-fix-0150rc1": (
        "context parallel (PCP/DCP) combined with speculative decoding",
        Shape(["-tp", "8", "--prefill-context-parallel-size", "2", *MTP], "0.14.0rc1",
              DEEPSEEK_V3, "A3"),
        Shape(["-tp", "4", "-dcp", "2", *EAGLE3], "0.14.0rc1", QWEN3),
        Shape(["-tp", "8", "--prefill-context-parallel-size", "2"], "0.14.0rc1", DEEPSEEK_V3,
              "A3")),
    "dynamic-eplb-ineffective-fix-0150rc1": (
        "dynamic EPLB (expert-parallel load balancing) can have no effect",
        Shape(["--enable-expert-parallel", *extra(dynamic_eplb=True)], "0.14.0rc1", QWEN3_MOE),
        Shape(["--enable-expert-parallel"], "0.14.0rc1", QWEN3_MOE,
              env={"DYNAMIC_EPLB": "true"}),
        Shape(["--enable-expert-parallel", *extra(dynamic_eplb=True)], "0.15.0rc1", QWEN3_MOE)),
    "kv-pool-backends-fix-0150rc1": (
        "fail to start with the memcache pool enabled",
        Shape(POOL, "0.14.0rc1", QWEN3),
        Shape(POOL_IN_MULTI, "0.14.0rc1", DEEPSEEK_V3, "A3"),
        Shape(MOONCAKE, "0.14.0rc1", QWEN3)),
    "attention-accuracy-310p-fix-0150rc1": (
        "on 310P the attention has an accuracy issue",
        Shape(["--enforce-eager"], "0.14.0rc1", QWEN3, "310P"),
        Shape(["--enforce-eager", "-tp", "2"], "0.14.0rc1", QWEN2, "310P"),
        Shape(["--enforce-eager"], "0.14.0rc1", QWEN3, "A2")),
    "eagle3-context-parallel-fix-0160rc1": (
        "Eagle speculative decoding with context parallel",
        Shape(["-tp", "4", "-pcp", "2", *EAGLE3], "0.15.0rc1", QWEN3),
        Shape(["-tp", "4", "--decode-context-parallel-size", "2", *EAGLE3], "0.15.0rc1",
              QWEN3_MOE),
        Shape(["-tp", "4", "-pcp", "2", *EAGLE3], "0.16.0rc1", QWEN3)),
    "mtp-aclgraph-sizes-layers-fix-0160rc1": (
        "counts the model's layers wrongly when it sizes the graph captures",
        Shape(["-tp", "16", *MTP], "0.15.0rc1", DEEPSEEK_V3, "A3"),
        Shape(["-tp", "16", *MTP, *FULL_DECODE_ONLY], "0.15.0rc1", DEEPSEEK_V3, "A3"),
        Shape(["-tp", "16", *MTP, "--enforce-eager"], "0.15.0rc1", DEEPSEEK_V3, "A3")),
    "glm46v-quant-config-fix-0160rc1": (
        "quantization config support for GLM-4.6V is broken",
        Shape(["-tp", "8", *ASCEND_QUANT], "0.15.0rc1", GLM46V, "A2", "W8A8"),
        Shape(["-tp", "8"], "0.15.0rc1", GLM46V, "A3", "W8A8_DYNAMIC"),
        Shape(["-tp", "8"], "0.15.0rc1", GLM46V)),
    "layerwise-mtp-pd-fix-0160rc1": (
        "MTP with the Mooncake layerwise connector",
        Shape([*MTP, *LAYERWISE], "0.15.0rc1", DEEPSEEK_V3, "A3"),
        Shape([*spec("deepseek_mtp"), *LAYERWISE], "0.15.0rc1", DEEPSEEK_V3, "A3"),
        Shape([*MTP, *MOONCAKE], "0.15.0rc1", DEEPSEEK_V3, "A3")),
    "qwen3-next-gdn-graph-accuracy-fix-0160rc1": (
        "Gated DeltaNet (GDN) layers that Qwen3-Next uses lose accuracy in graph mode",
        Shape(["-tp", "4"], "0.15.0rc1", QWEN3_NEXT),
        Shape(["-tp", "4", *FULL_DECODE_ONLY], "0.15.0rc1", QWEN3_NEXT, "A3"),
        Shape(["-tp", "4", "--enforce-eager"], "0.15.0rc1", QWEN3_NEXT)),
    "cp-pd-precision-fix-0160rc1": (
        "context parallel (PCP/DCP) in a prefill/decode disaggregated deployment",
        Shape(["-tp", "8", "-pcp", "2", *MOONCAKE], "0.15.0rc1", DEEPSEEK_V3, "A3"),
        Shape(["-tp", "8", *MOONCAKE], "0.15.0rc1", DEEPSEEK_V3, "A3",
              env={"VLLM_ASCEND_ENABLE_CONTEXT_PARALLEL": "1"}),
        Shape(["-tp", "8", "-pcp", "2", *MOONCAKE], "0.16.0rc1", DEEPSEEK_V3, "A3")),
    "gqa-dp-dcp-error-fix-0160rc1": (
        "grouped-query attention (GQA, not MLA) fails with both data parallel",
        Shape(["-tp", "4", "--data-parallel-size", "2", "-dcp", "2"], "0.15.0rc1", QWEN3),
        Shape(["-tp", "2", "-dp", "4", "--decode-context-parallel-size", "2"], "0.15.0rc1",
              QWEN3_MOE),
        Shape(["-tp", "4", "--data-parallel-size", "2", "-pcp", "2"], "0.15.0rc1", QWEN3)),
    "mtp-prefill-as-decode-fix-0160rc1": (
        "treats a prefill request as a decode request",
        Shape(["-tp", "16", *MTP], "0.15.0rc1", DEEPSEEK_V3, "A3"),
        Shape(["-tp", "4", *spec("qwen3_next_mtp")], "0.15.0rc1", QWEN3_NEXT),
        Shape(["-tp", "16", *MTP], "0.16.0rc1", DEEPSEEK_V3, "A3")),
    "mtp-flashcomm1-rope-shape-fix-0160rc1": (
        "MTP with FlashComm V1 enabled hits a RoPE shape mismatch",
        Shape(["-tp", "16", *MTP], "0.15.0rc1", DEEPSEEK_V3, "A3",
              env={"VLLM_ASCEND_ENABLE_FLASHCOMM1": "1"}),
        Shape(["-tp", "16", *MTP, *extra(enable_flashcomm1=True)], "0.15.0rc1", DEEPSEEK_V3,
              "A3"),
        Shape(["-tp", "16", *MTP], "0.15.0rc1", DEEPSEEK_V3, "A3")),
    "qwen25-vl-accuracy-fix-0160rc1": (
        "Qwen2.5-VL has an accuracy issue",
        Shape(["--max-model-len", "32768"], "0.15.0rc1", QWEN2_5_VL),
        Shape(["-tp", "4"], "0.15.0rc1", QWEN2_5_VL, "A3"),
        Shape(["--max-model-len", "32768"], "0.16.0rc1", QWEN2_5_VL)),
    "unquant-nd2nz-310p-fix-0160rc1": (
        "an unquantized model's weights hit an ND-to-NZ conversion error",
        Shape(["--enforce-eager", "-tp", "2"], "0.15.0rc1", QWEN3, "310P"),
        Shape(["--enforce-eager", "-tp", "4"], "0.15.0rc1", QWEN3_MOE, "310P"),
        Shape(["--enforce-eager", "-tp", "2", *ASCEND_QUANT], "0.15.0rc1", QWEN3, "310P",
              "W8A8")),
    "glm5-w8a8-mtp-precision-fix-0170rc1": (
        "GLM-5 W8A8 with MTP has a precision issue",
        Shape(["-tp", "16", *ASCEND_QUANT, *MTP], "0.16.0rc1", GLM5, "A3", "W8A8_DYNAMIC"),
        Shape(["-tp", "16", *spec("deepseek_mtp")], "0.16.0rc1", GLM5, "A3", "W8A8"),
        Shape(["-tp", "16", *ASCEND_QUANT], "0.16.0rc1", GLM5, "A3", "W8A8_DYNAMIC")),
    "ngram-graph-replay-310p-fix-0170rc1": (
        "ngram speculative decoding in graph mode gives wrong results",
        Shape(["-tp", "2", *spec("ngram")], "0.16.0rc1", QWEN3, "310P"),
        Shape(["-tp", "2", *spec("ngram"), *FULL_DECODE_ONLY], "0.16.0rc1", QWEN2, "310P"),
        Shape(["-tp", "2", *spec("ngram"), "--enforce-eager"], "0.16.0rc1", QWEN3, "310P")),
    "qwen3-reranker-lora-fix-0170rc1": (
        "a Qwen3 reranker (the notes name Qwen3-Reranker-0.6B) served with LoRA",
        Shape(["--task", "score", "--enable-lora"], "0.16.0rc1", QWEN3),
        Shape(["--runner", "pooling", "--enable-lora", "--max-lora-rank", "64"], "0.16.0rc1",
              QWEN3),
        Shape(["--task", "score"], "0.16.0rc1", QWEN3)),
    "pd-dp-decode-stuck-fix-0180rc1": (
        "decode nodes can get stuck on this release because shapes are not aligned",
        Shape(["-tp", "8", "--data-parallel-size", "2", *MOONCAKE], "0.17.0rc1", DEEPSEEK_V3,
              "A3"),
        Shape(["-tp", "4", "-dp", "4", "--enable-expert-parallel", *MOONCAKE], "0.17.0rc1",
              QWEN3_MOE, "A3"),
        Shape(["-tp", "8", "--data-parallel-size", "2", *MOONCAKE], "0.18.0rc1", DEEPSEEK_V3,
              "A3")),
    "kv-pool-spec-decode-no-put-fix-0180": (
        "the KV cache pool stores nothing when speculative decoding is on",
        Shape(["-tp", "16", *MTP, *POOL], "0.18.0rc1", DEEPSEEK_V3, "A3"),
        Shape(["-tp", "4", *EAGLE3, *POOL_IN_MULTI], "0.18.0rc1", QWEN3),
        Shape(["-tp", "16", *MTP, *POOL], "0.18.0", DEEPSEEK_V3, "A3")),
    "qwen3-vl-lm-head-load-fix-0180": (
        "Qwen3-VL can fail to load its weights on this release",
        Shape(["--max-model-len", "32768"], "0.18.0rc1", QWEN3_VL),
        Shape(["-tp", "4", "--enforce-eager"], "0.18.0rc1", QWEN3_VL, "A3"),
        Shape(["--max-model-len", "32768"], "0.18.0", QWEN3_VL)),
    "post-sampling-graph-310p-fix-0180": (
        "post-sampling does not work in graph mode",
        Shape(["-tp", "2"], "0.18.0rc1", QWEN3, "310P"),
        Shape(["-tp", "4", *FULL_DECODE_ONLY], "0.18.0rc1", QWEN3_5, "310P"),
        Shape(["-tp", "2", "--enforce-eager"], "0.18.0rc1", QWEN3, "310P")),
}


def known(finding: Finding, row: str, words: str) -> bool:
    return ("known-issue" in finding.rules and words in finding.summary
            and any(f"known issue {row}:" in line for line in finding.evidence))


@pytest.mark.parametrize("row", list(ROWS))
def test_fix_row_fires_on_the_affected_release_and_a_variant(tmp_path: Path, row: str) -> None:
    words, hit, variant, _ = ROWS[row]
    for name, shape in (("hit", hit), ("variant", variant)):
        found = support(tmp_path / name, shape)
        assert known(found, row, words), (name, found.summary)


@pytest.mark.parametrize("row", list(ROWS))
def test_fix_row_is_quiet_on_the_healthy_twin(tmp_path: Path, row: str) -> None:
    words, _, _, twin = ROWS[row]
    found = support(tmp_path, twin)
    assert words not in found.summary, found.summary
