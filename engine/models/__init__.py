"""The model families the engine runs, one module each; `family_for` picks one for a config."""

from __future__ import annotations

from engine.errors import ModelFormatError, UnsupportedArchitecture
from engine.models import llama, mixtral, qwen3, qwen3_5_moe, qwen3_moe, qwen3_next
from engine.models.base import Family
from probes.model.config import ConfigFacts

FAMILIES: dict[str, Family] = {f.name: f for f in (
    llama.FAMILY, qwen3.FAMILY, qwen3_moe.FAMILY, mixtral.FAMILY, qwen3_next.FAMILY,
    qwen3_5_moe.FAMILY, qwen3_5_moe.TEXT_FAMILY)}
SUPPORTED_ARCHITECTURES = tuple(FAMILIES)


def family_for(facts: ConfigFacts) -> Family:
    """The family of a config, or the error that names what it is instead."""
    if facts.family in FAMILIES:
        return FAMILIES[facts.family]
    found = facts.model_type or facts.architecture
    if not found:
        raise ModelFormatError(f"{facts.source}: no model_type or architectures field; "
                               "re-download config.json")
    raise UnsupportedArchitecture(
        f"{facts.source}: architecture {found!r} is not supported; supported: "
        f"{', '.join(SUPPORTED_ARCHITECTURES)}")
