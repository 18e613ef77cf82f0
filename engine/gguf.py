"""llama GGUF files (SmolLM2) under the engine's canonical names, dequantised with the `gguf`
package. The demo builder reads SmolLM2 through `read_gguf` too."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import torch

from engine.config import ModelConfig, config_from_gguf
from engine.errors import ModelFormatError
from engine.fp8 import Fp8Weight

Weight = torch.Tensor | Fp8Weight

_GGUF_GLOBAL = {"token_embd.weight": "embed.weight", "output_norm.weight": "norm.weight",
                "output.weight": "lm_head.weight"}
_GGUF_LAYER = {"attn_q": "attn.q", "attn_k": "attn.k", "attn_v": "attn.v", "attn_output": "attn.o",
               "ffn_gate": "mlp.gate", "ffn_up": "mlp.up", "ffn_down": "mlp.down",
               "attn_norm": "attn_norm", "ffn_norm": "mlp_norm"}
_GGUF_LAYER_RE = re.compile(r"blk\.(\d+)\.(\w+)\.(weight|bias)")


def gguf_to_canonical(name: str) -> str | None:
    """llama.cpp tensor name -> canonical name (None for tensors the engine does not use)."""
    if name in _GGUF_GLOBAL:
        return _GGUF_GLOBAL[name]
    match = _GGUF_LAYER_RE.fullmatch(name)
    if match is None or match.group(2) not in _GGUF_LAYER:
        return None
    return f"layers.{match.group(1)}.{_GGUF_LAYER[match.group(2)]}.{match.group(3)}"


def unpermute_rows(weight: torch.Tensor, heads: int) -> torch.Tensor:
    """Undo llama.cpp's Q/K row permutation: within each head rows are stored as interleaved
    pairs (for its interleaved RoPE); even rows become the first half, odd rows the second
    (HF rotate-half layout)."""
    rows, cols = weight.shape
    return weight.reshape(heads, rows // heads // 2, 2, cols).transpose(1, 2).reshape(rows, cols)


def read_gguf(path: Path) -> tuple[ModelConfig, dict[str, torch.Tensor]]:
    """A llama GGUF as (config, canonical name -> float32 tensor [out, in]), Q/K un-permuted
    (the demo builder reads SmolLM2 through this too)."""
    import gguf

    try:
        reader = gguf.GGUFReader(str(path))
    except Exception as exc:  # gguf raises ValueError, struct/IndexError... for damaged files
        raise ModelFormatError(f"{path}: not a readable GGUF file ({type(exc).__name__}: "
                               f"{exc}); re-download it") from None
    config = config_from_gguf(reader)
    weights: dict[str, torch.Tensor] = {}
    for tensor in reader.tensors:
        canonical = gguf_to_canonical(tensor.name)
        if canonical is None:
            continue
        values = _gguf_tensor(gguf, tensor, path)
        if canonical.endswith("attn.q.weight"):
            values = unpermute_rows(values, config.num_heads)
        elif canonical.endswith("attn.k.weight"):
            values = unpermute_rows(values, config.num_kv_heads)
        weights[canonical] = values
    return config, weights


def load_gguf(
    path: Path, *, device: torch.device | str = "cpu", dtype: torch.dtype = torch.bfloat16
) -> tuple[ModelConfig, dict[str, Weight]]:
    """Read a llama GGUF with the `gguf` package, dequantising every tensor at load."""
    config, tensors = read_gguf(path)
    weights: dict[str, Weight] = {name: t.to(device=device, dtype=dtype)
                                  for name, t in tensors.items()}
    if config.tie_word_embeddings and "embed.weight" in weights:
        weights["lm_head.weight"] = weights["embed.weight"]
    missing = [n for n in ("embed.weight", "norm.weight", "lm_head.weight") if n not in weights]
    missing += [f"layers.{i}.{p}" for i in range(config.num_layers)
                for p in ("attn_norm.weight", "mlp_norm.weight", "attn.q.weight",
                          "attn.k.weight", "attn.v.weight", "attn.o.weight", "mlp.gate.weight",
                          "mlp.up.weight", "mlp.down.weight")
                if f"layers.{i}.{p}" not in weights]
    if missing:
        raise ModelFormatError(f"{path}: GGUF lacks tensor {missing[0]!r} (canonical name) that "
                               "its metadata implies; re-download it")
    return config, weights


def _gguf_tensor(gguf: Any, tensor: Any, path: Path) -> torch.Tensor:
    """Dequantise one GGUF tensor to float32 [out, in] (GGUF lists dims innermost first)."""
    shape = tuple(int(d) for d in reversed(tensor.shape))
    try:
        values = np.asarray(gguf.quants.dequantize(tensor.data, tensor.tensor_type))
        values = values.reshape(shape)
    except (NotImplementedError, ValueError) as exc:
        raise ModelFormatError(f"{path}: tensor {tensor.name!r} cannot be dequantised "
                               f"({exc}); use a GGUF with standard quant types") from None
    if not values.flags.writeable:  # unquantised tensors come back as views of the mmap
        values = values.copy()
    return torch.from_numpy(values.astype(np.float32, copy=False))
