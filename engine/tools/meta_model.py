"""A model's decoder built from its config alone, on the meta device: no weights, no memory.

Layers of one kind (token mixer x feed-forward) run the same operators at the same shapes, so
one layer of each kind stands for all of them: `representative_layers` picks the first layer
of every kind and says how many layers it stands for. The decoder is built with the engine's
own families and layers (engine.model.Decoder) over meta tensors of the shapes and dtypes the
checkpoint would hold (probes.model.tensors), FP8 weights in the mode the engine would load
them. Building a 35B config this way costs a few thousand empty tensors.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch

from engine.cache import CacheShape, KVCache, StateShape
from engine.config import ModelConfig
from engine.errors import ModelFormatError
from engine.fp8 import Fp8Weight, scale_grid
from engine.model import Decoder
from engine.models import FAMILIES
from engine.options import FP8_MODES
from engine.weights import rename
from probes.model.config import FULL_ATTENTION
from probes.model.tensors import (
    InventoryError,
    LayerKind,
    TensorSpec,
    expand,
    global_tensors,
    layer_kind,
    layer_kind_counts,
    layer_tensors,
)

META = torch.device("meta")
# A config claiming more layers than this has its kinds looked for in the first ones only
# (the kinds are found arithmetically; this bounds the search for their first layer).
SEARCH_LAYERS = 100_000
# Tensors the traced layers may hold (Qwen3-235B: 4 x 128 experts a layer; DeepSeek-V3 style
# 256): a config claiming millions of experts is refused before anything is built.
MAX_TENSORS = 200_000


@dataclass(frozen=True)
class LayerUse:
    """One traced layer: its index, its kind and how many layers of the model it stands for."""

    index: int
    kind: LayerKind
    stands_for: int

    @property
    def label(self) -> str:
        mixer = "attention" if self.kind.mixer == FULL_ATTENTION else "deltanet"
        return f"{mixer}+{'moe' if self.kind.moe else 'mlp'}"


@dataclass
class MetaModel:
    """The decoder over representative layers, its cache, and what they stand for."""

    config: ModelConfig
    decoder: Decoder
    cache: KVCache
    layers: tuple[LayerUse, ...]
    dtype: torch.dtype
    fp8_mode: str  # "" for a checkpoint without FP8 weights


def representative_layers(config: ModelConfig) -> tuple[LayerUse, ...]:
    """The first layer of each kind, with the number of layers of that kind."""
    facts = config.facts
    if facts is None:
        raise ModelFormatError("the config was not read from config.json facts")
    try:
        counts = layer_kind_counts(facts)
    except InventoryError as exc:
        raise ModelFormatError(str(exc)) from None
    first: dict[LayerKind, int] = {}
    for index in range(min(config.num_layers, SEARCH_LAYERS)):
        first.setdefault(layer_kind(facts, index), index)
        if len(first) == len(counts):
            break
    return tuple(LayerUse(index, kind, counts[kind])
                 for kind, index in sorted(first.items(), key=lambda item: item[1]))


def _meta_weight(spec: TensorSpec, hf_name: str, config: ModelConfig, dtype: torch.dtype,
                 fp8_mode: str, scale_dtype: str) -> Any:
    """A meta tensor of the spec's shape; an Fp8Weight where the engine keeps FP8 resident."""
    resident = (fp8_mode == "resident" and config.fp8 is not None and spec.quantisable
                and config.facts is not None
                and not config.facts.quant.skips(hf_name.removesuffix(".weight")))
    if not resident:
        return torch.empty(spec.shape, dtype=dtype, device=META)
    assert config.fp8 is not None
    rows, cols = spec.shape[0], spec.shape[-1]
    block = {"tensor": (rows, cols), "channel": (1, cols)}.get(config.fp8.scheme,
                                                                config.fp8.block_size)
    grid = scale_grid((rows, cols), block)
    # The bytes are NaN-free in a real checkpoint (quantisers never write NaN codes); BF16
    # scales take the engine's all-bfloat16 dequantisation, others the float16 one.
    return Fp8Weight(torch.empty(spec.shape, dtype=torch.uint8, device=META),
                     torch.empty(grid, dtype=torch.float32, device=META), block,
                     nan_free=True, bf16_scales=scale_dtype == "BF16")


def meta_weights(config: ModelConfig, layer_count: int, dtype: torch.dtype, fp8_mode: str,
                 scale_dtype: str = "BF16") -> dict[str, Any]:
    """Canonical name -> meta weight for the global tensors and layers 0..layer_count-1."""
    facts = config.facts
    assert facts is not None
    named: list[tuple[str, TensorSpec]] = []
    for spec in global_tensors(facts):
        hf = spec.name if spec.name == "lm_head.weight" else \
            config.weight_prefix + spec.name.removeprefix("model.")
        named.append((hf, spec))
    for index in range(layer_count):
        prefix = f"{config.weight_prefix}layers.{index}."
        for spec in layer_tensors(facts, layer_kind(facts, index)):
            named += [(name, spec) for name in expand(spec, prefix)]
    weights: dict[str, Any] = {}
    for hf_name, spec in named:
        canonical = rename(hf_name, config.weight_prefix)
        if canonical is not None:
            weights[canonical] = _meta_weight(spec, hf_name, config, dtype, fp8_mode,
                                              scale_dtype)
    if config.tie_word_embeddings:
        weights["lm_head.weight"] = weights["embed.weight"]
    return weights


def _cache(config: ModelConfig, layers: tuple[LayerUse, ...], dtype: torch.dtype,
           max_seq_len: int) -> KVCache:
    kinds = [use.kind.mixer == FULL_ATTENTION for use in layers]
    shape = CacheShape(sum(kinds), 1, max_seq_len, config.num_kv_heads, config.head_dim)
    linear = len(kinds) - sum(kinds)
    state = None
    if linear and config.linear is not None:
        d = config.linear
        state = StateShape(linear, 1, d.conv_dim, d.kernel - 1, d.value_heads, d.key_dim,
                           d.value_dim)
    return KVCache.allocate(shape, dtype, META, state=state, kinds=kinds)


def _check_size(config: ModelConfig, layer_count: int) -> None:
    facts = config.facts
    assert facts is not None
    tensors = sum(spec.copies for index in range(layer_count)
                  for spec in layer_tensors(facts, layer_kind(facts, index)))
    if tensors > MAX_TENSORS:
        raise ModelFormatError(f"{facts.source}: the first {layer_count} layers alone would "
                               f"hold {tensors:,} tensors (num_experts "
                               f"{config.num_experts:,}); check config.json")


def build_meta_model(config: ModelConfig, dtype: torch.dtype, fp8_mode: str = "dequantize",
                     max_seq_len: int = 64, scale_dtype: str = "BF16") -> MetaModel:
    """The engine's decoder over one layer of each kind, on the meta device."""
    if fp8_mode not in FP8_MODES:
        raise ModelFormatError(f"fp8 mode {fp8_mode!r}: use one of {', '.join(FP8_MODES)}")
    layers = representative_layers(config)
    built = layers[-1].index + 1
    _check_size(config, built)
    reduced = dataclasses.replace(config, num_layers=built)
    weights = meta_weights(reduced, built, dtype, fp8_mode, scale_dtype)
    decoder = Decoder(reduced, weights, max_seq_len, META, dtype, FAMILIES[config.architecture])
    decoder.blocks = [decoder.blocks[use.index] for use in layers]
    return MetaModel(config, decoder, _cache(config, layers, dtype, max_seq_len), layers, dtype,
                     fp8_mode if config.fp8 is not None else "")
