"""The engine's view of one model as data: `ModelConfig` and its FP8 part (frozen, pure).

Resolving config.json into it is engine.config's job; the family modules (engine.models) build
layers from it. Apart from both so that neither needs the other to name the type.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from probes.model.config import FULL_ATTENTION, ConfigFacts
from probes.model.tensors import DeltaNetShape

DEFAULT_DTYPE = "float32"  # transformers' default when a config names none


@dataclass(frozen=True)
class Fp8Config:
    """FP8 weights as the checkpoint stores them (see probes.model.quant)."""

    block_size: tuple[int, int] = (128, 128)
    modules_to_not_convert: tuple[str, ...] = ()
    activation_scheme: str = "dynamic"
    scheme: str = "block"  # block | tensor | channel
    scale_suffix: str = "weight_scale_inv"  # weight_scale for per-tensor / per-channel


@dataclass(frozen=True)
class ModelConfig:
    """Everything the engine needs to build and run one decoder-only model."""

    architecture: str  # a family of engine.models: llama, qwen3, ..., qwen3_5_moe_text
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int  # dense MLP width; 0 when no layer is dense
    moe_intermediate_size: int  # per-expert width; 0 for dense models
    num_experts: int  # 0 = dense
    num_experts_per_tok: int
    norm_topk_prob: bool
    router: str  # "softmax_topk" (Qwen) | "topk_softmax" (Mixtral) | "" (dense)
    qk_norm: bool
    attention_bias: bool
    rope_theta: float
    rope_scaling: dict[str, Any] | None
    rms_norm_eps: float
    max_position_embeddings: int
    tie_word_embeddings: bool
    bos_token_id: int | None
    eos_token_ids: tuple[int, ...]
    torch_dtype: str
    fp8: Fp8Config | None = None
    shared_expert_intermediate_size: int = 0  # hybrids' always-on expert, gated
    norm_offset: bool = False  # zero-centred RMSNorm: x * (1 + weight)
    attn_output_gate: bool = False  # q_proj also emits a sigmoid gate per head
    rotary_dim: int = 0  # dims RoPE turns (partial rotary); head_dim when 0
    linear: DeltaNetShape | None = None  # Gated DeltaNet layers' shape (hybrids)
    full_attention_layers: int = 0  # layers with a KV cache
    weight_prefix: str = "model."  # where the language model's tensors live
    facts: ConfigFacts | None = field(default=None, compare=False, repr=False)

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    def is_moe_layer(self, layer: int) -> bool:
        return self.num_experts > 0 and self.facts is not None and self.facts.is_moe_layer(layer)

    @property
    def moe_layers(self) -> tuple[int, ...]:
        """Sparse layers (built only after the memory plan accepted num_layers)."""
        return tuple(i for i in range(self.num_layers) if self.is_moe_layer(i))

    def layer_kind(self, layer: int) -> str:
        """full_attention or linear_attention."""
        return self.facts.layer_kind(layer) if self.facts is not None else FULL_ATTENTION

    @property
    def is_hybrid(self) -> bool:
        return self.linear is not None and self.full_attention_layers < self.num_layers
