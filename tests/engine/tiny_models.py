"""Tiny random transformers models saved as HF directories, for parity tests of the engine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

VOCAB_SIZE = 512
EOS_ID = 1
ARCHITECTURES = ("llama", "qwen3", "qwen3_moe", "mixtral")

_COMMON: dict[str, Any] = {
    "vocab_size": VOCAB_SIZE, "hidden_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 512,
    "bos_token_id": 0, "eos_token_id": EOS_ID, "pad_token_id": 0, "initializer_range": 0.1,
}


def tiny_config(architecture: str) -> Any:
    import transformers as tf

    if architecture == "llama":
        return tf.LlamaConfig(**_COMMON, intermediate_size=128, tie_word_embeddings=True,
                              rope_parameters={"rope_type": "default", "rope_theta": 5e4})
    if architecture == "qwen3":
        return tf.Qwen3Config(**_COMMON, intermediate_size=128, head_dim=32,
                              tie_word_embeddings=False,
                              rope_parameters={"rope_type": "default", "rope_theta": 1e6})
    if architecture == "qwen3_moe":
        return tf.Qwen3MoeConfig(**_COMMON, intermediate_size=128, moe_intermediate_size=32,
                                 num_experts=4, num_experts_per_tok=2, norm_topk_prob=True,
                                 tie_word_embeddings=False)
    if architecture == "mixtral":
        return tf.MixtralConfig(**_COMMON, intermediate_size=48, num_local_experts=4,
                                num_experts_per_tok=2, tie_word_embeddings=False)
    raise ValueError(architecture)


def build_model(architecture: str, seed: int = 0) -> Any:
    """A float32 transformers model with random weights (norms away from 1 too)."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(tiny_config(architecture), dtype=torch.float32)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("norm.weight") or "layernorm" in name:
                param.add_(0.1 * torch.randn_like(param))
    return model.eval()


def write_word_tokenizer(directory: Path, vocab_size: int = VOCAB_SIZE) -> None:
    """A word-level tokenizer whose tokens are `w0`..`wN` (enough to drive text events)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {f"w{i}": i for i in range(vocab_size)}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="w2"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="w2",
                                   eos_token=f"w{EOS_ID}")
    fast.save_pretrained(str(directory))


def save_tiny(architecture: str, directory: Path, seed: int = 0) -> Any:
    """Save a tiny model (safetensors) plus a tokenizer into `directory`; return the model."""
    model = build_model(architecture, seed)
    model.save_pretrained(str(directory))
    write_word_tokenizer(directory)
    return model


def save_tiny_qwen_vocab(directory: Path, seed: int = 0) -> Any:
    """A one-layer Qwen3 with the full 151,936-row vocabulary and the real Qwen3 tokenizer."""
    import transformers as tf

    from demo_models.qwen_tokenizer import write_qwen3_tokenizer

    torch.manual_seed(seed)
    config = tf.Qwen3Config(vocab_size=151936, hidden_size=32, intermediate_size=64,
                            num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                            head_dim=16, tie_word_embeddings=True, bos_token_id=151643,
                            eos_token_id=151645, max_position_embeddings=1024)
    model = tf.AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
    model.save_pretrained(str(directory))
    write_qwen3_tokenizer(directory)
    return model
