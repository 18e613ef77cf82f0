"""One decoder for llama, qwen3, qwen3_moe and mixtral, chosen by config switches.

Switches: q/k norm (qwen3*), attention biases, dense SwiGLU or sparse MoE per layer, router
style. Weights come from `engine.weights.load_checkpoint` under canonical names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from engine.cache import KVCache
from engine.errors import ModelFormatError
from engine.layers import (
    Attention,
    AttentionWeights,
    MlpWeights,
    NormFn,
    Rotary,
    Transposed,
    Weight,
    linear,
    materialize,
    prefer_layout,
    rms_norm,
    swiglu,
)
from engine.moe import MoeWeights, SparseMoe


class WeightTable:
    """Canonical-name lookup that names the missing tensor in its error."""

    def __init__(self, weights: Mapping[str, Any], device: torch.device,
                 dtype: torch.dtype) -> None:
        self.weights = weights
        self.device, self.dtype = device, dtype
        self.relayout_bytes = 0  # copies made for a faster layout (tied lm_head)

    def get(self, name: str) -> Any:
        if name not in self.weights:
            raise ModelFormatError(f"checkpoint has no tensor for {name!r} (canonical name)")
        return self.weights[name]

    def optional(self, name: str) -> Any:
        return self.weights.get(name)

    def linear(self, name: str, shared: bool = False) -> Weight:
        """A projection weight in the device's preferred layout."""
        weight = prefer_layout(self.get(name), self.device, self.dtype)
        if shared and isinstance(weight, Transposed):
            self.relayout_bytes += weight.nbytes
        return weight


@dataclass
class Block:
    attn_norm: torch.Tensor
    attn: Attention
    mlp_norm: torch.Tensor
    mlp: MlpWeights | None
    moe: SparseMoe | None

    def feed_forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.moe is not None:
            return self.moe.forward(x)
        assert self.mlp is not None
        return swiglu(x, self.mlp)


class Decoder:
    """embed -> blocks (pre-norm attention, pre-norm MLP/MoE) -> norm -> lm_head."""

    def __init__(self, config: Any, weights: Mapping[str, Any], max_seq_len: int,
                 device: torch.device, dtype: torch.dtype, norm: NormFn = rms_norm) -> None:
        table = WeightTable(weights, device, dtype)
        self.config = config
        self.eps = float(config.rms_norm_eps)
        self.norm = norm
        self.embed: torch.Tensor = materialize(table.get("embed.weight"), dtype)
        self.final_norm: torch.Tensor = table.get("norm.weight")
        tied = weights.get("lm_head.weight") is weights.get("embed.weight")
        self.lm_head: Weight = table.linear("lm_head.weight", shared=tied)
        self.rotary = Rotary(config.head_dim, float(config.rope_theta), max_seq_len,
                             config.rope_scaling, device, dtype)
        self.blocks = [self._block(table, i) for i in range(config.num_layers)]
        self.relayout_bytes = table.relayout_bytes

    def _block(self, table: WeightTable, i: int) -> Block:
        cfg = self.config
        p = f"layers.{i}."
        attn = AttentionWeights(
            q=table.linear(p + "attn.q.weight"), k=table.linear(p + "attn.k.weight"),
            v=table.linear(p + "attn.v.weight"), o=table.linear(p + "attn.o.weight"),
            q_bias=table.optional(p + "attn.q.bias"), k_bias=table.optional(p + "attn.k.bias"),
            v_bias=table.optional(p + "attn.v.bias"), o_bias=table.optional(p + "attn.o.bias"),
            q_norm=table.get(p + "attn.q_norm.weight") if cfg.qk_norm else None,
            k_norm=table.get(p + "attn.k_norm.weight") if cfg.qk_norm else None)
        attention = Attention(attn, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, self.eps,
                              self.norm)
        is_moe = cfg.num_experts > 0 and i in tuple(cfg.moe_layers)
        return Block(attn_norm=table.get(p + "attn_norm.weight"), attn=attention,
                     mlp_norm=table.get(p + "mlp_norm.weight"),
                     mlp=None if is_moe else _mlp(table, p + "mlp."),
                     moe=_moe(table, p + "moe.", cfg) if is_moe else None)

    def forward(self, ids: torch.Tensor, cache: KVCache, start: int,
                last_only: bool) -> torch.Tensor:
        """Logits for ids [B, T] at positions start..start+T-1; float32 [B, T or 1, vocab]."""
        h = F.embedding(ids, self.embed)
        for block, layer_cache in zip(self.blocks, cache.layers, strict=True):
            h = h + block.attn.forward(self.norm(h, block.attn_norm, self.eps), self.rotary,
                                       layer_cache, start)
            h = h + block.feed_forward(self.norm(h, block.mlp_norm, self.eps))
        if last_only:
            h = h[:, -1:]
        h = self.norm(h, self.final_norm, self.eps)
        cache.tokens_used = start + ids.shape[1]
        return linear(h, self.lm_head).float()

    def prefill(self, ids: torch.Tensor, cache: KVCache, last_only: bool = True) -> torch.Tensor:
        """The prompt in one pass from position 0 of a reset cache."""
        cache.reset()
        return self.forward(ids, cache, 0, last_only)

    def decode(self, token: torch.Tensor, cache: KVCache) -> torch.Tensor:
        """One new token [B, 1] at position cache.tokens_used; logits [B, vocab]."""
        return self.forward(token, cache, cache.tokens_used, last_only=True)[:, -1]


def _mlp(table: WeightTable, prefix: str) -> MlpWeights:
    return MlpWeights(gate=table.linear(prefix + "gate.weight"),
                      up=table.linear(prefix + "up.weight"),
                      down=table.linear(prefix + "down.weight"))


def _moe(table: WeightTable, prefix: str, cfg: Any) -> SparseMoe:
    experts = [_mlp(table, f"{prefix}experts.{e}.") for e in range(cfg.num_experts)]
    weights = MoeWeights(router=table.linear(prefix + "router.weight"), experts=experts)
    return SparseMoe(weights, cfg.num_experts_per_tok, cfg.router, bool(cfg.norm_topk_prob))
