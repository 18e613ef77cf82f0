"""Llama (LlamaForCausalLM; SmolLM2): grouped-query attention with RoPE over the whole head,
a dense SwiGLU MLP, plain RMSNorm, optional attention biases and tied embeddings."""

from engine.models.base import Family, attention, dense_mlp

FAMILY = Family("llama", mixer=attention, feed_forward=dense_mlp)
