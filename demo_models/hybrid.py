"""The hybrid demo kinds: seeded random models with the official tensor names and dtypes.

- `qwen3-next-tiny`: Qwen3-Next (Qwen3NextForCausalLM) as Qwen3-Next-80B-A3B-Instruct stores
  it: BF16, weights under `model.`, fused DeltaNet projections `in_proj_qkvz` / `in_proj_ba`,
  one tensor per expert; the Qwen3 tokenizer.
- `qwen3.6-moe-fp8-tiny`: Qwen3.6-35B-A3B-FP8's layout: the vision-language config with the
  language model in `text_config`, weights under `model.language_model.`, block-FP8 attention,
  DeltaNet, expert and shared-expert projections (one tensor per expert, `weight_scale_inv`),
  everything else BF16, a small vision tower under `model.visual.` and an MTP head under
  `mtp.` (neither is loaded by the engine); the Qwen3.5/3.6 tokenizer.

Names and shapes of the language model come from `probes.model.tensors` (the inventory the
engine and the doctor use). Both have 4 layers (3 Gated DeltaNet + 1 gated attention) so
at least one layer keeps a KV cache; FP8 dims are multiples of 128, so transformers' own FP8
dequantisation is a valid reference.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch

from demo_models.base import SCALE_DTYPES, BuildOptions, Tensors, write_json
from demo_models.writer import (
    quantization_config,
    quantize_checkpoint,
    write_qwen_tokenizer,
    write_safetensors,
)
from probes.model.config import ConfigFacts, parse_config
from probes.model.tensors import TensorSpec, expected_tensors

SEED = 0
LAYER_TYPES = ["linear_attention"] * 3 + ["full_attention"]

QWEN3_NEXT_TINY: dict[str, Any] = {
    "architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next",
    "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 151643,
    "eos_token_id": 151645, "decoder_sparse_step": 1, "full_attention_interval": 4,
    "head_dim": 64, "hidden_act": "silu", "hidden_size": 128, "initializer_range": 0.02,
    "intermediate_size": 256, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 32,
    "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_value_head_dim": 32,
    "max_position_embeddings": 262144, "mlp_only_layers": [], "moe_intermediate_size": 64,
    "norm_topk_prob": True, "num_attention_heads": 4, "num_experts": 8,
    "num_experts_per_tok": 2, "num_hidden_layers": 4, "num_key_value_heads": 2,
    "output_router_logits": False, "partial_rotary_factor": 0.25, "rms_norm_eps": 1e-6,
    "rope_scaling": None, "rope_theta": 10000000, "router_aux_loss_coef": 0.001,
    "shared_expert_intermediate_size": 64, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "transformers_version": "4.57.0.dev0", "use_cache": True,
    "use_sliding_window": False, "vocab_size": 151936,
}

QWEN3_6_TEXT_TINY: dict[str, Any] = {
    "attention_bias": False, "attention_dropout": 0.0, "attn_output_gate": True,
    "dtype": "bfloat16", "eos_token_id": 248044, "full_attention_interval": 4, "head_dim": 128,
    "hidden_act": "silu", "hidden_size": 128, "initializer_range": 0.02,
    "layer_types": LAYER_TYPES, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128,
    "linear_num_key_heads": 1, "linear_num_value_heads": 2, "linear_value_head_dim": 128,
    "max_position_embeddings": 262144, "mlp_only_layers": [], "model_type": "qwen3_5_moe_text",
    "moe_intermediate_size": 128, "mtp_num_hidden_layers": 1,
    "mtp_use_dedicated_embeddings": False, "num_attention_heads": 2, "num_experts": 8,
    "num_experts_per_tok": 2, "num_hidden_layers": 4, "num_key_value_heads": 1,
    "rms_norm_eps": 1e-6, "router_aux_loss_coef": 0.001, "shared_expert_intermediate_size": 128,
    "use_cache": True, "vocab_size": 248320, "mamba_ssm_dtype": "float32",
    "rope_parameters": {"mrope_interleaved": True, "mrope_section": [11, 11, 10],
                        "rope_type": "default", "rope_theta": 10000000,
                        "partial_rotary_factor": 0.25},
}
VISION_TINY: dict[str, Any] = {
    "deepstack_visual_indexes": [], "depth": 1, "hidden_act": "gelu_pytorch_tanh",
    "hidden_size": 32, "in_channels": 3, "initializer_range": 0.02, "intermediate_size": 64,
    "model_type": "qwen3_5_moe", "num_heads": 2, "num_position_embeddings": 16,
    "out_hidden_size": 128, "patch_size": 16, "spatial_merge_size": 2,
    "temporal_patch_size": 2,
}
QWEN3_6_TINY: dict[str, Any] = {
    "architectures": ["Qwen3_5MoeForConditionalGeneration"], "image_token_id": 248056,
    "model_type": "qwen3_5_moe", "text_config": QWEN3_6_TEXT_TINY,
    "tie_word_embeddings": False, "transformers_version": "4.57.0.dev0",
    "video_token_id": 248057, "vision_config": VISION_TINY, "vision_end_token_id": 248054,
    "vision_start_token_id": 248053,
}


def _value(name: str, spec: TensorSpec, gen: torch.Generator, scale: float) -> torch.Tensor:
    """Random values that keep the model numerically sane (norms near their identity)."""
    shape = spec.shape
    if name.endswith("linear_attn.norm.weight"):  # plain-weight gated norm
        return 1.0 + 0.1 * torch.randn(shape, generator=gen)
    if name.endswith("norm.weight"):  # zero-centred RMSNorms: identity at 0
        return 0.1 * torch.randn(shape, generator=gen)
    if name.endswith("A_log"):
        return torch.empty(shape).uniform_(1.0, 16.0, generator=gen).log()
    if name.endswith("dt_bias"):
        return 1.0 + 0.1 * torch.randn(shape, generator=gen)
    if name.endswith("conv1d.weight"):
        return torch.randn(shape, generator=gen) / math.sqrt(shape[-1])
    if name.endswith("mlp.gate.weight"):  # a decisive router
        return torch.randn(shape, generator=gen) * scale * 50
    return torch.randn(shape, generator=gen) * scale


def language_model(config: ConfigFacts, seed: int = SEED) -> tuple[Tensors, set[str]]:
    """float32 tensors of the language model, and the names an FP8 checkpoint quantises."""
    gen = torch.Generator().manual_seed(seed)
    tensors: Tensors = {}
    quantised: set[str] = set()
    for name, spec in expected_tensors(config):
        tensors[name] = _value(name, spec, gen, 0.02)
        if spec.quantisable and not config.quant.skips(name.removesuffix(".weight")):
            quantised.add(name)
    return tensors, quantised


def vision_tower(vision: dict[str, Any], seed: int = SEED + 1) -> Tensors:
    """A depth-1 tower named as transformers 5.24's Qwen3_5MoeVisionModel names it."""
    gen = torch.Generator().manual_seed(seed)
    h, i, o = vision["hidden_size"], vision["intermediate_size"], vision["out_hidden_size"]
    merged = h * vision["spatial_merge_size"] ** 2
    patch = (h, vision["in_channels"], vision["temporal_patch_size"], vision["patch_size"],
             vision["patch_size"])
    shapes: dict[str, tuple[int, ...]] = {
        "patch_embed.proj.weight": patch, "patch_embed.proj.bias": (h,),
        "pos_embed.weight": (vision["num_position_embeddings"], h),
        "merger.norm.weight": (h,), "merger.norm.bias": (h,),
        "merger.linear_fc1.weight": (merged, merged), "merger.linear_fc1.bias": (merged,),
        "merger.linear_fc2.weight": (o, merged), "merger.linear_fc2.bias": (o,)}
    for block in range(vision["depth"]):
        b = f"blocks.{block}."
        shapes |= {b + "norm1.weight": (h,), b + "norm1.bias": (h,), b + "norm2.weight": (h,),
                   b + "norm2.bias": (h,), b + "attn.qkv.weight": (3 * h, h),
                   b + "attn.qkv.bias": (3 * h,), b + "attn.proj.weight": (h, h),
                   b + "attn.proj.bias": (h,), b + "mlp.linear_fc1.weight": (i, h),
                   b + "mlp.linear_fc1.bias": (i,), b + "mlp.linear_fc2.weight": (h, i),
                   b + "mlp.linear_fc2.bias": (h,)}
    return {"model.visual." + n: torch.randn(s, generator=gen) * 0.02
            for n, s in shapes.items()}


def mtp_head(hidden: int, seed: int = SEED + 2) -> Tensors:
    """The multi-token-prediction head's own tensors, under the names Qwen3-Next MTP loaders
    read (ModelTC/LightLLM lightllm/models/qwen3next_mtp/layer_weights); transformers and this
    engine skip `mtp.*`."""
    gen = torch.Generator().manual_seed(seed)
    return {"mtp.fc.weight": torch.randn(hidden, 2 * hidden, generator=gen) * 0.02,
            "mtp.norm.weight": torch.zeros(hidden),
            "mtp.pre_fc_norm_embedding.weight": torch.zeros(hidden),
            "mtp.pre_fc_norm_hidden.weight": torch.zeros(hidden)}


def build_qwen3_next_tiny(out: Path, options: BuildOptions) -> dict[str, Any]:
    config = dict(QWEN3_NEXT_TINY)
    tensors, _ = language_model(parse_config(config))
    write_qwen_tokenizer(out)
    bf16 = {name: t.to(torch.bfloat16).contiguous() for name, t in tensors.items()}
    files = write_safetensors(out, bf16, options.shards)
    write_json(out / "config.json", config)
    return {
        "description": ("seeded random Qwen3-Next (4 layers: 3 Gated DeltaNet + 1 gated "
                        "attention, 8 experts top-2 + shared expert) in the "
                        "Qwen3-Next-80B-A3B-Instruct BF16 layout; random weights, random text"),
        "license": "Apache-2.0 (code); Qwen tokenizer from qwen-tokenizer",
        "seed": SEED,
        "weights": files,
    }


def qwen3_6_not_converted(config: ConfigFacts) -> list[str]:
    """Modules kept in BF16, spelled as Qwen's FP8 configs spell them: lm_head, the
    embeddings, per layer the norms, router and shared-expert gate and the small DeltaNet
    parameters, and the vision tower."""
    p = config.weight_prefix
    names = ["lm_head", p + "embed_tokens", p + "norm", "model.visual"]
    for layer in range(config.num_hidden_layers or 0):
        q = f"{p}layers.{layer}."
        names += [q + "input_layernorm", q + "post_attention_layernorm", q + "mlp.gate",
                  q + "mlp.shared_expert_gate"]
        if config.layer_kind(layer) == "full_attention":
            names += [q + "self_attn.q_norm", q + "self_attn.k_norm"]
        else:
            names += [q + f"linear_attn.{m}" for m in ("A_log", "conv1d", "dt_bias",
                                                        "in_proj_a", "in_proj_b", "norm")]
    return names


def build_qwen3_6_moe_fp8_tiny(out: Path, options: BuildOptions) -> dict[str, Any]:
    config: dict[str, Any] = dict(QWEN3_6_TINY)
    facts = parse_config(config)
    config["quantization_config"] = quantization_config(qwen3_6_not_converted(facts))
    facts = parse_config(config)
    tensors, quantised = language_model(facts)
    scale_dtype = SCALE_DTYPES[options.scale_dtype]
    written = quantize_checkpoint(tensors, quantised.__contains__, scale_dtype)
    written |= {n: t.to(torch.bfloat16) for n, t in vision_tower(VISION_TINY).items()}
    written |= {n: t.to(torch.bfloat16) for n, t in mtp_head(facts.hidden_size or 0).items()}
    write_qwen_tokenizer(out, qwen3_5=True)
    files = write_safetensors(out, written, options.shards)
    write_json(out / "config.json", config)
    return {
        "description": ("seeded random Qwen3.5/3.6 MoE (4 layers: 3 Gated DeltaNet + 1 gated "
                        "attention, 8 experts top-2 + shared expert) in the "
                        f"Qwen3.6-35B-A3B-FP8 layout, {options.scale_dtype} weight_scale_inv, "
                        "with a vision tower and MTP head the engine does not load; random "
                        "weights, random text"),
        "license": "Apache-2.0 (code); Qwen3.5/3.6 tokenizer from qwen-tokenizer",
        "seed": SEED,
        "weights": files,
    }

