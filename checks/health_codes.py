"""One chip's `npu-smi info -t health -i N -c C`: its error codes, read the same way for the
doctor's npu.health and npu.temperature and for the console's sampler.

Only a chip whose health is not `OK` has an active alarm, so callers read it only for those
(a box in good health costs no call). The call goes through `probes.inventory.run_npu_smi`:
one npu-smi at a time in the process, waiting counted against the timeout.
"""

from __future__ import annotations

from dataclasses import dataclass

from checks.thermal_codes import THERMAL_CODES, normalise_code
from probes.host import Host
from probes.inventory import run_npu_smi

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


def chip_args(kind: str, npu_id: int, chip_id: int | None) -> list[str]:
    """`info -t KIND -i N [-c C]`: a card without chip rows is asked without -c."""
    args = ["info", "-t", kind, "-i", str(npu_id)]
    return args if chip_id is None else [*args, "-c", str(chip_id)]


def read_health(host: Host, npu_id: int, chip_id: int | None, timeout_s: float) -> HealthRead:
    """The chip's error codes and what they mean; why not, when the output could not be read."""
    args = chip_args("health", npu_id, chip_id)
    result = run_npu_smi(host, args, timeout_s)
    if not result.ok:
        return HealthRead(None, (result.describe(),), result.describe())
    from probes.npu_smi import health_report, parse_kv  # only for a chip that is not OK

    try:
        report = health_report(parse_kv(result.stdout, "health"))
    except Exception as exc:  # a health output we cannot read is evidence, not a crash
        reason = f"`npu-smi {' '.join(args)}`: unreadable ({exc})"
        return HealthRead(None, (reason,), reason)
    codes = tuple(normalise_code(code) for code in report.error_codes)
    known = [f"fault 0x{code}: {FAULT_CODES.get(code, 'see the Huawei fault manual')}"
             for code in codes]
    return HealthRead(codes, (*known, *report.error_information))
