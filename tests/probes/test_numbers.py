"""Numbers from outside: every hostile spelling the issue reproduced is a one-line note."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from probes.numbers import Field, NumberError, parse_float, parse_int
from probes.target.serving import vllm_args

COUNT = Field("-tp", 1, 4096)
FRACTION = Field("--gpu-memory-utilization", 0, 1, low_open=True)


@pytest.mark.parametrize("text", ["²", "1²", "٣", "1_000", " 8", "+8", "-1", "", "8.0",
                                  "9" * 5000, "0x10"])
def test_what_int_would_read_is_refused(text: str) -> None:
    with pytest.raises(NumberError) as caught:
        parse_int(text, COUNT)
    message = str(caught.value)
    assert message.startswith("-tp: ") and "\n" not in message and len(message) < 200


def test_range_per_field() -> None:
    assert parse_int("8", COUNT) == 8
    with pytest.raises(NumberError, match="out of range"):
        parse_int("0", COUNT)
    with pytest.raises(NumberError, match="out of range"):
        parse_int("4097", COUNT)


@pytest.mark.parametrize("text", ["nan", "NaN", "inf", "-0.5", "1e300", "0", "1.5", "1e400",
                                  "0.9.9", "٠.٩", "0x1p-1"])
def test_fractions_refuse_nan_inf_and_out_of_range(text: str) -> None:
    with pytest.raises(NumberError, match="--gpu-memory-utilization"):
        parse_float(text, FRACTION)


def test_fractions_read() -> None:
    assert parse_float("0.9", FRACTION) == 0.9
    assert parse_float(".5", FRACTION) == 0.5
    assert parse_float("9e-1", FRACTION) == 0.9
    assert parse_float("1", FRACTION) == 1.0


@given(st.text(max_size=60))
def test_any_text_is_a_number_in_range_or_a_number_error(text: str) -> None:
    try:
        value = parse_int(text, COUNT)
    except NumberError as exc:
        assert "\n" not in str(exc)
    else:
        assert 1 <= value <= 4096 and text.isascii()
    try:
        fraction = parse_float(text, FRACTION)
    except NumberError:
        pass
    else:
        assert math.isfinite(fraction) and 0 < fraction <= 1


@pytest.mark.parametrize(("argv", "said"), [
    (["--max-model-len", "²"], "--max-model-len ²"),
    (["-tp", "9" * 5000], "-tp 99999"),
    (["--max-model-len", "9" * 400 + "k"], "--max-model-len 99999"),
    (["-tp", "1e18", "-pp", "1e300"], "-tp 1e18"),
    (["-tp", "0"], "out of range"),
    (["--gpu-memory-utilization", "nan"], "--gpu-memory-utilization nan"),
    (["--gpu-memory-utilization", "0"], "out of range"),
    (["--max-model-len", "2000000000"], "out of range"),
])
def test_hostile_command_lines_are_notes_not_tracebacks(argv: list[str], said: str) -> None:
    args = vllm_args(["vllm", "serve", "/m", *argv])
    assert args.tensor_parallel_size is None and args.pipeline_parallel_size is None
    assert args.max_model_len is None and args.gpu_memory_utilization is None
    notes = [n for n in args.notes if "not read" in n]
    assert notes and any(said in n for n in notes)
    assert all("\n" not in n and len(n) < 300 for n in notes)
