"""npu-smi's front door: one sample of the machine's chips, read the same way for the doctor's
checks and the console's sampler.

`sample(host, timeout_s)` runs `npu-smi info` (the table), `-t health` for every chip that is
not OK (only those have an active alarm, so a box in good health costs no call) and
`-t usages` per card, all within one deadline, through `probes.inventory.run_npu_smi` (one
npu-smi at a time in the process). The result is typed facts; meanings and verdicts are the
callers' (checks.health_codes, checks.health).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from probes import inventory
from probes.errors import ParseError
from probes.host import CommandResult, Host

if TYPE_CHECKING:
    from probes.npu_smi.model import ChipRow, Usages
    from probes.npu_smi.model_kv import HealthReport

ChipKey = tuple[int, int | None]  # (npu_id, chip_id); chip_id None for a card without chip rows
_LAST_CALL_S = 0.05  # less time than this left: the call is not started


@dataclass(frozen=True)
class HealthCodes:
    """`-t health` of one chip: its error codes as printed (upper case, no 0x; None when
    unread), its error texts, and why it could not be read."""

    codes: tuple[str, ...] | None
    lines: tuple[str, ...]
    unread: str | None = None


@dataclass(frozen=True)
class NpuSample:
    """One sample: the table's reading, the health codes of chips that are not OK (a chip that
    is OK maps to no codes) and each card's usages."""

    reading: inventory.NpuReading
    health: Mapping[ChipKey, HealthCodes]
    usages: Mapping[ChipKey, Usages]
    duration_s: float


def needs_health_read(health: str | None) -> bool:
    """Whether a chip may have an active alarm: its health word is anything but OK."""
    return (health or "").strip().upper() != "OK"


def chip_args(kind: str, npu_id: int, chip_id: int | None) -> list[str]:
    """`info -t KIND -i N [-c C]`: a card without chip rows is asked without -c."""
    args = ["info", "-t", kind, "-i", str(npu_id)]
    return args if chip_id is None else [*args, "-c", str(chip_id)]


def normalise_code(code: str) -> str:
    """`0x80e00209` / `80E00209` -> `80E00209`."""
    return code.strip().upper().removeprefix("0X")


def sample(host: Host, timeout_s: float) -> NpuSample:
    """The table, then health codes (alerts first), then usages, within `timeout_s` together."""
    started = time.monotonic()
    reading = inventory.read_live(host, timeout_s=timeout_s)
    info = reading.info
    if info is None:
        return NpuSample(reading, {}, {}, time.monotonic() - started)
    deadline = started + timeout_s
    health = read_health_of(host, info.chips, deadline)
    usages = read_usages(host, sorted({chip.npu_id for chip in info.chips}), deadline)
    return NpuSample(reading, health, usages, time.monotonic() - started)


def read_health_of(host: Host, chips: Sequence[ChipRow],
                   deadline: float) -> dict[ChipKey, HealthCodes]:
    """`-t health` codes of every chip that is not OK, each call within what is left."""
    found: dict[ChipKey, HealthCodes] = {}
    for chip in chips:
        key = (chip.npu_id, chip.chip_id)
        if not needs_health_read(chip.health):
            found[key] = HealthCodes((), ())
            continue
        left_s = deadline - time.monotonic()
        health = chip.health or "NA"
        if left_s <= _LAST_CALL_S:
            reason = f"health {health}, not read within the sample's time"
            found[key] = HealthCodes(None, (), reason)
            continue
        read = read_health(host, chip.npu_id, chip.chip_id, left_s)
        if read.codes is None:
            read = HealthCodes(None, read.lines, f"health {health}, {read.unread}")
        found[key] = read
    return found


def read_health(host: Host, npu_id: int, chip_id: int | None, timeout_s: float) -> HealthCodes:
    """One chip's `-t health`: its codes and texts; why not, when unreadable."""
    args = chip_args("health", npu_id, chip_id)
    result = inventory.run_npu_smi(host, args, timeout_s)
    if not result.ok:
        return HealthCodes(None, (result.describe(),), result.describe())
    try:
        report: HealthReport = kv_view(result.stdout, "health")
    except Exception as exc:  # a health output we cannot read is evidence, not a crash
        reason = f"`npu-smi {' '.join(args)}`: unreadable ({exc})"
        return HealthCodes(None, (reason,), reason)
    codes = tuple(normalise_code(code) for code in report.error_codes)
    return HealthCodes(codes, report.error_information)


def read_usages(host: Host, npu_ids: Sequence[int], deadline: float) -> dict[ChipKey, Usages]:
    """`-t usages -i N` of each card while time is left (the panel shows "-" for the rest)."""
    found: dict[ChipKey, Usages] = {}
    for npu_id in npu_ids:
        left_s = deadline - time.monotonic()
        if left_s <= _LAST_CALL_S:
            break
        result = inventory.run_npu_smi(host, ["info", "-t", "usages", "-i", str(npu_id)], left_s)
        found.update(parse_usages(result, npu_id))
    return found


def parse_usages(result: CommandResult, npu_id: int) -> dict[ChipKey, Usages]:
    """The usages of one card's chips, keyed (npu_id, chip_id); empty when unreadable."""
    if not result.ok or not result.stdout.strip():
        return {}
    try:
        per_chip: dict[int | None, Usages] = kv_view(result.stdout, "usages")
    except ParseError:
        return {}
    # keyed by the card asked for: the printed NPU ID repeats it
    return {(npu_id, chip_id): usage for chip_id, usage in per_chip.items()}


def kv_view(text: str, kind: str) -> Any:
    """The typed view (probes.npu_smi.views.VIEWS) of one `-t KIND` output; ParseError when
    the text is not one."""
    from probes.npu_smi import parse_kv, view  # the parsers: only when there is an output

    return view(parse_kv(text, kind))
