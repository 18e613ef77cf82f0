"""Frozen facts parsed from the outputs of `npu-smi`: tables, lines and `-t` key/value blocks.

Units are in the field names. A field that the output does not carry, or that it prints as
`NA`, `-` or blank, is None. Strings (names, health, bus ids) are kept as printed, masked ones
(`xxx`, `0000:xx:00.0`) included, because a judge must be able to tell "masked" from "absent".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TypeAlias

WatchValue = float | int | None


@dataclass(frozen=True, slots=True)
class ChipRow:
    """One chip of the main table (the pair of rows between two borders)."""

    npu_id: int
    chip_id: int | None = None
    phy_id: int | None = None
    logic_id: int | None = None
    name: str | None = None
    health: str | None = None
    power_w: float | None = None
    temperature_c: int | None = None
    aicore_percent: int | None = None
    bus_id: str | None = None
    memory_used_mb: int | None = None
    memory_total_mb: int | None = None
    hbm_used_mb: int | None = None
    hbm_total_mb: int | None = None
    hugepages_used: int | None = None
    hugepages_total: int | None = None
    # `NPU Util(%)`, the overall utilisation the `npu-id` layout prints instead of AICore(%)
    npu_util_percent: int | None = None


@dataclass(frozen=True, slots=True)
class ProcessRow:
    """One row of the process section; `pid` is the host pid, `container_pid` the one seen
    inside the container (26.0 layout and soft-partitioned A3)."""

    npu_id: int
    chip_id: int | None
    pid: int
    name: str
    memory_mb: int | None
    container_pid: int | None = None


@dataclass(frozen=True, slots=True)
class NpuInfo:
    """`npu-smi info`. `processes_known` is False when the process section is missing or cut:
    an empty `processes` then means "unknown", not "idle"."""

    npu_smi_version: str | None
    driver_version: str | None
    layout: str
    chips: tuple[ChipRow, ...]
    processes: tuple[ProcessRow, ...]
    processes_known: bool
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class MappingRow:
    """One row of `npu-smi info -m`; Mcu rows have logic_id None."""

    npu_id: int
    chip_id: int | None
    logic_id: int | None
    phy_id: int | None
    name: str | None


@dataclass(frozen=True, slots=True)
class NpuMapping:
    """`npu-smi info -m`: one row per chip (and MCU)."""

    rows: tuple[MappingRow, ...]
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ListEntry:
    """One card of `npu-smi info -l`; product name and serial are absent on 910-class servers."""

    npu_id: int
    chip_count: int | None
    product_name: str | None = None
    serial_number: str | None = None


@dataclass(frozen=True, slots=True)
class NpuList:
    """`npu-smi info -l`: the card count and one entry per card."""

    total_count: int | None
    npus: tuple[ListEntry, ...]
    warnings: tuple[str, ...] = ()


def _frozen_values(values: Mapping[str, WatchValue]) -> Mapping[str, WatchValue]:
    return MappingProxyType(dict(values))


@dataclass(frozen=True, slots=True)
class WatchRow:
    """One line of `npu-smi info watch`; `values` has every column of the table, ids included."""

    npu_id: int | None
    chip_id: int | None
    # a read-only mapping: unhashable, so it stays out of the hash
    values: Mapping[str, WatchValue] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", _frozen_values(self.values))


@dataclass(frozen=True, slots=True)
class WatchTable:
    """`npu-smi info watch`: its columns and one row per chip and interval."""

    columns: tuple[str, ...]
    rows: tuple[WatchRow, ...]
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class NpuSmiError:
    """An error printed by npu-smi instead of the asked-for output.

    `code` is the dcmi return code (`-8005`) when printed, `kind` a short word for judges
    (`dcmi_init_failed`, `device_in_use`, `dcmi_error`, `invalid_card`, `permission_denied`,
    `no_npu`, `driver_library_missing`, `command_not_found`, `unsupported`),
    `message` the error line(s) as printed, stripped, joined by newlines; `warnings` every
    other line of the output (with its line number), so that none is lost.
    """

    code: int | None
    kind: str
    message: str
    warnings: tuple[str, ...] = ()


# ----------------------------------------------------------------------------- -t key/value

Value: TypeAlias = int | float | str | None


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
