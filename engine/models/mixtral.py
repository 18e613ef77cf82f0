"""Mixtral (MixtralForCausalLM; the upcycled SmolLM2 demo): Llama's attention and a sparse MoE
on every layer; the router's softmax is taken over the top-k logits, and the config's
intermediate_size is the width of each expert."""

from engine.models.base import Family, attention, sparse_moe

FAMILY = Family("mixtral", mixer=attention, feed_forward=sparse_moe, router="topk_softmax",
                expert_width_field="intermediate_size", always_norm_topk=True)
