"""Property tests: damaged copies of the corpus parse (maybe with warnings) or raise ParseError.

Copies of npu-smi output lose TABs, blank lines and tails, and gain trailing spaces; none of
that may crash a parser or make it hang.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from probes.errors import ParseError
from probes.npu_smi import KV_KINDS, parse_kv, parse_proc_mem, parse_topo, to_json
from tests.npu_smi_fixtures import npu_smi_sample

KV_SAMPLES = ("010", "011", "012", "013", "027", "028", "029", "032", "037", "038", "061", "062")
ALL_SAMPLES = (*KV_SAMPLES, "047")
KINDS = (None, *KV_KINDS)  # every `-t` type parse_kv knows, and none (it guesses)


TEXTS = {number: npu_smi_sample(number) for number in ALL_SAMPLES}
PARSERS: tuple[Callable[[str], Any], ...] = (parse_kv, parse_proc_mem, parse_topo)


def parses_or_refuses(parser: Callable[[str], Any], text: str) -> None:
    """The only allowed outcomes: a result that serialises to JSON, or ParseError."""
    try:
        result = parser(text)
    except ParseError:
        return
    json.dumps(to_json(result))


def reindent(text: str, indent: str) -> str:
    return "\n".join(indent + line.lstrip("\t ") for line in text.splitlines())


@settings(deadline=None, max_examples=200)
@given(number=st.sampled_from(ALL_SAMPLES), data=st.data())
def test_truncated_copies(number: str, data: st.DataObject) -> None:
    text = TEXTS[number]
    cut = data.draw(st.integers(min_value=0, max_value=len(text)))
    for parser in PARSERS:
        parses_or_refuses(parser, text[:cut])


@settings(deadline=None, max_examples=200)
@given(
    number=st.sampled_from(KV_SAMPLES),
    indent=st.sampled_from(["\t", " " * 8, "", "  "]),
    trailing=st.sampled_from(["", " ", "   ", "\t"]),
    keep_blank_lines=st.booleans(),
    newline=st.sampled_from(["\n", "\r\n"]),
)
def test_reindented_copies_keep_their_values(
    number: str, indent: str, trailing: str, keep_blank_lines: bool, newline: str
) -> None:
    original = parse_kv(TEXTS[number])
    lines = reindent(TEXTS[number], indent).splitlines()
    if not keep_blank_lines:
        lines = [line for line in lines if line.strip()]
    copy = newline.join(line + trailing for line in lines)
    out = parse_kv(copy)
    assert out.kind == original.kind
    assert out.npu_id == original.npu_id
    assert [(b.chip_id, b.name) for b in out.blocks] == [
        (b.chip_id, b.name) for b in original.blocks
    ]
    assert [dict(b.fields) for b in out.blocks] == [dict(b.fields) for b in original.blocks]
    assert out.warnings == ()


@settings(deadline=None, max_examples=200)
@given(indent=st.sampled_from(["\t", " " * 8, "", "\t   "]), trailing=st.sampled_from(["", "  "]))
def test_reindented_topo_keeps_its_matrix(indent: str, trailing: str) -> None:
    original = parse_topo(TEXTS["047"])
    copy = "\n".join(line + trailing for line in reindent(TEXTS["047"], indent).splitlines())
    topo = parse_topo(copy)
    assert topo.devices == original.devices
    assert dict(topo.links) == dict(original.links)
    assert dict(topo.cpu_affinity) == dict(original.cpu_affinity)
    assert dict(topo.legend) == dict(original.legend)


@settings(deadline=None, max_examples=200)
@given(text=st.text(max_size=400), kind=st.sampled_from(KINDS))
def test_random_text(text: str, kind: str | None) -> None:
    parses_or_refuses(lambda t: parse_kv(t, kind), text)
    parses_or_refuses(parse_proc_mem, text)
    parses_or_refuses(parse_topo, text)


LINE_PIECES = st.sampled_from(
    [
        "Chip ID : 0",
        "Chip ID : x",
        "NPU ID : 1",
        "NPU ID : 2",
        "Chip Count : 2",
        "Chip Name : mcu",
        "HBM Usage Rate(%) : 5",
        "Temperature(C) : NA",
        "                               : more text",
        "Process id:12 Process name:  Process memory(MB):3",
        "Process id:zz",
        "No process in device.",
        "Get pid name failed.",
        "NPU0 NPU1 CPU Affinity",
        "NPU0 X HCCS 0-23",
        "NPU1 HCCS",
        "HCCS = Connection traversing HCCS.",
        "Legend:",
        "",
        ":",
        " : : ",
    ]
)


@settings(deadline=None, max_examples=200)
@given(
    lines=st.lists(st.one_of(LINE_PIECES, st.text(max_size=40)), max_size=30),
    kind=st.sampled_from(KINDS),
)
def test_shuffled_real_lines(lines: list[str], kind: str | None) -> None:
    text = "\n".join(lines)
    parses_or_refuses(lambda t: parse_kv(t, kind), text)
    parses_or_refuses(parse_proc_mem, text)
    parses_or_refuses(parse_topo, text)


def test_long_hostile_lines_stay_fast() -> None:
    # Patterns with lazy groups would backtrack quadratically on these.
    walls = [
        "a" + " " * 200_000 + "b : 1",
        "Process id:1 Process name:" + " " * 200_000 + "x",
        "X" + " " * 200_000 + "= y z",
        "Temperature" + " " * 200_000 + "(C) : 1",
        "9" * 100_000 + " : 1",
    ]
    for text in walls:
        for parser in PARSERS:
            parses_or_refuses(parser, text)
