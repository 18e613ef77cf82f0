"""Every kind of npu-smi output this package reads, in one registry: each row names the kind,
the command that prints it, its detector, its parser, the class the parser returns, its
`ascend-npu/1` JSON writer and (where judges use one) its typed view.

`parse(text)` is the one way in: it blanks the noise lines out (`probes.npu_smi.noise`), asks
each kind in order whether the text is its output, and hands the text to the first that says
yes. `to_json(result)` and `view(result)` find the row by the result's class. A new kind of
output is one more `OutputKind` row (with its parser module, writer and view); every other
list of kinds (`KNOWN`, the writers) derives from `KINDS`.

Detectors see the non-blank lines of the noise-free text; they look for the kind's header
or typical lines, never for widths. Order matters where outputs share features: an error
message beats anything around it, tables come before the key/value family, and the generic
key/value parser comes last.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from probes.errors import ParseError
from probes.npu_smi.error import detect_error
from probes.npu_smi.noise import blank_noise

if TYPE_CHECKING:
    from probes.npu_smi.jsonform import ParseResult
    from probes.npu_smi.model import NpuSmiError

Lines = Sequence[str]


class _Lazy:
    """A row's parser, detector, writer or view, named "module:function" in this package and
    imported on the first call: a run meets one or two kinds, and each parser module builds
    its patterns and facts when it is imported."""

    __slots__ = ("target",)

    def __init__(self, target: str) -> None:
        self.target = target

    def __call__(self, arg: Any) -> Any:
        module, _, name = self.target.partition(":")
        return getattr(importlib.import_module(f"probes.npu_smi.{module}"), name)(arg)

    def __repr__(self) -> str:
        return f"_Lazy({self.target!r})"


@dataclass(frozen=True)
class OutputKind:
    """One kind of npu-smi output: `detect` sees its lines, `parse` reads its text into an
    instance of `result` ("module:Class", compared by name so no class is built to dispatch),
    `write` gives that instance's JSON form and `view` (None: the result is the view) the typed
    view judges read. `command` is how it is asked for, for messages."""

    name: str
    command: str
    detect: Callable[[Lines], bool]
    parse: Callable[[str], ParseResult]
    result: str
    write: Callable[[Any], dict[str, Any]]
    view: Callable[[Any], Any] | None = None

    def made(self, obj: object) -> bool:
        """Whether `obj` is what this kind's parser returns."""
        kind = type(obj)
        return f"{kind.__module__}:{kind.__qualname__}" == self.result


@dataclass(frozen=True)
class Parsed:
    """What `parse` found: the kind's name, the parser's result, the noise lines taken out."""

    kind: str
    result: ParseResult
    noise: tuple[str, ...]


_INFO_TITLE = re.compile(r"^\s*\|\s*npu-smi\s+\S+\s+Version:")
_INFO_HEADER = re.compile(r"^\s*\|.*\bHealth\b")
_MAPPING_HEADER = re.compile(r"^\s*NPU ID\s+Chip ID\b")
_LIST_COUNT = re.compile(r"^\s*(?:Total|Card) Count\s*:")
# npu-smi pads keys (`\t%-30s : `), so its separator always has blank space before the colon
_KV_LINE = re.compile(r"^\s*\S.*?\s:(?:\s|$)")
_PROCESS_LINE = re.compile(r"^\s*(?:Process id\b|No process in device\b)", re.IGNORECASE)


def _is_error(lines: Lines) -> bool:
    return detect_error("\n".join(lines)) is not None


def _parse_error(text: str) -> NpuSmiError:
    error = detect_error(text)
    if error is None:  # the detector said yes: only a caller skipping it can get here
        raise ParseError("npu-smi error output", "no error message found")
    return error


def _is_info(lines: Lines) -> bool:
    return any(_INFO_TITLE.match(ln) or _INFO_HEADER.match(ln) for ln in lines)


def _is_watch(lines: Lines) -> bool:
    from probes.npu_smi.lines import watch_columns

    return any(len(watch_columns(ln)) >= 2 for ln in lines)


def _is_mapping(lines: Lines) -> bool:
    return any(_MAPPING_HEADER.match(ln) for ln in lines)


def _is_list(lines: Lines) -> bool:
    return any(_LIST_COUNT.match(ln) for ln in lines)


def _looks_key_value(lines: Lines) -> bool:
    """Mostly `Key   : value` lines."""
    kv_lines = sum(1 for ln in lines if _KV_LINE.match(ln))
    return bool(lines) and 2 * kv_lines >= len(lines)


def _is_proc_mem(lines: Lines) -> bool:
    """Process lines (or `No process in device.`) and key/value lines, mostly."""
    processes = sum(1 for ln in lines if _PROCESS_LINE.match(ln))
    kv_lines = sum(1 for ln in lines if _KV_LINE.match(ln))
    return processes > 0 and 2 * (processes + kv_lines) >= len(lines)


_PKG = "probes.npu_smi"


def _row(name: str, command: str, detect: Callable[[Lines], bool], parse: str, result: str,
         write: str, view: str | None = None) -> OutputKind:
    """A row whose parser, writer and view are "module:function" names in this package."""
    return OutputKind(name, command, detect, _Lazy(parse), f"{_PKG}.{result}", _Lazy(write),
                      None if view is None else _Lazy(view))


KINDS: tuple[OutputKind, ...] = (
    OutputKind("error", "", _is_error, _parse_error, f"{_PKG}.model:NpuSmiError",
               _Lazy("jsonform:error_to_json")),
    _row("info", "info", _is_info, "table:parse_info", "model:NpuInfo", "jsonform:info_to_json"),
    _row("watch", "info watch", _is_watch, "lines:parse_watch", "model_lines:WatchTable",
         "jsonform:watch_to_json"),
    _row("mapping", "info -m", _is_mapping, "lines:parse_mapping", "model_lines:NpuMapping",
         "jsonform:mapping_to_json"),
    _row("list", "info -l", _is_list, "lines:parse_list", "model_lines:NpuList",
         "jsonform:list_to_json"),
    _row("topo", "info -t topo", _Lazy("topo:looks_like_topo"), "topo:parse_topo",
         "model_kv:Topology", "jsonform:topo_to_json"),
    _row("proc-mem", "info -t proc-mem", _is_proc_mem, "proc_mem:parse_proc_mem",
         "model_kv:ProcMem", "jsonform:proc_mem_to_json"),
    _row("kv", "info -t TYPE", _looks_key_value, "kv:parse_kv", "model_kv:KvOutput",
         "jsonform:kv_to_json", "views:kv_view"),
)

# What the tool reads, for messages: the commands of the rows (an error prints no output kind)
KNOWN = ", ".join(kind.command for kind in KINDS if kind.command)

# The largest real output (`npu-smi info` of a 16-die A3 with processes) is a few hundred lines
# and tens of KB; a `watch` log grows by one line per chip and interval. These limits keep a
# paste of anything bigger from taking minutes and gigabytes (parse time is linear below them).
MAX_INPUT_BYTES = 8 * 1024 * 1024
MAX_INPUT_LINES = 50_000


def check_size(text: str, what: str) -> None:
    """Raise ParseError when `text` is over the limits of one npu-smi output."""
    if len(text) > MAX_INPUT_BYTES:
        raise ParseError(what, f"more than {MAX_INPUT_BYTES // (1024 * 1024)} MiB, larger than "
                         "any npu-smi output; pass one command's output (`tail -n 2000 FILE` of "
                         "a watch log)")
    lines = text.count("\n") + (0 if text.endswith("\n") else 1)
    if lines > MAX_INPUT_LINES:
        raise ParseError(what, f"{lines:,} lines, more than the {MAX_INPUT_LINES:,} of any "
                         "npu-smi output; pass one command's output (`tail -n 2000 FILE` of a "
                         "watch log)")


def _content_lines(clean: str) -> list[str]:
    return [line for line in clean.splitlines() if line.strip()]


def _kind_of(clean: str, kinds: Sequence[OutputKind] = KINDS) -> OutputKind | None:
    lines = _content_lines(clean)
    return next((kind for kind in kinds if kind.detect(lines)), None)


def detect_kind(text: str) -> str:
    """The registry name of the kind `text` is an output of, or "unknown"; ParseError for a
    text over the limits (MAX_INPUT_BYTES, MAX_INPUT_LINES)."""
    check_size(text, "npu-smi output")
    kind = _kind_of(blank_noise(text)[0])
    return "unknown" if kind is None else kind.name


def parse(text: str, what: str = "npu-smi output",
          kinds: Sequence[OutputKind] = KINDS) -> Parsed:
    """Detect the kind of an npu-smi output among `kinds` and parse it. Raises ParseError
    naming `what`, also for a text over MAX_INPUT_BYTES or MAX_INPUT_LINES."""
    check_size(text, what)
    clean, noise = blank_noise(text)
    kind = _kind_of(clean, kinds)
    if kind is None:
        known = ", ".join(k.command for k in kinds if k.command)
        raise ParseError(what, f"not an npu-smi output this tool knows ({known})")
    return Parsed(kind.name, kind.parse(clean), noise)


def row_of(obj: object, kinds: Sequence[OutputKind] = KINDS) -> OutputKind:
    """The row whose parser made `obj`; TypeError for anything else."""
    row = next((kind for kind in kinds if kind.made(obj)), None)
    if row is None:
        raise TypeError(f"not an npu-smi parse result: {type(obj).__name__}")
    return row


def to_json(obj: ParseResult, kinds: Sequence[OutputKind] = KINDS) -> dict[str, Any]:
    """The `ascend-npu/1` JSON form (a dict of plain values) of a parse result: the output
    edge (inventory, bundles, `--json`); judges read `view` or the result itself."""
    return row_of(obj, kinds).write(obj)


def view(obj: ParseResult, kinds: Sequence[OutputKind] = KINDS) -> Any:
    """The typed view judges read of a parse result (the result itself where its row has no
    view): a `-t health` output gives its HealthReport, `-t usages` its Usages per chip."""
    row = row_of(obj, kinds)
    return obj if row.view is None else row.view(obj)
