"""Frozen facts of the line-shaped npu-smi outputs: `info -m`, `info -l`, `info watch`.

Units are in the field names; a field the output does not carry, or prints as `NA`, `-` or
blank, is None (as in probes.npu_smi.model).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from probes.npu_smi.model import WatchValue


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
