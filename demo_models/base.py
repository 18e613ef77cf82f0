"""What every kind shares: its options, its failure type, how it is declared."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

Tensors = dict[str, torch.Tensor]
SCALE_DTYPES: dict[str, torch.dtype] = {
    "bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32,
}


class DemoError(Exception):
    """A failure reported as one line (what is wrong and what to do), exit code 2."""


@dataclass(frozen=True)
class BuildOptions:
    kind: str
    scale_dtype: str = "bf16"
    shards: int = 1


@dataclass(frozen=True)
class Kind:
    name: str
    summary: str
    safetensors: bool  # --scale-dtype / --shards apply
    build: Callable[[Path, BuildOptions], dict[str, Any]]  # writes files, returns demo.json


def write_json(path: Path, document: dict[str, Any]) -> None:
    path.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def drop_keys(path: Path, keys: tuple[str, ...]) -> None:
    """Remove `keys` from a JSON file this builder just wrote through another library."""
    document = json.loads(path.read_text(encoding="utf-8"))
    for key in keys:
        document.pop(key, None)
    write_json(path, document)
