"""The tensors a checkpoint of a config holds, named as the official checkpoints name them.

One inventory serves the memory arithmetic (bytes per mode, counted per layer kind, never by
listing 10**12 experts), the engine (which names it expects), the demo builder (which names and
shapes it writes) and tests that build header-only shards of the real models.

Per family (transformers 5.24 module trees; Hub checkpoints keep one tensor per expert):

    global      model.embed_tokens, model.norm, lm_head (absent when tied)
    attention   self_attn.{q,k,v,o}_proj (+ biases), self_attn.{q,k}_norm (qwen3*, hybrids);
                hybrids' q_proj emits query and output gate: 2 x heads x head_dim rows
    DeltaNet    linear_attn.in_proj_{qkv,z,b,a} (Qwen3.5/3.6) or in_proj_{qkvz,ba} (Qwen3-Next),
                conv1d [conv_dim, 1, kernel], A_log, dt_bias, norm [v_head_dim], out_proj
    dense MLP   mlp.{gate,up,down}_proj
    MoE         mlp.gate (router), mlp.experts.E.{gate,up,down}_proj (Mixtral:
                block_sparse_moe.gate, experts.E.w1/w3/w2), hybrids also mlp.shared_expert.*
                and mlp.shared_expert_gate [1, hidden]

`quantisable` marks the linears an FP8 checkpoint stores as FP8 (unless listed in
modules_to_not_convert): attention and DeltaNet projections, experts, shared experts, dense
MLPs. Embeddings, norms, routers, shared_expert_gate, in_proj_a/b/ba, conv1d, A_log and dt_bias
stay BF16 (Qwen3.5/3.6-FP8 list them in modules_to_not_convert).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from probes.model.config import FULL_ATTENTION, LINEAR_ATTENTION, ConfigFacts
from probes.model.families import FAMILIES, SHARED_EXPERT_FAMILIES


@dataclass(frozen=True)
class TensorSpec:
    """One tensor (or `copies` tensors differing only in `{e}`), under the layer prefix."""

    name: str  # relative to the layer ("self_attn.q_proj.weight") or global ("lm_head.weight")
    shape: tuple[int, ...]
    quantisable: bool = False
    copies: int = 1  # experts: the name holds "{e}"

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class LayerKind:
    """A combination of token mixer and feed-forward; layers of one kind hold the same tensors."""

    mixer: str  # full_attention | linear_attention
    moe: bool


class InventoryError(ValueError):
    """The config lacks a field the inventory needs (the message names it)."""


def _need(config: ConfigFacts, name: str) -> int:
    value = getattr(config, name)
    if not value:
        raise InventoryError(f"{config.source}: field {name!r} is missing or invalid")
    return int(value)


def require_known_family(config: ConfigFacts) -> None:
    """Refuse an architecture whose tensors this module does not lay out (e.g. DeepSeek-V3's
    latent attention): counting it as a llama would print a plan that looks like fact."""
    if config.family not in FAMILIES:
        kind = config.model_type or config.architecture or "unknown"
        raise InventoryError(f"{config.source}: architecture {kind} is not one this project "
                             f"lays out ({', '.join(FAMILIES)}); its tensors and memory are "
                             "not estimated")


def global_tensors(config: ConfigFacts) -> list[TensorSpec]:
    require_known_family(config)
    vocab, hidden = _need(config, "vocab_size"), _need(config, "hidden_size")
    specs = [TensorSpec("model.embed_tokens.weight", (vocab, hidden)),
             TensorSpec("model.norm.weight", (hidden,))]
    if not config.tie_word_embeddings:
        specs.append(TensorSpec("lm_head.weight", (vocab, hidden)))
    return specs


def attention_tensors(config: ConfigFacts) -> list[TensorSpec]:
    hidden, heads = _need(config, "hidden_size"), _need(config, "num_attention_heads")
    head_dim = _need(config, "head_dim")
    kv = (config.num_key_value_heads or heads) * head_dim
    gated = config.family in ("qwen3_next", "qwen3_5_moe", "qwen3_5_moe_text") and \
        config.attn_output_gate is not False
    q_rows = heads * head_dim * (2 if gated else 1)
    specs = [TensorSpec("self_attn.q_proj.weight", (q_rows, hidden), True),
             TensorSpec("self_attn.k_proj.weight", (kv, hidden), True),
             TensorSpec("self_attn.v_proj.weight", (kv, hidden), True),
             TensorSpec("self_attn.o_proj.weight", (hidden, heads * head_dim), True)]
    if config.attention_bias:
        specs += [TensorSpec("self_attn.q_proj.bias", (q_rows,)),
                  TensorSpec("self_attn.k_proj.bias", (kv,)),
                  TensorSpec("self_attn.v_proj.bias", (kv,)),
                  TensorSpec("self_attn.o_proj.bias", (hidden,))]
    if config.family not in ("llama", "mixtral"):
        specs += [TensorSpec("self_attn.q_norm.weight", (head_dim,)),
                  TensorSpec("self_attn.k_norm.weight", (head_dim,))]
    return specs


@dataclass(frozen=True)
class DeltaNetShape:
    """The shapes of a Gated DeltaNet layer's recurrent and convolution state."""

    key_heads: int
    value_heads: int
    key_dim: int  # per head
    value_dim: int  # per head
    kernel: int

    @property
    def conv_dim(self) -> int:
        """Channels of the depthwise conv: q and k (key heads) plus v (value heads)."""
        return 2 * self.key_heads * self.key_dim + self.value_heads * self.value_dim


def deltanet_shape(config: ConfigFacts) -> DeltaNetShape:
    return DeltaNetShape(_need(config, "linear_num_key_heads"),
                         _need(config, "linear_num_value_heads"),
                         _need(config, "linear_key_head_dim"),
                         _need(config, "linear_value_head_dim"),
                         _need(config, "linear_conv_kernel_dim"))


def deltanet_tensors(config: ConfigFacts) -> list[TensorSpec]:
    hidden = _need(config, "hidden_size")
    d = deltanet_shape(config)
    values = d.value_heads * d.value_dim
    if config.family == "qwen3_next":
        projections = [
            TensorSpec("linear_attn.in_proj_qkvz.weight", (d.conv_dim + values, hidden), True),
            TensorSpec("linear_attn.in_proj_ba.weight", (2 * d.value_heads, hidden))]
    else:
        projections = [
            TensorSpec("linear_attn.in_proj_qkv.weight", (d.conv_dim, hidden), True),
            TensorSpec("linear_attn.in_proj_z.weight", (values, hidden), True),
            TensorSpec("linear_attn.in_proj_b.weight", (d.value_heads, hidden)),
            TensorSpec("linear_attn.in_proj_a.weight", (d.value_heads, hidden))]
    return [*projections,
            TensorSpec("linear_attn.conv1d.weight", (d.conv_dim, 1, d.kernel)),
            TensorSpec("linear_attn.A_log", (d.value_heads,)),
            TensorSpec("linear_attn.dt_bias", (d.value_heads,)),
            TensorSpec("linear_attn.norm.weight", (d.value_dim,)),
            TensorSpec("linear_attn.out_proj.weight", (hidden, values), True)]


def mlp_tensors(config: ConfigFacts) -> list[TensorSpec]:
    hidden, width = _need(config, "hidden_size"), _need(config, "intermediate_size")
    return [TensorSpec("mlp.gate_proj.weight", (width, hidden), True),
            TensorSpec("mlp.up_proj.weight", (width, hidden), True),
            TensorSpec("mlp.down_proj.weight", (hidden, width), True)]


def moe_tensors(config: ConfigFacts) -> list[TensorSpec]:
    hidden, experts = _need(config, "hidden_size"), _need(config, "num_experts")
    if config.family == "mixtral":
        width = _need(config, "intermediate_size")  # Mixtral's is the expert width
        return [TensorSpec("block_sparse_moe.gate.weight", (experts, hidden)),
                TensorSpec("block_sparse_moe.experts.{e}.w1.weight", (width, hidden), True,
                           experts),
                TensorSpec("block_sparse_moe.experts.{e}.w3.weight", (width, hidden), True,
                           experts),
                TensorSpec("block_sparse_moe.experts.{e}.w2.weight", (hidden, width), True,
                           experts)]
    width = _need(config, "moe_intermediate_size")
    specs = [TensorSpec("mlp.gate.weight", (experts, hidden)),
             TensorSpec("mlp.experts.{e}.gate_proj.weight", (width, hidden), True, experts),
             TensorSpec("mlp.experts.{e}.up_proj.weight", (width, hidden), True, experts),
             TensorSpec("mlp.experts.{e}.down_proj.weight", (hidden, width), True, experts)]
    if config.family in SHARED_EXPERT_FAMILIES:
        shared = _need(config, "shared_expert_intermediate_size")
        specs += [TensorSpec("mlp.shared_expert.gate_proj.weight", (shared, hidden), True),
                  TensorSpec("mlp.shared_expert.up_proj.weight", (shared, hidden), True),
                  TensorSpec("mlp.shared_expert.down_proj.weight", (hidden, shared), True),
                  TensorSpec("mlp.shared_expert_gate.weight", (1, hidden))]
    return specs


def layer_tensors(config: ConfigFacts, kind: LayerKind) -> list[TensorSpec]:
    hidden = _need(config, "hidden_size")
    norms = [TensorSpec("input_layernorm.weight", (hidden,)),
             TensorSpec("post_attention_layernorm.weight", (hidden,))]
    mixer = attention_tensors(config) if kind.mixer == FULL_ATTENTION else \
        deltanet_tensors(config)
    ffn = moe_tensors(config) if kind.moe else mlp_tensors(config)
    return [*norms, *mixer, *ffn]


def layer_kind(config: ConfigFacts, layer: int) -> LayerKind:
    return LayerKind(config.layer_kind(layer), config.is_moe_layer(layer))


def layer_kind_counts(config: ConfigFacts) -> dict[LayerKind, int]:
    """How many layers of each kind, counted without visiting every layer (a config may
    claim 10**9 layers; it must be refused by arithmetic, not by a loop)."""
    layers = _need(config, "num_hidden_layers")
    full, moe = config.full_attention_layers(), config.moe_layers()
    both = _full_and_moe(config, layers, full, moe)
    counts = {LayerKind(FULL_ATTENTION, True): both,
              LayerKind(FULL_ATTENTION, False): full - both,
              LayerKind(LINEAR_ATTENTION, True): moe - both,
              LayerKind(LINEAR_ATTENTION, False): layers - full - moe + both}
    return {kind: n for kind, n in counts.items() if n > 0}


def _full_and_moe(config: ConfigFacts, layers: int, full: int, moe: int) -> int:
    if config.layer_types:  # explicit: bounded by the config file's size
        return sum(1 for i in range(min(layers, len(config.layer_types)))
                   if config.layer_kind(i) == FULL_ATTENTION and config.is_moe_layer(i))
    if full == layers:
        return moe
    if not moe:
        return 0
    interval, step = config.full_attention_interval or 1, config.decoder_sparse_step or 1
    period = math.lcm(interval, step)
    listed = {i for i in config.mlp_only_layers if i < layers and (i + 1) % period == 0}
    return layers // period - len(listed)


def expand(spec: TensorSpec, prefix: str) -> Iterator[str]:
    """The full names of a spec under `prefix` ("model.layers.3." or "")."""
    if spec.copies == 1 and "{e}" not in spec.name:
        yield prefix + spec.name
        return
    for expert in range(spec.copies):
        yield prefix + spec.name.replace("{e}", str(expert))


def expected_tensors(config: ConfigFacts) -> Iterator[tuple[str, TensorSpec]]:
    """(full checkpoint name, spec) for every tensor of the language model, lazily."""
    for spec in global_tensors(config):
        yield ("lm_head.weight" if spec.name == "lm_head.weight"
               else config.weight_prefix + spec.name.removeprefix("model.")), spec
    for layer in range(_need(config, "num_hidden_layers")):
        prefix = f"{config.weight_prefix}layers.{layer}."
        for spec in layer_tensors(config, layer_kind(config, layer)):
            for name in expand(spec, prefix):
                yield name, spec


def expected_count(config: ConfigFacts) -> int:
    """How many tensors expected_tensors() yields, by arithmetic."""
    total = len(global_tensors(config))
    for kind, layers in layer_kind_counts(config).items():
        total += layers * sum(spec.copies for spec in layer_tensors(config, kind))
    return total
