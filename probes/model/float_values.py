"""The bytes of a float tensor (safetensors: little-endian) as Python floats, without numpy.

The doctor reads only small float tensors (FP8 scale grids: one value to a few thousand per
weight); importing numpy costs more than decoding them. Values widen exactly: F16 and BF16 are
subsets of float64, as F32 is.
"""

from __future__ import annotations

import struct
import sys
from array import array

FLOAT_DTYPES = ("F64", "F32", "F16", "BF16")


def floats(raw: bytes, dtype: str) -> list[float]:
    """The values of `raw`, flat. Raises ValueError for another dtype or a ragged length."""
    if dtype == "F32":
        return _native("f", raw)
    if dtype == "F64":
        return _native("d", raw)
    if dtype == "BF16":
        return _native("f", _widen_bf16(raw))
    if dtype == "F16":
        if len(raw) % 2:
            raise ValueError(f"{len(raw)} bytes is not a whole number of F16 values")
        return list(struct.unpack(f"<{len(raw) // 2}e", raw))
    raise ValueError(f"not a float safetensors dtype: {dtype}")


def _native(code: str, raw: bytes) -> list[float]:
    values: array[float] = array(code)
    values.frombytes(raw)  # ValueError when the length is not a multiple of the item size
    if sys.byteorder == "big":
        values.byteswap()
    return values.tolist()


def _widen_bf16(raw: bytes) -> bytes:
    """BF16 is the upper half of a float32: each 2-byte value gets two zero bytes below it."""
    if len(raw) % 2:
        raise ValueError(f"{len(raw)} bytes is not a whole number of BF16 values")
    wide = bytearray(2 * len(raw))
    wide[2::4] = raw[0::2]
    wide[3::4] = raw[1::2]
    return bytes(wide)
