"""Typed views of parsed `-t` outputs that judges use: the health report of `-t health`, the
chip and HBM temperatures of `-t temp`, `-t memory` or `-t common`, the usages of `-t usages`.

`VIEWS` holds one row per `-t` type a judge reads (the registry's "kv" row views through
`kv_view`); a `-t` type without a row is viewed as its blocks (the KvOutput itself).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from probes.npu_smi.model import Usages, Value
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
    return next((n for n in (_number(fields.get(key)) for key in keys) if n is not None), None)


def usages(output: KvOutput) -> dict[int | None, Usages]:
    """`-t usages` per chip id (the MCU block is not a chip's)."""
    found: dict[int | None, Usages] = {}
    for block in output.blocks:
        if block.name is not None and block.name.lower() == "mcu":
            continue
        fields = block.fields
        found[block.chip_id] = Usages(
            hbm_bandwidth_percent=_number(fields.get("hbm_bandwidth_usage_rate_percent")),
            aicore_percent=_int(fields.get("aicore_usage_rate_percent")),
        )
    return found


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _int(value: object) -> int | None:
    number = _number(value)
    return None if number is None else round(number)


# `-t` type -> its typed view (the view rows; each type is one of probes.npu_smi.kv.KV_KINDS)
VIEWS: dict[str, Callable[[KvOutput], Any]] = {
    "health": health_report,
    "usages": usages,
    "memory": temperatures,
    "common": temperatures,
    "temp": temperatures,
}


def kv_view(output: KvOutput) -> Any:
    """The typed view of a `-t` output by its type; the output itself for a type without one."""
    row = VIEWS.get(output.kind)
    return output if row is None else row(output)
