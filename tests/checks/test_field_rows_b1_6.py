"""Rows learned from measured field incidents (issue 25, tune1): each fires on its incident's
shape and on a variant (another model of the family, another release in the range, another
command line), and stays quiet on the healthy twin."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from serving_fixtures import (
    QWEN2,
    QWEN2_5_VL,
    QWEN3,
    QWEN3_5,
    QWEN3_5_MOE,
    QWEN3_MOE,
    QWEN3_VL,
    model,
    served,
)

from checks.builtin.serving_flags import serving_flags
from checks.builtin.serving_support import serving_support
from checks.model import Finding

LLAMA = model("llama", "LlamaForCausalLM")
EAGLE3 = ["--speculative_config",
          '{"model": "/m/eagle3", "num_speculative_tokens": 2, "method": "eagle3"}']
LORA = ["--enable-lora", "--lora-modules", "a=/adapters/a"]
DP_EP = ["--data-parallel-size", "2", "--tensor-parallel-size", "8", "--enable-expert-parallel"]
FLASHCOMM1 = {"VLLM_ASCEND_ENABLE_FLASHCOMM1": "1"}

Shape = tuple[str, dict[str, Any], list[str], str]  # release, config.json, command line, chip


def support(tmp_path: Path, shape: Shape) -> Finding:
    release, config, args, chip = shape
    with served(tmp_path, args, release=release, config=config, chip=chip) as ctx:
        return serving_support(ctx)


def flags(tmp_path: Path, shape: Shape, env: dict[str, str]) -> Finding:
    release, config, args, chip = shape
    with served(tmp_path, args, release=release, config=config, env=env, chip=chip) as ctx:
        return serving_flags(ctx)


# (the incident's shape or its variant, the healthy twin, the support row that refuses it)
REFUSED: list[tuple[Shape, Shape, str]] = [
    # #1963: Mllama refused by v0.9.2rc1's V1 engine; variant: graph mode; twin: a VL it serves
    (("0.9.2rc1", model("mllama", "MllamaForConditionalGeneration"), ["--enforce-eager"], "A2"),
     ("0.9.2rc1", QWEN2_5_VL, ["--enforce-eager"], "A2"), "mllama-0092rc1-no"),
    (("0.9.2rc1", model("mllama", "MllamaForConditionalGeneration"), ["-tp", "2"], "A2"),
     ("0.9.2rc1", QWEN2_5_VL, ["-tp", "2"], "A2"), "mllama-0092rc1-no"),
    # #2262: Whisper refused in eager and graph mode
    (("0.9.2rc1", model("whisper", "WhisperForConditionalGeneration"), ["--enforce-eager"], "A2"),
     ("0.9.2rc1", QWEN2, ["--enforce-eager"], "A2"), "whisper-0092rc1-no"),
    (("0.9.2rc1", model("whisper", "WhisperForConditionalGeneration"), [], "A2"),
     ("0.9.2rc1", QWEN2, [], "A2"), "whisper-0092rc1-no"),
    # #2255 (glm) and #2258 (glm4)
    (("0.9.2rc1", model("glm", "GlmForCausalLM"), ["--enforce-eager"], "A2"),
     ("0.9.2rc1", QWEN2, ["--enforce-eager"], "A2"), "glm4-dense-0092rc1-no"),
    (("0.9.2rc1", model("glm4", "Glm4ForCausalLM"), ["-tp", "2"], "A2"),
     ("0.9.2rc1", QWEN2, ["-tp", "2"], "A2"), "glm4-dense-0092rc1-no"),
    # #7423: Qwen3.5 on 310P at v0.17.0rc1; the twin is the same release on A2
    (("0.17.0rc1", QWEN3_5, [], "310P"), ("0.17.0rc1", QWEN3_5, [], "A2"),
     "qwen3-5-310p-0170rc1-no"),
    (("0.17.0rc1", QWEN3_5_MOE, ["-tp", "2"], "310P"),
     ("0.17.0rc1", QWEN3_5_MOE, ["-tp", "2"], "A2"),
     "qwen3-5-310p-0170rc1-no"),
]


@pytest.mark.parametrize("shape, twin, row", REFUSED,
                         ids=[f"{r[2]}-{i}" for i, r in enumerate(REFUSED)])
def test_a_refused_model_fails_and_its_twin_does_not(tmp_path: Path, shape: Shape, twin: Shape,
                                                     row: str) -> None:
    hit = support(tmp_path / "a", shape)
    quiet = support(tmp_path / "b", twin)
    assert hit.status == "fail" and "unsupported" in hit.rules, hit.summary
    assert any(e.startswith(f"support row {row}:") for e in hit.evidence), hit.evidence
    assert not any(e.startswith(f"support row {row}:") for e in quiet.evidence)


def test_the_v0_9_2rc1_refusals_stop_at_v0_10_0rc1_where_the_pages_speak(tmp_path: Path) -> None:
    """The v0.9.2rc1 rows end where the v0.10.0rc1 supported-models page takes over."""
    later = support(tmp_path, ("0.10.0rc1", model("mllama", "MllamaForConditionalGeneration"),
                               [], "A2"))
    assert not any(e.startswith("support row mllama-0092rc1-no:") for e in later.evidence)


# (the incident's shape or its variant, the healthy twin, the known-issue row)
KNOWN: list[tuple[Shape, Shape, str]] = [
    # #15815: Qwen3 MoE keeps vLLM's FusedMoE factory on v0.26.0rc1; a dense Qwen3 is spared
    (("0.26.0rc1", QWEN3_MOE, [], "A2"), ("0.26.0rc1", QWEN3, [], "A2"),
     "qwen3-moe-fusedmoe-import-0260rc1"),
    (("0.26.0rc1", QWEN3_MOE, ["-tp", "4", "--enable-expert-parallel"], "A3"),
     ("0.26.0rc1", QWEN3, ["-tp", "4"], "A3"), "qwen3-moe-fusedmoe-import-0260rc1"),
    # gpustack#5594: XLM-RoBERTa rerankers fail on 0.22.0, work on 0.16.0
    (("0.22.0", model("xlm-roberta", "XLMRobertaForSequenceClassification"), [], "A2"),
     ("0.16.0", model("xlm-roberta", "XLMRobertaForSequenceClassification"), [], "A2"),
     "xlm-roberta-reranker-0220"),
    (("0.22.0", model("xlm-roberta", "XLMRobertaModel"), ["--runner", "pooling"], "A3"),
     ("0.22.0", QWEN3, ["--runner", "pooling"], "A3"), "xlm-roberta-reranker-0220"),
    # #2315: v0.9.2rc1 on 310P; the maintainers' v0.10.0rc1, and the same release on A2
    (("0.9.2rc1", QWEN2, [], "310P"), ("0.10.0rc1", QWEN2, [], "310P"), "310p-crash-0092rc1"),
    (("0.9.2rc1", QWEN3, ["-tp", "2"], "310P"), ("0.9.2rc1", QWEN3, ["-tp", "2"], "A2"),
     "310p-crash-0092rc1"),
    # #2481: EAGLE-3 in graph mode on v0.10.0rc1; --enforce-eager serves
    (("0.10.0rc1", LLAMA, EAGLE3, "A2"), ("0.10.0rc1", LLAMA, [*EAGLE3, "--enforce-eager"], "A2"),
     "eagle3-graph-0100rc1"),
    (("0.10.0rc1", QWEN3, [*EAGLE3, "-tp", "2"], "A2"),
     ("0.10.0rc1", QWEN3, [*EAGLE3, "-tp", "2", "--enforce-eager"], "A2"), "eagle3-graph-0100rc1"),
    # #7635: Qwen3.5 MoE with DP and EP on v0.17.0rc1; without EP it starts
    (("0.17.0rc1", QWEN3_5_MOE, [*DP_EP, "--quantization", "ascend"], "A2"),
     ("0.17.0rc1", QWEN3_5_MOE, ["--data-parallel-size", "2", "-tp", "8",
                                 "--quantization", "ascend"], "A2"),
     "qwen3-5-moe-ep-dp-tiling-0170rc1"),
    (("0.17.0rc1", QWEN3_5_MOE, DP_EP, "A2"),
     ("0.17.0rc1", QWEN3_5_MOE, DP_EP, "A3"),  # the reports are all from two A2 nodes
     "qwen3-5-moe-ep-dp-tiling-0170rc1"),
    # #10626: Qwen2-VL with LoRA on v0.19.1rc1; the same model without LoRA
    (("0.19.1rc1", model("qwen2_vl", "Qwen2VLForConditionalGeneration"), LORA, "A2"),
     ("0.19.1rc1", model("qwen2_vl", "Qwen2VLForConditionalGeneration"), [], "A2"),
     "qwen2-vl-lora-profile-0191rc1"),
    (("0.19.1rc1", model("qwen2_vl", "Qwen2VLForConditionalGeneration"),
      ["--enable-lora", "-tp", "2"], "A3"),
     ("0.19.1rc1", QWEN2_5_VL, ["--enable-lora", "-tp", "2"], "A3"),
     "qwen2-vl-lora-profile-0191rc1"),
]


@pytest.mark.parametrize("shape, twin, row", KNOWN,
                         ids=[f"{r[2]}-{i}" for i, r in enumerate(KNOWN)])
def test_a_known_issue_fires_on_its_shape_and_not_on_its_twin(
        tmp_path: Path, shape: Shape, twin: Shape, row: str) -> None:
    hit = support(tmp_path / "a", shape)
    quiet = support(tmp_path / "b", twin)
    assert hit.status in ("warn", "fail") and "known-issue" in hit.rules, hit.summary
    assert any(e.startswith(f"known issue {row}") for e in hit.evidence), hit.evidence
    assert not any(e.startswith(f"known issue {row}") for e in quiet.evidence)


@pytest.mark.parametrize("config", [QWEN3_VL, QWEN2_5_VL], ids=["qwen3_vl", "qwen2_5_vl"])
def test_flashcomm1_on_a_vl_model_fails_on_v0_15_0rc1(tmp_path: Path,
                                                       config: dict[str, Any]) -> None:
    """vllm-project/vllm-ascend#6950: v0.15.0rc1 asserts that Flash Comm V1 is not for VL
    models; TP 2 keeps the TP-size rule out of the way."""
    finding = flags(tmp_path, ("0.15.0rc1", config, ["-tp", "2"], "A2"), FLASHCOMM1)
    assert finding.status == "fail" and "flashcomm1-vl-model-0150rc1" in finding.rules
    assert any(e.startswith("rule flashcomm1-vl-model-0150rc1:") and "#6950" in e
               for e in finding.evidence)


@pytest.mark.parametrize("release, config, env", [
    ("0.15.0rc1", QWEN3_VL, {}),  # the twin: the variable unset
    ("0.15.0rc1", QWEN3, FLASHCOMM1),  # a text model
    ("0.13.0", QWEN3_VL, FLASHCOMM1),  # the release the contributor found accepting it
], ids=["unset", "text-model", "v0.13.0"])
def test_flashcomm1_vl_rule_is_quiet_off_its_shape(tmp_path: Path, release: str,
                                                   config: dict[str, Any],
                                                   env: dict[str, str]) -> None:
    finding = flags(tmp_path, (release, config, ["-tp", "2"], "A2"), env)
    assert "flashcomm1-vl-model-0150rc1" not in finding.rules
