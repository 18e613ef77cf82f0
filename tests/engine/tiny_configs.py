"""Tiny config.json documents of every architecture the engine knows (no weights).

The op scan and the micro-benchmark need only a config; these keep the shapes small and the
fields as the real checkpoints spell them (Qwen3.5/3.6 nested in text_config, Mixtral's
num_local_experts, block-FP8 quantization_config).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

_BASE: dict[str, Any] = {
    "vocab_size": 300, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "max_position_embeddings": 4096, "rms_norm_eps": 1e-6,
    "rope_theta": 10000.0, "bos_token_id": 0, "eos_token_id": 1, "torch_dtype": "bfloat16",
    "tie_word_embeddings": False,
}
_HYBRID: dict[str, Any] = {
    **_BASE, "num_hidden_layers": 4, "head_dim": 32, "linear_num_key_heads": 2,
    "linear_num_value_heads": 4, "linear_key_head_dim": 16, "linear_value_head_dim": 16,
    "linear_conv_kernel_dim": 4, "num_experts": 4, "num_experts_per_tok": 2,
    "moe_intermediate_size": 32, "shared_expert_intermediate_size": 48,
    "full_attention_interval": 4,
}
FP8_QUANT = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
             "weight_block_size": [128, 128], "modules_to_not_convert": ["lm_head"]}

CONFIGS: dict[str, dict[str, Any]] = {
    "llama": {**_BASE, "architectures": ["LlamaForCausalLM"], "model_type": "llama",
              "intermediate_size": 128, "tie_word_embeddings": True},
    "qwen3": {**_BASE, "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
              "intermediate_size": 128, "head_dim": 32},
    "qwen3_moe": {**_BASE, "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
                  "intermediate_size": 128, "moe_intermediate_size": 32, "num_experts": 4,
                  "num_experts_per_tok": 2, "norm_topk_prob": True, "mlp_only_layers": [0]},
    "mixtral": {**_BASE, "architectures": ["MixtralForCausalLM"], "model_type": "mixtral",
                "intermediate_size": 48, "num_local_experts": 4, "num_experts_per_tok": 2},
    "qwen3_next": {**_HYBRID, "architectures": ["Qwen3NextForCausalLM"],
                   "model_type": "qwen3_next", "intermediate_size": 80},
    "qwen3_5_moe_text": {**_HYBRID, "architectures": ["Qwen3_5MoeForCausalLM"],
                         "model_type": "qwen3_5_moe_text"},
    "qwen3_5_moe": {"architectures": ["Qwen3_5MoeForConditionalGeneration"],
                    "model_type": "qwen3_5_moe", "tie_word_embeddings": False,
                    "text_config": {**_HYBRID, "model_type": "qwen3_5_moe_text"}},
}
FAMILIES = tuple(CONFIGS)


def config(family: str, fp8: bool = False) -> dict[str, Any]:
    document = json.loads(json.dumps(CONFIGS[family]))
    if fp8:
        document["quantization_config"] = FP8_QUANT
    return document


def write(directory: Path, family: str, fp8: bool = False) -> Path:
    """A model directory holding only config.json."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config(family, fp8)), encoding="utf-8")
    return directory
