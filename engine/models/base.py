"""What a model family is to the engine, and the layer builders families compose.

A family module (engine/models/<family>.py) declares a `Family`: the traits the config
resolution needs (router, expert width field, norms) and two functions that build, from the
checkpoint's tensors, the token mixer and the feed-forward of layer i. The decoder
(engine.model) runs any family the same way; adding an architecture adds a module here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.cpu_decode import decode_attention_for, rope_attend_for
from engine.deltanet import DeltaNetWeights, GatedDeltaNet, Projections
from engine.layers import (
    Attention,
    AttentionWeights,
    MlpWeights,
    NormFn,
    offset_rms_norm,
    rms_norm,
)
from engine.moe import MoeWeights, SharedExpert, SparseMoe
from engine.weight_table import WeightTable

if TYPE_CHECKING:
    from engine.spec import ModelConfig

Mixer = Attention | GatedDeltaNet
FeedForward = MlpWeights | SparseMoe


@dataclass(frozen=True)
class LayerContext:
    """What a layer builder reads: the weights, the config, the norm in use."""

    table: WeightTable
    config: ModelConfig
    norm: NormFn

    @property
    def eps(self) -> float:
        return float(self.config.rms_norm_eps)


@dataclass(frozen=True)
class Family:
    name: str
    mixer: Callable[[LayerContext, int], Mixer]
    feed_forward: Callable[[LayerContext, int], FeedForward]
    router: str = ""  # "" (dense), "softmax_topk" (Qwen), "topk_softmax" (Mixtral)
    expert_width_field: str = ""  # config field of the per-expert width ("" = dense family)
    qk_norm: bool = False  # RMSNorm on q and k heads before RoPE
    norm_offset: bool = False  # zero-centred RMSNorm: x * (1 + weight)
    attn_output_gate: bool = False  # q_proj also emits a sigmoid output gate
    shared_expert: bool = False  # MoE layers add a gated always-on expert
    always_norm_topk: bool = False  # the top-k weights are renormalised whatever the config
    linear_attention: bool = False  # Gated DeltaNet layers exist

    def norm(self, fused_rms_norm: NormFn = rms_norm) -> NormFn:
        """The RMSNorm of this family (a fused vendor op only replaces the plain one)."""
        return offset_rms_norm if self.norm_offset else fused_rms_norm

    @staticmethod
    def context(table: WeightTable, config: ModelConfig, norm: NormFn) -> LayerContext:
        return LayerContext(table, config, norm)


def prefix(layer: int) -> str:
    return f"layers.{layer}."


def attention(ctx: LayerContext, layer: int) -> Attention:
    table, cfg, p = ctx.table, ctx.config, prefix(layer)
    q, k, v = (table.linear(p + f"attn.{name}.weight") for name in "qkv")
    weights = AttentionWeights(
        q=q, k=k, v=v, o=table.linear(p + "attn.o.weight"), qkv=table.stack(q, k, v),
        q_bias=table.optional(p + "attn.q.bias"), k_bias=table.optional(p + "attn.k.bias"),
        v_bias=table.optional(p + "attn.v.bias"), o_bias=table.optional(p + "attn.o.bias"),
        q_norm=table.get(p + "attn.q_norm.weight") if cfg.qk_norm else None,
        k_norm=table.get(p + "attn.k_norm.weight") if cfg.qk_norm else None)
    return Attention(weights, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, ctx.eps, ctx.norm,
                     output_gate=cfg.attn_output_gate,
                     decode_attention=decode_attention_for(table.device, table.dtype),
                     rope_attend=rope_attend_for(table.device))


def deltanet(ctx: LayerContext, layer: int, projections: Projections) -> GatedDeltaNet:
    table, p = ctx.table, prefix(layer) + "linear."
    assert ctx.config.linear is not None
    weights = DeltaNetWeights(conv=table.get(p + "conv.weight"), a_log=table.get(p + "A_log"),
                              dt_bias=table.get(p + "dt_bias"), norm=table.get(p + "norm.weight"),
                              out=table.linear(p + "out.weight"))
    return GatedDeltaNet(projections, weights, ctx.config.linear, ctx.eps)


def mlp(table: WeightTable, name: str) -> MlpWeights:
    gate, up = table.linear(name + "gate.weight"), table.linear(name + "up.weight")
    return MlpWeights(gate=gate, up=up, down=table.linear(name + "down.weight"),
                      gate_up=table.stack(gate, up))


def dense_mlp(ctx: LayerContext, layer: int) -> MlpWeights:
    return mlp(ctx.table, prefix(layer) + "mlp.")


def sparse_moe(ctx: LayerContext, layer: int) -> SparseMoe:
    table, cfg, p = ctx.table, ctx.config, prefix(layer) + "moe."
    experts = [mlp(table, f"{p}experts.{e}.") for e in range(cfg.num_experts)]
    shared = SharedExpert(mlp(table, p + "shared."), table.linear(p + "shared_gate.weight")) \
        if cfg.shared_expert_intermediate_size else None
    weights = MoeWeights(router=table.linear(p + "router.weight"), experts=experts, shared=shared)
    return SparseMoe(weights, cfg.num_experts_per_tok, cfg.router, bool(cfg.norm_topk_prob))


def moe_or_dense(ctx: LayerContext, layer: int) -> FeedForward:
    """Sparse where the config's rule says so (mlp_only_layers, decoder_sparse_step)."""
    return sparse_moe(ctx, layer) if ctx.config.is_moe_layer(layer) else dense_mlp(ctx, layer)
