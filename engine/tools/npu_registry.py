"""Which operators torch_npu has a kernel for, per torch line, without torch_npu installed.

Reads the compact table `engine/tools/data/torch_npu_ops.txt`, derived by
`scripts/torch_npu_ops_table.py` from torch_npu's published operator registries (the table's
header names the files and the commits). One line per operator:

    mm  official  acl_op=all  op_api=all
    _fused_sdp_choice  official  op_api=2.7+
    view  torch_npu  native=all

`acl_op` / `op_api` are op-plugin's two kernel paths (the older ACL operators and the aclnn
op-api); `native` are kernels torch_npu registers itself. A version spec is `all` (every line
the registry covers), `2.7+` (from 2.7 to the newest it covers), `2.1-2.12` (inclusive) or
`2.1,2.2`. A torch line newer than the registry's newest is answered from the `all` and `+`
specs and marked `beyond` (the registry did not know that line yet). No torch import here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

TABLE = "torch_npu_ops.txt"
Version = tuple[int, int]
_VERSION_RE = re.compile(r"^v?(\d+)\.(\d+)")


class RegistryError(ValueError):
    """The table is malformed; the message names the line."""


def parse_version(text: str) -> Version | None:
    """"2.5", "v2.5", "2.5.1", "2.5.1.post3" -> (2, 5); None when it is not a version."""
    match = _VERSION_RE.match(text.strip())
    return (int(match.group(1)), int(match.group(2))) if match else None


def version_text(version: Version) -> str:
    return f"{version[0]}.{version[1]}"


@dataclass(frozen=True)
class Spec:
    """The torch lines one kernel path covers."""

    text: str  # as written: all | - | 2.7+ | 2.1-2.12 | 2.1,2.2
    versions: frozenset[Version]
    open_ended: bool  # covers the registry's newest line, so maybe later ones too


def parse_spec(text: str, known: tuple[Version, ...]) -> Spec:
    if text == "all":
        return Spec(text, frozenset(known), True)
    if text == "-":
        return Spec(text, frozenset(), False)
    if text.endswith("+"):
        start = _need_version(text[:-1])
        return Spec(text, frozenset(v for v in known if v >= start), True)
    if "-" in text:
        low, high = (_need_version(part) for part in text.split("-", 1))
        return Spec(text, frozenset(v for v in known if low <= v <= high), False)
    return Spec(text, frozenset(_need_version(part) for part in text.split(",")), False)


def _need_version(text: str) -> Version:
    version = parse_version(text)
    if version is None:
        raise RegistryError(f"{text!r} is not a torch version")
    return version


@dataclass(frozen=True)
class Entry:
    op: str  # "mm", "add.Tensor", "npu_rms_norm"
    section: str  # official | custom | symint | autograd | quant | torch_npu
    paths: Mapping[str, Spec]  # acl_op / op_api / native -> versions


@dataclass(frozen=True)
class Answer:
    """What the registry says about one operator for one torch line."""

    op: str
    listed: bool  # the registry names the operator at all
    paths: tuple[str, ...]  # kernel paths for this line ("op_api", "acl_op", "native")
    beyond: bool = False  # the line is newer than the registry's newest
    listed_for: str = ""  # the versions it does have, when not this line

    @property
    def has_kernel(self) -> bool:
        return bool(self.paths)


@dataclass(frozen=True)
class Registry:
    versions: tuple[Version, ...]
    entries: Mapping[str, Entry]
    provenance: tuple[str, ...] = ()  # "op-plugin: Ascend/op-plugin ... @ commit (date)"
    _names: Mapping[str, tuple[str, ...]] = field(default_factory=dict, repr=False)

    @property
    def newest(self) -> Version:
        return self.versions[-1]

    def answer(self, op: str, version: Version) -> Answer:
        entry = self.entries.get(op)
        if entry is None:
            return Answer(op, False, ())
        beyond = version > self.newest
        paths = tuple(name for name, spec in entry.paths.items()
                      if (spec.open_ended if beyond else version in spec.versions))
        listed_for = "" if paths else ", ".join(
            f"{name} {spec.text}" for name, spec in entry.paths.items()) or "no version"
        return Answer(op, True, paths, beyond, listed_for)

    def overloads(self, name: str) -> tuple[str, ...]:
        """Every listed operator named `name` ("repeat_interleave" -> its overloads)."""
        return self._names.get(name, ())


def parse_table(lines: Iterable[str], source: str = TABLE) -> Registry:
    versions: tuple[Version, ...] = ()
    provenance: list[str] = []
    entries: dict[str, Entry] = {}
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if line.startswith("#@ versions:"):
            versions = tuple(_need_version(v) for v in line.split(":", 1)[1].split())
        elif line.startswith("#@ source "):
            provenance.append(line.removeprefix("#@ source ").strip())
        elif line and not line.startswith("#"):
            if not versions:
                raise RegistryError(f"{source}:{number}: operator before the versions line")
            entry = _entry(line, versions, f"{source}:{number}")
            entries[entry.op] = entry
    if not versions:
        raise RegistryError(f"{source}: no '#@ versions:' line")
    names: dict[str, list[str]] = {}
    for op in entries:
        names.setdefault(op.split(".", 1)[0], []).append(op)
    return Registry(versions, entries, tuple(provenance),
                    {k: tuple(v) for k, v in names.items()})


def _entry(line: str, versions: tuple[Version, ...], where: str) -> Entry:
    parts = line.split()
    if len(parts) < 2:
        raise RegistryError(f"{where}: expected 'operator section path=versions ...'")
    paths: dict[str, Spec] = {}
    for token in parts[2:]:
        name, _, spec = token.partition("=")
        try:
            paths[name] = parse_spec(spec, versions)
        except RegistryError as exc:
            raise RegistryError(f"{where}: {exc}") from None
    return Entry(parts[0], parts[1], paths)


def load_registry(path: Path | None = None) -> Registry:
    """The shipped table (or `path`)."""
    if path is not None:
        return parse_table(path.read_text(encoding="utf-8").splitlines(), str(path))
    data = resources.files("engine.tools").joinpath("data")
    text = data.joinpath(TABLE).read_text(encoding="utf-8")
    return parse_table(text.splitlines(), f"engine/tools/data/{TABLE}")
