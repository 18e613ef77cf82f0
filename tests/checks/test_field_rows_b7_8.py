"""Rows and reading learnt from measured field incidents (issue 25, tune2): each fires on the
incident's shape and on a variant, and stays quiet on the healthy twin."""

from __future__ import annotations

from pathlib import Path

from serving_fixtures import (
    QWEN2,
    QWEN3_5,
    model,
    served,
)
from serving_fixtures import (
    support_finding as support,
)

from checks.builtin import toolchain
from checks.builtin.serving_features import model_dtype
from checks.builtin.serving_rows import features_hold
from checks.builtin.toolchain import soc_family
from checks.model import Finding

XLMR = model("xlm-roberta", "XLMRobertaModel", "float32")
BERT = model("bert", "BertModel", "float32")
TTS = {"architectures": ["Qwen3TTSForConditionalGeneration"], "model_type": "qwen3_tts"}
LORA = ["--enable-lora", "--lora-modules", "a=/adapters/a", "--max-lora-rank", "64"]


def test_lora_with_the_default_dtype_on_v0_11_0rc0_warns(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#3668: LoRA has no effect with the default bfloat16."""
    found = support(tmp_path, LORA, "0.11.0rc0", QWEN2)
    assert found.status == "warn" and "known-issue" in found.rules
    assert "LoRA adapters have no effect" in found.summary


def test_lora_with_dtype_half_or_a_later_release_is_quiet(tmp_path: Path) -> None:
    half = support(tmp_path / "a", [*LORA, "--dtype", "half"], "0.11.0rc0", QWEN2)
    later = support(tmp_path / "b", LORA, "0.11.0rc1", QWEN2)
    for found in (half, later):
        assert "LoRA adapters have no effect" not in found.summary


def test_dtype_feature_and_negated_row_features() -> None:
    assert model_dtype(("vllm", "serve", "m")) == []
    assert model_dtype(("--dtype", "half")) == ["dtype:float16"]
    assert model_dtype(("--dtype", "bfloat16")) == ["dtype:bfloat16"]
    assert features_hold(("lora", "!dtype:float16"), ["lora"])
    assert not features_hold(("lora", "!dtype:float16"), ["lora", "dtype:float16"])


def test_encoder_models_on_v0_20_2rc1_warn_and_on_0_18_0_do_not(tmp_path: Path) -> None:
    """gpustack/gpustack#5607: BERT / XLM-RoBERTa encoders crash in encoder FlashAttention."""
    for name, config in (("x", XLMR), ("b", BERT)):
        found = support(tmp_path / name, [], "0.20.2rc1", config)
        assert "encoder FlashAttention" in found.summary, found.summary
        twin = support(tmp_path / f"{name}2", [], "0.18.0", config)
        assert "encoder FlashAttention" not in twin.summary


def test_qwen3_tts_on_0_15_0_and_0_22_0_warns_and_on_0_14_1_does_not(tmp_path: Path) -> None:
    """gpustack/gpustack#4756, #4435, #5593."""
    for release in ("0.15.0", "0.22.0"):
        found = support(tmp_path / release, [], release, TTS)
        assert "Qwen3-TTS fails" in found.summary and "known-issue" in found.rules
    twin = support(tmp_path / "ok", [], "0.14.1", TTS)
    assert "Qwen3-TTS fails" not in twin.summary


def test_glm5_ascend_quantized_on_a3_v0_22_1rc1_warns(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#12851, #12901."""
    glm = model("glm_moe_dsa", "GlmMoeDsaForCausalLM")
    args = ["--quantization", "ascend", "-tp", "16"]
    found = support(tmp_path / "a", args, "0.22.1rc1", glm, chip="A3")
    assert "GLM-5.2-w4a8c8 checkpoint fails" in found.summary, found.summary
    twin = support(tmp_path / "b", args, "0.23.0rc1", glm, chip="A3")
    assert "GLM-5.2-w4a8c8 checkpoint fails" not in twin.summary


def test_an_older_builds_device_type_names_its_family() -> None:
    """vllm-project/vllm-ascend#11160, #6206: the PyPI wheels write __device_type__ = 'A2'."""
    assert soc_family("A2") == "A2" and soc_family("A3") == "A3"
    assert soc_family("ascend910_9391") == "A3"
    assert soc_family("B9") is None
    build_file = "# Auto-generated file\n__device_type__ = 'A2'\n"
    found = (toolchain._BUILT_SOC.search(build_file)
             or toolchain._BUILT_DEVICE_TYPE.search(build_file))
    assert found is not None and soc_family(found.group(1)) == "A2"




def flags_with(tmp_path: Path, args: list[str], quant_type: str, chip: str) -> Finding:
    from checks.builtin.serving_flags import serving_flags

    description = {"quant_model_description.json": {"model_quant_type": quant_type}}
    with served(tmp_path, args, release="0.23.0rc1", config=QWEN3_5, chip=chip,
                files=description) as ctx:
        return serving_flags(ctx)


FP16 = ["-tp", "2", "--quantization", "ascend", "--dtype", "float16"]


def test_w8a8_with_float16_on_a2_warns(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#12907 / #12919: no float16 scale for the A2/A3 quant matmul."""
    for rule, quant_type, spelling in (("w8a8-float16-a2-a3", "W8A8", "float16"),
                                       ("w8a8-dynamic-float16-a2-a3", "W8A8_DYNAMIC", "half")):
        args = [*FP16[:-1], spelling]
        found = flags_with(tmp_path / rule, args, quant_type, "A2")
        assert rule in found.rules, found.summary
        assert "takes no float16 scale" in found.summary
    plain = flags_with(tmp_path / "w8a8", FP16, "W8A8", "A3")
    dynamic = flags_with(tmp_path / "dyn", FP16, "W8A8_DYNAMIC", "A3")
    assert "w8a8-float16-a2-a3" in plain.rules
    assert "w8a8-dynamic-float16-a2-a3" in dynamic.rules


def test_w8a8_with_bfloat16_or_on_310p_is_quiet(tmp_path: Path) -> None:
    bf16 = flags_with(tmp_path / "a", [*FP16[:-1], "bfloat16"], "W8A8", "A2")
    duo = flags_with(tmp_path / "b", FP16, "W8A8", "310P")
    for found in (bf16, duo):
        assert "takes no float16 scale" not in found.summary
