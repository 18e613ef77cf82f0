"""Block FP8 quantisation in the Qwen3 / DeepSeek-V3 checkpoint format.

A weight `W` [out, in] is stored as `W_fp8` (`float8_e4m3fn`, same shape) plus
`weight_scale_inv` [ceil(out/128), ceil(in/128)]: one scale per 128x128 tile, which is the
*dequantisation multiplier* despite its name:

    W[r, c] ~= float(W_fp8[r, c]) * weight_scale_inv[r // 128, c // 128]

Producing it: per tile `s = max|W_tile| / 448`, `W_fp8 = clamp(W_tile / s, -448, 448)`.
Ragged dimensions (not multiples of 128) use ceil-division, and the last tile row/column
covers the remainder (facts: model/FP8_FORMAT.md §3). Everything computes in float32.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch

BLOCK = 128
FP8_MAX = 448.0  # largest finite float8_e4m3fn
FP8_DTYPE = torch.float8_e4m3fn
SCALE_SUFFIX = "_scale_inv"  # `X.weight` pairs with `X.weight_scale_inv`
SCALE_DTYPES: dict[str, torch.dtype] = {
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
    "fp32": torch.float32,
}


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def scale_grid(shape: tuple[int, ...] | torch.Size, block: int = BLOCK) -> tuple[int, int]:
    """Shape of `weight_scale_inv` for a 2-D weight of `shape`."""
    if len(shape) != 2:
        raise ValueError(f"block FP8 needs a 2-D weight, got shape {tuple(shape)}")
    return ceil_div(shape[0], block), ceil_div(shape[1], block)


def expand_scales(scale_inv: torch.Tensor, shape: tuple[int, ...] | torch.Size,
                  block: int = BLOCK) -> torch.Tensor:
    """Per-element float32 multipliers: tile (r // block, c // block), cropped to `shape`."""
    expected = scale_grid(shape, block)
    if tuple(scale_inv.shape) != expected:
        raise ValueError(f"scale grid {tuple(scale_inv.shape)} does not match weight "
                         f"{tuple(shape)} with {block}x{block} blocks (expected {expected})")
    full = scale_inv.float().repeat_interleave(block, dim=0).repeat_interleave(block, dim=1)
    return full[: shape[0], : shape[1]]


def block_amax(weight: torch.Tensor, block: int = BLOCK) -> torch.Tensor:
    """max |W| per tile, float32 [ceil(out/block), ceil(in/block)] (zero-padded edges)."""
    rows, cols = scale_grid(weight.shape, block)
    padded = torch.zeros(rows * block, cols * block, dtype=torch.float32)
    padded[: weight.shape[0], : weight.shape[1]] = weight.float().abs()
    return padded.view(rows, block, cols, block).amax(dim=(1, 3))


def round_up(values: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """float32 -> `dtype`, rounding to the next representable value at or above each."""
    rounded = values.to(dtype)
    low = rounded.float() < values
    if bool(low.any()):
        rounded[low] = torch.nextafter(rounded[low], torch.full_like(rounded[low], math.inf))
    return rounded


def quantize_block_fp8(weight: torch.Tensor, block: int = BLOCK,
                       scale_dtype: torch.dtype = torch.float32,
                       ) -> tuple[torch.Tensor, torch.Tensor]:
    """(W_fp8, weight_scale_inv) for a 2-D weight; the scale is stored in `scale_dtype`.

    The scale is rounded *up* to `scale_dtype` before dividing, so dequantising with the
    stored scale is consistent and no tile saturates past 448.
    """
    stored = round_up((block_amax(weight, block) / FP8_MAX), scale_dtype)
    divisor = expand_scales(stored, weight.shape, block)
    divisor = torch.where(divisor > 0, divisor, torch.ones_like(divisor))
    scaled = (weight.float() / divisor).clamp(-FP8_MAX, FP8_MAX)
    return scaled.to(FP8_DTYPE), stored


def dequantize_block_fp8(weight: torch.Tensor, scale_inv: torch.Tensor, block: int = BLOCK,
                         dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """W ~= float(W_fp8) * scale_inv[r // block, c // block], returned in `dtype`."""
    values = weight.float() * expand_scales(scale_inv, weight.shape, block)
    return values.to(dtype)


def is_quantized_pair(name: str, tensors: Mapping[str, torch.Tensor]) -> bool:
    """True for an FP8 `*.weight` whose `*.weight_scale_inv` sibling is present."""
    return (name.endswith(".weight") and tensors[name].dtype == FP8_DTYPE
            and name + SCALE_SUFFIX in tensors)


def dequantize_state_dict(tensors: Mapping[str, torch.Tensor], block: int = BLOCK,
                          dtype: torch.dtype = torch.bfloat16) -> dict[str, torch.Tensor]:
    """A plain state dict: FP8 pairs dequantised, scales dropped, the rest cast to `dtype`.

    An FP8 tensor without its scale is an error (the checkpoint is incomplete).
    """
    result: dict[str, torch.Tensor] = {}
    for name, tensor in tensors.items():
        if name.endswith(".weight" + SCALE_SUFFIX):
            continue
        if tensor.dtype == FP8_DTYPE:
            if not is_quantized_pair(name, tensors):
                raise ValueError(f"{name} is FP8 but {name + SCALE_SUFFIX} is missing")
            result[name] = dequantize_block_fp8(tensor, tensors[name + SCALE_SUFFIX], block,
                                                dtype)
        else:
            result[name] = tensor.to(dtype) if tensor.is_floating_point() else tensor
    return result
