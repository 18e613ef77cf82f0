"""What each micro-benchmarked operator must move and compute, from its shapes alone.

Bytes are what an ideal kernel reads and writes once (weights, inputs, outputs, state), FLOPs
count a multiply-add as two. A measured time then gives an achieved rate, and the roofline --
the slower of moving the bytes at the measured copy bandwidth and doing the FLOPs at the
measured matmul peak -- says what fraction of the device the operator reached. No torch here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from probes.model.memory import KvStateSize

FP8_SCALE_BYTES = 4  # the engine keeps FP8 tile scales as float32 (engine.fp8.Fp8Weight)
STATE_BYTES = 4  # the per-value-head decay and beta inputs, counted at float32
INDEX_BYTES = 8  # int64 expert ids


@dataclass(frozen=True)
class Cost:
    bytes: int
    flops: int


def fp8_weight_bytes(out_features: int, in_features: int, block: tuple[int, int]) -> int:
    """FP8 bytes plus one float32 scale per (ragged) tile."""
    grid = math.ceil(out_features / block[0]) * math.ceil(in_features / block[1])
    return out_features * in_features + grid * FP8_SCALE_BYTES


def matmul_cost(tokens: int, out_features: int, in_features: int, weight_bytes: int,
                act_bytes: int) -> Cost:
    """x [tokens, in] times W^T [in, out]: the weights, x and y once; 2 FLOPs per MAC."""
    moved = weight_bytes + tokens * (in_features + out_features) * act_bytes
    return Cost(moved, 2 * tokens * out_features * in_features)


def swiglu_cost(tokens: int, hidden: int, width: int, weight_bytes: int,
                act_bytes: int) -> Cost:
    """One expert (gate, up, down) on `tokens` tokens: three GEMMs; x in and y out once
    (the [tokens, width] intermediates of a fused kernel never leave it)."""
    return Cost(weight_bytes + 2 * tokens * hidden * act_bytes, 2 * tokens * 3 * hidden * width)


def attention_decode_cost(heads: int, head_dim: int, context: int, kv: KvStateSize,
                          act_bytes: int) -> Cost:
    """One query token against `context` cached keys and values: the cache dominates. The
    cache's bytes per token of one layer are kv_state_size's (probes.model.memory), the figure
    the engine allocates with; the query in and the output out are `heads x head_dim` each."""
    cache = context * kv.kv_bytes_per_token_per_layer
    return Cost(cache + 2 * heads * head_dim * act_bytes, 4 * heads * context * head_dim)


def deltanet_step_cost(key_heads: int, value_heads: int, key_dim: int, value_dim: int,
                       kv: KvStateSize, act_bytes: int) -> Cost:
    """One recurrent step: the float32 state (kv_state_size's recurrent bytes of one layer)
    read and written once; per value head a decay (Dk*Dv), a read-out S^T k (2 Dk*Dv), the
    delta (2 Dv), the rank-1 update (2 Dk*Dv) and the output S^T q (2 Dk*Dv)."""
    state = kv.recurrent_state_bytes_per_layer
    inputs = (2 * key_heads * key_dim + 2 * value_heads * value_dim) * act_bytes \
        + 2 * value_heads * STATE_BYTES
    return Cost(2 * state + inputs, value_heads * (7 * key_dim * value_dim + 2 * value_dim))


def rmsnorm_cost(tokens: int, hidden: int, act_bytes: int) -> Cost:
    """x in, y out, the weight once; square, mean, scale, weight: 4 FLOPs per element."""
    return Cost((2 * tokens * hidden + hidden) * act_bytes, 4 * tokens * hidden)


def router_topk_cost(tokens: int, experts: int, top_k: int, logit_bytes: int) -> Cost:
    """Softmax over the router logits then top-k: logits in, weights and ids out; exp, sum
    and divide per logit."""
    return Cost(tokens * experts * logit_bytes + tokens * top_k * (logit_bytes + INDEX_BYTES),
                3 * tokens * experts)


def copy_cost(nbytes: int) -> Cost:
    """dst.copy_(src): every byte read once and written once."""
    return Cost(2 * nbytes, 0)


def tokens_per_expert(batch_tokens: int, experts: int, top_k: int) -> int:
    """Tokens each expert sees when `batch_tokens` are routed evenly (at least one)."""
    return max(1, round(batch_tokens * top_k / experts))


@dataclass(frozen=True)
class Rate:
    gb_per_s: float
    tflop_per_s: float
    roofline_s: float  # the time at the measured peaks
    pct_of_roofline: float
    bound: str  # memory | compute


def rate(cost: Cost, seconds: float, copy_bytes_per_s: float, flops_per_s: float) -> Rate:
    """Achieved rates and the fraction of the roofline (100% = at the measured peaks)."""
    memory_s = cost.bytes / copy_bytes_per_s if copy_bytes_per_s > 0 else 0.0
    compute_s = cost.flops / flops_per_s if flops_per_s > 0 else 0.0
    roof = max(memory_s, compute_s)
    return Rate(cost.bytes / seconds / 1e9, cost.flops / seconds / 1e12, roof,
                100.0 * roof / seconds, "memory" if memory_s >= compute_s else "compute")
