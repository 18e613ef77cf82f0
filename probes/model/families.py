"""The one family table: every list of architectures the project uses derives from `TABLE`.

A row says how a config.json is recognised (its `architectures[]` class names, its
`model_type`), the defaults transformers' config class gives absent fields, the traits the
memory plan and the tensor checks need (hybrid Gated-DeltaNet layers, a shared expert, the
kind of per-token state), and whether this project's engine runs it. A new architecture is a
row here and a module in `engine/models/`. Torch-free: the doctor reads it without the engine.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

KV = "kv"  # a KV cache per attention layer
KV_AND_LINEAR_STATE = "kv+linear-state"  # attention KV plus a fixed-size recurrent state


@dataclass(frozen=True)
class FamilyRow:
    name: str  # the family key used everywhere (ConfigFacts.family, engine.models)
    model_type: str  # config.json model_type (text_config.model_type for nested configs)
    classes: tuple[str, ...]  # architectures[] class names that mean this family
    defaults: Mapping[str, Any] = field(default_factory=dict)
    moe: bool = False
    hybrid: bool = False  # Gated DeltaNet layers between attention layers
    # a gated always-on expert of `shared_expert_intermediate_size` (transformers 5.24:
    # Qwen3NextConfig, Qwen3_5MoeTextConfig; Qwen3MoeConfig has no such field, and a Qwen3-MoE
    # config that carries one, as Qwen3-Coder-30B-A3B writes 0, means no shared expert)
    shared_expert: bool = False
    kv_kind: str = KV
    engine_runs: bool = True


# transformers' class defaults (5.24: LlamaConfig, Qwen3Config, Qwen3MoeConfig, MixtralConfig,
# Qwen3NextConfig, Qwen3_5MoeTextConfig) for the fields a config may leave out.
_QWEN3_NEXT_DEFAULTS: Mapping[str, Any] = MappingProxyType({
    "rope_theta": 10000.0, "rms_norm_eps": 1e-6, "max_position_embeddings": 32768,
    "head_dim": 256, "partial_rotary_factor": 0.25, "full_attention_interval": 4,
    "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
    "linear_num_key_heads": 16, "linear_num_value_heads": 32, "norm_topk_prob": True,
    "decoder_sparse_step": 1, "shared_expert_intermediate_size": 512,
    "moe_intermediate_size": 512, "attn_output_gate": True,
})
# Qwen3.5/3.6: every layer is MoE and the top-k is always renormalised (transformers'
# Qwen3VLMoeTextTopKRouter has no switch).
_QWEN3_5_DEFAULTS: Mapping[str, Any] = MappingProxyType(
    {**_QWEN3_NEXT_DEFAULTS, "vocab_size": 248320})

TABLE: tuple[FamilyRow, ...] = (
    FamilyRow("llama", "llama", ("LlamaForCausalLM",), MappingProxyType(
        {"rope_theta": 10000.0, "rms_norm_eps": 1e-6, "max_position_embeddings": 2048})),
    FamilyRow("qwen3", "qwen3", ("Qwen3ForCausalLM",), MappingProxyType(
        {"rope_theta": 10000.0, "rms_norm_eps": 1e-6, "max_position_embeddings": 32768})),
    FamilyRow("qwen3_moe", "qwen3_moe", ("Qwen3MoeForCausalLM",), MappingProxyType(
        {"rope_theta": 10000.0, "rms_norm_eps": 1e-6, "max_position_embeddings": 32768,
         "norm_topk_prob": False, "decoder_sparse_step": 1}), moe=True),
    FamilyRow("mixtral", "mixtral", ("MixtralForCausalLM",), MappingProxyType(
        {"rope_theta": 1e6, "rms_norm_eps": 1e-5, "max_position_embeddings": 131072}),
        moe=True),
    FamilyRow("qwen3_next", "qwen3_next", ("Qwen3NextForCausalLM",), _QWEN3_NEXT_DEFAULTS,
              moe=True, hybrid=True, shared_expert=True, kv_kind=KV_AND_LINEAR_STATE),
    FamilyRow("qwen3_5_moe", "qwen3_5_moe", ("Qwen3_5MoeForConditionalGeneration",),
              _QWEN3_5_DEFAULTS, moe=True, hybrid=True, shared_expert=True,
              kv_kind=KV_AND_LINEAR_STATE),
    FamilyRow("qwen3_5_moe_text", "qwen3_5_moe_text", ("Qwen3_5MoeForCausalLM",),
              _QWEN3_5_DEFAULTS, moe=True, hybrid=True, shared_expert=True,
              kv_kind=KV_AND_LINEAR_STATE),
    # checkpoint.format knows these layouts; the engine runs none of them, and their configs
    # are not recognised as a family (no class names), so the engine names them unsupported
    FamilyRow("qwen2", "qwen2", (), engine_runs=False),
    FamilyRow("qwen2_moe", "qwen2_moe", (), moe=True, engine_runs=False),
    FamilyRow("mistral", "mistral", (), engine_runs=False),  # Llama's attention (MistralConfig)
)

BY_NAME: Mapping[str, FamilyRow] = MappingProxyType({row.name: row for row in TABLE})

# The derived lists: each exists here once, and only here.
FAMILIES: tuple[str, ...] = tuple(row.name for row in TABLE if row.engine_runs)
FAMILY_BY_CLASS: Mapping[str, str] = MappingProxyType(
    {cls: row.name for row in TABLE for cls in row.classes})
FAMILY_DEFAULTS: Mapping[str, Mapping[str, Any]] = MappingProxyType(
    {row.name: row.defaults for row in TABLE if row.defaults})
HYBRID_FAMILIES: tuple[str, ...] = tuple(row.name for row in TABLE if row.hybrid)
SHARED_EXPERT_FAMILIES: tuple[str, ...] = tuple(row.name for row in TABLE if row.shared_expert)
# the model_type values checkpoint.format knows (a config's own model_type, not its family)
KNOWN_MODEL_TYPES: tuple[str, ...] = tuple(dict.fromkeys(row.model_type for row in TABLE))
# the model_type values whose per-token KV (and linear state) npu.hbm-fit sizes
KV_MODEL_TYPES: tuple[str, ...] = tuple(
    dict.fromkeys(row.model_type for row in TABLE if row.kv_kind in (KV, KV_AND_LINEAR_STATE)))
