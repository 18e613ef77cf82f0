"""The names of the temperature rule (checks.thermal) that need no judging to be known: the
thermal fault codes and their meanings, the rule names, the code spelling. Apart, so that a
check can name them without building the rule's classes (a machine without npu-smi never
judges a temperature).
"""

from __future__ import annotations

from typing import Literal

ThermalLevel = Literal["ok", "warn", "fail", "unknown"]

# code (8 hex digits, upper case, no 0x) -> (level, meaning as the fault knowledge graph states it:
# Ascend/mind-cluster component/ascend-faultdiag/src/ascend_fd/configuration/kg-config.json
# @ 22bb3d987bc0); the levels are this project's reading of fatal / non-fatal
THERMAL_CODES: dict[str, tuple[ThermalLevel, str]] = {
    "80E00209": ("fail", "HBM temperature above 95 °C (alarm)"),
    "80E0020B": ("fail", "HBM fatal high-temperature alarm"),
    "80E20207": ("warn", "SoC non-fatal high-temperature alarm (threshold not published)"),
    "80DE0207": ("warn", "DDR chip non-fatal high-temperature alarm"),
}

# the rule names (npu.temperature's playbook lists them under "What the check does")
RULE_CODE = "thermal-alarm-code"
RULE_CODES_UNREAD = "thermal-codes-unread"
RULE_HBM = "hbm-alarm"
RULE_PEERS = "hotter-than-peers"
RULE_NO_TEMPERATURE = "no-temperature"
NO_TEMPERATURE = "npu-smi printed no temperature for it"



