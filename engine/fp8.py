"""Block-FP8 weights (float8_e4m3fn + one `weight_scale_inv` per 128x128 tile).

`W[r, c] = float(W_fp8[r, c]) * scale_inv[r // bo, c // bi]`, with a ceil-divided scale grid:
the last tile row / column may be partial (ragged). Scales come as BF16, FP16 or FP32; the
product is always computed in float32 and cast once.

Ascend A2/A3 have no FP8 compute, so the engine either dequantises once at load or keeps the
bytes resident as an `Fp8Weight` and dequantises per use.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field

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
# e4m3fn has no infinities; its only NaNs are S.1111.111 (0x7F, 0xFF).
_NAN_MAGNITUDE = 0x7F
# Bits kept after moving an e4m3 byte (sign-extended to int16, shifted left by 7) into the
# float16 layout: the sign (bit 15) and the 7 magnitude bits eeee.mmm (bits 13..7). Bit 14 is
# the sign extension and must go. 0xBF80 as a signed int16.
_HALF_MASK = 0xBF80 - 0x10000
# e4m3 and float16 share the mantissa layout; float16's exponent bias is 15 against e4m3's 7,
# so the reinterpreted value is the true one times 2**-8 -- subnormals included, because
# float16 subnormals use the same 2**-14 step that e4m3's 2**-6 becomes.
HALF_REBIAS = 256.0
# The bfloat16 variant: the magnitude bits go to bits 10..4 (bfloat16's exponent low bits and top
# mantissa bits); with bias 127 against 7 the value is the true one times 2**-120, and e4m3
# subnormals become bfloat16 subnormals. 0x87F0 as a signed int16.
_BF16_MASK = 0x87F0 - 0x10000
_BF16_REBIAS = 2.0**120
# Scales for which scale * 2**120 is an exact, finite bfloat16 and products stay normal.
_BF16_SCALE_RANGE = (2.0**-100, 2.0**7)
_BF16_SCALE_RANGE_BITS = tuple(struct.unpack("<I", struct.pack("<f", bound))[0]
                               for bound in _BF16_SCALE_RANGE)
_DENORMAL_PROBE = (torch.tensor([2.0**-130], dtype=torch.bfloat16),
                   torch.tensor([2.0**10], dtype=torch.bfloat16))


def _denormals_kept() -> bool:
    """False when the CPU flushes denormal inputs (torch.set_flush_denormal(True)): the bfloat16
    path reads e4m3 subnormals as bfloat16 subnormals, so it must not run then. ~2 us."""
    a, b = _DENORMAL_PROBE
    return bool((a * b).item() != 0)


def has_nan_codes(weight: torch.Tensor) -> bool:
    """Whether an e4m3 weight (or its uint8 bytes) holds NaN codes (quantisers never write them).

    The codes are 0xFF, the largest byte, and 0x7F, the largest int8: two max reductions,
    which read the bytes once each and allocate nothing (a mask-and-compare scan costs 18x
    more on the CPU and dominated loading)."""
    raw = weight.view(torch.uint8) if weight.dtype != torch.uint8 else weight
    if raw.numel() == 0:
        return False
    return bool(raw.max() == 0xFF) or bool(raw.view(torch.int8).max() == _NAN_MAGNITUDE)


def bf16_exact_scales(scale: torch.Tensor) -> bool:
    """Whether every scale is a bfloat16 value in the range the all-bfloat16 path handles
    (true for the BF16 scales Qwen ships; FP32 / FP16 scales usually are not)."""
    # Read as float32 bit patterns, in Python: a grid holds a few to a few thousand scales,
    # and the dozen torch ops this took cost more than the scan (a quarter of a load). A
    # float32 is a bfloat16 value when its low 16 bits are 0; positive floats order as their
    # bit patterns do; 0x7F800000 and above is inf or NaN.
    low, high = _BF16_SCALE_RANGE_BITS
    for bits in scale.to(torch.float32).reshape(-1).view(torch.int32).tolist():
        magnitude = bits & 0x7FFFFFFF
        if bits & 0xFFFF or magnitude >= 0x7F800000 or (
                magnitude and not low <= magnitude < high):
            return False
    return True


def checked_bytes(weight_fp8: torch.Tensor, scale_inv: torch.Tensor,
                   block: tuple[int, int]) -> torch.Tensor:
    """The FP8 weight as uint8 bytes, after checking it is 2-D and its scale grid fits."""
    if weight_fp8.dim() != 2:
        raise ModelFormatError(f"FP8 weight must be 2-D, got shape {list(weight_fp8.shape)}")
    rows, cols = int(weight_fp8.shape[0]), int(weight_fp8.shape[1])
    if tuple(scale_inv.shape) != scale_grid((rows, cols), block):
        raise ModelFormatError(
            f"FP8 scale grid {list(scale_inv.shape)} does not match weight {[rows, cols]} "
            f"with {list(block)} blocks (expected {list(scale_grid((rows, cols), block))})"
        )
    return weight_fp8.view(torch.uint8) if weight_fp8.dtype != torch.uint8 else weight_fp8


def dequantize_block(
    weight_fp8: torch.Tensor,
    scale_inv: torch.Tensor,
    block: tuple[int, int] = BLOCK,
    dtype: torch.dtype = torch.bfloat16,
) -> torch.Tensor:
    """Dequantise a [out, in] block-FP8 weight with its [ceil(out/bo), ceil(in/bi)] scales.

    Bit-exact with `(float32(W_fp8) * float32(scale)).to(dtype)` tile by tile.
    """
    raw = checked_bytes(weight_fp8, scale_inv, block)
    scale = scale_inv.to(device=raw.device, dtype=torch.float32)
    return _dequantize(raw, scale, block, dtype, nan_free=not has_nan_codes(raw),
                       bf16_scales=dtype == torch.bfloat16 and bf16_exact_scales(scale))


def _dequantize(raw: torch.Tensor, scale: torch.Tensor, block: tuple[int, int],
                dtype: torch.dtype, nan_free: bool, bf16_scales: bool) -> torch.Tensor:
    """raw: uint8 [rows, cols]; scale: float32 grid on raw's device (shapes already checked).

    Fastest first (CPU, cold weights, smollm2-moe-fp8 shapes, one decode step's worth):
    all-bfloat16 shifts + multiply ~60 ms, float16 shifts + float32 multiply ~120 ms, per-tile
    lookup tables ~270 ms, the float8 conversion + repeat_interleave it replaced ~360 ms. On the
    CPU a multiply of mixed dtypes copies its inputs to float32 first, which is why the
    single-dtype path wins.
    """
    if nan_free:
        try:
            if (bf16_scales and dtype == torch.bfloat16
                    and (raw.device.type != "cpu" or _denormals_kept())):
                return _dequantize_bf16(raw, scale, block)
            return _dequantize_shifted(raw, scale, block, dtype)
        except (RuntimeError, TypeError):
            if raw.device.type == "cpu":
                raise
            # A backend without int16 shifts or float16 views still has index_select.
    return _dequantize_table(raw, scale, block, dtype)


def _dequantize_shifted(raw: torch.Tensor, scale: torch.Tensor, block: tuple[int, int],
                        dtype: torch.dtype) -> torch.Tensor:
    """Integer shifts turn the bytes into float16 values scaled by 2**-8 (no table gather, no
    float8 conversion kernel), then one multiply per rectangle of equal tiles broadcasts the
    tile scales (times 2**8) and casts; any scale dtype, any output dtype.

    Bit-exact: the float16 value and the rebiased scale are both exact, so their float32 product
    is the same real number as float32(W_fp8) * scale, rounded once to float32 and once to dtype,
    just as the reference is. Needs NaN-free bytes (0x7F would read as a finite 480).
    """
    half = raw.view(torch.int8).to(torch.int16)  # sign-extends
    half <<= 7
    half &= _HALF_MASK
    return _multiply_tiles(half.view(torch.float16), scale * HALF_REBIAS, block, dtype)


def _dequantize_bf16(raw: torch.Tensor, scale: torch.Tensor,
                     block: tuple[int, int]) -> torch.Tensor:
    """bfloat16 out with bfloat16-exact scales: like `_dequantize_shifted`, but the bits land in
    the bfloat16 layout so the multiply has one dtype throughout (no float32 copies).

    Bit-exact: value (<= 4 significant bits) times scale (<= 8) has at most 12 significant bits,
    so the float32 product inside the bfloat16 multiply is exact and is rounded once, as the
    reference's exact float32 product is. Needs NaN-free bytes and denormals kept.
    """
    half = raw.view(torch.int8).to(torch.int16)
    half <<= 4
    half &= _BF16_MASK
    rebiased = (scale * _BF16_REBIAS).to(torch.bfloat16)
    return _multiply_tiles(half.view(torch.bfloat16), rebiased, block, torch.bfloat16)


def _multiply_tiles(values: torch.Tensor, scale: torch.Tensor, block: tuple[int, int],
                    dtype: torch.dtype) -> torch.Tensor:
    """values [rows, cols] times each tile's scale, as a [rows, cols] tensor of dtype (in
    place when the values already have that dtype: callers hand over a fresh buffer).

    The tile scales are first spread along a row of tiles (a [tile rows, cols] table, small),
    then broadcast over the rows of each tile: the multiply's inner loop runs along whole rows
    (25% faster on the CPU than a broadcast per 128-column tile). A ragged last tile row is
    one more multiply; nothing is padded.
    """
    rows, cols = int(values.shape[0]), int(values.shape[1])
    # Same dtype: the values' own buffer (fresh from the shifts) becomes the result.
    out = values if values.dtype == dtype else torch.empty((rows, cols), dtype=dtype,
                                                          device=values.device)
    spread = scale.repeat_interleave(block[1], dim=1)[:, :cols]
    whole = rows // block[0]
    if whole:
        tiles = (whole, block[0], cols)
        torch.mul(values[:whole * block[0]].view(tiles), spread[:whole, None, :],
                  out=out[:whole * block[0]].view(tiles))
    if rows % block[0]:
        torch.mul(values[whole * block[0]:], spread[whole], out=out[whole * block[0]:])
    return out


def _dequantize_table(raw: torch.Tensor, scale: torch.Tensor, block: tuple[int, int],
                      dtype: torch.dtype) -> torch.Tensor:
    """Lookup path for any bytes (NaN codes included): one 256-entry table per tile, already
    multiplied by the tile's scale in float32 and cast to dtype (so bit-exact by construction),
    then a single int32 gather; the index is byte + 256 * tile number."""
    rows, cols = int(raw.shape[0]), int(raw.shape[1])
    grid_cols = int(scale.shape[1])
    tables = (_E4M3_TABLE.to(raw.device)[None, :] * scale.reshape(-1, 1)).to(dtype).reshape(-1)
    col_tile = torch.arange(cols, dtype=torch.int32, device=raw.device) // block[1]
    row_tile = torch.arange(rows, dtype=torch.int32, device=raw.device) // block[0]
    index = torch.add(raw, col_tile * 256)  # uint8 + int32 -> int32
    index += (row_tile * (256 * grid_cols))[:, None]
    return torch.index_select(tables, 0, index.reshape(-1)).view(rows, cols)


def round_up(values: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """float32 -> `dtype`, each value rounded to the next representable one at or above it."""
    rounded = values.to(dtype)
    low = rounded.float() < values
    if bool(low.any()):
        rounded[low] = torch.nextafter(rounded[low], torch.full_like(rounded[low], math.inf))
    return rounded


def quantize_block(
    weight: torch.Tensor, block: tuple[int, int] = BLOCK,
    scale_dtype: torch.dtype = torch.float32,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantise [out, in] to (float8_e4m3fn, scale_inv in `scale_dtype`), scale = amax / 448
    per tile (1 for an all-zero tile).

    The writer side of the format (tests and the demo builder). The scale is rounded *up* to
    `scale_dtype` before dividing, so dequantising with the stored scale never needs a code
    past 448.
    """
    rows, cols = int(weight.shape[0]), int(weight.shape[1])
    grid = scale_grid((rows, cols), block)
    padded = torch.zeros(grid[0] * block[0], grid[1] * block[1], dtype=torch.float32)
    padded[:rows, :cols] = weight.float()
    tiles = padded.view(grid[0], block[0], grid[1], block[1])
    amax = tiles.abs().amax(dim=(1, 3))
    stored = round_up(torch.where(amax > 0, amax / FP8_MAX, torch.ones_like(amax)), scale_dtype)
    quant = (tiles / stored.float()[:, None, :, None]).clamp(-FP8_MAX, FP8_MAX)
    quant = quant.reshape(padded.shape)[:rows, :cols].to(torch.float8_e4m3fn)
    return quant.contiguous(), stored


@dataclass(frozen=True)
class Fp8Weight:
    """An FP8 linear weight kept resident: the raw bytes (uint8) and float32 tile scales."""

    data: torch.Tensor  # uint8 view of float8_e4m3fn, [out, in]
    scale_inv: torch.Tensor  # float32, scale grid
    block: tuple[int, int] = BLOCK
    # Scanned once at placement so the per-use path need not look for NaN codes every step;
    # None (built directly) means "scan on each use".
    nan_free: bool | None = field(default=None, compare=False)
    bf16_scales: bool = field(default=False, compare=False)

    @classmethod
    def from_tensors(
        cls,
        weight_fp8: torch.Tensor,
        scale_inv: torch.Tensor,
        block: tuple[int, int] = BLOCK,
        device: torch.device | str = "cpu",
        nan_free: bool | None = None,
    ) -> Fp8Weight:
        """Place an FP8 weight and its scales on `device`; the bytes are stored as uint8
        because not every backend can hold float8 tensors. `nan_free`: already known (the
        CPU loader's copy counts NaN codes as it goes), else scanned here."""
        data = checked_bytes(weight_fp8, scale_inv, block).to(device)
        return cls(data, scale_inv.to(device=device, dtype=torch.float32), block,
                   nan_free=not has_nan_codes(data) if nan_free is None else nan_free,
                   bf16_scales=bf16_exact_scales(scale_inv))

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
        if self.nan_free is None:
            return dequantize_block(self.data, self.scale_inv, self.block, dtype)
        # Shapes were checked in from_tensors; skip the re-validation on this per-step path.
        return _dequantize(self.data, self.scale_inv, self.block, dtype, self.nan_free,
                           self.bf16_scales)

    def rows(self, start: int, end: int) -> Fp8Weight:
        """Output rows start..end-1 as a view; `start` must begin a tile row."""
        if start % self.block[0]:
            raise ValueError(f"row {start} does not begin a {self.block[0]}-row tile")
        grid = slice(start // self.block[0], -(-end // self.block[0]))
        return Fp8Weight(self.data[start:end], self.scale_inv[grid], self.block,
                         nan_free=self.nan_free, bf16_scales=self.bf16_scales)

    def to(self, device: torch.device | str) -> Fp8Weight:
        return Fp8Weight(self.data.to(device), self.scale_inv.to(device), self.block,
                         nan_free=self.nan_free, bf16_scales=self.bf16_scales)
