"""How many of the tensors config.json needs a checkpoint holds, counted the way the loader
finds them (probes.model.tensors names them; a routed expert also counts when the layer stores
its experts fused as `mlp.experts.gate_up_proj` / `down_proj`, as Qwen3.5/3.6 BF16 releases
do). Pure: the headers were read by probes.model.reader."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from probes.model.families import FAMILIES
from probes.model.reader import ModelDir, TensorInfo
from probes.model.safetensors_header import shown
from probes.model.tensors import InventoryError, expected_count, expected_tensors

# A config implying more tensors than this is not enumerated (no real checkpoint comes near:
# Qwen3-235B-A22B-FP8 has about 74,000 with its scales).
MAX_ENUMERATED = 2_000_000
_PER_EXPERT = re.compile(r"^(.*\.mlp\.experts\.)\d+\.(gate|up|down)_proj\.weight$")


@dataclass(frozen=True)
class Coverage:
    """The tensors config.json needs against those the shards hold."""

    needed: int = 0
    present: int = 0
    in_broken_shards: int = 0  # not present, and the index puts them in a missing/unreadable shard
    example: str = ""  # one needed tensor found nowhere ("" when none)
    note: str = ""  # why nothing was counted ("" when counted)

    @property
    def counted(self) -> bool:
        return not self.note

    @property
    def complete(self) -> bool:
        return self.counted and self.present == self.needed

    def line(self) -> str:
        """One line for a person: what is held, what is in broken shards, what is nowhere."""
        if not self.counted:
            return self.note
        if self.complete:
            return f"holds all {self.needed:,} tensors config.json needs"
        nowhere = self.needed - self.present - self.in_broken_shards
        parts = []
        if self.in_broken_shards:
            parts.append(f"{self.in_broken_shards:,} in the shards that are missing or "
                         "unreadable")
        if nowhere:
            parts.append(f"{nowhere:,} in no shard" + (f", e.g. {shown(self.example)}"
                                                       if self.example else ""))
        return (f"holds {self.present:,} of the {self.needed:,} tensors config.json needs ("
                + "; ".join(parts) + ")")


def _fused(name: str, tensors: Mapping[str, TensorInfo]) -> bool:
    match = _PER_EXPERT.match(name)
    if match is None:
        return False
    fused = "down_proj" if match.group(2) == "down" else "gate_up_proj"
    return match.group(1) + fused in tensors


def coverage(model: ModelDir) -> Coverage:
    config = model.config
    if config.family not in FAMILIES:
        arch = config.model_type or config.architecture or "unknown"
        return Coverage(note=f"tensors not counted: {arch} is not an architecture this project "
                             "lays out")
    try:
        needed = expected_count(config)
    except InventoryError as exc:
        return Coverage(note=f"tensors not counted: {exc}")
    if needed > MAX_ENUMERATED:
        # not enumerated: the shards hold at most what their headers list
        return Coverage(needed, min(needed, len(model.tensors)))
    broken = set(model.missing_shards) | set(model.unreadable_shards)
    present = in_broken = 0
    example = ""
    for name, _spec in expected_tensors(config):
        if name in model.tensors or _fused(name, model.tensors):
            present += 1
        elif model.weight_map.get(name) in broken:
            in_broken += 1
        elif not example:
            example = name
    return Coverage(needed, present, in_broken, example)
