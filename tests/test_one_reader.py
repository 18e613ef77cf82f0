"""One reader of a model directory (probes.model.reader): no other package parses config.json,
generation_config.json or the shard index, or reads safetensors headers or tensors with a
reader of its own. Read statically from the source of every module outside probes/."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("checks", "engine", "console", "demo_models", "playbooks")
MODEL_FILES = frozenset({"config.json", "generation_config.json", "model.safetensors.index.json"})
SAFETENSORS_READERS = frozenset({"safe_open", "load_file", "load", "deserialize"})
# The one JSON reader for these files; a module naming them may call it, or parse nothing.
READER = "probes.model.reader"


def modules() -> list[Path]:
    return [p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))]


def _names_model_file(tree: ast.AST) -> bool:
    return any(isinstance(n, ast.Constant) and n.value in MODEL_FILES for n in ast.walk(tree))


def _parses_json(tree: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
               and n.func.attr in ("load", "loads") and isinstance(n.func.value, ast.Name)
               and n.func.value.id == "json" for n in ast.walk(tree))


def _reads_json_elsewhere(tree: ast.AST) -> bool:
    """Calls a `read_json`-like function that is not probes.model.reader's."""
    ours = {alias.asname or alias.name for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module == READER
            for alias in node.names}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else \
                node.func.attr if isinstance(node.func, ast.Attribute) else ""
            if "json" in name.lower() and name.startswith(("read", "load", "_read", "_load")) \
                    and name not in ours:
                return True
    return False


def _unpacks_header_length(tree: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
               and n.func.attr.startswith("unpack") and n.args
               and isinstance(n.args[0], ast.Constant) and n.args[0].value == "<Q"
               for n in ast.walk(tree))


def _reads_safetensors(tree: ast.AST) -> bool:
    return any(isinstance(node, ast.ImportFrom)
               and (node.module or "").startswith("safetensors")
               and any(alias.name in SAFETENSORS_READERS for alias in node.names)
               for node in ast.walk(tree))


def violations() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        rules = []
        if _names_model_file(tree) and (_parses_json(tree) or _reads_json_elsewhere(tree)):
            rules.append("parses a model-directory JSON file itself")
        if _unpacks_header_length(tree):
            rules.append("unpacks a safetensors header length itself")
        if _reads_safetensors(tree):
            rules.append("reads safetensors with the library's reader")
        if rules:
            found[str(path.relative_to(ROOT))] = rules
    return found


def test_only_probes_reads_model_directories() -> None:
    assert violations() == {}


def test_the_rules_notice_a_reader(tmp_path: Path) -> None:
    planted = ast.parse(
        "import json, struct\nfrom safetensors import safe_open\n"
        "def f(d):\n    n = struct.unpack('<Q', d[:8])\n"
        "    return json.loads((d / 'config.json').read_text())\n")
    assert _names_model_file(planted) and _parses_json(planted)
    assert _unpacks_header_length(planted) and _reads_safetensors(planted)
    helper = ast.parse("from mine import read_json\nread_json(d / 'config.json')\n")
    assert _names_model_file(helper) and _reads_json_elsewhere(helper)
    shared = ast.parse("from probes.model.reader import read_json\nread_json(h, 'config.json')\n")
    assert not _reads_json_elsewhere(shared)
