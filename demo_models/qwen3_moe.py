"""qwen3-moe-fp8-tiny: a seeded random Qwen3-MoE written exactly like Qwen3-30B-A3B-FP8
(per-expert FP8 weights with BF16 weight_scale_inv, router / norms / embeddings BF16), with
the real Qwen3 tokenizer. The layout is the one huggingface.co/Qwen/Qwen3-30B-A3B-FP8 ships
(config.json quantization_config: fp8, e4m3, dynamic, 128x128 weight_block_size)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from demo_models.base import SCALE_DTYPES, BuildOptions, Tensors, write_json
from demo_models.smollm2 import fp8_target
from demo_models.writer import (
    not_converted_names,
    quantization_config,
    quantize_checkpoint,
    write_qwen_tokenizer,
    write_safetensors,
)

TINY_SEED = 0

QWEN3_TINY: dict[str, Any] = {
    "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
    "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 151643,
    "eos_token_id": 151645, "decoder_sparse_step": 1, "head_dim": 128, "hidden_act": "silu",
    "hidden_size": 128, "initializer_range": 0.02, "intermediate_size": 384,
    "max_position_embeddings": 40960, "max_window_layers": 2, "mlp_only_layers": [],
    "moe_intermediate_size": 128, "norm_topk_prob": True, "num_attention_heads": 2,
    "num_experts": 8, "num_experts_per_tok": 2, "num_hidden_layers": 2,
    "num_key_value_heads": 1, "output_router_logits": False, "rms_norm_eps": 1e-6,
    "rope_scaling": None, "rope_theta": 1000000.0, "router_aux_loss_coef": 0.001,
    "sliding_window": None, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "transformers_version": "4.51.0", "use_cache": True, "use_sliding_window": False,
    "vocab_size": 151936,
}


def qwen3_tiny_tensors(config: dict[str, Any], seed: int = TINY_SEED) -> Tensors:
    """Seeded random float32 weights, Hub naming (one tensor per expert)."""
    gen = torch.Generator().manual_seed(seed)
    hidden, head_dim = config["hidden_size"], config["head_dim"]
    q_out = config["num_attention_heads"] * head_dim
    kv_out = config["num_key_value_heads"] * head_dim
    inter = config["moe_intermediate_size"]

    def normal(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=gen) * config["initializer_range"]

    def norm(size: int) -> torch.Tensor:
        return 1.0 + 0.1 * torch.randn(size, generator=gen)

    tensors: Tensors = {"model.embed_tokens.weight": normal(config["vocab_size"], hidden)}
    for layer in range(config["num_hidden_layers"]):
        p = f"model.layers.{layer}"
        tensors[f"{p}.input_layernorm.weight"] = norm(hidden)
        for proj, shape in (("q_proj", (q_out, hidden)), ("k_proj", (kv_out, hidden)),
                            ("v_proj", (kv_out, hidden)), ("o_proj", (hidden, q_out))):
            tensors[f"{p}.self_attn.{proj}.weight"] = normal(*shape)
        tensors[f"{p}.self_attn.q_norm.weight"] = norm(head_dim)
        tensors[f"{p}.self_attn.k_norm.weight"] = norm(head_dim)
        tensors[f"{p}.post_attention_layernorm.weight"] = norm(hidden)
        tensors[f"{p}.mlp.gate.weight"] = normal(config["num_experts"], hidden) * 50
        for expert in range(config["num_experts"]):
            e = f"{p}.mlp.experts.{expert}"
            tensors[f"{e}.gate_proj.weight"] = normal(inter, hidden)
            tensors[f"{e}.up_proj.weight"] = normal(inter, hidden)
            tensors[f"{e}.down_proj.weight"] = normal(hidden, inter)
    tensors["model.norm.weight"] = norm(hidden)
    tensors["lm_head.weight"] = normal(config["vocab_size"], hidden)
    return tensors


def build_qwen3_moe_fp8_tiny(out: Path, options: BuildOptions) -> dict[str, Any]:
    config = dict(QWEN3_TINY)
    config["quantization_config"] = quantization_config(
        not_converted_names(config["num_hidden_layers"], "mlp.gate"))
    write_qwen_tokenizer(out)
    tensors = quantize_checkpoint(qwen3_tiny_tensors(config), fp8_target,
                                  SCALE_DTYPES[options.scale_dtype])
    files = write_safetensors(out, tensors, options.shards)
    write_json(out / "config.json", config)
    return {
        "description": ("seeded random Qwen3-MoE (2 layers, hidden 128, 8 experts top-2) in "
                        f"the Qwen3-30B-A3B-FP8 format, {options.scale_dtype} "
                        "weight_scale_inv; random weights, random text"),
        "license": "Apache-2.0 (code); Qwen tokenizer from qwen-tokenizer",
        "seed": TINY_SEED,
        "weights": files,
    }
