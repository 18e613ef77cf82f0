"""Qwen3-Next (Qwen3NextForCausalLM; Qwen3-Next-80B-A3B): a hybrid. Layers whose type is
full_attention (every 4th by default) run gated attention -- q_proj emits query and a sigmoid
output gate, q/k RMSNorm, RoPE on 25% of head_dim -- the others a Gated DeltaNet whose
projections are fused per key head (in_proj_qkvz, in_proj_ba). Every sparse layer is an MoE
with a gated shared expert; all RMSNorms but the DeltaNet's output norm are zero-centred.
Reference: transformers 5.24 models/qwen3_next/modeling_qwen3_next.py."""

from engine.deltanet import FusedProjections
from engine.models.base import (
    Family,
    LayerContext,
    Mixer,
    attention,
    deltanet,
    moe_or_dense,
    prefix,
)
from probes.model.config import FULL_ATTENTION


def mixer(ctx: LayerContext, layer: int) -> Mixer:
    if ctx.config.layer_kind(layer) == FULL_ATTENTION:
        return attention(ctx, layer)
    p = prefix(layer) + "linear."
    qkvz, ba = ctx.table.linear(p + "qkvz.weight"), ctx.table.linear(p + "ba.weight")
    projections = FusedProjections(qkvz, ba, ctx.table.stack(qkvz, ba))
    return deltanet(ctx, layer, projections)


FAMILY = Family("qwen3_next", mixer=mixer, feed_forward=moe_or_dense, router="softmax_topk",
                expert_width_field="moe_intermediate_size", qk_norm=True, norm_offset=True,
                attn_output_gate=True, shared_expert=True, linear_attention=True)
