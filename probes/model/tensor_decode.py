"""Decoding raw safetensors bytes into numpy arrays (small floats widen to float32).

Separate from probes.model.reader so that reading headers never imports numpy.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

_NUMPY_DTYPES: Mapping[str, str] = {
    "F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2",
    "I8": "i1", "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1", "BOOL": "?",
}


def _e4m3fn_table() -> np.ndarray:
    """float32 value of every float8_e4m3fn byte: bias 7, no infinities, S.1111.111 is NaN."""
    table = np.empty(256, dtype=np.float32)
    for byte in range(256):
        sign = -1.0 if byte & 0x80 else 1.0
        exponent, mantissa = (byte >> 3) & 0x0F, byte & 0x07
        if exponent == 0x0F and mantissa == 0x07:
            table[byte] = np.nan
        elif exponent == 0:  # subnormal: 0.mmm * 2^(1-7)
            table[byte] = sign * (mantissa / 8.0) * 2.0**-6
        else:
            table[byte] = sign * (1.0 + mantissa / 8.0) * 2.0 ** (exponent - 7)
    return table


def _e5m2_table() -> np.ndarray:
    """float32 value of every float8_e5m2 byte: bias 15, IEEE-like infinities and NaNs."""
    table = np.empty(256, dtype=np.float32)
    for byte in range(256):
        sign = -1.0 if byte & 0x80 else 1.0
        exponent, mantissa = (byte >> 2) & 0x1F, byte & 0x03
        if exponent == 0x1F:
            table[byte] = sign * np.inf if mantissa == 0 else np.nan
        elif exponent == 0:
            table[byte] = sign * (mantissa / 4.0) * 2.0**-14
        else:
            table[byte] = sign * (1.0 + mantissa / 4.0) * 2.0 ** (exponent - 15)
    return table


E4M3_TABLE = _e4m3fn_table()
E5M2_TABLE = _e5m2_table()


def decode_bf16(raw: bytes) -> np.ndarray:
    """BF16 is the top half of a float32: widen each uint16 and shift it up."""
    halves = np.frombuffer(raw, dtype="<u2").astype(np.uint32)
    return (halves << 16).view(np.float32)


def decode(raw: bytes, dtype: str) -> np.ndarray:
    """A flat array of the values in `raw`; small floats widen to float32."""
    if dtype == "BF16":
        return decode_bf16(raw)
    if dtype == "F8_E4M3":
        return E4M3_TABLE[np.frombuffer(raw, dtype=np.uint8)]
    if dtype == "F8_E5M2":
        return E5M2_TABLE[np.frombuffer(raw, dtype=np.uint8)]
    if dtype in _NUMPY_DTYPES:
        return np.frombuffer(raw, dtype=_NUMPY_DTYPES[dtype])
    raise ValueError(f"cannot decode safetensors dtype {dtype}")
