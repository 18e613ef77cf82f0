"""Float tensors decoded without numpy agree with numpy, value for value."""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from probes.model.float_values import floats
from probes.model.tensor_decode import decode

SPECIAL = [0.0, -0.0, 1.0, -2.5, 65504.0, 6.0e-8, 1e-40, 3.0e38, math.inf, -math.inf, math.nan]


def same(ours: list[float], theirs: np.ndarray) -> bool:
    with np.errstate(invalid="ignore"):  # NaN payloads widen as NaN, which is compared
        wide = theirs.astype(np.float64).ravel().tolist()
    return len(ours) == len(wide) and all(
        (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
        for a, b in zip(ours, wide, strict=True))


@pytest.mark.parametrize(("dtype", "numpy_dtype"), [("F32", "<f4"), ("F64", "<f8"),
                                                    ("F16", "<f2")])
def test_special_values(dtype: str, numpy_dtype: str) -> None:
    with np.errstate(over="ignore", invalid="ignore"):
        raw = np.array(SPECIAL, dtype=numpy_dtype).tobytes()
    assert same(floats(raw, dtype), decode(raw, dtype))


@given(st.binary(max_size=64).map(lambda b: b[: len(b) // 4 * 4]),
       st.sampled_from(["F32", "F16", "BF16"]))
def test_any_bytes_decode_as_numpy_does(raw: bytes, dtype: str) -> None:
    assert same(floats(raw, dtype), decode(raw, dtype))


def test_bf16_is_the_upper_half_of_a_float32() -> None:
    raw = struct.pack("<3H", 0x3F80, 0xC040, 0x7F80)  # 1.0, -3.0, +inf
    assert floats(raw, "BF16") == [1.0, -3.0, math.inf]


def test_a_ragged_length_or_another_dtype_is_refused() -> None:
    for dtype in ("F32", "F16", "BF16"):
        with pytest.raises(ValueError):
            floats(b"\x00\x01\x02", dtype)
    with pytest.raises(ValueError, match="not a float"):
        floats(b"\x00", "F8_E4M3")
