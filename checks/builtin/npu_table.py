"""The npu-smi table both NPU checks start from, and their front (checks/registry.py): without a
table (no npu-smi, an npu-smi error, a hang, no chips) the checks' answer is given here, before
the health words, thermal codes and their classes are imported."""

from __future__ import annotations

from typing import TYPE_CHECKING

from checks.builtin import facts
from checks.context import Context
from checks.model import Finding, failed, skipped

if TYPE_CHECKING:
    from probes.inventory import NpuReading
    from probes.npu_smi import NpuInfo

# npu-smi error outputs and their known causes (tests/corpus/npu-smi/FORMATS.md §4).
ERROR_CAUSES = {
    "dcmi_init_failed": "no access to the device: a container started without the device "
                        "nodes, a device held by another container, a non-root user, or a "
                        "driver upgraded without a reboot",
    "device_in_use": "the device is already in use by another container",
    "invalid_card": "the card id is not present (a card that fell off the bus, or a wrong -i)",
    "permission_denied": "this user may not open the device nodes (run as root or in the "
                         "HwHiAiUser group)",
    "no_npu": "the driver sees no NPU card on this server",
}
# the rules both checks share (their CHECK_RULES, checks/builtin/npu.py)
NPU_SMI_RULES = {
    "npu-smi-hung": "fail",
    "no-npu": "skip",
    "npu-smi-error": "fail",
    "no-chips": "skip",
}


def npu_table(ctx: Context) -> NpuInfo | None:
    """The main table with at least one chip; None when there is none (no_table says why)."""
    return _table_or_finding(ctx)[0]


def no_table(ctx: Context) -> Finding | None:
    """The front of npu.health and npu.temperature: their Finding without a table, else None."""
    return _table_or_finding(ctx)[1]


def _table_or_finding(ctx: Context) -> tuple[NpuInfo | None, Finding | None]:
    """The main table, or the Finding to return when there is none."""
    reading: NpuReading = facts.npu(ctx)
    if reading.command is not None and reading.command.outcome in ("timeout", "output_limit"):
        # error_text already says it hung, and where to look
        return None, failed(reading.error_text,
                            "find the stuck driver or device in `dmesg`; see the npu.health "
                            "playbook", rules=("npu-smi-hung",))
    if reading.kind == "unavailable":
        return None, skipped(f"no NPU to look at: {reading.error_text}", rules=("no-npu",))
    if reading.is_error:
        return None, _npu_smi_error(reading)
    if reading.info is None or not reading.info.chips:
        return None, skipped("npu-smi printed no chips", rules=("no-chips",))
    return reading.info, None


def _npu_smi_error(reading: NpuReading) -> Finding:
    kind = reading.error.kind if reading.error is not None else ""
    cause = ERROR_CAUSES.get(kind, "see the npu.health playbook")
    return failed(f"npu-smi failed: {reading.error_text}", cause, reading.error_text,
                  rules=("npu-smi-error",))
