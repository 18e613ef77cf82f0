"""Dense building blocks: RMSNorm (plain and zero-centred), rotary embedding (full and
partial), attention over the KV cache (optionally with a sigmoid output gate), SwiGLU MLP.

Weights are plain tensors or `Fp8Weight`s (dequantised per use); the math follows
transformers' Llama / Qwen3 / Qwen3-Next references so float32 logits agree to rounding.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch
import torch.nn.functional as F

from engine.cache import LayerCache
from engine.cpu_decode import AttendFn, CpuLinear, RopeAttendFn, Stack
from engine.errors import UnsupportedArchitecture


class QuantizedWeight(Protocol):
    """What the engine needs from `engine.fp8.Fp8Weight`."""

    shape: Any

    def dequantize(self, dtype: torch.dtype) -> torch.Tensor: ...


Weight = torch.Tensor | QuantizedWeight | CpuLinear
NormFn = Callable[[torch.Tensor, torch.Tensor, float], torch.Tensor]


def materialize(weight: Weight, dtype: torch.dtype) -> torch.Tensor:
    """The weight as an [out, in] tensor of `dtype`; FP8-resident weights are dequantised."""
    if isinstance(weight, torch.Tensor):
        return weight
    if hasattr(weight, "dequantize"):
        return weight.dequantize(dtype)
    assert isinstance(weight, CpuLinear)
    return weight.dense()


def linear(x: torch.Tensor, weight: Weight, bias: torch.Tensor | None = None) -> torch.Tensor:
    if isinstance(weight, CpuLinear):  # the CPU's own layouts (engine.cpu_decode)
        y = weight.matmul(x)
        return y if bias is None else y + bias
    return F.linear(x, materialize(weight, x.dtype), bias)


def linears(x: torch.Tensor, weights: Sequence[Weight],
            stack: Stack | None = None) -> tuple[torch.Tensor, ...]:
    """x times each weight (no biases): as one stacked GEMV where `stack` can take x."""
    if stack is not None:
        parts = stack.split(x)
        if parts is not None:
            return parts
    return tuple(linear(x, weight) for weight in weights)


def _biased(y: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    return y if bias is None else y + bias


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """Normalise in float32, cast back, then scale by the plain weight (not 1 + weight)."""
    x32 = x.float()
    x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    return weight * x32.to(x.dtype)


def offset_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """The zero-centred RMSNorm of Qwen3-Next / Qwen3.5: scale by (1 + weight) in float32,
    then cast back (the weight is stored centred on 0)."""
    x32 = x.float()
    x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    return (x32 * (1.0 + weight.float())).to(x.dtype)


class Rotary:
    """cos/sin tables for every position up to max_seq_len (rotate-half layout) over the first
    `rotary_dim` dims of a head (all of them, or 25% with partial rotary).

    The sin table is stored with its first half negated, so that rotate_half(x) * sin is
    halves_swapped(x) * signed_sin: one flip instead of two slices, a negation and a cat,
    and the same bits (a sign moves from one factor to the other)."""

    def __init__(self, rotary_dim: int, theta: float, max_seq_len: int,
                 rope_scaling: dict[str, Any] | None, device: torch.device,
                 dtype: torch.dtype) -> None:
        inv_freq, attention_scaling = _inv_freq(rotary_dim, theta, rope_scaling)
        positions = torch.arange(max_seq_len, dtype=torch.float32)
        freqs = torch.outer(positions, inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        sign = torch.ones(rotary_dim)
        sign[:rotary_dim // 2] = -1.0
        self.cos = (emb.cos() * attention_scaling).to(device=device, dtype=dtype)
        self.signed_sin = (emb.sin() * attention_scaling * sign).to(device=device, dtype=dtype)
        self._last: tuple[int, int, torch.Tensor, torch.Tensor] | None = None

    def tables(self, start: int, length: int) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and signed sin shaped [1, length, 1, rotary_dim] to broadcast over BSND (every
        layer of one forward asks for the same positions: the views are made once)."""
        if self._last is None or self._last[:2] != (start, length):
            cos = self.cos[start:start + length][None, :, None, :]
            sin = self.signed_sin[start:start + length][None, :, None, :]
            self._last = (start, length, cos, sin)
        return self._last[2], self._last[3]


def _inv_freq(head_dim: int, theta: float,
              rope_scaling: dict[str, Any] | None) -> tuple[torch.Tensor, float]:
    exponents = torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim
    inv_freq = 1.0 / (theta ** exponents)
    kind = (rope_scaling or {}).get("rope_type", (rope_scaling or {}).get("type", "default"))
    if kind == "default":
        return inv_freq, 1.0
    assert rope_scaling is not None
    if kind == "linear":
        return inv_freq / float(rope_scaling["factor"]), 1.0
    if kind == "llama3":
        return _llama3_inv_freq(inv_freq, rope_scaling), 1.0
    raise UnsupportedArchitecture(
        f"rope_scaling type {kind!r} is not supported (supported: default, linear, llama3)")


def _llama3_inv_freq(inv_freq: torch.Tensor, scaling: dict[str, Any]) -> torch.Tensor:
    factor = float(scaling["factor"])
    low, high = float(scaling["low_freq_factor"]), float(scaling["high_freq_factor"])
    old_len = float(scaling["original_max_position_embeddings"])
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > old_len / low, inv_freq / factor, inv_freq)
    smooth = (old_len / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = (wavelen >= old_len / high) & (wavelen <= old_len / low)
    return torch.where(medium, smoothed, scaled)


def swap_halves(x: torch.Tensor) -> torch.Tensor:
    """(x1, x2) -> (x2, x1) along the last dim; rotate_half(x) is this times (-1, +1)."""
    half = x.shape[-1] // 2
    return x.unflatten(-1, (2, half)).flip(-2).flatten(-2)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> torch.Tensor:
    """Rotate the first cos.shape[-1] dims of each head; the rest pass through."""
    dim = cos.shape[-1]
    if dim == x.shape[-1]:
        return x * cos + swap_halves(x) * signed_sin
    turned, kept = x[..., :dim], x[..., dim:]
    return torch.cat((turned * cos + swap_halves(turned) * signed_sin, kept), dim=-1)


@dataclass
class AttentionWeights:
    q: Weight
    k: Weight
    v: Weight
    o: Weight
    q_bias: torch.Tensor | None = None
    k_bias: torch.Tensor | None = None
    v_bias: torch.Tensor | None = None
    o_bias: torch.Tensor | None = None
    q_norm: torch.Tensor | None = None
    k_norm: torch.Tensor | None = None
    qkv: Stack | None = None  # q, k and v as one CPU kernel GEMV (engine.cpu_decode.stack)


class Attention:
    """Grouped-query attention that writes K/V into the cache in place and reads it back.

    With `output_gate` (Qwen3-Next, Qwen3.5/3.6) q_proj emits per head the query and a gate
    of the same size; the attention output is multiplied by sigmoid(gate) before o_proj.
    """

    def __init__(self, weights: AttentionWeights, num_heads: int, num_kv_heads: int,
                 head_dim: int, eps: float, norm: NormFn = rms_norm,
                 output_gate: bool = False, decode_attention: AttendFn | None = None,
                 rope_attend: RopeAttendFn | None = None) -> None:
        self.w = weights
        self.decode_attention = decode_attention  # a device's own one-query kernel
        self.rope_attend = rope_attend  # a device's own RoPE + cache write + one query
        self.num_heads, self.num_kv_heads, self.head_dim = num_heads, num_kv_heads, head_dim
        self.eps = eps
        self.norm = norm
        self.scale = head_dim ** -0.5
        self.output_gate = output_gate

    def _query(self, x: torch.Tensor,
               q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Query heads [B, T, H, D] and, when gated, the flat gate [B, T, H * D], from q_proj's
        output."""
        batch, length, _ = x.shape
        if not self.output_gate:
            return q.view(batch, length, self.num_heads, self.head_dim), None
        query, gate = q.view(batch, length, self.num_heads, 2 * self.head_dim).chunk(2, dim=-1)
        return query, gate.reshape(batch, length, self.num_heads * self.head_dim)

    def _heads(self, x: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """q [B, T, H, D], k and v [B, T, KV, D] (q and k normed where the model norms them,
        not yet rotated) and the flat output gate or None."""
        batch, length, _ = x.shape
        w = self.w
        q_out, k_out, v_out = linears(x, (w.q, w.k, w.v), w.qkv)
        q, gate = self._query(x, _biased(q_out, w.q_bias))
        k = _biased(k_out, w.k_bias).view(batch, length, self.num_kv_heads, self.head_dim)
        v = _biased(v_out, w.v_bias).view(batch, length, self.num_kv_heads, self.head_dim)
        if self.w.q_norm is not None and self.w.k_norm is not None:
            q = self.norm(q, self.w.q_norm, self.eps)
            k = self.norm(k, self.w.k_norm, self.eps)
        return q, k, v, gate

    def forward(self, x: torch.Tensor, rotary: Rotary, cache: LayerCache,
                start: int) -> torch.Tensor:
        """x [B, T, hidden] at positions start..start+T-1; T == 1 takes the decode path."""
        q, k, v, gate = self._heads(x)
        length = x.shape[1]
        cos, sin = rotary.tables(start, length)
        out = None
        if length == 1 and self.rope_attend is not None:
            out = self.rope_attend(q, k, v, cos, sin, cache, start, self.scale)
        if out is None:
            out = self._attend(apply_rotary(q, cos, sin), apply_rotary(k, cos, sin), v, cache,
                               start)
        out = out.reshape(x.shape[0], length, self.num_heads * self.head_dim)
        if gate is not None:
            out = out * torch.sigmoid(gate)
        return linear(out, self.w.o, self.w.o_bias)

    def _attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cache: LayerCache,
                start: int) -> torch.Tensor:
        """Rotated q, k and v: k and v into the cache, q over it; [B, T, H, D]."""
        length = q.shape[1]
        cache.write(start, k, v)
        keys, values = cache.read(start + length)
        if length == 1 and self.decode_attention is not None:
            return self.decode_attention(q, keys, values, self.scale)
        mask = None if length == 1 else _causal_mask(start, length, q.device)
        return F.scaled_dot_product_attention(
            q.transpose(1, 2), keys.transpose(1, 2), values.transpose(1, 2),
            attn_mask=mask, scale=self.scale,
            enable_gqa=self.num_heads != self.num_kv_heads).transpose(1, 2)


def _causal_mask(start: int, length: int, device: torch.device) -> torch.Tensor:
    """Boolean [T, start+T]: query i (at position start+i) sees keys 0..start+i."""
    rows = torch.arange(length, device=device)[:, None] + start
    cols = torch.arange(start + length, device=device)[None, :]
    return cols <= rows


@dataclass
class MlpWeights:
    gate: Weight
    up: Weight
    down: Weight
    gate_up: Stack | None = None  # gate and up as one CPU kernel GEMV


def swiglu(x: torch.Tensor, w: MlpWeights) -> torch.Tensor:
    gate, up = linears(x, (w.gate, w.up), w.gate_up)
    return linear(F.silu(gate) * up, w.down)
