"""Build small but real block-FP8 safetensors checkpoints for tests (Qwen3-FP8 layout).

numpy has no float8 or bfloat16, so tensors are saved by `safetensors.numpy.save_file` as
uint8 / uint16 and the dtype strings in the header are then patched to F8_E4M3 / BF16 (the
header is re-serialised and re-padded; the data bytes are untouched).
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import save_file

Tensors = dict[str, tuple[np.ndarray, str]]  # name -> (stored array, safetensors dtype)

BLOCK = 128
OUT, IN = 256, 320  # 320 = 2 full blocks + a ragged 64-column block
LAYERS = 2


def to_bf16_bits(values: np.ndarray) -> np.ndarray:
    """float32 -> BF16 bit patterns (round to nearest even), as uint16."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def fp8_bytes(shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Random float8_e4m3fn bytes, avoiding the NaN codes 0x7F / 0xFF."""
    magnitude = rng.integers(0, 0x7F, size=shape, dtype=np.uint8)
    sign = rng.integers(0, 2, size=shape, dtype=np.uint8) << 7
    return magnitude | sign


def scale_grid(out: int, inp: int, block: int = BLOCK) -> tuple[int, int]:
    return (math.ceil(out / block), math.ceil(inp / block))


def encode_scales(values: np.ndarray, dtype: str) -> tuple[np.ndarray, str]:
    if dtype == "BF16":
        return to_bf16_bits(values), "BF16"
    if dtype == "F16":
        return values.astype(np.float16), "F16"
    return values.astype(np.float32), "F32"


def bf16(values: np.ndarray) -> tuple[np.ndarray, str]:
    return to_bf16_bits(values), "BF16"


def fp8_model_tensors(scale_dtype: str = "BF16", layers: int = LAYERS, seed: int = 0) -> Tensors:
    """FP8 q_proj/o_proj per layer with scales; norms, router and embeddings in BF16."""
    rng = np.random.default_rng(seed)
    tensors: Tensors = {"model.embed_tokens.weight": bf16(rng.standard_normal((64, IN)))}
    for i in range(layers):
        prefix = f"model.layers.{i}"
        for proj, shape in (("self_attn.q_proj", (OUT, IN)), ("self_attn.o_proj", (IN, OUT))):
            tensors[f"{prefix}.{proj}.weight"] = (fp8_bytes(shape, rng), "F8_E4M3")
            scales = rng.uniform(1e-4, 5e-4, size=scale_grid(*shape)).astype(np.float32)
            tensors[f"{prefix}.{proj}.weight_scale_inv"] = encode_scales(scales, scale_dtype)
        tensors[f"{prefix}.input_layernorm.weight"] = bf16(np.ones(IN))
        tensors[f"{prefix}.mlp.gate.weight"] = bf16(rng.standard_normal((4, IN)))
    tensors["lm_head.weight"] = bf16(rng.standard_normal((64, IN)))
    return tensors


def bf16_model_tensors(layers: int = LAYERS, seed: int = 0) -> Tensors:
    rng = np.random.default_rng(seed)
    tensors: Tensors = {}
    for i in range(layers):
        tensors[f"model.layers.{i}.self_attn.q_proj.weight"] = bf16(rng.standard_normal((OUT, IN)))
        tensors[f"model.layers.{i}.input_layernorm.weight"] = bf16(np.ones(IN))
    return tensors


def model_config(fp8: bool = True, model_type: str = "qwen3_moe",
                 architecture: str = "Qwen3MoeForCausalLM") -> dict[str, Any]:
    config: dict[str, Any] = {
        "architectures": [architecture], "model_type": model_type, "torch_dtype": "bfloat16",
        "vocab_size": 64, "num_hidden_layers": LAYERS, "hidden_size": IN,
        "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 128, "num_experts": 4,
    }
    if fp8:
        config["quantization_config"] = {
            "activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
            "weight_block_size": [BLOCK, BLOCK],
            "modules_to_not_convert": ["lm_head"]
            + [f"model.layers.{i}.mlp.gate" for i in range(LAYERS)],
        }
    return config


def write_safetensors(path: Path, tensors: Tensors) -> None:
    """save_file, then patch the dtype strings numpy cannot express."""
    save_file({name: np.ascontiguousarray(arr) for name, (arr, _) in tensors.items()}, str(path))
    blob = path.read_bytes()
    (size,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + size])
    for name, (_, dtype) in tensors.items():
        header[name]["dtype"] = dtype
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # safetensors pads the header to 8 bytes with spaces
    path.write_bytes(struct.pack("<Q", len(text)) + text + blob[8 + size :])


def write_model(directory: Path, tensors: Tensors, config: dict[str, Any] | None = None,
                shards: int = 2) -> Path:
    """A model directory: config.json, `shards` shard files and an index (when shards > 1)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config or model_config()))
    names = list(tensors)
    per = math.ceil(len(names) / shards)
    weight_map: dict[str, str] = {}
    for i in range(shards):
        part = names[i * per : (i + 1) * per]
        file = "model.safetensors" if shards == 1 else \
            f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        write_safetensors(directory / file, {n: tensors[n] for n in part})
        weight_map.update(dict.fromkeys(part, file))
    if shards > 1:
        total = sum(np.ascontiguousarray(arr).nbytes for arr, _ in tensors.values())
        index = {"metadata": {"total_size": total}, "weight_map": weight_map}
        (directory / "model.safetensors.index.json").write_text(json.dumps(index))
    return directory


def shard_of(directory: Path, tensor: str) -> Path:
    index = json.loads((directory / "model.safetensors.index.json").read_text())
    return directory / index["weight_map"][tensor]
