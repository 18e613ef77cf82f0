"""torch_npu's operator table: its format, the script that derives it from the registries, and
the table shipped with the engine."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from engine.tools.npu_registry import (
    RegistryError,
    load_registry,
    parse_spec,
    parse_table,
    parse_version,
)

ROOT = Path(__file__).resolve().parent.parent.parent
KNOWN = ((2, 1), (2, 2), (2, 3), (2, 4))


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "torch_npu_ops_table", ROOT / "scripts" / "torch_npu_ops_table.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("text", "version"), [
    ("2.5", (2, 5)), ("v2.10", (2, 10)), ("2.5.1", (2, 5)), ("2.1.0.post4", (2, 1)),
    ("2.6.0rc1", (2, 6)), ("latest", None), ("", None)])
def test_versions(text: str, version: tuple[int, int] | None) -> None:
    assert parse_version(text) == version


@pytest.mark.parametrize(("text", "covered", "open_ended"), [
    ("all", set(KNOWN), True), ("-", set(), False), ("2.3+", {(2, 3), (2, 4)}, True),
    ("2.1-2.2", {(2, 1), (2, 2)}, False), ("2.1,2.4", {(2, 1), (2, 4)}, False)])
def test_specs(text: str, covered: set[tuple[int, int]], open_ended: bool) -> None:
    spec = parse_spec(text, KNOWN)
    assert (set(spec.versions), spec.open_ended) == (covered, open_ended)


def test_a_malformed_table_names_the_line() -> None:
    with pytest.raises(RegistryError, match="t:2"):
        parse_table(["#@ versions: 2.1", "mm official op_api=two"], "t")
    with pytest.raises(RegistryError, match="no '#@ versions:' line"):
        parse_table(["# nothing"], "t")
    with pytest.raises(RegistryError, match="before the versions line"):
        parse_table(["mm official op_api=all"], "t")


OP_PLUGIN = """\
all_version: [v2.1, v2.2, v2.3, v2.4]
official:
  - func: mm(Tensor self, Tensor mat2) -> Tensor
    acl_op: all_version
    op_api: all_version

  - func: silu(Tensor self) -> Tensor
    op_api: [v2.3, newest]

  - func: gelu(Tensor self) -> Tensor
    acl_op: [v2.1, v2.2]

  - func: repeat_interleave.self_int(Tensor self, SymInt repeats) -> Tensor
    op_api: v2.1, v2.2

  - func: repeat_interleave.self_int(Tensor self, SymInt repeats, int? dim=None) -> Tensor
    op_api: [v2.3, newest]

  - func: nothing_anywhere(Tensor self) -> Tensor
custom:
  - func: npu_rms_norm(Tensor self, Tensor gamma, float epsilon=1e-06) -> (Tensor, Tensor)
    op_api: [v2.2, newest]
"""
TORCH_NPU = """\
backend: NPU
supported:
  - view
  - func: copy_
    op_api: True
custom:
  - func: npu_format_cast(Tensor self, int acl_format) -> Tensor
symint:
  - as_strided_
"""


def test_the_script_derives_the_table_from_both_registries(tmp_path: Path) -> None:
    script = _script()
    (tmp_path / "op.yaml").write_text(OP_PLUGIN)
    (tmp_path / "npu.yaml").write_text(TORCH_NPU)
    text = script.build(tmp_path / "op.yaml", "abc123 (2026-01-01)", tmp_path / "npu.yaml",
                        "def456")
    lines = {line.split()[0]: line for line in text.splitlines() if not line.startswith("#")}
    assert lines["mm"] == "mm official acl_op=all op_api=all"
    assert lines["silu"] == "silu official op_api=2.3+"
    assert lines["gelu"] == "gelu official acl_op=2.1-2.2"
    # the same operator twice (its schema changed): the lines are merged
    assert lines["repeat_interleave.self_int"] == "repeat_interleave.self_int official op_api=all"
    assert lines["nothing_anywhere"] == "nothing_anywhere official"
    assert lines["npu_rms_norm"] == "npu_rms_norm custom op_api=2.2+"
    assert lines["view"] == "view torch_npu native=all"
    assert lines["copy_"].endswith("native=all") and "as_strided_" in lines
    registry = parse_table(text.splitlines())
    assert registry.provenance == (
        "op-plugin: Ascend/op-plugin op_plugin/config/op_plugin_functions.yaml @ abc123 "
        "(2026-01-01)",
        "torch_npu: Ascend/pytorch torch_npu/csrc/aten/npu_native_functions.yaml @ def456")
    gelu = registry.answer("gelu", (2, 3))
    assert not gelu.has_kernel and gelu.listed and gelu.listed_for == "acl_op 2.1-2.2"
    assert registry.answer("gelu", (2, 1)).paths == ("acl_op",)
    assert registry.answer("nothing_anywhere", (2, 1)).listed_for == "no version"
    beyond = registry.answer("silu", (2, 9))
    assert beyond.has_kernel and beyond.beyond
    assert not registry.answer("gelu", (2, 9)).has_kernel  # a closed range ends
    assert registry.overloads("repeat_interleave") == ("repeat_interleave.self_int",)


def test_the_script_reports_a_bad_input_in_one_line(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "op.yaml").write_text("official: []\n")  # no all_version
    code = _script().main(["--op-plugin", str(tmp_path / "op.yaml"), "--op-plugin-ref", "x"])
    assert code == 2
    assert capsys.readouterr().err.startswith("error: ")


def test_the_shipped_table_names_its_sources_and_covers_the_basics() -> None:
    registry = load_registry()
    assert registry.versions[0] == (2, 1) and registry.newest == (2, 15)
    assert any("517f2e7d0f202f38b76310706cb977ca2388ad21" in p for p in registry.provenance)
    assert any("npu_native_functions.yaml" in p for p in registry.provenance)
    assert len(registry.entries) > 1500
    for op in ("mm", "add.Tensor", "view", "copy_", "_to_copy", "npu_rms_norm"):
        assert registry.answer(op, (2, 5)).has_kernel, op
    assert registry.answer("_fused_sdp_choice", (2, 7)).has_kernel
    assert not registry.answer("_fused_sdp_choice", (2, 6)).has_kernel
