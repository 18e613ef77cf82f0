"""The npu-smi package loads what an output needs: the parser of its kind, not the others."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import probes.npu_smi as npu_smi

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "corpus" / "npu-smi"
# the parser modules of every row but the main table's (from the registry), and the modules
# only those kinds use
_PARSERS = {kind.parse.target.partition(":")[0] for kind in npu_smi.KINDS
            if hasattr(kind.parse, "target")}
OTHER_KINDS = tuple(sorted(f"probes.npu_smi.{module}" for module in (
    (_PARSERS - {"table"}) | {"kvlines", "views", "model_kv", "model_lines"})))


def test_every_exported_name_says_where_it_lives_and_is_found_there() -> None:
    assert sorted(npu_smi._WHERE) == sorted(npu_smi.__all__)
    for name, module in npu_smi._WHERE.items():
        defined = getattr(importlib.import_module(f"probes.npu_smi.{module}"), name)
        assert getattr(npu_smi, name) is defined, name


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        npu_smi.no_such_parser  # noqa: B018  (the access is the test)
    except AttributeError as exc:
        assert "no_such_parser" in str(exc)
    else:
        raise AssertionError("no AttributeError")


def _loaded_after_parsing(sample: str) -> list[str]:
    code = (
        "import json, sys\n"
        "from probes.inventory import parse_output\n"
        f"reading = parse_output(open({str(CORPUS / sample)!r}).read())\n"
        f"print(json.dumps([reading.kind, [m for m in {OTHER_KINDS!r} if m in sys.modules]]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, check=True)
    kind, loaded = json.loads(out.stdout)
    assert kind == "info"
    return list(loaded)


def test_the_main_table_loads_no_other_kind() -> None:
    assert _loaded_after_parsing("014-info-25.0.rc1.1-910B4-8cards-noproc.txt") == []


def test_a_key_value_output_loads_its_parser() -> None:
    reading = npu_smi.parse((CORPUS / "027-info-t-board-i0-c0-chip-910A-23.0.5.txt").read_text())
    assert reading.kind == "kv"
    assert npu_smi.to_json(reading.result)["kind"] == "board"
