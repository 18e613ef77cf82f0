"""Pure parsers of every `npu-smi` output, and their `ascend-npu/1` JSON form.

The kinds of output live in one registry (`probes.npu_smi.registry.KINDS`: name, command,
detector, parser, result class, JSON writer, typed view); `parse(text)` detects and parses any
of them, `to_json(result)` and `view(result)` dispatch through the same rows. Modules:

- `model`     frozen facts of the main table and of errors (units in the field names);
              `model_lines` and `model_kv` those of the other kinds
- `noise`     noise lines around an output (driver log lines, shell prompts, the trailer)
- `error`     the error messages npu-smi prints instead of an output
- `table`     `npu-smi info`, every main-table layout, and its process section
- `lines`     `info -m`, `info -l`, `info watch`
- `kv`        `info -t <type>` key/value outputs (`kvlines` classifies their lines)
- `proc_mem`  `info -t proc-mem`;  `topo`  `info -t topo`
- `views`     typed views judges use (`VIEWS`: `-t health` report, temperatures, usages)
- `jsonform`  the JSON writer of each row;  `text`  placeholders, numbers, box cells

Each parser raises `probes.errors.ParseError` when the text is not its output at all; anything
it does not understand inside its output becomes a warning. Importing this package loads no
parser: each name below is imported from its module on first use, and the registry imports a
kind's parser when it meets that kind's output.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from probes.npu_smi.error import detect_error
    from probes.npu_smi.jsonform import SCHEMA, ParseResult
    from probes.npu_smi.kv import KV_KINDS, guess_kv_kind, parse_kv
    from probes.npu_smi.kvlines import normalise_key, parse_value
    from probes.npu_smi.lines import parse_list, parse_mapping, parse_watch
    from probes.npu_smi.model import ChipRow, NpuInfo, NpuSmiError, ProcessRow, Usages
    from probes.npu_smi.model_kv import (
        ChipProcesses,
        ChipTemperatures,
        HealthReport,
        KvBlock,
        KvOutput,
        Process,
        ProcMem,
        Topology,
    )
    from probes.npu_smi.model_lines import (
        ListEntry,
        MappingRow,
        NpuList,
        NpuMapping,
        WatchRow,
        WatchTable,
    )
    from probes.npu_smi.noise import split_noise
    from probes.npu_smi.proc_mem import parse_proc_mem
    from probes.npu_smi.registry import (
        KINDS,
        OutputKind,
        Parsed,
        detect_kind,
        parse,
        to_json,
        view,
    )
    from probes.npu_smi.table import parse_info
    from probes.npu_smi.topo import parse_topo
    from probes.npu_smi.views import VIEWS, health_report, temperatures, usages

# name -> the module that defines it: each is imported on first use (PEP 562), so a reading
# loads the parser of its own kind and not the others
_WHERE = {
    "ChipProcesses": "model_kv",
    "ChipRow": "model",
    "ChipTemperatures": "model_kv",
    "HealthReport": "model_kv",
    "KINDS": "registry",
    "KV_KINDS": "kv",
    "KvBlock": "model_kv",
    "KvOutput": "model_kv",
    "ListEntry": "model_lines",
    "MappingRow": "model_lines",
    "NpuInfo": "model",
    "NpuList": "model_lines",
    "NpuMapping": "model_lines",
    "NpuSmiError": "model",
    "OutputKind": "registry",
    "ParseResult": "jsonform",
    "Parsed": "registry",
    "ProcMem": "model_kv",
    "Process": "model_kv",
    "ProcessRow": "model",
    "SCHEMA": "jsonform",
    "Topology": "model_kv",
    "Usages": "model",
    "VIEWS": "views",
    "WatchRow": "model_lines",
    "WatchTable": "model_lines",
    "detect_error": "error",
    "detect_kind": "registry",
    "guess_kv_kind": "kv",
    "health_report": "views",
    "normalise_key": "kvlines",
    "parse": "registry",
    "parse_info": "table",
    "parse_kv": "kv",
    "parse_list": "lines",
    "parse_mapping": "lines",
    "parse_proc_mem": "proc_mem",
    "parse_topo": "topo",
    "parse_value": "kvlines",
    "parse_watch": "lines",
    "split_noise": "noise",
    "temperatures": "views",
    "to_json": "registry",
    "usages": "views",
    "view": "registry",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "KINDS",
    "KV_KINDS",
    "SCHEMA",
    "VIEWS",
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
    "Usages",
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
    "usages",
    "view",
]
