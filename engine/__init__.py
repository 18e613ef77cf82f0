"""In-process inference engine (the only package that imports torch).

    from engine import Engine, GenerationConfig
    eng = Engine.load("path/to/model", device="auto", dtype="bfloat16")
    for event in eng.generate(ids, GenerationConfig(max_new_tokens=32)):
        print(event.text, end="")

Names are resolved lazily so that torch-free helpers in this package (for example
`demo_models.qwen_tokenizer`) can be imported without loading torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.errors import EngineError
    from engine.generate import Engine, EngineStats, GenerationConfig, GenerationEvent

__all__ = ["Engine", "EngineError", "EngineStats", "GenerationConfig", "GenerationEvent"]

_HOME = {
    "Engine": "engine.generate",
    "EngineStats": "engine.generate",
    "GenerationConfig": "engine.generate",
    "GenerationEvent": "engine.generate",
    "EngineError": "engine.errors",
}


def __getattr__(name: str) -> Any:
    if name in _HOME:
        return getattr(importlib.import_module(_HOME[name]), name)
    raise AttributeError(f"module 'engine' has no attribute {name!r}")
