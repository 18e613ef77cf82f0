"""Qwen3 (Qwen3ForCausalLM): Llama's layers plus an RMSNorm on every query and key head
before RoPE; head_dim is given explicitly (it need not be hidden / heads)."""

from engine.models.base import Family, attention, dense_mlp

FAMILY = Family("qwen3", mixer=attention, feed_forward=dense_mlp, qk_norm=True)
