"""The architectures read from vLLM's registry.py and vLLM-Ascend's registrations, on text
written in their shapes (vllm-project/vllm vllm/model_executor/models/registry.py @
0002bff0b6cb; vllm-project/vllm-ascend vllm_ascend/models/__init__.py @ 000736f0d4e8)."""

from __future__ import annotations

import pytest

from probes.errors import ParseError
from probes.model.vllm_registry import (
    parse_ascend_registrations,
    parse_vllm_registry,
    served_as,
)

REGISTRY = '''
import torch.nn as nn

logger = init_logger(__name__)

_TEXT_GENERATION_MODELS = {
    # [Decoder-only]
    "DeepseekV3ForCausalLM": ("deepseek_v2", "DeepseekV3ForCausalLM"),
    "Qwen3MoeForCausalLM": ("qwen3_moe", "Qwen3MoeForCausalLM"),
    "Qwen3ForCausalLM": ("qwen3", "Qwen3ForCausalLM"),
}

_EMBEDDING_MODELS = {
    "Qwen2Model": ("qwen2", "Qwen2ForCausalLM"),
    **{
        k: (mod, arch)
        for k, (mod, arch) in _TEXT_GENERATION_MODELS.items()
        if arch == "LlamaForCausalLM"
    },
}

_MULTIMODAL_MODELS = {
    "Qwen3VLForConditionalGeneration": ("qwen3_vl", "Qwen3VLForConditionalGeneration"),
}

_SPECULATIVE_DECODING_MODELS = {
    "DeepSeekMTPModel": ("deepseek_mtp", "DeepSeekMTP"),
}

_VLLM_MODELS = {
    **_TEXT_GENERATION_MODELS,
    **_EMBEDDING_MODELS,
    **_MULTIMODAL_MODELS,
    **_SPECULATIVE_DECODING_MODELS,
}

_PREVIOUSLY_SUPPORTED_MODELS = {
    "Phi3SmallForCausalLM": "0.9.2",
}

ModelRegistry = _ModelRegistry({})
'''

ASCEND = '''
from vllm import ModelRegistry

import vllm_ascend.envs as envs_ascend


def register_model():
    ModelRegistry.register_model(
        "DeepseekV4ForCausalLM",
        "vllm_ascend.models.deepseek_v4:AscendDeepseekV4ForCausalLM")
    if envs_ascend.USE_OPTIMIZED_MODEL:
        ModelRegistry.register_model("Qwen2_5_VLForConditionalGeneration",
                                     "vllm_ascend.models.qwen2_5_vl:AscendQwen2_5_VL")
    ModelRegistry.register_model(SOME_NAME, "vllm_ascend.models.x:X")
'''


def test_the_keys_of_the_tables_spread_into_vllm_models_are_registered() -> None:
    found = parse_vllm_registry(REGISTRY)
    assert found.architectures == {"DeepseekV3ForCausalLM", "Qwen3MoeForCausalLM",
                                   "Qwen3ForCausalLM", "Qwen2Model",
                                   "Qwen3VLForConditionalGeneration", "DeepSeekMTPModel"}
    assert found.removed == {"Phi3SmallForCausalLM": "0.9.2"}


def test_a_table_not_spread_into_vllm_models_does_not_count() -> None:
    text = REGISTRY.replace("    **_MULTIMODAL_MODELS,\n", "")
    assert "Qwen3VLForConditionalGeneration" not in parse_vllm_registry(text).architectures


def test_without_vllm_models_every_models_table_counts_but_the_previous_ones() -> None:
    text = REGISTRY.replace("_VLLM_MODELS = {", "_ALL = {")
    found = parse_vllm_registry(text).architectures
    assert "Qwen3VLForConditionalGeneration" in found
    assert "Phi3SmallForCausalLM" not in found


def test_a_table_spread_from_another_module_is_a_parse_error_not_an_empty_registry() -> None:
    text = "from .tables import _TEXT_GENERATION_MODELS\n" + REGISTRY.replace(
        "_TEXT_GENERATION_MODELS = {", "_OTHER = {")
    with pytest.raises(ParseError, match="spreads _TEXT_GENERATION_MODELS, not a dict literal"):
        parse_vllm_registry(text)


def test_tables_without_a_single_key_are_a_parse_error() -> None:
    with pytest.raises(ParseError, match="register no architecture"):
        parse_vllm_registry("_A_MODELS = {}\n_VLLM_MODELS = {**_A_MODELS}\n")


def test_an_annotated_table_is_read() -> None:
    text = 'X_MODELS: dict[str, tuple[str, str]] = {"AForCausalLM": ("a", "A")}\n'
    assert parse_vllm_registry(text).architectures == {"AForCausalLM"}


def test_text_that_is_not_python_is_a_parse_error_naming_the_file() -> None:
    with pytest.raises(ParseError, match=r"registry\.py, line 2: not Python"):
        parse_vllm_registry('X = 1\n_TEXT_GENERATION_MODELS = {"A": (\n', "x/registry.py")


def test_python_without_a_models_table_is_a_parse_error() -> None:
    with pytest.raises(ParseError, match=r"no module-level \*_MODELS dict"):
        parse_vllm_registry("MODELS = {}\n")


def test_every_literal_registration_of_vllm_ascend_counts() -> None:
    assert parse_ascend_registrations(ASCEND) == {"DeepseekV4ForCausalLM",
                                                  "Qwen2_5_VLForConditionalGeneration"}


def test_a_broken_ascend_file_is_a_parse_error() -> None:
    with pytest.raises(ParseError):
        parse_ascend_registrations("def register_model(:\n")


@pytest.mark.parametrize(("architecture", "expected"), [
    ("Qwen3MoeForCausalLM", "Qwen3MoeForCausalLM"),
    ("Qwen3ForSequenceClassification", "Qwen3ForCausalLM"),
    ("Qwen3MoeModel", "Qwen3MoeForCausalLM"),
    ("Qwen3_5MoeForConditionalGeneration", None),
    ("SomethingElse", None),
])
def test_served_as_swaps_the_task_suffix_as_vllm_does(architecture: str,
                                                      expected: str | None) -> None:
    registered = parse_vllm_registry(REGISTRY).architectures
    assert served_as(architecture, registered) == expected
