"""npu-smi's kind registry is the one list of kinds: each row carries its parser, JSON writer and
typed view, every other list derives from it, and a new kind needs only its row."""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import probes.npu_smi as npu_smi
from probes.errors import ParseError
from probes.inventory import parse_output
from probes.npu_smi import jsonform, registry, views
from probes.npu_smi.kv import KV_KINDS
from probes.npu_smi.registry import KINDS, KNOWN, OutputKind

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "npu-smi"
SAMPLES = sorted(p.name for p in CORPUS.glob("*.txt"))


def _resolve(target: str) -> Any:
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def test_the_known_commands_and_the_front_names_derive_from_the_rows() -> None:
    assert ", ".join(kind.command for kind in KINDS if kind.command) == KNOWN
    assert npu_smi.KINDS is KINDS
    assert npu_smi.to_json is registry.to_json and npu_smi.view is registry.view
    assert len({kind.name for kind in KINDS}) == len(KINDS)
    # the writers live only behind the rows: no table of its own in jsonform
    assert not [name for name in vars(jsonform) if name.startswith("_WRITERS")]


@pytest.mark.parametrize("kind", KINDS, ids=[k.name for k in KINDS])
def test_every_row_names_a_result_class_writer_and_view_that_exist(kind: OutputKind) -> None:
    assert isinstance(_resolve(kind.result), type)
    for lazy in (kind.parse, kind.write, kind.view):
        target = getattr(lazy, "target", None)
        if target is not None:  # a lazy "module:function" of this package
            assert callable(_resolve(f"probes.npu_smi.{target}")), target


def test_the_view_rows_are_key_value_types_the_parser_knows() -> None:
    assert set(views.VIEWS) <= set(KV_KINDS)


@pytest.mark.parametrize("sample", SAMPLES)
def test_each_corpus_output_is_written_by_the_row_that_parsed_it(sample: str) -> None:
    text = (CORPUS / sample).read_text(errors="replace")
    try:
        parsed = npu_smi.parse(text)
    except ParseError:
        return  # not an npu-smi output (version files, lspci): nothing to write
    row = registry.row_of(parsed.result)
    assert row.name == parsed.kind
    doc = npu_smi.to_json(parsed.result)
    assert doc["schema"] == jsonform.SCHEMA
    assert parse_output(text).document["kind"] == doc["kind"]


def test_judges_get_typed_views_of_key_value_outputs() -> None:
    health = npu_smi.parse((CORPUS / "032-info-t-health-alarm-multi-errorcode.txt").read_text())
    report = npu_smi.view(health.result)
    assert isinstance(report, npu_smi.HealthReport) and report.error_codes
    usages = npu_smi.view(npu_smi.parse_kv(
        (CORPUS / "013-info-t-usages-310P-2chips-DVPP.txt").read_text(), "usages"))
    assert usages and all(isinstance(u, npu_smi.Usages) for u in usages.values())
    table = npu_smi.parse((CORPUS / "014-info-25.0.rc1.1-910B4-8cards-noproc.txt").read_text())
    assert npu_smi.view(table.result) is table.result  # the main table is its own view


def test_something_no_row_made_has_no_json_form() -> None:
    with pytest.raises(TypeError, match="not an npu-smi parse result: dict"):
        npu_smi.to_json({"kind": "info"})  # type: ignore[arg-type]


# -- a new kind is one row ----------------------------------------------------------------------

_TOY_LINE = re.compile(r"^\s*TOY FANS\s*:\s*(\d+)\s*$")


@dataclass(frozen=True)
class ToyFans:
    """The toy kind's parse result."""

    fans: int


@dataclass(frozen=True)
class ToyView:
    fans_spinning: bool


def _parse_toy(text: str) -> ToyFans:
    match = next(m for m in map(_TOY_LINE.match, text.splitlines()) if m)
    return ToyFans(int(match.group(1)))


TOY = OutputKind(
    "toy-fans", "info -t toy-fans",
    detect=lambda lines: any(_TOY_LINE.match(line) for line in lines),
    parse=_parse_toy,  # type: ignore[arg-type]  # a toy result is no ParseResult
    result=f"{ToyFans.__module__}:{ToyFans.__qualname__}",
    write=lambda out: {"schema": jsonform.SCHEMA, "kind": "toy-fans", "fans": out.fans},
    view=lambda out: ToyView(out.fans > 0),
)
TOY_OUTPUT = "noise before\n\tTOY FANS : 3\n"


def test_a_planted_row_alone_parses_views_and_writes_its_kind() -> None:
    kinds = (TOY,)
    parsed = registry.parse(TOY_OUTPUT, kinds=kinds)
    assert parsed.kind == "toy-fans" and parsed.result == ToyFans(3)
    assert registry.view(parsed.result, kinds) == ToyView(True)
    assert registry.to_json(parsed.result, kinds) == {
        "schema": jsonform.SCHEMA, "kind": "toy-fans", "fans": 3}


def test_the_planted_row_goes_in_a_copy_and_the_real_registry_does_not_know_it() -> None:
    kinds = (*KINDS[:1], TOY, *KINDS[1:])  # before the generic key/value row, which would win
    assert registry.parse(TOY_OUTPUT, kinds=kinds).kind == "toy-fans"
    with pytest.raises(ParseError, match="info -t toy-fans"):
        registry.parse("nothing npu-smi prints\n", kinds=kinds)
    with pytest.raises(TypeError):
        npu_smi.to_json(ToyFans(3))  # type: ignore[arg-type]
    assert "toy" not in KNOWN
