"""Bytes and FLOPs per micro-benchmarked operator, pinned to values worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.tools.bench_math import (
    Cost,
    attention_decode_cost,
    copy_cost,
    deltanet_step_cost,
    fp8_weight_bytes,
    matmul_cost,
    rate,
    rmsnorm_cost,
    router_topk_cost,
    swiglu_cost,
    tokens_per_expert,
)
from probes.model.config import ConfigFacts, parse_config
from probes.model.memory import kv_state_size

MODELS = Path(__file__).resolve().parents[1] / "data" / "models"


def qwen35() -> ConfigFacts:
    return parse_config(json.loads((MODELS / "Qwen3.5-35B-A3B" / "config.json").read_text()))


def test_decode_gemv_of_a_bf16_projection() -> None:
    # Qwen3-30B-A3B expert gate: [768, 2048] bf16 = 3,145,728 bytes; x 2048 and y 768 bf16
    assert matmul_cost(1, 768, 2048, 768 * 2048 * 2, 2) == Cost(3_145_728 + 5_632, 3_145_728)


def test_fp8_weight_bytes_count_one_float32_scale_per_tile() -> None:
    assert fp8_weight_bytes(8192, 2048, (128, 128)) == 16_777_216 + 64 * 16 * 4
    assert fp8_weight_bytes(200, 300, (128, 128)) == 60_000 + 2 * 3 * 4  # ragged edges


def test_expert_swiglu_at_eight_tokens() -> None:
    # three [512, 2048] bf16 weights; x and y [8, 2048] bf16; 2 * 8 * 3 * 2048 * 512 FLOPs
    weights = 3 * 512 * 2048 * 2
    assert swiglu_cost(8, 2048, 512, weights, 2) == Cost(weights + 65_536, 50_331_648)


def test_attention_decode_reads_the_whole_cache() -> None:
    # Qwen3.5/3.6 (the real config): 16 query heads, 2 KV heads of 256, 4096 tokens, bf16;
    # K and V of one layer: 2 x 2 x 256 x 2 = 2,048 bytes per token
    kv = kv_state_size(qwen35(), 2)
    assert kv.kv_bytes_per_token_per_layer == 2_048
    assert attention_decode_cost(16, 256, 4096, kv, 2) == Cost(8_388_608 + 16_384, 67_108_864)


def test_deltanet_step_reads_and_writes_the_float32_state() -> None:
    # Qwen3.5/3.6 (the real config): 16 key heads, 32 value heads, 128 x 128 per head
    state = 32 * 128 * 128 * 4
    inputs = (2 * 16 * 128 + 2 * 32 * 128) * 2 + 2 * 32 * 4
    kv = kv_state_size(qwen35(), 2)
    assert kv.recurrent_state_bytes_per_layer == state
    assert deltanet_step_cost(16, 32, 128, 128, kv, 2) == Cost(2 * state + inputs,
                                                              32 * (7 * 128 * 128 + 2 * 128))


def test_small_operators() -> None:
    assert rmsnorm_cost(1, 2048, 2) == Cost(12_288, 8_192)
    assert router_topk_cost(1, 256, 8, 2) == Cost(512 + 80, 768)
    assert copy_cost(2**20) == Cost(2**21, 0)


@pytest.mark.parametrize(("batch", "experts", "top_k", "tokens"), [
    (1, 256, 8, 1), (16, 256, 8, 1), (256, 256, 8, 8), (2048, 256, 8, 64), (256, 4, 2, 128)])
def test_tokens_per_expert(batch: int, experts: int, top_k: int, tokens: int) -> None:
    assert tokens_per_expert(batch, experts, top_k) == tokens


def test_rate_against_the_roofline() -> None:
    memory = rate(Cost(10**9, 10**6), seconds=0.1, copy_bytes_per_s=20e9, flops_per_s=1e12)
    assert memory.bound == "memory" and memory.roofline_s == pytest.approx(0.05)
    assert memory.pct_of_roofline == pytest.approx(50.0)
    assert memory.gb_per_s == pytest.approx(10.0)
    compute = rate(Cost(1_000, 2 * 10**12), seconds=4.0, copy_bytes_per_s=1e9, flops_per_s=1e12)
    assert compute.bound == "compute" and compute.pct_of_roofline == pytest.approx(50.0)
    assert compute.tflop_per_s == pytest.approx(0.5)
