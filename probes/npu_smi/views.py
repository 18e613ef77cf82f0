"""Typed views of parsed `-t` outputs that judges use: the health report of `-t health`."""

from __future__ import annotations

from collections.abc import Mapping

from probes.npu_smi.model import HealthReport, KvBlock, KvOutput, Value


def health_report(block: KvBlock | KvOutput) -> HealthReport:
    """The typed view of `-t health`: status, error codes, one text per error."""
    fields = _health_fields(block)
    status = fields.get("health_status", fields.get("health"))
    codes = str(fields.get("error_code", "NA")).split()
    info = str(fields.get("error_information", "NA")).split("\n")
    return HealthReport(
        status=None if status is None else str(status),
        error_codes=tuple(code for code in codes if code.upper() != "NA"),
        error_information=tuple(t.strip() for t in info if t.strip() and t.strip() != "NA"),
    )


def _health_fields(block: KvBlock | KvOutput) -> Mapping[str, Value]:
    if isinstance(block, KvBlock):
        return block.fields
    health_keys = ("health_status", "health", "error_code")
    for candidate in block.blocks:
        if any(key in candidate.fields for key in health_keys):
            return candidate.fields
    return {}
