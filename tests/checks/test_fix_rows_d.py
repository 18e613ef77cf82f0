"""Rows of the fifth harvest, block D (issue #25): fixes the vLLM-Ascend release notes of
v0.19.1rc1, v0.21.0rc1 and v0.23.0rc1 list, warned on the release before the fix. Each row
fires on a realistic `vllm serve` line on the affected release and on a variant (another
spelling, model of the family or chip), and stays quiet on the fixed release and with the
feature off."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from serving_fixtures import (
    QWEN3,
    QWEN3_5,
    QWEN3_5_MOE,
    QWEN3_MOE,
    QWEN3_NEXT,
    described,
    known,
    model,
    support_finding,
)

from checks.model import Finding

QWEN3_OMNI = model("qwen3_omni_moe", "Qwen3OmniMoeForConditionalGeneration")
MINIMAX_M2 = model("minimax_m2", "MiniMaxM2ForCausalLM")

MTP = ["--speculative-config", '{"method":"mtp","num_speculative_tokens":1}']
DEEPSEEK_MTP = ["--speculative-config", '{"method":"deepseek_mtp","num_speculative_tokens":2}']
EAGLE3 = ["--speculative-config",
          '{"method":"eagle3","model":"/models/draft","num_speculative_tokens":3}']
PD = ["--kv-transfer-config",
      '{"kv_connector":"MooncakeConnectorV1","kv_role":"kv_producer"}']
PD_DECODE = ["--kv-transfer-config",
             '{"kv_connector":"MooncakeConnectorV1","kv_role":"kv_consumer"}']
LAYERWISE = ["--kv-transfer-config",
             '{"kv_connector":"MooncakeLayerwiseConnector","kv_role":"kv_producer"}']
ASCEND_QUANT = ["--quantization", "ascend"]


@dataclass(frozen=True)
class Deployment:
    args: list[str]
    release: str
    config: dict[str, Any] = field(default_factory=lambda: QWEN3_MOE)
    chip: str = "A2"
    quant_type: str = ""


def support(tmp_path: Path, d: Deployment) -> Finding:
    return support_finding(tmp_path, d.args, d.release, d.config, d.chip,
                           files=described(d.quant_type))


# (words of the symptom, affected deployment, a variant also affected, healthy twins)
CASES = [
    pytest.param(
        "leaves the MTP layer's KV cache out of the transfer",
        Deployment(["-tp", "8", *PD, *MTP], "0.18.0rc1", QWEN3_5_MOE, chip="A3"),
        Deployment(["--tensor-parallel-size", "4", *PD_DECODE, *DEEPSEEK_MTP], "0.18.0rc1",
                   QWEN3_5_MOE, chip="A3"),
        [Deployment(["-tp", "8", *PD, *MTP], "0.19.1rc1", QWEN3_5_MOE, chip="A3"),
         Deployment(["-tp", "8", *PD], "0.18.0rc1", QWEN3_5_MOE, chip="A3")],
        id="pd-mtp-unequal-tp-0191rc1"),
    pytest.param(
        "a drafter length check near the maximum model length",
        Deployment(["--data-parallel-size", "2", "--enable-expert-parallel", *MTP],
                   "0.20.2rc1", QWEN3_5_MOE),
        Deployment(["-dp", "4", "-tp", "4", *DEEPSEEK_MTP], "0.20.2rc1", QWEN3_5_MOE,
                   chip="A3"),
        [Deployment(["--data-parallel-size", "2", "--enable-expert-parallel", *MTP],
                    "0.21.0rc1", QWEN3_5_MOE),
         Deployment(["--data-parallel-size", "2", "--enable-expert-parallel"], "0.20.2rc1",
                    QWEN3_5_MOE)],
        id="dp-spec-decode-hang-0210rc1"),
    pytest.param(
        "speculative placeholder tokens can push a request past",
        Deployment([*PD_DECODE, *MTP], "0.20.2rc1", QWEN3_5_MOE),
        Deployment(["-tp", "16", *PD, *DEEPSEEK_MTP], "0.20.2rc1", QWEN3_5_MOE, chip="A3"),
        [Deployment([*PD_DECODE, *MTP], "0.21.0rc1", QWEN3_5_MOE),
         Deployment([*PD_DECODE], "0.20.2rc1", QWEN3_5_MOE)],
        id="pd-mtp-max-len-0210rc1"),
    pytest.param(
        "the PCP ranks' handshake ports can collide",
        Deployment(["--prefill-context-parallel-size", "2", *LAYERWISE], "0.20.2rc1"),
        Deployment(["-pcp", "4", "-tp", "4", *LAYERWISE], "0.20.2rc1", QWEN3, chip="A3"),
        [Deployment(["--prefill-context-parallel-size", "2", *LAYERWISE], "0.21.0rc1"),
         Deployment(["--prefill-context-parallel-size", "2", *PD], "0.20.2rc1")],
        id="pcp-layerwise-port-collision-0210rc1"),
    pytest.param(
        "Qwen3.5 (dense) on Atlas 300I (310P) can lose precision",
        Deployment(["-tp", "2"], "0.20.2rc1", QWEN3_5, chip="310P"),
        Deployment(["--tensor-parallel-size", "4", "--enforce-eager"], "0.20.2rc1", QWEN3_5,
                   chip="310P"),
        [Deployment(["-tp", "2"], "0.21.0rc1", QWEN3_5, chip="310P"),
         Deployment(["-tp", "2"], "0.20.2rc1", QWEN3_5, chip="A2")],
        id="qwen3-5-310p-precision-0210rc1"),
    pytest.param(
        "the draft model can fail with an index out of range",
        Deployment(["-tp", "4", *EAGLE3], "0.20.2rc1", QWEN3, chip="A5_950"),
        Deployment(["-tp", "8", *MTP], "0.20.2rc1", QWEN3_5_MOE, chip="A5_950"),
        [Deployment(["-tp", "4", *EAGLE3], "0.21.0rc1", QWEN3, chip="A5_950"),
         Deployment(["-tp", "4", *EAGLE3], "0.20.2rc1", QWEN3, chip="A3")],
        id="draft-index-oob-950-0210rc1"),
    pytest.param(
        "the GDN layers can lose accuracy",
        Deployment(["-tp", "4", "--prefill-context-parallel-size", "2"], "0.22.1rc1",
                   QWEN3_5_MOE, chip="A3"),
        Deployment(["-tp", "8", "-dcp", "2"], "0.22.1rc1", QWEN3_5, chip="A3"),
        [Deployment(["-tp", "4", "--prefill-context-parallel-size", "2"], "0.23.0rc1",
                    QWEN3_5_MOE, chip="A3"),
         Deployment(["-tp", "4"], "0.22.1rc1", QWEN3_5_MOE, chip="A3")],
        id="qwen3-5-cp-accuracy-0230rc1"),
    pytest.param(
        "a ModelSlim-quantized Qwen3-Omni checkpoint",
        Deployment(["-tp", "2", *ASCEND_QUANT], "0.22.1rc1", QWEN3_OMNI, quant_type="W8A8"),
        Deployment(["--tensor-parallel-size", "4", *ASCEND_QUANT], "0.22.1rc1", QWEN3_OMNI,
                   chip="A3", quant_type="W8A8_DYNAMIC"),
        [Deployment(["-tp", "2", *ASCEND_QUANT], "0.23.0rc1", QWEN3_OMNI, quant_type="W8A8"),
         Deployment(["-tp", "2"], "0.22.1rc1", QWEN3_OMNI)],
        id="qwen3-omni-modelslim-load-0230rc1"),
    pytest.param(
        "at tensor parallel 8 with expert parallel can fail to start",
        Deployment(["--tensor-parallel-size", "8", "--enable-expert-parallel"], "0.22.1rc1",
                   MINIMAX_M2, chip="A3"),
        Deployment(["-tp", "8", "-dp", "2", "--enable-expert-parallel"], "0.22.1rc1",
                   MINIMAX_M2),
        [Deployment(["--tensor-parallel-size", "8", "--enable-expert-parallel"], "0.23.0rc1",
                    MINIMAX_M2, chip="A3"),
         Deployment(["--tensor-parallel-size", "8"], "0.22.1rc1", MINIMAX_M2, chip="A3"),
         Deployment(["--tensor-parallel-size", "4", "--enable-expert-parallel"], "0.22.1rc1",
                    MINIMAX_M2, chip="A3")],
        id="minimax-m2-tp8-ep-start-0230rc1"),
    pytest.param(
        "can silently corrupt output on cache hits",
        Deployment(["-tp", "4", "--enable-prefix-caching", "--mamba-cache-mode", "align",
                    *MTP], "0.22.1rc1", QWEN3_5_MOE),
        Deployment(["-tp", "4", "--enable-prefix-caching", *EAGLE3], "0.22.1rc1", QWEN3_NEXT),
        [Deployment(["-tp", "4", "--enable-prefix-caching", "--mamba-cache-mode", "align",
                     *MTP], "0.23.0rc1", QWEN3_5_MOE),
         Deployment(["-tp", "4", "--enable-prefix-caching", "--mamba-cache-mode", "align"],
                    "0.22.1rc1", QWEN3_5_MOE),
         Deployment(["-tp", "4", "--enable-prefix-caching", *MTP], "0.22.1rc1", QWEN3)],
        id="hybrid-prefix-cache-spec-0230rc1"),
    pytest.param(
        "decode context parallel together with data parallel can leave the service hung",
        Deployment(["-tp", "8", "--decode-context-parallel-size", "2",
                    "--data-parallel-size", "2"], "0.22.1rc1", chip="A3"),
        Deployment(["-tp", "4", "-dcp", "4", "-dp", "4", "--enable-expert-parallel"],
                   "0.22.1rc1", QWEN3_5_MOE, chip="A3"),
        [Deployment(["-tp", "8", "--decode-context-parallel-size", "2",
                     "--data-parallel-size", "2"], "0.23.0rc1", chip="A3"),
         Deployment(["-tp", "8", "--decode-context-parallel-size", "2"], "0.22.1rc1",
                    chip="A3")],
        id="dcp-dp-hang-0230rc1"),
]


@pytest.mark.parametrize(("words", "affected", "variant", "healthy"), CASES)
def test_fix_row_warns_before_the_fix_and_is_quiet_after(
        tmp_path: Path, words: str, affected: Deployment, variant: Deployment,
        healthy: list[Deployment]) -> None:
    hit = support(tmp_path / "hit", affected)
    also = support(tmp_path / "variant", variant)
    assert hit.status != "ok" and known(hit, words), hit.summary
    assert known(also, words), also.summary
    for n, twin in enumerate(healthy):
        quiet = support(tmp_path / f"twin{n}", twin)
        assert words not in quiet.summary, (twin, quiet.summary)
