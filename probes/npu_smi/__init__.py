"""Pure parsers of every `npu-smi` output, and their `ascend-npu/1` JSON form.

The kinds of output live in one registry (`probes.npu_smi.registry.KINDS`: name, detector,
parser); `parse(text)` detects and parses any of them. Modules, one job each:

- `model`     frozen facts of every kind (units in the field names)
- `noise`     noise lines around an output (driver log lines, shell prompts, the trailer)
- `error`     the error messages npu-smi prints instead of an output
- `table`     `npu-smi info`, every main-table layout, and its process section
- `lines`     `info -m`, `info -l`, `info watch`
- `kv`        `info -t <type>` key/value outputs (`kvlines` classifies their lines)
- `proc_mem`  `info -t proc-mem`;  `topo`  `info -t topo`
- `views`     typed views judges use (`-t health` report, temperatures of a `-t` output)
- `jsonform`  `to_json` of any result;  `text`  placeholders, numbers, box cells

Each parser raises `probes.errors.ParseError` when the text is not its output at all; anything
it does not understand inside its output becomes a warning. Importing this package loads every
parser: `probes.inventory` imports it only when there is an output to read.
"""

from __future__ import annotations

from probes.npu_smi.error import detect_error
from probes.npu_smi.jsonform import SCHEMA, ParseResult, to_json
from probes.npu_smi.kv import KV_KINDS, guess_kv_kind, parse_kv
from probes.npu_smi.kvlines import normalise_key, parse_value
from probes.npu_smi.lines import parse_list, parse_mapping, parse_watch
from probes.npu_smi.model import (
    ChipProcesses,
    ChipRow,
    ChipTemperatures,
    HealthReport,
    KvBlock,
    KvOutput,
    ListEntry,
    MappingRow,
    NpuInfo,
    NpuList,
    NpuMapping,
    NpuSmiError,
    Process,
    ProcessRow,
    ProcMem,
    Topology,
    WatchRow,
    WatchTable,
)
from probes.npu_smi.noise import split_noise
from probes.npu_smi.proc_mem import parse_proc_mem
from probes.npu_smi.registry import KINDS, OutputKind, Parsed, detect_kind, parse
from probes.npu_smi.table import parse_info
from probes.npu_smi.topo import parse_topo
from probes.npu_smi.views import health_report, temperatures

__all__ = [
    "KINDS",
    "KV_KINDS",
    "SCHEMA",
    "ChipProcesses",
    "ChipRow",
    "ChipTemperatures",
    "HealthReport",
    "KvBlock",
    "KvOutput",
    "ListEntry",
    "MappingRow",
    "NpuInfo",
    "NpuList",
    "NpuMapping",
    "NpuSmiError",
    "OutputKind",
    "ParseResult",
    "Parsed",
    "ProcMem",
    "Process",
    "ProcessRow",
    "Topology",
    "WatchRow",
    "WatchTable",
    "detect_error",
    "detect_kind",
    "guess_kv_kind",
    "health_report",
    "normalise_key",
    "parse",
    "parse_info",
    "parse_kv",
    "parse_list",
    "parse_mapping",
    "parse_proc_mem",
    "parse_topo",
    "parse_value",
    "parse_watch",
    "split_noise",
    "temperatures",
    "to_json",
]
