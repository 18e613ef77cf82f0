"""Typed views of parsed `-t` outputs that judges use: the health report of `-t health`, the
chip and HBM temperatures of `-t temp`, `-t usages`, `-t memory` or `-t common`."""

from __future__ import annotations

from collections.abc import Mapping

from probes.npu_smi.model import Value
from probes.npu_smi.model_kv import ChipTemperatures, HealthReport, KvBlock, KvOutput

_CHIP_TEMPERATURE_KEYS = ("npu_temperature_c", "temperature_c")
_HBM_TEMPERATURE_KEYS = ("hbm_temperature_c",)


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


def temperatures(output: KvOutput) -> tuple[ChipTemperatures, ...]:
    """Per chip block, the temperatures printed (the MCU block's board sensors are not a chip's);
    blocks that print no temperature are left out."""
    found = []
    for block in output.blocks:
        if block.name is not None:
            continue
        chip_c = _first_number(block.fields, _CHIP_TEMPERATURE_KEYS)
        hbm_c = _first_number(block.fields, _HBM_TEMPERATURE_KEYS)
        if chip_c is not None or hbm_c is not None:
            found.append(ChipTemperatures(block.chip_id, chip_c, hbm_c))
    return tuple(found)


def _first_number(fields: Mapping[str, Value], keys: tuple[str, ...]) -> float | None:
    for key in keys:
        value = fields.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    return None
