"""How the serving engines plan memory when they are not told: the share of each chip's memory
they plan within (checks/data/engine_memory.yaml) and the context vLLM sizes for without
`--max-model-len` (the model's own `max_position_embeddings`: vllm-project/vllm#19407).
Pure lookups; npu.hbm-fit (checks.builtin.hbm_inputs) applies them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from checks import data

if TYPE_CHECKING:
    from probes.model.config import ConfigFacts

MAX_LEN_SOURCE = ("vLLM's default without --max-model-len: the model's own maximum context "
                  "(vllm-project/vllm#19407)")


@dataclass(frozen=True)
class EngineDefault:
    """One engine's default memory share, what it covers, and its sources."""

    id: str
    engine: str  # vllm, mindie: the server probes.target.cmdline names
    setting: str  # the flag or variable that overrides it
    default_fraction: float
    holds: str  # what the share is planned for
    sources: tuple[str, ...]
    note: str = ""


def engine_default(engine: str) -> EngineDefault | None:
    """The default memory share of `engine`, or None when the data has none."""
    rows = data.load("engine_memory", EngineDefault)
    return next((row for row in rows if row.engine == engine), None)


def default_source(row: EngineDefault) -> str:
    return (f"{row.setting} unset: {row.engine}'s default {row.default_fraction:g} "
            f"({row.sources[0]})")


def model_max_context(config: ConfigFacts) -> tuple[int, str] | None:
    """The context vLLM sizes for when the command line gives none, and where it comes from;
    None when config.json does not say."""
    text = config.raw.get("text_config")
    written = "max_position_embeddings" in config.raw or (
        isinstance(text, dict) and "max_position_embeddings" in text)
    value = config.max_position_embeddings
    if not written or not value:
        return None
    return value, f"max_position_embeddings {value:,} in config.json; {MAX_LEN_SOURCE}"
