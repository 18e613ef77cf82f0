"""Header-only checkpoints of real model shapes: every safetensors header a real checkpoint of
the config would have, the data left as a file hole (no disk used, nothing to download).

Names, shapes and dtypes come from probes.model.tensors (the official layouts); FP8 configs
get float8 weights plus a BF16 `weight_scale_inv` grid for every quantisable linear.
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path
from typing import Any

from probes.model.config import parse_config
from probes.model.tensors import expected_tensors

BYTES = {"BF16": 2, "F8_E4M3": 1}


def header_entries(config: dict[str, Any]) -> list[tuple[str, str, tuple[int, ...]]]:
    """(name, dtype, shape) of the language model's tensors and their FP8 scales."""
    facts = parse_config(config)
    block = facts.quant.block_size
    entries: list[tuple[str, str, tuple[int, ...]]] = []
    for name, spec in expected_tensors(facts):
        fp8 = facts.quant.is_fp8 and spec.quantisable and \
            not facts.quant.skips(name.removesuffix(".weight"))
        entries.append((name, "F8_E4M3" if fp8 else "BF16", spec.shape))
        if fp8 and block is not None:
            grid = (math.ceil(spec.shape[0] / block[0]), math.ceil(spec.shape[1] / block[1]))
            entries.append((name + "_scale_inv", "BF16", grid))
    return entries


def write_header_only(directory: Path, config: dict[str, Any]) -> int:
    """config.json and one sparse shard; returns the data bytes the headers describe."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config))
    header: dict[str, Any] = {}
    offset = 0
    for name, dtype, shape in header_entries(config):
        size = math.prod(shape) * BYTES[dtype]
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset,
                                                                            offset + size]}
        offset += size
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    shard = directory / "model.safetensors"
    with shard.open("wb") as handle:
        handle.write(struct.pack("<Q", len(text)) + text)
        handle.truncate(8 + len(text) + offset)
    return offset


def _write_shard(path: Path, entries: list[tuple[str, str, tuple[int, ...]]]) -> int:
    """One sparse shard holding `entries`; returns its data bytes."""
    header: dict[str, Any] = {}
    offset = 0
    for name, dtype, shape in entries:
        size = math.prod(shape) * BYTES[dtype]
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with path.open("wb") as handle:
        handle.write(struct.pack("<Q", len(text)) + text)
        handle.truncate(8 + len(text) + offset)
    return offset


def write_sharded_header_only(directory: Path, config: dict[str, Any], shards: int = 0,
                              weight_map: dict[str, str] | None = None) -> dict[str, Any]:
    """config.json, sparse shards and model.safetensors.index.json (with the real
    metadata.total_size of what the headers describe). The tensors go where `weight_map` says
    (a real index), else in order over `shards` files named as the Hub names them."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config))
    entries = header_entries(config)
    if weight_map is None:
        per = math.ceil(len(entries) / shards)
        weight_map = {name: f"model-{i // per + 1:05d}-of-{shards:05d}.safetensors"
                      for i, (name, _, _) in enumerate(entries)}
    by_shard: dict[str, list[tuple[str, str, tuple[int, ...]]]] = {}
    for entry in entries:
        by_shard.setdefault(weight_map[entry[0]], []).append(entry)
    total = sum(_write_shard(directory / shard, found) for shard, found in by_shard.items())
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (directory / "model.safetensors.index.json").write_text(json.dumps(index))
    return index
