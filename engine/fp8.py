"""Block-FP8 weights (float8_e4m3fn + one `weight_scale_inv` per 128x128 tile).

`W[r, c] = float(W_fp8[r, c]) * scale_inv[r // bo, c // bi]`, with a ceil-divided scale grid:
the last tile row / column may be partial (ragged). Scales come as BF16, FP16 or FP32; the
product is always computed in float32 and cast once.

Ascend A2/A3 have no FP8 compute, so the engine either dequantises once at load or keeps the
bytes resident as an `Fp8Weight` and dequantises per use.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from engine.errors import ModelFormatError

BLOCK = (128, 128)
FP8_MAX = 448.0  # largest finite float8_e4m3fn


def scale_grid(shape: tuple[int, int], block: tuple[int, int] = BLOCK) -> tuple[int, int]:
    """Scale-grid shape for a [out, in] weight: ceil-division, so ragged edges get a tile."""
    return math.ceil(shape[0] / block[0]), math.ceil(shape[1] / block[1])


def fp8_to_float32(weight: torch.Tensor) -> torch.Tensor:
    """float8_e4m3fn (or its uint8 bytes) -> float32, on the tensor's device."""
    raw = weight.view(torch.float8_e4m3fn) if weight.dtype == torch.uint8 else weight
    try:
        return raw.to(torch.float32)
    except (RuntimeError, TypeError):
        # Some backends store float8 but cannot convert it; a 256-entry table always works.
        return _E4M3_TABLE.to(weight.device)[raw.view(torch.uint8).long()]


def _e4m3_table() -> torch.Tensor:
    return torch.arange(256, dtype=torch.int32).to(torch.uint8).view(torch.float8_e4m3fn).float()


_E4M3_TABLE = _e4m3_table()


def dequantize_block(
    weight_fp8: torch.Tensor,
    scale_inv: torch.Tensor,
    block: tuple[int, int] = BLOCK,
    dtype: torch.dtype = torch.bfloat16,
) -> torch.Tensor:
    """Dequantise a [out, in] block-FP8 weight with its [ceil(out/bo), ceil(in/bi)] scales."""
    if weight_fp8.dim() != 2:
        raise ModelFormatError(f"FP8 weight must be 2-D, got shape {list(weight_fp8.shape)}")
    rows, cols = int(weight_fp8.shape[0]), int(weight_fp8.shape[1])
    if tuple(scale_inv.shape) != scale_grid((rows, cols), block):
        raise ModelFormatError(
            f"FP8 scale grid {list(scale_inv.shape)} does not match weight {[rows, cols]} "
            f"with {list(block)} blocks (expected {list(scale_grid((rows, cols), block))})"
        )
    # Expand each tile's scale to its rows/columns, then cut the ragged overhang.
    scale = scale_inv.to(device=weight_fp8.device, dtype=torch.float32)
    scale = scale.repeat_interleave(block[0], dim=0)[:rows]
    scale = scale.repeat_interleave(block[1], dim=1)[:, :cols]
    return (fp8_to_float32(weight_fp8) * scale).to(dtype)


def quantize_block(
    weight: torch.Tensor, block: tuple[int, int] = BLOCK
) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantise [out, in] to (float8_e4m3fn, float32 scale_inv) with scale = amax / 448 per tile.

    The writer side of the format, used to build FP8 checkpoints for tests and demos.
    """
    rows, cols = int(weight.shape[0]), int(weight.shape[1])
    grid = scale_grid((rows, cols), block)
    padded = torch.zeros(grid[0] * block[0], grid[1] * block[1], dtype=torch.float32)
    padded[:rows, :cols] = weight.float()
    tiles = padded.view(grid[0], block[0], grid[1], block[1])
    amax = tiles.abs().amax(dim=(1, 3))
    scale = torch.where(amax > 0, amax / FP8_MAX, torch.ones_like(amax))
    quant = (tiles / scale[:, None, :, None]).clamp(-FP8_MAX, FP8_MAX)
    quant = quant.reshape(padded.shape)[:rows, :cols].to(torch.float8_e4m3fn)
    return quant.contiguous(), scale


@dataclass(frozen=True)
class Fp8Weight:
    """An FP8 linear weight kept resident: the raw bytes (uint8) and float32 tile scales."""

    data: torch.Tensor  # uint8 view of float8_e4m3fn, [out, in]
    scale_inv: torch.Tensor  # float32, scale grid
    block: tuple[int, int] = BLOCK

    @classmethod
    def from_tensors(
        cls,
        weight_fp8: torch.Tensor,
        scale_inv: torch.Tensor,
        block: tuple[int, int] = BLOCK,
        device: torch.device | str = "cpu",
    ) -> Fp8Weight:
        """Place an FP8 weight and its scales on `device`; the bytes are stored as uint8
        because not every backend can hold float8 tensors."""
        rows, cols = int(weight_fp8.shape[0]), int(weight_fp8.shape[1])
        if tuple(scale_inv.shape) != scale_grid((rows, cols), block):
            raise ModelFormatError(
                f"FP8 scale grid {list(scale_inv.shape)} does not match weight {[rows, cols]} "
                f"with {list(block)} blocks"
            )
        data = weight_fp8.view(torch.uint8) if weight_fp8.dtype != torch.uint8 else weight_fp8
        return cls(data.to(device), scale_inv.to(device=device, dtype=torch.float32), block)

    @property
    def shape(self) -> torch.Size:
        return self.data.shape

    @property
    def device(self) -> torch.device:
        return self.data.device

    @property
    def nbytes(self) -> int:
        """Resident bytes: FP8 weight plus its scales."""
        return self.data.nbytes + self.scale_inv.nbytes

    def dequantize(self, dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
        return dequantize_block(self.data, self.scale_inv, self.block, dtype)

    def to(self, device: torch.device | str) -> Fp8Weight:
        return Fp8Weight(self.data.to(device), self.scale_inv.to(device), self.block)
