"""engine.fp8: block dequantisation on ragged shapes against a direct per-tile reference."""

from __future__ import annotations

import math

import pytest
import torch

from engine.errors import ModelFormatError
from engine.fp8 import (
    _E4M3_TABLE,
    Fp8Weight,
    dequantize_block,
    fp8_to_float32,
    quantize_block,
    scale_grid,
)

SCALE_DTYPES = [torch.bfloat16, torch.float16, torch.float32]
# Ragged shapes: SmolLM2's 576/192/1536, odd sizes, a single row, one block exactly.
SHAPES = [(192, 576), (576, 1536), (100, 300), (1, 129), (257, 64), (128, 128)]


def random_fp8(rows: int, cols: int, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(rows, cols, generator=gen) * 100).clamp(-448, 448).to(torch.float8_e4m3fn)


def random_scales(rows: int, cols: int, block: tuple[int, int], dtype: torch.dtype,
                  seed: int = 1) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    grid = scale_grid((rows, cols), block)
    return (torch.rand(grid, generator=gen) * 1e-3 + 1e-4).to(dtype)


def reference(weight: torch.Tensor, scale: torch.Tensor, block: tuple[int, int]) -> torch.Tensor:
    """Tile by tile in plain Python: the definition, W[r, c] * scale[r // bo, c // bi]."""
    rows, cols = weight.shape
    out = torch.empty(rows, cols, dtype=torch.float32)
    for bi in range(math.ceil(rows / block[0])):
        for bj in range(math.ceil(cols / block[1])):
            r0, c0 = bi * block[0], bj * block[1]
            tile = weight[r0 : r0 + block[0], c0 : c0 + block[1]].to(torch.float32)
            out[r0 : r0 + block[0], c0 : c0 + block[1]] = tile * scale[bi, bj].to(torch.float32)
    return out


@pytest.mark.parametrize("scale_dtype", SCALE_DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_dequantize_matches_reference_on_ragged_shapes(shape: tuple[int, int],
                                                       scale_dtype: torch.dtype) -> None:
    weight = random_fp8(*shape)
    scale = random_scales(*shape, (128, 128), scale_dtype)
    want = reference(weight, scale, (128, 128))
    got = dequantize_block(weight, scale, (128, 128), torch.float32)
    assert torch.equal(got, want)
    assert torch.equal(dequantize_block(weight, scale), want.to(torch.bfloat16))


def test_other_block_sizes_and_uint8_input() -> None:
    weight = random_fp8(200, 90)
    scale = random_scales(200, 90, (64, 32), torch.float32)
    want = reference(weight, scale, (64, 32))
    assert torch.equal(dequantize_block(weight.view(torch.uint8), scale, (64, 32), torch.float32),
                       want)


def test_scale_grid_mismatch_is_a_format_error() -> None:
    weight = random_fp8(192, 576)
    with pytest.raises(ModelFormatError, match="scale grid"):
        dequantize_block(weight, torch.ones(1, 4), (128, 128))  # 192 rows need 2 tile rows


def test_lookup_table_equals_native_conversion() -> None:
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    native = codes.view(torch.float8_e4m3fn).to(torch.float32)
    assert torch.equal(_E4M3_TABLE.isnan(), native.isnan())
    assert torch.equal(_E4M3_TABLE.nan_to_num(), native.nan_to_num())
    assert torch.equal(fp8_to_float32(codes).nan_to_num(), native.nan_to_num())


@pytest.mark.parametrize("shape", [(192, 576), (130, 70)])
def test_quantize_then_dequantize_is_within_fp8_rounding(shape: tuple[int, int]) -> None:
    weight = torch.randn(*shape, generator=torch.Generator().manual_seed(3))
    quant, scale = quantize_block(weight)
    assert quant.dtype == torch.float8_e4m3fn and tuple(scale.shape) == scale_grid(shape)
    back = dequantize_block(quant, scale, dtype=torch.float32)
    # e4m3 keeps 3 mantissa bits: relative error <= 2**-4, plus subnormal steps near zero.
    tile_scale = scale.repeat_interleave(128, 0)[: shape[0]]
    tile_scale = tile_scale.repeat_interleave(128, 1)[:, : shape[1]]
    assert bool(((back - weight).abs() <= weight.abs() / 16 + tile_scale * 2**-9).all())


@pytest.mark.parametrize("scale_dtype", SCALE_DTYPES)
def test_fp8_weight_round_trip(scale_dtype: torch.dtype) -> None:
    weight = random_fp8(192, 576)
    scale = random_scales(192, 576, (128, 128), scale_dtype)
    resident = Fp8Weight.from_tensors(weight, scale)
    assert resident.shape == torch.Size([192, 576]) and resident.data.dtype == torch.uint8
    assert resident.nbytes == 192 * 576 + 2 * 5 * 4  # bytes + float32 scales
    assert resident.device == torch.device("cpu")
    assert torch.equal(resident.dequantize(torch.float32), reference(weight, scale, (128, 128)))
    assert torch.equal(resident.to("cpu").dequantize(), dequantize_block(weight, scale))


def test_fp8_weight_refuses_wrong_grid() -> None:
    with pytest.raises(ModelFormatError):
        Fp8Weight.from_tensors(random_fp8(192, 576), torch.ones(2, 4))
