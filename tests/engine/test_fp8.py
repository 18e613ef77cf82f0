"""engine.fp8: block dequantisation on ragged shapes against a direct per-tile reference."""

from __future__ import annotations

import math

import pytest
import torch

from engine import fp8
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


# --- the fast per-use paths (engine.fp8._dequantize picks one) ------------------------------

ALL_CODES = torch.arange(256, dtype=torch.int32).to(torch.uint8)
NAN_CODES = (0x7F, 0xFF)


def every_finite_code(rows: int, cols: int, seed: int = 4) -> torch.Tensor:
    """uint8 [rows, cols] cycling through all 254 non-NaN e4m3 codes (subnormals, zeros, +-448)
    in a shuffled order, so every code meets every tile."""
    finite = torch.tensor([c for c in range(256) if c not in NAN_CODES], dtype=torch.uint8)
    gen = torch.Generator().manual_seed(seed)
    picks = torch.randint(0, finite.numel(), (rows * cols,), generator=gen)
    head = min(finite.numel(), rows * cols)
    picks[:head] = torch.arange(head)
    return finite[picks].view(rows, cols)


def nan_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    return bool(torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(), b.nan_to_num()))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("scale_dtype", SCALE_DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_every_code_is_bit_exact_on_every_path(shape: tuple[int, int], scale_dtype: torch.dtype,
                                               dtype: torch.dtype) -> None:
    raw = every_finite_code(*shape)
    scale = random_scales(*shape, (128, 128), scale_dtype)
    want = reference(raw.view(torch.float8_e4m3fn), scale, (128, 128)).to(dtype)
    scale32 = scale.float()
    assert torch.equal(dequantize_block(raw, scale, dtype=dtype), want)
    assert torch.equal(fp8._dequantize_shifted(raw, scale32, (128, 128), dtype), want)
    assert torch.equal(fp8._dequantize_table(raw, scale32, (128, 128), dtype), want)
    if fp8.bf16_exact_scales(scale32):
        assert torch.equal(fp8._dequantize_bf16(raw, scale32, (128, 128)),
                           want.to(torch.bfloat16) if dtype == torch.bfloat16 else
                           reference(raw.view(torch.float8_e4m3fn), scale,
                                     (128, 128)).to(torch.bfloat16))
    resident = Fp8Weight.from_tensors(raw, scale)
    assert torch.equal(resident.dequantize(dtype), want)


def test_bf16_scales_take_the_all_bfloat16_path(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    for name in ("_dequantize_bf16", "_dequantize_shifted", "_dequantize_table"):
        original = getattr(fp8, name)

        def spy(*args: object, _name: str = name, _original: object = original) -> torch.Tensor:
            calls.append(_name)
            return _original(*args)  # type: ignore[operator]

        monkeypatch.setattr(fp8, name, spy)
    raw = every_finite_code(192, 576)
    bf16 = Fp8Weight.from_tensors(raw, random_scales(192, 576, (128, 128), torch.bfloat16))
    fp32 = Fp8Weight.from_tensors(raw, random_scales(192, 576, (128, 128), torch.float32))
    assert bf16.bf16_scales and not fp32.bf16_scales and bf16.nan_free
    bf16.dequantize(torch.bfloat16)
    bf16.dequantize(torch.float32)
    fp32.dequantize(torch.bfloat16)
    assert calls == ["_dequantize_bf16", "_dequantize_shifted", "_dequantize_shifted"]


def test_scales_outside_the_bfloat16_range_stay_exact() -> None:
    raw = every_finite_code(130, 260)
    for value in (300.0, 2.0**-110, 0.0):
        scale = torch.full(scale_grid((130, 260)), value, dtype=torch.bfloat16)
        scale[0, 0] = 1e-3
        assert not fp8.bf16_exact_scales(scale.float()) or value == 0.0
        want = reference(raw.view(torch.float8_e4m3fn), scale, (128, 128))
        assert torch.equal(dequantize_block(raw, scale, dtype=torch.float32), want)
        assert torch.equal(dequantize_block(raw, scale), want.to(torch.bfloat16))


def _exact_in_range(scale: torch.Tensor) -> bool:
    """The definition bf16_exact_scales implements on bit patterns, in torch ops."""
    s32 = scale.to(torch.float32)
    nonzero = s32.abs()[s32 != 0]
    low, high = fp8._BF16_SCALE_RANGE
    return bool(torch.isfinite(s32).all()) and torch.equal(s32.bfloat16().float(), s32) \
        and (nonzero.numel() == 0 or (float(nonzero.min()) >= low and float(nonzero.max()) < high))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_bf16_exact_scales_is_its_definition(dtype: torch.dtype) -> None:
    edges = [[0.0], [-0.0, 3.0], [1.0, -2.0], [2.0**7], [2.0**7 - 1], [-(2.0**7)],
             [2.0**-100], [2.0**-101], [1.5 * 2.0**-100], [1.0000001], [1e-30],
             [float("inf")], [float("nan")], [3.0, float("-inf")]]
    generator = torch.Generator().manual_seed(0)
    grids = [torch.tensor(edge) for edge in edges]
    for exponent in range(-120, 12, 4):
        grid = torch.randn(3, 5, generator=generator) * 2.0**exponent
        grids += [grid, grid.bfloat16().float()]
    for grid in grids:
        scale = grid.to(dtype)
        assert fp8.bf16_exact_scales(scale) == _exact_in_range(scale), (scale, dtype)
    assert fp8.bf16_exact_scales(torch.tensor([1.0, 2.0**-100]))
    assert not fp8.bf16_exact_scales(torch.tensor([1.0000001]))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_nan_codes_fall_back_to_the_lookup_table(dtype: torch.dtype) -> None:
    raw = every_finite_code(192, 576)
    raw[0, :4] = torch.tensor([0x7F, 0xFF, 0x00, 0x80], dtype=torch.uint8)
    raw[150, 575] = 0x7F
    scale = random_scales(192, 576, (128, 128), torch.bfloat16)
    want = reference(raw.view(torch.float8_e4m3fn), scale, (128, 128)).to(dtype)
    resident = Fp8Weight.from_tensors(raw, scale)
    assert resident.nan_free is False and fp8.has_nan_codes(raw)
    assert nan_equal(resident.dequantize(dtype), want)
    assert nan_equal(dequantize_block(raw, scale, dtype=dtype), want)
    assert int(resident.dequantize(dtype).isnan().sum()) == 3


def test_flushed_denormals_avoid_the_bfloat16_path() -> None:
    """e4m3 subnormals are bfloat16 subnormals on the all-bfloat16 path; with denormal inputs
    flushed the result must still equal the reference."""
    raw = every_finite_code(128, 256)
    scale = random_scales(128, 256, (128, 128), torch.bfloat16)
    want = reference(raw.view(torch.float8_e4m3fn), scale, (128, 128)).to(torch.bfloat16)
    resident = Fp8Weight.from_tensors(raw, scale)
    if not torch.set_flush_denormal(True):
        pytest.skip("this CPU cannot flush denormals")
    try:
        assert not fp8._denormals_kept()
        got = resident.dequantize(torch.bfloat16)
    finally:
        torch.set_flush_denormal(False)
    assert fp8._denormals_kept()
    assert torch.equal(got, want)


def test_directly_built_weight_scans_on_use() -> None:
    raw = every_finite_code(100, 300)
    scale = random_scales(100, 300, (128, 128), torch.float16)
    direct = Fp8Weight(raw, scale.float())
    assert direct.nan_free is None
    want = reference(raw.view(torch.float8_e4m3fn), scale, (128, 128))
    assert torch.equal(direct.dequantize(torch.float32), want)
    moved = Fp8Weight.from_tensors(raw, scale).to("cpu")
    assert moved.nan_free is True and torch.equal(moved.dequantize(torch.float32), want)
