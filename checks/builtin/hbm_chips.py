"""npu.hbm-fit's chips: which chips a deployment uses and how much HBM it has on each (the
target's own chips judged against their total, any other chip against what is free now)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from checks.builtin.hbm_plan import MB
from checks.context import Context

if TYPE_CHECKING:
    from probes.npu_smi import ChipRow, NpuInfo


@dataclass(frozen=True)
class ChipBudget:
    """One chip and the HBM a deployment has on it, and why."""

    chip: ChipRow
    budget_bytes: int
    how: str


def chips_used(chips: Sequence[ChipRow], visible_ids: tuple[int, ...] | None) -> list[ChipRow]:
    """The chips the deployment sees: ASCEND_RT_VISIBLE_DEVICES logical ids are positions in
    npu-smi's table; ids past its end are ignored (cann.environment reports them)."""
    if visible_ids is None:
        return list(chips)
    return [chips[i] for i in visible_ids if 0 <= i < len(chips)]


def free_bytes(chip: ChipRow) -> int | None:
    if chip.hbm_total_mb is None or chip.hbm_used_mb is None:
        return None
    return (chip.hbm_total_mb - chip.hbm_used_mb) * MB


def chip_label(chip: ChipRow) -> str:
    part = "" if chip.chip_id is None else f" chip {chip.chip_id}"
    return f"NPU {chip.npu_id}{part}"


def names(chips: Sequence[ChipRow]) -> str:
    found = sorted({c.name or "unknown" for c in chips})
    return f"{len(chips)} x {'/'.join(found)}"


def _same_chip(chip: ChipRow, npu_id: int, chip_id: int | None) -> bool:
    return chip.npu_id == npu_id and (chip.chip_id is None or chip_id is None
                                      or chip.chip_id == chip_id)


def budget(chip: ChipRow, info: NpuInfo, own_pids: frozenset[int]) -> ChipBudget:
    """A chip the target holds: its total less what other processes hold on it. Any other:
    what is free now."""
    total = (chip.hbm_total_mb or 0) * MB
    rows = [p for p in info.processes if _same_chip(chip, p.npu_id, p.chip_id)]
    if own_pids and any(p.pid in own_pids for p in rows):
        others_mb = sum(p.memory_mb or 0 for p in rows if p.pid not in own_pids)
        return ChipBudget(chip, total - others_mb * MB,
                          f"{chip.hbm_total_mb:,} MB total less {others_mb:,} MB other processes "
                          f"hold (the target's own use is its plan)")
    return ChipBudget(chip, free_bytes(chip) or 0,
                      f"{(chip.hbm_total_mb or 0) - (chip.hbm_used_mb or 0):,} MB free now "
                      f"({chip.hbm_used_mb:,} / {chip.hbm_total_mb:,} MB used)")


def group(ctx: Context, info: NpuInfo, visible: list[ChipRow],
          size: int) -> tuple[list[ChipBudget], str]:
    """The chips of one deployment: those the target holds, else the `size` visible chips
    with the most HBM free (the best placement), and how they were chosen."""
    own = frozenset(use.pid for use in ctx.target.npus)
    held = [c for c in visible if any(_same_chip(c, u.npu_id, u.chip_id)
                                      for u in ctx.target.npus)]
    if held:
        return ([budget(c, info, own) for c in held],
                f"the {len(held)} chip(s) the target holds")
    ranked = sorted((budget(c, info, own) for c in visible), key=lambda b: -b.budget_bytes)
    return ranked[:size], (f"the {min(size, len(ranked))} of {len(visible)} visible chip(s) "
                           "with the most free HBM")
