"""A baseline as data: what a validated machine looked like (`ascend-baseline/1`). Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

SCHEMA = "ascend-baseline/1"
SCHEMA_NAME, SCHEMA_MAJOR = "ascend-baseline", "1"
STACK_ITEMS = ("driver", "firmware", "cann", "nnal", "mindie")
PACKAGES = ("torch", "torch-npu", "transformers", "tokenizers", "vllm", "vllm-ascend")
# Chinese, an emoji-free mix of scripts, digits and a chat marker: a tokenizer swap or a
# different added-token table changes these ids.
PROBE_TEXT = "<|im_start|>user\n你好，昇腾 NPU！Hello, world 12345<|im_end|>\n"
SPECIAL_IDS = ("bos_token_id", "eos_token_id", "pad_token_id", "unk_token_id")
ABSENT = "absent"
UNAVAILABLE = "unavailable"

Category = Literal["version", "environment", "inventory", "tokenizer"]
CATEGORIES: tuple[Category, ...] = ("version", "environment", "inventory", "tokenizer")


class BaselineError(Exception):
    """A baseline file cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class NpuInventory:
    count: int
    chips: tuple[str, ...]  # chip names as npu-smi prints them, e.g. 910B4
    hbm_total_mb: tuple[int | None, ...]


@dataclass(frozen=True)
class TokenizerFingerprint:
    vocab_size: int
    special_ids: Mapping[str, int | None]
    probe_text: str
    ids: tuple[int, ...]
    ids_dtype: str
    mask_dtype: str | None


@dataclass(frozen=True)
class Baseline:
    recorded_at: str
    host: str
    versions: Mapping[str, str] = field(default_factory=dict)  # item -> version (present only)
    environment: Mapping[str, str] = field(default_factory=dict)
    npu: NpuInventory | None = None  # None: npu-smi gave no inventory
    tokenizer: TokenizerFingerprint | None = None
    # what could not be observed (only on the "now" side): flattened names or their prefixes
    unknown: Mapping[str, str] = field(default_factory=dict)  # name -> why


@dataclass(frozen=True)
class Drift:
    name: str
    category: Category
    baseline: str
    now: str

    def line(self) -> str:
        return f"{self.name}: {self.baseline} -> {self.now}"
