"""Qwen3.5 / Qwen3.6 MoE (Qwen3_5MoeForConditionalGeneration, e.g. Qwen3.6-35B-A3B-FP8, and
the text-only Qwen3_5MoeForCausalLM that transformers saves as qwen3_5_moe_text): Qwen3-Next's
layers with the DeltaNet projections stored apart (in_proj_qkv, in_proj_z, in_proj_b,
in_proj_a), an MoE with a gated shared expert on every layer and the top-k always
renormalised. The vision-language checkpoint keeps the language model under
model.language_model.; its vision tower (model.visual.*) and multi-token-prediction head
(mtp.*) are not loaded. Reference: transformers 5.24 models/qwen3_5_moe, models/qwen3_5."""

from engine.deltanet import SplitProjections
from engine.models.base import (
    Family,
    LayerContext,
    Mixer,
    attention,
    deltanet,
    prefix,
    sparse_moe,
)
from probes.model.config import FULL_ATTENTION


def mixer(ctx: LayerContext, layer: int) -> Mixer:
    if ctx.config.layer_kind(layer) == FULL_ATTENTION:
        return attention(ctx, layer)
    table, p = ctx.table, prefix(layer) + "linear."
    qkv, z, b, a = (table.linear(p + f"{name}.weight") for name in ("qkv", "z", "b", "a"))
    projections = SplitProjections(qkv, z, b, a, table.stack(qkv, z, b, a))
    return deltanet(ctx, layer, projections)


_TRAITS = {"mixer": mixer, "feed_forward": sparse_moe, "router": "softmax_topk",
           "expert_width_field": "moe_intermediate_size", "qk_norm": True, "norm_offset": True,
           "attn_output_gate": True, "shared_expert": True, "always_norm_topk": True,
           "linear_attention": True}
FAMILY = Family("qwen3_5_moe", **_TRAITS)  # type: ignore[arg-type]
TEXT_FAMILY = Family("qwen3_5_moe_text", **_TRAITS)  # type: ignore[arg-type]
