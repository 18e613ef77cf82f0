"""Rows of the fifth harvest, block B (issue #25): fixes the vLLM-Ascend release notes of
v0.11.0rc0 .. v0.14.0rc1 list, as known issues of the release before each fix. Each row fires on
a realistic `vllm serve` line of an affected release and on a variant (another spelling of the
switch, another model of the family or another affected release), and stays quiet on its
healthy twins (the release whose notes list the fix, or the switch off)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from serving_fixtures import (
    DEEPSEEK_V3,
    QWEN2_5_VL,
    QWEN3,
    QWEN3_MOE,
    QWEN3_NEXT,
    QWEN3_VL,
    described,
    model,
    support_finding,
)

from checks.model import Finding

KIMI_K2 = model("kimi_k2", "DeepseekV3ForCausalLM")
DEEPSEEK_V32 = model("deepseek_v32", "DeepseekV32ForCausalLM")
QWEN2_VL = model("qwen2_vl", "Qwen2VLForConditionalGeneration")
QWEN3_VL_MOE = model("qwen3_vl_moe", "Qwen3VLMoeForConditionalGeneration")

FULL_DECODE_ONLY = ["--compilation-config", '{"cudagraph_mode":"FULL_DECODE_ONLY"}']
QWEN3_NEXT_MTP = ["--speculative-config", '{"method":"qwen3_next_mtp","num_speculative_tokens":2}']
PLAIN_MTP = ["--speculative-config", '{"method":"mtp","num_speculative_tokens":1}']
MOONCAKE = ["--kv-transfer-config",
            '{"kv_connector":"MooncakeConnectorV1","kv_role":"kv_producer","kv_port":"30000"}']
MOONCAKE_IN_MULTI = ["--kv-transfer-config",
                     '{"kv_connector":"MultiConnector","kv_role":"kv_consumer",'
                     '"kv_connector_extra_config":{"connectors":['
                     '{"kv_connector":"MooncakeConnectorV1","kv_role":"kv_consumer"}]}}']
LAYERWISE = ["--kv-transfer-config",
             '{"kv_connector":"MooncakeLayerwiseConnector","kv_role":"kv_producer"}']
LLMDD = ["--kv-transfer-config",
         '{"kv_connector":"LLMDataDistCMgrConnector","kv_role":"kv_consumer"}']
DYNAMIC_EPLB = ["--enable-expert-parallel", "--additional-config", '{"dynamic_eplb":true}']
EPLB_CONFIG = ["--enable-expert-parallel", "--additional-config",
               '{"eplb_config":{"dynamic_eplb":true}}']


@dataclass(frozen=True)
class Serve:
    """One deployment: its command line after the model, vllm_ascend release and config."""

    args: list[str]
    release: str
    config: dict[str, Any]
    env: dict[str, str] = field(default_factory=dict)
    quant_type: str = ""  # msModelSlim's model_quant_type, written beside config.json


def support(tmp_path: Path, deployment: Serve) -> Finding:
    return support_finding(tmp_path, deployment.args, deployment.release, deployment.config,
                           env=deployment.env, files=described(deployment.quant_type))


@dataclass(frozen=True)
class Case:
    """A row: words of its symptom, the affected deployment, a variant, the healthy twins."""

    row: str
    words: str
    hit: Serve
    variant: Serve
    twins: tuple[Serve, ...]


CASES = [
    Case("qwen3-next-bugs-fix-0110rc0", "carries bugs it brought in with v0.10.2",
         Serve(["--tensor-parallel-size", "4", "--max-model-len", "32768"], "0.10.2rc1",
               QWEN3_NEXT),
         Serve(["-tp", "8", "--enforce-eager"], "0.10.2rc1", QWEN3_NEXT),
         (Serve(["--tensor-parallel-size", "4"], "0.11.0rc0", QWEN3_NEXT),
          Serve(["--tensor-parallel-size", "4"], "0.10.2rc1", QWEN3_MOE))),
    Case("qwen3-next-stability-fix-0110rc2", "Qwen3-Next is less stable in this release",
         Serve(["--tensor-parallel-size", "4"], "0.11.0rc1", QWEN3_NEXT),
         Serve(["-tp", "8", "--enable-expert-parallel"], "0.11.0rc1", QWEN3_NEXT,
               env={"HCCL_BUFFSIZE": "1024"}),
         (Serve(["--tensor-parallel-size", "4"], "0.11.0rc2", QWEN3_NEXT),)),
    Case("kimi-k2-quant-fix-0110rc2", "a quantized Kimi K2 checkpoint does not work",
         Serve(["--quantization", "ascend", "-tp", "16", "--enable-expert-parallel"],
               "0.11.0rc1", KIMI_K2, quant_type="W8A8_DYNAMIC"),
         Serve(["--tensor-parallel-size", "16"], "0.11.0rc1", KIMI_K2, quant_type="W8A8"),
         (Serve(["--quantization", "ascend", "-tp", "16"], "0.11.0rc2", KIMI_K2,
                quant_type="W8A8_DYNAMIC"),
          Serve(["-tp", "16"], "0.11.0rc1", KIMI_K2))),
    Case("full-decode-only-fix-0110rc2", "the FULL_DECODE_ONLY graph mode, experimental",
         Serve(["-tp", "2", *FULL_DECODE_ONLY], "0.11.0rc1", QWEN3),
         Serve(["--compilation-config", '{"cudagraph_mode": "full_decode_only"}', "-tp", "16"],
               "0.11.0rc1", DEEPSEEK_V3),
         (Serve(["-tp", "2", *FULL_DECODE_ONLY], "0.11.0rc2", QWEN3),
          Serve(["-tp", "2"], "0.11.0rc1", QWEN3),
          Serve(["-tp", "2", "--enforce-eager", *FULL_DECODE_ONLY], "0.11.0rc1", QWEN3))),
    Case("deepseek-v3-allgather-fix-0110rc2", "a bug in the MoE allgather operation",
         Serve(["--tensor-parallel-size", "16"], "0.11.0rc1", DEEPSEEK_V3),
         Serve(["-dp", "2", "-tp", "8", "--enable-expert-parallel"], "0.11.0rc1",
               DEEPSEEK_V3),
         (Serve(["--tensor-parallel-size", "16"], "0.11.0rc2", DEEPSEEK_V3),
          Serve(["--tensor-parallel-size", "16"], "0.11.0rc1", DEEPSEEK_V32))),
    Case("eplb-bugs-fix-0110", "expert-parallel load balancing (EPLB) has bugs",
         Serve(["-tp", "8", *DYNAMIC_EPLB], "0.11.0rc1", QWEN3_MOE),
         Serve(["-tp", "8", "--enable-expert-parallel"], "0.11.0rc3", QWEN3_MOE,
               env={"DYNAMIC_EPLB": "true"}),
         (Serve(["-tp", "8", *DYNAMIC_EPLB], "0.11.0", QWEN3_MOE),
          Serve(["-tp", "8", "--enable-expert-parallel"], "0.11.0rc2", QWEN3_MOE))),
    Case("vl-dp-hang-fix-0110rc3", "served with data parallel above 1 can hang",
         Serve(["--data-parallel-size", "2", "-tp", "4"], "0.11.0rc2", QWEN2_5_VL),
         Serve(["-dp", "4"], "0.11.0rc2", QWEN3_VL),
         (Serve(["--data-parallel-size", "2", "-tp", "4"], "0.11.0rc3", QWEN2_5_VL),
          Serve(["-tp", "4"], "0.11.0rc2", QWEN2_5_VL),
          Serve(["--data-parallel-size", "2"], "0.11.0rc2", QWEN3_MOE))),
    Case("qwen3-vl-accuracy-fix-0110", "Qwen3-VL has an accuracy bug in this release",
         Serve(["-tp", "2", "--max-model-len", "16384"], "0.11.0rc3", QWEN3_VL),
         Serve(["--tensor-parallel-size", "4", "--enforce-eager"], "0.11.0rc3", QWEN3_VL),
         (Serve(["-tp", "2"], "0.11.0", QWEN3_VL),)),
    Case("deepseek-v32-quant-fix-0110", "a quantized DeepSeek-V3.2-Exp checkpoint",
         Serve(["--quantization", "ascend", "-tp", "16"], "0.11.0rc3", DEEPSEEK_V32,
               quant_type="W8A8_DYNAMIC"),
         Serve(["-q", "ascend", "-dp", "2", "-tp", "8"], "0.11.0rc3", DEEPSEEK_V32,
               quant_type="W8A8"),
         (Serve(["--quantization", "ascend", "-tp", "16"], "0.11.0", DEEPSEEK_V32,
                quant_type="W8A8_DYNAMIC"),
          Serve(["-tp", "16"], "0.11.0rc3", DEEPSEEK_V32))),
    Case("pd-accuracy-fix-0110", "prefill/decode disaggregation has an accuracy bug",
         Serve(["-tp", "8", *MOONCAKE], "0.11.0rc3", QWEN3_MOE),
         Serve(["-tp", "16", *LLMDD], "0.11.0rc3", DEEPSEEK_V3),
         (Serve(["-tp", "8", *MOONCAKE], "0.11.0", QWEN3_MOE),
          Serve(["-tp", "8"], "0.11.0rc3", QWEN3_MOE))),
    Case("vl-oom-fix-0130rc1", "vision-language models can run out of memory",
         Serve(["-tp", "4"], "0.12.0rc1", QWEN2_5_VL),
         Serve(["--tensor-parallel-size", "8", "--enable-expert-parallel"], "0.12.0rc1",
               QWEN3_VL_MOE),
         (Serve(["-tp", "4"], "0.13.0rc1", QWEN2_5_VL),
          Serve(["-tp", "4"], "0.12.0rc1", QWEN3))),
    Case("qwen3-next-mtp-batch-accuracy-fix-0130rc1", "loses accuracy when requests are batched",
         Serve(["-tp", "4", *QWEN3_NEXT_MTP], "0.12.0rc1", QWEN3_NEXT),
         Serve(["-tp", "4", *PLAIN_MTP], "0.12.0rc1", QWEN3_NEXT),
         (Serve(["-tp", "4", *QWEN3_NEXT_MTP], "0.13.0rc1", QWEN3_NEXT),
          Serve(["-tp", "4"], "0.12.0rc1", QWEN3_NEXT))),
    Case("mooncake-zmq-fix-0130rc2", "after one failed ZeroMQ send or receive",
         Serve(["-tp", "8", *MOONCAKE], "0.13.0rc1", QWEN3_MOE),
         Serve(["-tp", "16", *MOONCAKE_IN_MULTI], "0.13.0rc1", DEEPSEEK_V3),
         (Serve(["-tp", "8", *MOONCAKE], "0.13.0rc2", QWEN3_MOE),
          Serve(["-tp", "8", *LAYERWISE], "0.13.0rc1", QWEN3_MOE))),
    Case("flashcomm1-qwen3-vl-fix-0130rc2", "FlashComm1 does not work with Qwen3-VL",
         Serve(["-tp", "4"], "0.13.0rc1", QWEN3_VL, env={"VLLM_ASCEND_ENABLE_FLASHCOMM1": "1"}),
         Serve(["-tp", "4", "--additional-config", '{"enable_flashcomm1": true}'], "0.13.0rc1",
               QWEN3_VL),
         (Serve(["-tp", "4"], "0.13.0rc2", QWEN3_VL, env={"VLLM_ASCEND_ENABLE_FLASHCOMM1": "1"}),
          Serve(["-tp", "4"], "0.13.0rc1", QWEN3_VL, env={"VLLM_ASCEND_ENABLE_FLASHCOMM1": "0"}),
          Serve(["-tp", "4"], "0.13.0rc1", QWEN3, env={"VLLM_ASCEND_ENABLE_FLASHCOMM1": "1"}))),
    Case("vl-oom-expandable-fix-0140rc1", "multimodal inference can run out of memory",
         Serve(["-tp", "2"], "0.13.0rc2", QWEN3_VL),
         Serve(["--tensor-parallel-size", "1", "--max-model-len", "8192"], "0.13.0rc2", QWEN2_VL),
         (Serve(["-tp", "2"], "0.14.0rc1", QWEN3_VL),
          Serve(["-tp", "2"], "0.13.0rc2", QWEN3))),
]


@pytest.mark.parametrize("case", CASES, ids=[c.row for c in CASES])
def test_a_fix_row_fires_on_its_release_and_variant_and_not_on_its_twins(
        tmp_path: Path, case: Case) -> None:
    hit = support(tmp_path / "hit", case.hit)
    variant = support(tmp_path / "variant", case.variant)
    assert "known-issue" in hit.rules and case.words in hit.summary, hit.summary
    assert "known-issue" in variant.rules and case.words in variant.summary, variant.summary
    for n, twin in enumerate(case.twins):
        quiet = support(tmp_path / f"twin{n}", twin)
        assert case.words not in quiet.summary, (twin, quiet.summary)
