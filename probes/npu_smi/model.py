"""Frozen facts parsed from the outputs of `npu-smi`: the main table of `npu-smi info` and the
error npu-smi prints instead of an output, which every reading may meet. The facts of the other
kinds live beside them and are built only when such an output is parsed: `model_lines`
(`-m`, `-l`, `watch`) and `model_kv` (the `-t` outputs).

Units are in the field names. A field that the output does not carry, or that it prints as
`NA`, `-` or blank, is None. Strings (names, health, bus ids) are kept as printed, masked ones
(`xxx`, `0000:xx:00.0`) included, because a judge must be able to tell "masked" from "absent".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

# a value of a `watch` column (probes.npu_smi.model_lines)
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


# a value of a `-t` key/value line (probes.npu_smi.model_kv)
Value: TypeAlias = int | float | str | None


@dataclass(frozen=True, slots=True)
class Usages:
    """One chip's `-t usages` figures that the panels and checks use (views.usages)."""

    hbm_bandwidth_percent: float | None
    aicore_percent: int | None
