"""Frozen facts of the `npu-smi info -t <type>` outputs: key/value blocks, the health report
and temperatures read from them, `-t proc-mem` and `-t topo`.

Units are in the field names; a field the output does not carry, or prints as `NA`, `-` or
blank, is None (as in probes.npu_smi.model).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from probes.npu_smi.model import Value


@dataclass(frozen=True)
class KvBlock:
    """One chip's fields (or the card's, for flat outputs). `name` marks the MCU block."""

    chip_id: int | None
    name: str | None
    fields: Mapping[str, Value]


@dataclass(frozen=True)
class KvOutput:
    """An `npu-smi info -t <type>` output: card-level lines and one block per chip."""

    kind: str  # one of KV_KINDS
    npu_id: int | None  # the `NPU ID` card-level line
    blocks: tuple[KvBlock, ...]
    warnings: tuple[str, ...]  # lines not understood, with their line numbers
    chip_count: int | None = None  # the `Chip Count` card-level line


@dataclass(frozen=True)
class HealthReport:
    """What `-t health` says of one chip: its status word and error codes."""

    status: str | None  # `OK`, `Warning`, `Alarm`, `Critical`, ... as printed
    error_codes: tuple[str, ...]  # 8-hex codes; empty when `NA`
    error_information: tuple[str, ...]  # one text per line; empty when `NA`


@dataclass(frozen=True)
class ChipTemperatures:
    """The temperatures one chip's block of a `-t` output prints; None where it prints none."""

    chip_id: int | None
    temperature_c: float | None  # `NPU Temperature (C)` / `Temperature(C)`
    hbm_temperature_c: float | None  # `HBM Temperature(C)`


@dataclass(frozen=True)
class Process:
    """One process line of a `-t` output (`-t proc-mem`): pid, name and device memory."""

    pid: int
    name: str  # kernel comm, may be "" (npu-smi prints a blank name on A3)
    memory_mb: int | None


@dataclass(frozen=True)
class ChipProcesses:
    """The processes of one chip in `-t proc-mem`."""

    chip_id: int | None  # None when the output was cut before the chip's `Chip ID` line
    processes: tuple[Process, ...]


@dataclass(frozen=True)
class ProcMem:
    """`npu-smi info -t proc-mem`: the processes of each chip of one card."""

    npu_id: int | None
    chips: tuple[ChipProcesses, ...]
    warnings: tuple[str, ...]


@dataclass(frozen=True)
class Topology:
    """`npu-smi info -t topo`: the link matrix, CPU affinity and legend."""

    devices: tuple[str, ...]  # header labels in order: `NPU0`.. or `Phy-ID0`.. (A3)
    links: Mapping[tuple[str, str], str]  # (row, column) -> `HCCS`, `SYS`, `X` (self), ...
    cpu_affinity: Mapping[str, str | None]  # `144-167`; None without the column (A3 on ARM)
    legend: Mapping[str, str]  # code -> explanation
    warnings: tuple[str, ...]
