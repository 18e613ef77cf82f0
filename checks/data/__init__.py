"""The field's knowledge as data: one YAML file per topic in this directory, one typed loader.

A topic file is a mapping with `topic` (its own name), `schema: 1` and `rows`, a list of
mappings. Every row carries `sources`: what a reader can open to check it (a URL, a vendor
document id, `owner/repo path @ release`, `owner/repo#issue`). The code that uses a topic
declares its row as a frozen dataclass and asks `load(topic, RowType)`; the loader checks every
field against the dataclass (no unknown keys, every required one there, the right types), that
every row has a source and that no two rows share a key. The checks and triage hold logic, the
rows hold facts. `validate_all()` is what the data test runs over every file here.

The rows are read from the JSON copy beside each YAML file (checks.datafiles), so a run never
imports PyYAML; `validate_file` parses the YAML itself, refusing duplicate mapping keys.
"""

from __future__ import annotations

import dataclasses
import importlib
import re
import sys
import types
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from checks import datafiles

DATA_DIR = Path(__file__).resolve().parent
SCHEMA = 1
# files here that predate the row format: tables with their own `sources` block
LEGACY_FILES = ("compat.yaml",)

T = TypeVar("T")

# What a reader can open: a URL, an issue/PR reference, a repository path at a release or
# commit, or a vendor document id. Files beside this repository never qualify.
_SOURCE_RES = (
    re.compile(r"https?://\S+"),
    re.compile(r"\b[\w.-]+/[\w.-]+#\d+\b"),
    re.compile(r"\b[\w.-]+/[\w.-]+ \S+ @ \S+"),
    re.compile(r"\b[\w.-]+/[\w.-]+ @ \S+"),
)
_NOT_A_SOURCE = re.compile(r"\.\./|\bshared/|[F]ACT[C]HECK")


class DataError(ValueError):
    """A knowledge file is malformed: the message names the file, the row and the field."""


# topic -> "module:RowType": the row type each topic is read as; a topic file without an entry
# here fails the data test
ROW_TYPES: dict[str, str] = {
    "support": "checks.builtin.serving_rows:SupportRow",
    "known_issues": "checks.builtin.serving_rows:KnownIssueRow",
    "flags": "checks.builtin.serving_rows:FlagRow",
    "error_codes": "checks.triage.rows:ErrorCode",
    "signatures": "checks.triage.rows:Signature",
    "tokenizer_families": "checks.builtin.tokenizer_families:TokenizerFamily",
    "engine_memory": "checks.builtin.hbm_engine:EngineDefault",
    "toolchain": "checks.builtin.toolchain:ToolchainNeed",
}


def row_type(topic: str) -> type:
    """The row type registered for `topic` (imported on demand)."""

    module_name, _, class_name = ROW_TYPES[topic].partition(":")
    return getattr(importlib.import_module(module_name), class_name)


def validate_all() -> dict[str, int]:
    """Every topic file here, checked from its YAML text: topic -> number of rows."""
    counts = {}
    for topic in topics():
        if topic not in ROW_TYPES:
            raise DataError(f"checks/data/{topic}.yaml: no row type registered in "
                            "checks.data.ROW_TYPES")
        document = validate_file(topic_path(topic))
        counts[topic] = len(rows_from(document, row_type(topic), f"checks/data/{topic}.yaml",
                                      topic))
    return counts


def topic_path(topic: str) -> Path:
    return DATA_DIR / f"{topic}.yaml"


def topics() -> tuple[str, ...]:
    """Every row-format topic shipped here, sorted."""
    return tuple(sorted(p.stem for p in DATA_DIR.glob("*.yaml") if p.name not in LEGACY_FILES))


def load(topic: str, row_type: type[T], key: str = "id") -> tuple[T, ...]:
    """The rows of `topic` as `row_type` instances (a frozen dataclass), validated."""
    cache_key = (topic, row_type, key)
    if cache_key not in _LOADED:
        document = datafiles.load(f"data/{topic}.yaml")
        _LOADED[cache_key] = rows_from(document, row_type, f"checks/data/{topic}.yaml", topic,
                                       key)
    return _LOADED[cache_key]


_LOADED: dict[tuple[str, type, str], tuple[Any, ...]] = {}


def rows_from(document: Any, row_type: type[T], where: str, topic: str,
              key: str = "id") -> tuple[T, ...]:
    """Validate a parsed topic document and build its rows (pure: tests feed it documents)."""
    if not isinstance(document, Mapping):
        raise DataError(f"{where}: expected a mapping with topic, schema and rows")
    if document.get("topic") != topic:
        raise DataError(f"{where}: `topic` must be {topic!r}, not {document.get('topic')!r}")
    if document.get("schema") != SCHEMA:
        raise DataError(f"{where}: `schema` must be {SCHEMA}")
    raw_rows = document.get("rows")
    if not isinstance(raw_rows, list) or not raw_rows:
        raise DataError(f"{where}: `rows` must be a non-empty list")
    _require_sources_field(row_type, where)
    built: list[T] = []
    seen: dict[Any, int] = {}
    for index, raw in enumerate(raw_rows):
        label = f"{where}: row {index + 1}"
        if isinstance(raw, Mapping) and key in raw:
            label += f" ({key}={raw[key]!r})"
        row = _build(row_type, raw, label)
        _check_sources(vars(row)["sources"], label)
        row_key = getattr(row, key, None)
        if row_key is None:
            raise DataError(f"{label}: has no `{key}`")
        if row_key in seen:
            raise DataError(f"{label}: `{key}` {row_key!r} repeats row {seen[row_key] + 1}")
        seen[row_key] = index
        built.append(row)
    return tuple(built)


def _require_sources_field(row_type: type, where: str) -> None:
    names = {f.name for f in dataclasses.fields(row_type)}
    if "sources" not in names:
        raise DataError(f"{where}: row type {row_type.__name__} has no `sources` field")


def _check_sources(sources: Any, label: str) -> None:
    if not sources:
        raise DataError(f"{label}: `sources` is empty: every row needs a source a reader "
                        "can open (URL, document id, owner/repo#issue, repo path @ release)")
    for source in sources:
        if _NOT_A_SOURCE.search(source):
            raise DataError(f"{label}: source {source!r} points beside the repository; cite "
                            "the primary source instead")
        if not any(pattern.search(source) for pattern in _SOURCE_RES):
            raise DataError(f"{label}: source {source!r} is not something a reader can open "
                            "(a URL, owner/repo#N, or owner/repo path @ release)")


# -- building typed rows ---------------------------------------------------------------------


def _build(row_type: type[T], raw: Any, label: str) -> T:
    if not isinstance(raw, Mapping):
        raise DataError(f"{label}: expected a mapping, got {type(raw).__name__}")
    hints = _hints(row_type)
    fields = {f.name: f for f in dataclasses.fields(row_type)}  # type: ignore[arg-type]
    unknown = sorted(set(map(str, raw)) - set(fields))
    if unknown:
        raise DataError(f"{label}: unknown field(s) {', '.join(unknown)} "
                        f"(known: {', '.join(fields)})")
    values: dict[str, Any] = {}
    for name, field in fields.items():
        if name not in raw:
            if (field.default is dataclasses.MISSING
                    and field.default_factory is dataclasses.MISSING):
                raise DataError(f"{label}: missing field `{name}`")
            continue
        values[name] = _convert(hints[name], raw[name], f"{label}: field `{name}`")
    return row_type(**values)


def _hints(row_type: type) -> dict[str, Any]:
    if row_type not in _HINTS:
        module = sys.modules.get(row_type.__module__)
        _HINTS[row_type] = typing.get_type_hints(row_type, vars(module) if module else None)
    return _HINTS[row_type]


_HINTS: dict[type, dict[str, Any]] = {}


def _convert(hint: Any, value: Any, label: str) -> Any:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return _convert_union(typing.get_args(hint), value, label)
    if origin is tuple:
        return _convert_tuple(typing.get_args(hint), value, label)
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return _build(hint, value, label)
    if hint is Any:
        return value
    return _convert_scalar(hint, value, label)


def _convert_union(options: tuple[Any, ...], value: Any, label: str) -> Any:
    if value is None and type(None) in options:
        return None
    errors = []
    for option in options:
        if option is type(None):
            continue
        try:
            return _convert(option, value, label)
        except DataError as exc:
            errors.append(str(exc))
    raise DataError(errors[0] if len(errors) == 1 else f"{label}: {value!r} fits none of "
                    f"{', '.join(_name(o) for o in options)}")


def _convert_tuple(args: tuple[Any, ...], value: Any, label: str) -> tuple[Any, ...]:
    if isinstance(value, str) or not isinstance(value, list):
        raise DataError(f"{label}: expected a list, got {type(value).__name__}")
    if len(args) == 2 and args[1] is Ellipsis:
        return tuple(_convert(args[0], item, f"{label}[{i}]") for i, item in enumerate(value))
    if len(args) != len(value):
        raise DataError(f"{label}: expected {len(args)} items, got {len(value)}")
    pairs = enumerate(zip(args, value, strict=True))
    return tuple(_convert(a, item, f"{label}[{i}]") for i, (a, item) in pairs)


_SCALARS: dict[type, Callable[[Any], bool]] = {
    str: lambda v: isinstance(v, str) and v != "",
    bool: lambda v: isinstance(v, bool),
    int: lambda v: isinstance(v, int) and not isinstance(v, bool),
    float: lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
}


def _convert_scalar(hint: Any, value: Any, label: str) -> Any:
    accepts = _SCALARS.get(hint)
    if accepts is None:
        raise DataError(f"{label}: the row type uses {_name(hint)}, which the loader "
                        "does not read (str, int, float, bool, tuples, dataclasses, X | None)")
    if not accepts(value):
        raise DataError(f"{label}: expected a non-empty {_name(hint)}, got {value!r}"[:300])
    return float(value) if hint is float else value


def _name(hint: Any) -> str:
    return getattr(hint, "__name__", str(hint))


# -- validating the files themselves (the data test) ----------------------------------------


def validate_file(path: Path) -> Any:
    """Parse a YAML file, refusing duplicate mapping keys anywhere in it."""
    import yaml

    class _Strict(yaml.SafeLoader):
        pass

    def _mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
        result: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            if key in result:
                line = key_node.start_mark.line + 1
                raise DataError(f"{path.name}:{line}: duplicate key {key!r}")
            result[key] = loader.construct_object(value_node, deep=True)
        return result

    _Strict.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)
    return yaml.load(path.read_text(encoding="utf-8"), Loader=_Strict)
