"""npu.hbm-fit's chips: which chips a deployment uses and how much HBM it has on each (the
target's own chips judged against their total, any other chip against what is free now)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from checks.builtin.hbm_plan import MB
from checks.context import Context
from probes.words import counted

if TYPE_CHECKING:
    from probes.npu_smi import ChipRow, NpuInfo


@dataclass(frozen=True)
class ChipBudget:
    """One chip and the HBM a deployment has on it, and why."""

    chip: ChipRow
    budget_bytes: int
    how: str
    runtime_total_bytes: int = 0  # the chip's total less what no process holds at idle


def chips_used(chips: Sequence[ChipRow], visible_ids: tuple[int, ...] | None) -> list[ChipRow]:
    """The chips the deployment sees: ASCEND_RT_VISIBLE_DEVICES logical ids are positions in
    npu-smi's table; ids past its end are ignored (cann.environment reports them)."""
    if visible_ids is None:
        return list(chips)
    return [chips[i] for i in visible_ids if 0 <= i < len(chips)]


def memory_mb(chip: ChipRow) -> tuple[int, int, str] | None:
    """(used, total, which figure): HBM-Usage, else Memory-Usage (310P prints its device
    memory there, not in an HBM column); None when npu-smi printed neither."""
    if chip.hbm_total_mb and chip.hbm_used_mb is not None:
        return chip.hbm_used_mb, chip.hbm_total_mb, "HBM"
    if chip.memory_total_mb and chip.memory_used_mb is not None:
        return chip.memory_used_mb, chip.memory_total_mb, "Memory-Usage"
    return None


def total_mb(chip: ChipRow) -> int:
    found = memory_mb(chip)
    return found[1] if found else 0


def free_bytes(chip: ChipRow) -> int | None:
    found = memory_mb(chip)
    return None if found is None else (found[1] - found[0]) * MB


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
    """What the deployment can use on a chip, measured, whether it runs or not. What no
    process holds is the runtime's own at idle (a 64 GB part shows about 61 GiB to torch_npu:
    vllm-project/vllm-ascend#1670), so the engine's total is the chip's less that. A chip the
    target holds gives the target that total less what other processes hold, i.e. what was
    free before it started; any other chip gives what is free now."""
    used_mb, all_mb, figure = memory_mb(chip) or (0, 0, "HBM")
    rows = [p for p in info.processes if _same_chip(chip, p.npu_id, p.chip_id)]
    idle_mb = max(used_mb - sum(p.memory_mb or 0 for p in rows), 0)
    runtime_mb = all_mb - idle_mb
    if own_pids and any(p.pid in own_pids for p in rows):
        others_mb = sum(p.memory_mb or 0 for p in rows if p.pid not in own_pids)
        return ChipBudget(chip, (runtime_mb - others_mb) * MB,
                          f"{all_mb:,} MB total less {idle_mb:,} MB no process holds and "
                          f"{others_mb:,} MB other processes hold (the target's own use is "
                          "its plan)", runtime_mb * MB)
    return ChipBudget(chip, free_bytes(chip) or 0,
                      f"{all_mb - used_mb:,} MB free now ({used_mb:,} / {all_mb:,} MB "
                      f"{'used' if figure == 'HBM' else 'Memory-Usage'}, {idle_mb:,} MB of it "
                      "held by no process)", runtime_mb * MB)


def group(ctx: Context, info: NpuInfo, visible: list[ChipRow],
          size: int) -> tuple[list[ChipBudget], str]:
    """The chips of one deployment: those the target holds, else the `size` visible chips
    with the most HBM free (the best placement), and how they were chosen."""
    own = frozenset(use.pid for use in ctx.target.npus)
    held = [c for c in visible if any(_same_chip(c, u.npu_id, u.chip_id)
                                      for u in ctx.target.npus)]
    if held:
        return ([budget(c, info, own) for c in held],
                f"the {counted(len(held), 'chip')} the target holds")
    ranked = sorted((budget(c, info, own) for c in visible), key=lambda b: -b.budget_bytes)
    return ranked[:size], (f"the {min(size, len(ranked))} of "
                           f"{counted(len(visible), 'visible chip')} "
                           "with the most free HBM")
