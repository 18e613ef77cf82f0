"""Qwen3-MoE (Qwen3MoeForCausalLM; Qwen3-30B-A3B): Qwen3's attention and a sparse MoE on the
layers the config makes sparse (dense SwiGLU on mlp_only_layers); the router takes a float32
softmax over all experts, then the top-k, renormalised when norm_topk_prob."""

from engine.models.base import Family, attention, moe_or_dense

FAMILY = Family("qwen3_moe", mixer=attention, feed_forward=moe_or_dense, router="softmax_topk",
                expert_width_field="moe_intermediate_size", qk_norm=True)
