"""The decoder every family runs: embed -> blocks -> norm -> lm_head.

A block is pre-norm: a token mixer (attention over its KV cache, or a Gated DeltaNet over its
linear state) then a feed-forward (dense SwiGLU or sparse MoE), each added to the residual.
On the CPU, where the compiled kernel's RMSNorm is in use, an attention layer's decode step
runs as compiled calls (engine.cpu_decode.KernelLayer) computing the same ops: the attention
half, and the feed-forward half where it is a dense MLP or a mixture of experts without a
shared expert; every other case runs the torch path below.
Which mixer and feed-forward a layer has, and which RMSNorm, is the family's to say
(engine.models); weights come from `engine.weights` under canonical names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from engine.cache import KVCache, LayerCache, LinearState
from engine.cpu_decode import KernelLayer, kernel_layer
from engine.deltanet import GatedDeltaNet
from engine.layers import (
    Attention,
    MlpWeights,
    NormFn,
    Rotary,
    Weight,
    linear,
    materialize,
    rms_norm,
    swiglu,
)
from engine.moe import SparseMoe
from engine.weight_table import WeightTable

if TYPE_CHECKING:
    from engine.models.base import Family


@dataclass
class Block:
    attn_norm: torch.Tensor
    mlp_norm: torch.Tensor
    attn: Attention | None  # full-attention layers
    linear: GatedDeltaNet | None  # linear-attention layers
    mlp: MlpWeights | None
    moe: SparseMoe | None
    kernel: KernelLayer | None = None  # the CPU kernel's decode step for this layer

    def mix(self, x: torch.Tensor, cache: LayerCache | LinearState, rotary: Rotary,
            start: int) -> torch.Tensor:
        if self.attn is not None:
            assert isinstance(cache, LayerCache)
            return self.attn.forward(x, rotary, cache, start)
        assert self.linear is not None and isinstance(cache, LinearState)
        return self.linear.forward(x, cache)

    def feed_forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.moe is not None:
            return self.moe.forward(x)
        assert self.mlp is not None
        return swiglu(x, self.mlp)


class Decoder:
    """embed -> blocks (pre-norm mixer, pre-norm MLP/MoE) -> norm -> lm_head."""

    def __init__(self, config: Any, weights: Mapping[str, Any], max_seq_len: int,
                 device: torch.device, dtype: torch.dtype, family: Family,
                 norm: NormFn = rms_norm, kernel_layers: bool = False) -> None:
        table = WeightTable(weights, device, dtype)
        self.config = config
        self.eps = float(config.rms_norm_eps)
        self.norm = family.norm(norm)
        self.embed: torch.Tensor = materialize(table.get("embed.weight"), dtype)
        self.final_norm: torch.Tensor = table.get("norm.weight")
        tied = weights.get("lm_head.weight") is weights.get("embed.weight")
        self.lm_head: Weight = table.linear("lm_head.weight", shared=tied)
        self.rotary = Rotary(config.rotary_dim or config.head_dim, float(config.rope_theta),
                             max_seq_len, config.rope_scaling, device, dtype)
        context = family.context(table, config, self.norm)
        self.blocks = [self._block(context, family, i) for i in range(config.num_layers)]
        if kernel_layers:  # the compiled CPU kernel's RMSNorm is the one in use
            for block in self.blocks:
                block.kernel = self._kernel(block, dtype)
        self.relayout_bytes = table.relayout_bytes

    @staticmethod
    def _block(ctx: Any, family: Family, i: int) -> Block:
        mixer, ffn = family.mixer(ctx, i), family.feed_forward(ctx, i)
        p = f"layers.{i}."
        return Block(attn_norm=ctx.table.get(p + "attn_norm.weight"),
                     mlp_norm=ctx.table.get(p + "mlp_norm.weight"),
                     attn=mixer if isinstance(mixer, Attention) else None,
                     linear=mixer if isinstance(mixer, GatedDeltaNet) else None,
                     mlp=ffn if isinstance(ffn, MlpWeights) else None,
                     moe=ffn if isinstance(ffn, SparseMoe) else None)

    @property
    def kernel_layers(self) -> str:
        """How many layers' decode steps run in the CPU kernel: "" when none does, else
        "N of M layers (K whole)": K with both halves there, the other N - K only their
        attention half."""
        bound = [block.kernel for block in self.blocks if block.kernel is not None]
        if not bound:
            return ""
        whole = sum(kernel.whole for kernel in bound)
        return f"{len(bound)} of {len(self.blocks)} layers ({whole} whole)"

    def _kernel(self, block: Block, dtype: torch.dtype) -> KernelLayer | None:
        if block.attn is None:
            return None
        return kernel_layer(block.attn, block.mlp, block.moe, (block.attn_norm, block.mlp_norm),
                            self.eps, int(self.rotary.cos.shape[-1]), dtype)

    def forward(self, ids: torch.Tensor, cache: KVCache, start: int,
                last_only: bool) -> torch.Tensor:
        """Logits for ids [B, T] at positions start..start+T-1; float32 [B, T or 1, vocab]."""
        h = F.embedding(ids, self.embed)  # a fresh tensor: a kernel layer adds into it
        one = ids.numel() == 1
        tables = self.rotary.tables(start, 1) if one else None  # a kernel layer's RoPE rows
        for block, layer_cache in zip(self.blocks, cache.layers, strict=True):
            kernel = block.kernel if one else None
            if kernel is None or tables is None \
                    or not kernel.attention(h, layer_cache, start, *tables):
                h = h + block.mix(self.norm(h, block.attn_norm, self.eps), layer_cache,
                                  self.rotary, start)
            if kernel is None or not kernel.mlp(h):
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
