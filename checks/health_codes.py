"""One chip's `npu-smi info -t health -i N -c C`: its error codes, read the same way for the
doctor's npu.health and npu.temperature and for the console's sampler.

Only a chip whose health is not `OK` has an active alarm, so callers read it only for those
(a box in good health costs no call). The call goes through npu-smi's front door
(`probes.npu_smi.reading`): one npu-smi at a time in the process, waiting counted against the
timeout.
"""

from __future__ import annotations

from dataclasses import dataclass

from checks.thermal_codes import THERMAL_CODES
from probes.host import Host

# Fault codes (hex, printed by -t health without 0x) with documented meanings
# (Ascend/mind-cluster component/ascend-faultdiag/src/ascend_fd/configuration/kg-config.json).
FAULT_CODES = {
    **{code: meaning for code, (_, meaning) in THERMAL_CODES.items()},
    "80E01801": "multi-bit ECC error with failed address isolation",
}


@dataclass(frozen=True)
class HealthRead:
    """`-t health` of one chip: its error codes (None when unread), and evidence lines."""

    codes: tuple[str, ...] | None
    lines: tuple[str, ...]
    unread: str | None = None


def read_health(host: Host, npu_id: int, chip_id: int | None, timeout_s: float) -> HealthRead:
    """The chip's error codes (npu-smi's front door reads them) and what they mean."""
    from probes.npu_smi import reading  # only for a chip that is not OK

    read = reading.read_health(host, npu_id, chip_id, timeout_s)
    if read.codes is None:
        return HealthRead(None, read.lines, read.unread)
    return HealthRead(read.codes, (*meanings(read.codes), *read.lines))


def meanings(codes: tuple[str, ...]) -> list[str]:
    return [f"fault 0x{code}: {FAULT_CODES.get(code, 'see the Huawei fault manual')}"
            for code in codes]
