"""A Qwen3-MoE model directory with the real Qwen3 tokenizer (built from qwen.tiktoken).

The tokenizer is built once per machine (cached by the tiktoken file's sha256, see
demo_models.qwen_tokenizer) and copied into each directory, so a test pays milliseconds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from demo_models.qwen_tokenizer import write_qwen3_tokenizer

QWEN3_VOCAB_SIZE = 151936


def qwen3_moe_config(**overrides: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "architectures": ["Qwen3MoeForCausalLM"],
        "model_type": "qwen3_moe",
        "vocab_size": QWEN3_VOCAB_SIZE,
        "bos_token_id": 151643,
        "eos_token_id": 151645,
        "torch_dtype": "bfloat16",
    }
    config.update(overrides)
    return config


def qwen3_generation_config() -> dict[str, Any]:
    return {"bos_token_id": 151643, "eos_token_id": [151645, 151643], "pad_token_id": 151643}


def write_qwen3_model_dir(directory: Path, config: dict[str, Any] | None = None,
                          generation_config: dict[str, Any] | None = None) -> Path:
    """config.json, generation_config.json and the tokenizer files; no weights."""
    write_qwen3_tokenizer(directory)
    (directory / "config.json").write_text(json.dumps(config or qwen3_moe_config()))
    (directory / "generation_config.json").write_text(
        json.dumps(generation_config or qwen3_generation_config()))
    return directory
