"""Regenerate engine/tools/data/torch_npu_ops.txt, the operator table `ascend-doctor ops`
predicts from.

    python scripts/torch_npu_ops_table.py \\
        --op-plugin op_plugin_functions.yaml --op-plugin-ref "517f2e7d0f20... (2026-08-21)" \\
        --torch-npu npu_native_functions.yaml --torch-npu-ref "9ed07bbbd8d9..." \\
        -o engine/tools/data/torch_npu_ops.txt

Inputs, downloaded at the commits you name:
- Ascend/op-plugin `op_plugin/config/op_plugin_functions.yaml`: every aten (`official:`) and
  torch_npu (`custom:`, ...) operator op-plugin builds, each with the torch lines it has a kernel
  for on the ACL path (`acl_op:`) and the aclnn path (`op_api:`): `all_version`, an inclusive
  range `[v2.1, newest]`, or a list `v2.1, v2.2`;
- Ascend/pytorch `torch_npu/csrc/aten/npu_native_functions.yaml`: the operators torch_npu
  registers itself (views, copies, allocation: `supported:`, `symint:`, `custom:`), for every
  torch line it builds.

The output keeps one line per operator (name.overload): its section and its kernel paths with
the lines each covers (see engine/tools/npu_registry.py for the format). Same entry twice (a schema
changed between torch lines): the versions are merged.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

Version = tuple[int, int]
HEADER = """\
# torch_npu operator registry: which operators have a kernel, per torch line.
# Derived by scripts/torch_npu_ops_table.py (see engine/tools/npu_registry.py for the format).
# Columns: operator, section, then path=versions for each kernel path:
#   acl_op, op_api  op-plugin's ACL and aclnn kernels; native  kernels torch_npu registers itself
"""


def _version(text: str) -> Version:
    digits = str(text).strip().lstrip("v").split(".")
    return int(digits[0]), int(digits[1])


def _text(version: Version) -> str:
    return f"{version[0]}.{version[1]}"


def versions_of(value: Any, known: list[Version]) -> set[Version]:
    """op-plugin's `acl_op:` / `op_api:` value -> the torch lines it covers."""
    if value is None:
        return set()
    if isinstance(value, str) and value.strip() == "all_version":
        return set(known)
    if isinstance(value, list) and len(value) == 2:
        low = _version(value[0])
        high = known[-1] if str(value[1]).strip() == "newest" else _version(value[1])
        return {v for v in known if low <= v <= high}
    items = value if isinstance(value, list) else str(value).split(",")
    return {_version(item) for item in items if str(item).strip()}


def spec_text(covered: set[Version], known: list[Version]) -> str:
    """The shortest spec for a set of lines: all, -, 2.7+, 2.1-2.12 or 2.1,2.2."""
    if not covered:
        return "-"
    if covered == set(known):
        return "all"
    ordered = sorted(covered)
    span = [v for v in known if ordered[0] <= v <= ordered[-1]]
    if span == ordered:
        if ordered[-1] == known[-1]:
            return f"{_text(ordered[0])}+"
        return f"{_text(ordered[0])}-{_text(ordered[-1])}"
    return ",".join(_text(v) for v in ordered)


def op_key(func: str) -> str:
    """`mm(Tensor self, ...) -> Tensor` -> `mm`; `add.Tensor(...)` -> `add.Tensor`."""
    return func.split("(", 1)[0].strip()


Table = dict[str, tuple[str, dict[str, set[Version]]]]


def _add(table: Table, key: str, section: str, path: str, covered: set[Version]) -> None:
    _, paths = table.setdefault(key, (section, {}))
    paths.setdefault(path, set()).update(covered)


def read_op_plugin(document: Mapping[str, Any], table: Table) -> list[Version]:
    known = sorted(_version(v) for v in document["all_version"])
    for section, entries in document.items():
        if section == "all_version" or not isinstance(entries, list):
            continue
        for entry in entries:
            if not isinstance(entry, Mapping) or "func" not in entry:
                continue
            key = op_key(str(entry["func"]))
            for path in ("acl_op", "op_api"):
                _add(table, key, section, path, versions_of(entry.get(path), known))
    return known


def read_torch_npu(document: Mapping[str, Any], table: Table, known: list[Version]) -> None:
    for section in ("supported", "symint", "custom"):
        for entry in document.get(section) or []:
            name = entry.get("func") if isinstance(entry, Mapping) else entry
            if name:
                _add(table, op_key(str(name)), "torch_npu", "native", set(known))


def render(table: Table, known: list[Version], sources: Iterable[str]) -> str:
    lines = [HEADER.rstrip("\n")]
    lines += [f"#@ source {source}" for source in sources]
    lines.append("#@ versions: " + " ".join(_text(v) for v in known))
    for key in sorted(table):
        section, paths = table[key]
        specs = " ".join(f"{path}={spec_text(covered, known)}"
                         for path, covered in sorted(paths.items()) if covered)
        lines.append(f"{key} {section} {specs}".rstrip())
    return "\n".join(lines) + "\n"


def build(op_plugin: Path, op_plugin_ref: str, torch_npu: Path | None,
          torch_npu_ref: str) -> str:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    table: Table = {}
    known = read_op_plugin(yaml.load(op_plugin.read_text(encoding="utf-8"), Loader=loader),
                           table)
    sources = [f"op-plugin: Ascend/op-plugin op_plugin/config/op_plugin_functions.yaml @ "
               f"{op_plugin_ref}"]
    if torch_npu is not None:
        read_torch_npu(yaml.load(torch_npu.read_text(encoding="utf-8"), Loader=loader), table,
                       known)
        sources.append("torch_npu: Ascend/pytorch torch_npu/csrc/aten/npu_native_functions.yaml"
                       f" @ {torch_npu_ref}")
    return render(table, known, sources)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--op-plugin", type=Path, required=True, metavar="YAML")
    parser.add_argument("--op-plugin-ref", required=True, metavar="COMMIT",
                        help="the commit (and date) the file was read at")
    parser.add_argument("--torch-npu", type=Path, metavar="YAML")
    parser.add_argument("--torch-npu-ref", default="", metavar="COMMIT")
    parser.add_argument("-o", "--output", type=Path, metavar="FILE",
                        help="write here (default: stdout)")
    args = parser.parse_args(argv)
    try:
        text = build(args.op_plugin, args.op_plugin_ref, args.torch_npu, args.torch_npu_ref)
    except (OSError, yaml.YAMLError, KeyError, ValueError, IndexError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.output is None:
        sys.stdout.write(text)
    else:
        args.output.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
