"""Gated DeltaNet: the linear-attention layer of Qwen3-Next and Qwen3.5/3.6.

Per token t, with q, k L2-normalised (q also scaled by 1/sqrt(key_dim)), a decay
g_t = -exp(A_log) * softplus(a_t + dt_bias) and a step size beta_t = sigmoid(b_t), the state
S (value_heads x key_dim x value_dim, float32) evolves as

    S = exp(g_t) * S;   S = S + k_t (beta_t * (v_t - S^T k_t))^T;   o_t = S^T q_t

before q, k and v, a causal depthwise conv1d (kernel 4, SiLU) mixes each channel with its
previous three inputs. Prefill runs the rule in chunks of 64 tokens (a triangular solve per
chunk, then one state update per chunk); decode runs it one step at a time. Both start from
and leave their result in the layer's preallocated state (engine.cache.LinearState). The
output is normalised per value head, gated by SiLU(z) and projected back.

Projections come in two layouts: Qwen3.5/3.6 store in_proj_qkv / in_proj_z / in_proj_b /
in_proj_a; Qwen3-Next fuses them as in_proj_qkvz / in_proj_ba, grouped per key head.
Reference: transformers 5.24 `models/qwen3_next/modeling_qwen3_next.py` and
`models/qwen3_5/modeling_qwen3_5.py` (torch_chunk_gated_delta_rule,
torch_recurrent_gated_delta_rule, causal_conv1d_fn / _update, RMSNormGated).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from engine.cache import LinearState
from engine.cpu_decode import Stack
from engine.layers import Weight, linear, linears
from probes.model.tensors import DeltaNetShape

CHUNK = 64
L2_EPS = 1e-6

Projected = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


@dataclass
class DeltaNetWeights:
    conv: torch.Tensor  # [conv_dim, 1, kernel]
    a_log: torch.Tensor  # [value_heads]
    dt_bias: torch.Tensor  # [value_heads]
    norm: torch.Tensor  # [value_dim], plain weight (not zero-centred)
    out: Weight  # [hidden, value_heads * value_dim]


class SplitProjections:
    """Qwen3.5/3.6: in_proj_qkv, in_proj_z, in_proj_b, in_proj_a."""

    def __init__(self, qkv: Weight, z: Weight, b: Weight, a: Weight,
                 stack: Stack | None = None) -> None:
        self.qkv, self.z, self.b, self.a = qkv, z, b, a
        self.stack = stack  # the four as one CPU kernel GEMV (engine.cpu_decode.stack)

    def __call__(self, x: torch.Tensor, shape: DeltaNetShape) -> Projected:
        """(q|k|v channels [B, T, conv_dim], z [B, T, Hv, Dv], b, a [B, T, Hv])."""
        batch, length, _ = x.shape
        qkv, z, b, a = linears(x, (self.qkv, self.z, self.b, self.a), self.stack)
        return qkv, z.view(batch, length, shape.value_heads, shape.value_dim), b, a


class FusedProjections:
    """Qwen3-Next: in_proj_qkvz and in_proj_ba, each grouped per key head
    ([q, k, v of the group's value heads, z of them] and [b of them, a of them])."""

    def __init__(self, qkvz: Weight, ba: Weight, stack: Stack | None = None) -> None:
        self.qkvz, self.ba = qkvz, ba
        self.stack = stack  # the two as one CPU kernel GEMV

    def __call__(self, x: torch.Tensor, shape: DeltaNetShape) -> Projected:
        batch, length, _ = x.shape
        groups, per = shape.key_heads, shape.value_heads // shape.key_heads
        kd, vd = shape.key_dim, shape.value_dim
        mixed, ba = linears(x, (self.qkvz, self.ba), self.stack)
        mixed = mixed.reshape(batch, length, groups, 2 * kd + 2 * per * vd)
        q, k, v, z = torch.split(mixed, [kd, kd, per * vd, per * vd], dim=3)
        ba = ba.reshape(batch, length, groups, 2 * per)
        b, a = torch.split(ba, [per, per], dim=3)
        channels = torch.cat([t.reshape(batch, length, -1) for t in (q, k, v)], dim=-1)
        z = z.reshape(batch, length, shape.value_heads, vd)
        return (channels, z, b.reshape(batch, length, shape.value_heads),
                a.reshape(batch, length, shape.value_heads))


Projections = SplitProjections | FusedProjections


class GatedDeltaNet:
    """One linear-attention layer over its preallocated conv + recurrent state."""

    def __init__(self, projections: Projections, weights: DeltaNetWeights,
                 shape: DeltaNetShape, eps: float) -> None:
        self.project = projections
        self.w = weights
        self.shape = shape
        self.eps = eps

    def forward(self, x: torch.Tensor, state: LinearState) -> torch.Tensor:
        """x [B, T, hidden] continuing from `state`; T == 1 takes the recurrent (decode) path."""
        batch, length, _ = x.shape
        channels, z, b, a = self.project(x, self.shape)
        channels = causal_conv(channels.transpose(1, 2), self.w.conv, state.conv).transpose(1, 2)
        s = self.shape
        q, k, v = torch.split(channels, [s.key_heads * s.key_dim, s.key_heads * s.key_dim,
                                         s.value_heads * s.value_dim], dim=-1)
        q = q.reshape(batch, length, s.key_heads, s.key_dim)
        k = k.reshape(batch, length, s.key_heads, s.key_dim)
        v = v.reshape(batch, length, s.value_heads, s.value_dim)
        beta = b.sigmoid()
        decay = -self.w.a_log.float().exp() * F.softplus(a.float() + self.w.dt_bias)
        rule = recurrent_delta_rule if length == 1 else chunked_delta_rule
        core = rule(q, k, v, decay, beta, state.recurrent)
        out = gated_rms_norm(core, z, self.w.norm, self.eps)
        return linear(out.reshape(batch, length, -1), self.w.out)


def causal_conv(x: torch.Tensor, weight: torch.Tensor, conv_state: torch.Tensor) -> torch.Tensor:
    """Depthwise causal conv1d + SiLU over x [B, C, T], preceded by the `kernel - 1` inputs
    kept in conv_state [B, C, kernel - 1], which then holds the last ones of x."""
    width = conv_state.shape[-1]
    window = torch.cat([conv_state.to(weight.dtype), x.to(weight.dtype)], dim=-1)
    conv_state.copy_(window[:, :, window.shape[-1] - width:])
    if x.shape[-1] == 1:
        # One token is one dot product per channel, summed in float32 as conv1d does: on the
        # CPU 1.5-5x faster than oneDNN's depthwise kernel and 200x faster than the fallback
        # conv a decode step without oneDNN would get (15 ms per layer at 8192 channels).
        out = (window.float() * weight[:, 0].float()).sum(-1, keepdim=True).to(weight.dtype)
    else:
        out = F.conv1d(window, weight, groups=window.shape[1])
    return F.silu(out).to(x.dtype)


def l2_normalise(x: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + L2_EPS)


def _heads_first(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, decay: torch.Tensor,
                 beta: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """float32 [B, Hv, T, ...]; key heads repeated for the value heads they serve; q, k
    L2-normalised and q scaled by 1/sqrt(key_dim)."""
    repeat = v.shape[2] // k.shape[2]
    if repeat > 1:
        q, k = q.repeat_interleave(repeat, dim=2), k.repeat_interleave(repeat, dim=2)
    q, k, v, beta, decay = (t.transpose(1, 2).to(torch.float32,
                                                 memory_format=torch.contiguous_format)
                            for t in (q, k, v, beta, decay))
    q, k = l2_normalise(q), l2_normalise(k)
    return q * q.shape[-1] ** -0.5, k, v, decay, beta


def recurrent_delta_rule(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, decay: torch.Tensor,
                         beta: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
    """The rule token by token (decode); `state` [B, Hv, Dk, Dv] float32 is updated in place.
    Returns [B, T, Hv, Dv] in v's dtype."""
    out_dtype = v.dtype
    q, k, v, decay, beta = _heads_first(q, k, v, decay, beta)
    s = state.clone()
    out = torch.empty_like(v)
    for t in range(q.shape[2]):
        s = s * decay[:, :, t].exp()[..., None, None]
        remembered = (s * k[:, :, t, :, None]).sum(dim=-2)
        delta = (v[:, :, t] - remembered) * beta[:, :, t, None]
        s = s + k[:, :, t, :, None] * delta[:, :, None, :]
        out[:, :, t] = (s * q[:, :, t, :, None]).sum(dim=-2)
    state.copy_(s)
    return out.transpose(1, 2).contiguous().to(out_dtype)


def chunked_delta_rule(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, decay: torch.Tensor,
                       beta: torch.Tensor, state: torch.Tensor,
                       chunk: int = CHUNK) -> torch.Tensor:
    """The rule over chunks of `chunk` tokens (prefill); same contract as the recurrent form.

    Within a chunk the delta-rule updates are condensed by a unit lower-triangular solve
    (the UT transform), so each chunk costs a few matmuls and one state update.
    """
    out_dtype, length = v.dtype, q.shape[1]
    q, k, v, decay, beta = _heads_first(q, k, v, decay, beta)
    pad = (chunk - length % chunk) % chunk
    q, k, v = (F.pad(t, (0, 0, 0, pad)) for t in (q, k, v))
    decay, beta = F.pad(decay, (0, pad)), F.pad(beta, (0, pad))
    batch, heads, padded, _ = q.shape
    k_beta, v_beta = k * beta[..., None], v * beta[..., None]
    q, k, k_beta, v_beta = (t.reshape(batch, heads, padded // chunk, chunk, t.shape[-1])
                            for t in (q, k, k_beta, v_beta))
    cum = decay.reshape(batch, heads, padded // chunk, chunk).cumsum(dim=-1)
    upper = torch.ones(chunk, chunk, dtype=torch.bool, device=q.device).triu(1)
    pairwise = (cum[..., :, None] - cum[..., None, :]).masked_fill(upper, float("-inf")).exp()
    system = (k_beta @ k.transpose(-1, -2)) * pairwise
    within = (q @ k.transpose(-1, -2)) * pairwise
    values = torch.linalg.solve_triangular(system, v_beta, upper=False, unitriangular=True)
    read_keys = torch.linalg.solve_triangular(system, k_beta * cum.exp()[..., None],
                                              upper=False, unitriangular=True)
    q = q * cum.exp()[..., None]
    k = k * (cum[..., -1:] - cum).exp()[..., None]
    chunk_decay = cum[..., -1].exp()[..., None, None]
    s = state.clone()
    out = torch.empty_like(values)
    for i in range(padded // chunk):
        fresh = values[:, :, i] - read_keys[:, :, i] @ s
        out[:, :, i] = q[:, :, i] @ s + within[:, :, i] @ fresh
        s = s * chunk_decay[:, :, i] + k[:, :, i].transpose(-1, -2) @ fresh
    state.copy_(s)
    out = out.reshape(batch, heads, padded, -1)[:, :, :length]
    return out.transpose(1, 2).contiguous().to(out_dtype)


def gated_rms_norm(x: torch.Tensor, gate: torch.Tensor, weight: torch.Tensor,
                   eps: float) -> torch.Tensor:
    """RMSNorm per value head (plain weight), then times SiLU(gate) in float32."""
    dtype = x.dtype
    x32 = x.float()
    x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    return ((weight * x32.to(dtype)) * F.silu(gate.float())).to(dtype)
