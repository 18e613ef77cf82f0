"""Property tests: damaged or random input gives a parse (maybe with warnings) or ParseError,
never another exception; re-spacing a table never changes what it says."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from probes.errors import ParseError
from probes.npu_smi import (
    detect_error,
    detect_kind,
    parse_info,
    parse_list,
    parse_mapping,
    parse_watch,
    split_noise,
)
from probes.npu_smi.registry import KINDS as REGISTRY
from tests.npu_smi_fixtures import npu_smi_sample

INFO_SAMPLES = ["001", "002", "003", "004", "014", "023", "025", "039", "048", "049", "051",
                "055", "059", "064", "065", "067"]
OTHER_SAMPLES = ["005", "006", "009", "015", "026", "031", "041", "042", "043", "057", "060"]
LIST_TEXT = (
    "\tTotal Count                    : 1\n\n"
    "\tNPU ID                         : 0\n"
    "\tProduct Name                   : Atlas 300I Duo\n"
    "\tChip Count                     : 2\n\n"
)


TEXTS = {number: npu_smi_sample(number) for number in INFO_SAMPLES + OTHER_SAMPLES}
TEXTS["list"] = LIST_TEXT
ALL_TEXTS = st.sampled_from(sorted(TEXTS.values()))
INFO_TEXTS = st.sampled_from([TEXTS[n] for n in INFO_SAMPLES])

PARSERS: list[Callable[[str], object]] = [parse_info, parse_mapping, parse_list, parse_watch]
# the registry's kind names, and detect_kind's answer for none of them
KINDS = {kind.name for kind in REGISTRY} | {"unknown"}


def check_all(text: str) -> None:
    """Every entry point answers: a result or ParseError, nothing else."""
    for parser in PARSERS:
        with contextlib.suppress(ParseError):
            parser(text)
    assert detect_kind(text) in KINDS
    detect_error(text)
    clean, noise = split_noise(text)
    assert len(clean.splitlines()) + len(noise) == len(text.splitlines())


def rewrap(text: str, tabs: bool, strip: bool, pad: int) -> str:
    lines = text.splitlines()
    if tabs:
        lines = [line.replace("        ", "\t") for line in lines]
    else:
        lines = [line.replace("\t", "        ") for line in lines]
    lines = [line.rstrip() if strip else line + " " * pad for line in lines]
    return "\n".join(lines) + "\n"


def widen(text: str, seed: int, extra: int) -> str:
    """Insert `extra` spaces after some of the spaces of the text (never inside a token)."""
    out: list[str] = []
    for index, char in enumerate(text):
        out.append(char)
        if char == " " and (index * 2654435761 + seed) % 7 == 0:
            out.append(" " * extra)
    return "".join(out)


@settings(deadline=None, max_examples=200)
@given(text=ALL_TEXTS, cut=st.floats(min_value=0.0, max_value=1.0))
def test_truncated_anywhere(text: str, cut: float) -> None:
    check_all(text[: int(len(text) * cut)])


@settings(deadline=None, max_examples=200)
@given(text=ALL_TEXTS, tabs=st.booleans(), strip=st.booleans(), pad=st.integers(0, 5))
def test_rewrapped(text: str, tabs: bool, strip: bool, pad: int) -> None:
    check_all(rewrap(text, tabs, strip, pad))


@settings(deadline=None, max_examples=200)
@given(text=INFO_TEXTS, seed=st.integers(0, 6), extra=st.integers(1, 8))
def test_widened_cells_say_the_same(text: str, seed: int, extra: int) -> None:
    original = parse_info(text)
    widened = parse_info(widen(text, seed, extra))
    assert widened.chips == original.chips
    assert widened.processes == original.processes
    assert widened.processes_known == original.processes_known
    assert (widened.npu_smi_version, widened.layout) == (original.npu_smi_version, original.layout)


@settings(deadline=None, max_examples=200)
@given(text=INFO_TEXTS, strip=st.booleans(), pad=st.integers(0, 5))
def test_trailing_spaces_say_the_same(text: str, strip: bool, pad: int) -> None:
    original = parse_info(text)
    rewrapped = parse_info(rewrap(text, tabs=False, strip=strip, pad=pad))
    assert rewrapped.chips == original.chips
    assert rewrapped.processes == original.processes


@settings(deadline=None, max_examples=200)
@given(text=st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=400))
def test_random_text(text: str) -> None:
    check_all(text)


TABLE_ALPHABET = st.sampled_from([
    *"|+-= \t\n/:.0123456789ANOKx",
    "NPU", "Name", "Health", "Bus-Id", "Chip", "Process id", "NpuID(Idx)", "NPU ID", "Chip ID",
    "Total Count", " : ",
])


@settings(deadline=None, max_examples=200)
@given(parts=st.lists(TABLE_ALPHABET, max_size=200))
def test_random_table_like_text(parts: list[str]) -> None:
    check_all("".join(parts))


@settings(deadline=None, max_examples=200)
@given(text=INFO_TEXTS, data=st.data())
def test_lines_dropped_or_duplicated(text: str, data: st.DataObject) -> None:
    lines = text.splitlines()
    index = data.draw(st.integers(0, max(len(lines) - 1, 0)))
    duplicate = data.draw(st.booleans())
    if duplicate:
        lines.insert(index, lines[index])
    else:
        del lines[index]
    check_all("\n".join(lines))
