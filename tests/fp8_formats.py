"""Tiny but complete FP8 checkpoints of a small Qwen3-MoE config, one per on-disk FP8 format.

Every tensor the config needs is there (names and shapes from probes.model.tensors, real bytes),
so checkpoint.format counts them all and checkpoint.fp8-scales judges real scale values:

- `block`: quant_method fp8 with weight_block_size [128, 128]: `X.weight_scale_inv` per tile,
  BF16 (the Qwen3-FP8 layout);
- `channel`: compressed-tensors float8, strategy channel: `X.weight_scale` [out, 1] float32,
  dynamic activations (the layout llm-compressor's FP8_DYNAMIC writes);
- `tensor`: compressed-tensors float8, strategy tensor, static activations: `X.weight_scale`
  [1] and `X.input_scale` [1] float32;
- `autofp8`: quant_method fp8 without a block size, static activations: scalar `X.weight_scale`
  and `X.input_scale` (AutoFP8's layout).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from probes.model.config import parse_config
from probes.model.tensors import expected_tensors
from tests.fp8_fixtures import Tensors, bf16, encode_scales, fp8_bytes, write_model

FORMATS = ("block", "channel", "tensor", "autofp8")
BLOCK = 128


def tiny_config(fmt: str | None) -> dict[str, Any]:
    config: dict[str, Any] = {
        "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
        "torch_dtype": "bfloat16", "vocab_size": 128, "num_hidden_layers": 2,
        "hidden_size": 256, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 128,
        "num_experts": 2, "num_experts_per_tok": 1, "moe_intermediate_size": 128,
        "intermediate_size": 512, "rms_norm_eps": 1e-6, "rope_theta": 1e6,
    }
    if fmt is not None:
        config["quantization_config"] = quantization_config(fmt)
    return config


def _compressed(strategy: str, static: bool) -> dict[str, Any]:
    inputs = {"type": "float", "num_bits": 8, "symmetric": True, "dynamic": not static,
              "strategy": "tensor" if static else "token"}
    return {"quant_method": "compressed-tensors", "format": "float-quantized",
            "config_groups": {"group_0": {
                "targets": ["Linear"], "input_activations": inputs,
                "weights": {"type": "float", "num_bits": 8, "symmetric": True,
                            "dynamic": False, "strategy": strategy}}},
            "ignore": ["lm_head"]}


def quantization_config(fmt: str) -> dict[str, Any]:
    if fmt == "block":
        return {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                "weight_block_size": [BLOCK, BLOCK], "modules_to_not_convert": ["lm_head"]}
    if fmt == "channel":
        return _compressed("channel", static=False)
    if fmt == "tensor":
        return _compressed("tensor", static=True)
    assert fmt == "autofp8"
    return {"quant_method": "fp8", "activation_scheme": "static", "ignored_layers": ["lm_head"]}


def scale_tensors(fmt: str, name: str, shape: tuple[int, ...],
                  rng: np.random.Generator) -> Tensors:
    """The scale (and input scale) tensors of one FP8 weight in format `fmt`."""
    base = name.removesuffix("weight")
    rows, cols = shape
    if fmt == "block":
        grid = (math.ceil(rows / BLOCK), math.ceil(cols / BLOCK))
        return {base + "weight_scale_inv": encode_scales(rng.uniform(1e-4, 5e-4, grid), "BF16")}
    if fmt == "channel":
        return {base + "weight_scale": encode_scales(rng.uniform(1e-4, 5e-4, (rows, 1)), "F32")}
    scalar: tuple[int, ...] = (1,) if fmt == "tensor" else ()
    return {base + "weight_scale": encode_scales(rng.uniform(1e-4, 5e-4, scalar), "F32"),
            base + "input_scale": encode_scales(rng.uniform(1e-2, 5e-2, scalar), "F32")}


def tiny_tensors(fmt: str | None, seed: int = 0) -> Tensors:
    """Every tensor of tiny_config(fmt), FP8 linears with the format's scales."""
    rng = np.random.default_rng(seed)
    config = parse_config(tiny_config(fmt))
    tensors: Tensors = {}
    for name, spec in expected_tensors(config):
        if fmt is not None and spec.quantisable and not config.quant.skips(
                name.removesuffix(".weight")):
            tensors[name] = (fp8_bytes(spec.shape, rng), "F8_E4M3")
            tensors.update(scale_tensors(fmt, name, spec.shape, rng))
        else:
            tensors[name] = bf16(rng.standard_normal(spec.shape) * 0.02)
    return tensors


def write_tiny(directory: Path, fmt: str | None, shards: int = 2,
               tensors: Tensors | None = None) -> Path:
    return write_model(directory, tiny_tensors(fmt) if tensors is None else tensors,
                       tiny_config(fmt), shards)
