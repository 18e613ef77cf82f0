"""The `ascend-npu/1` JSON writers (docs/npu-inventory.md), one per registry row: each row of
`probes.npu_smi.registry.KINDS` names its writer here, and `registry.to_json` dispatches."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    from probes.npu_smi.model import NpuInfo, NpuSmiError
    from probes.npu_smi.model_kv import KvOutput, ProcMem, Topology
    from probes.npu_smi.model_lines import NpuList, NpuMapping, WatchTable

SCHEMA = "ascend-npu/1"

ParseResult: TypeAlias = (
    "NpuInfo | NpuMapping | NpuList | WatchTable | NpuSmiError | KvOutput | ProcMem | Topology"
)


def info_to_json(info: NpuInfo) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "kind": "info",
        "npu_smi_version": info.npu_smi_version,
        "driver_version": info.driver_version,
        "layout": info.layout,
        "chips": [asdict(chip) for chip in info.chips],
        "processes": [asdict(process) for process in info.processes],
        "processes_known": info.processes_known,
        "warnings": list(info.warnings),
    }


def mapping_to_json(mapping: NpuMapping) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "kind": "mapping",
        "rows": [asdict(row) for row in mapping.rows],
        "warnings": list(mapping.warnings),
    }


def list_to_json(listing: NpuList) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "kind": "list",
        "total_count": listing.total_count,
        "npus": [asdict(entry) for entry in listing.npus],
        "warnings": list(listing.warnings),
    }


def watch_to_json(table: WatchTable) -> dict[str, Any]:
    rows = [
        {"npu_id": row.npu_id, "chip_id": row.chip_id, "values": dict(row.values)}
        for row in table.rows
    ]
    return {
        "schema": SCHEMA,
        "kind": "watch",
        "columns": list(table.columns),
        "rows": rows,
        "warnings": list(table.warnings),
    }


def error_to_json(error: NpuSmiError) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "kind": "error",
        "error": error.message,
        "code": error.code,
        "error_kind": error.kind,
        "warnings": list(error.warnings),
    }


def kv_to_json(out: KvOutput) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "kind": out.kind,
        "npu_id": out.npu_id,
        "chip_count": out.chip_count,
        "blocks": [
            {"chip_id": b.chip_id, "name": b.name, "fields": dict(b.fields)} for b in out.blocks
        ],
        "warnings": list(out.warnings),
    }


def proc_mem_to_json(out: ProcMem) -> dict[str, Any]:
    chips = [
        {
            "chip_id": chip.chip_id,
            "processes": [
                {"pid": p.pid, "name": p.name, "memory_mb": p.memory_mb} for p in chip.processes
            ],
        }
        for chip in out.chips
    ]
    return {
        "schema": SCHEMA,
        "kind": "proc-mem",
        "npu_id": out.npu_id,
        "chips": chips,
        "warnings": list(out.warnings),
    }


def topo_to_json(out: Topology) -> dict[str, Any]:
    links: dict[str, dict[str, str]] = {}
    for (row, column), link in out.links.items():
        links.setdefault(row, {})[column] = link
    return {
        "schema": SCHEMA,
        "kind": "topo",
        "devices": list(out.devices),
        "links": links,
        "cpu_affinity": dict(out.cpu_affinity),
        "legend": dict(out.legend),
        "warnings": list(out.warnings),
    }
