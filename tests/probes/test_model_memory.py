"""The memory plan of the real Qwen3.6-35B-A3B-FP8 / Qwen3.5-35B-A3B / Qwen3-Next shapes,
pinned to values computed by hand below, and printed identically by the engine's
`python -m engine.tools.plan` and the doctor's npu.hbm-fit (configs: tests/data/models)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from checks.builtin.hbm_fit import hbm_fit
from checks.builtin.hbm_inputs import mb
from checks.builtin.hbm_plan import kv_size
from checks.context import Context
from checks.policy import load_policy
from probes.host import CommandResult
from probes.inventory import unavailable
from probes.live import LiveHost
from probes.model.config import parse_config
from probes.model.memory import MLA, NO_KV, kv_state_size, plan_lines, plan_memory
from tests.model_shapes import write_header_only

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "tests" / "data" / "models"
SEQ = 32768  # the doctor's policy default hbm_fit.max_seq_len

# Qwen3.5/3.6-35B-A3B text model, by hand (config: text_config)
H, V, E, W, S = 2048, 248320, 256, 512, 512  # hidden, vocab, experts, expert and shared width
HEADS, KV, HD = 16, 2, 256  # gated attention: 16 query heads (x2: query + gate), 2 KV heads
KH, VH, KD, VD, K = 16, 32, 128, 128, 4  # DeltaNet heads and dims, conv kernel
FULL, LINEAR = 10, 30
CONV = 2 * KH * KD + VH * VD  # 8192 conv channels

FULL_FP8 = 2 * HEADS * HD * H + 2 * KV * HD * H + H * HEADS * HD  # q (with gate), k, v, o
LINEAR_FP8 = CONV * H + VH * VD * H + H * VH * VD  # in_proj_qkv, in_proj_z, out_proj
MOE_FP8 = E * 3 * W * H + 3 * S * H  # routed experts + shared expert
FULL_PLAIN = 2 * HD  # q_norm, k_norm
LINEAR_PLAIN = 2 * VH * H + CONV * K + VH + VH + VD  # in_proj_b/a, conv1d, A_log, dt_bias, norm
LAYER_PLAIN = 2 * H + E * H + H  # two norms, router, shared_expert_gate
GLOBAL_PLAIN = 2 * V * H + H  # embeddings, lm_head, final norm


def tiles(rows: int, cols: int) -> int:
    return math.ceil(rows / 128) * math.ceil(cols / 128)


FULL_SCALES = tiles(2 * HEADS * HD, H) + 2 * tiles(KV * HD, H) + tiles(H, HEADS * HD)
LINEAR_SCALES = tiles(CONV, H) + tiles(VH * VD, H) + tiles(H, VH * VD)
MOE_SCALES = E * 3 * tiles(W, H) + 3 * tiles(S, H)

FP8 = FULL * (FULL_FP8 + MOE_FP8) + LINEAR * (LINEAR_FP8 + MOE_FP8)
SCALES = FULL * (FULL_SCALES + MOE_SCALES) + LINEAR * (LINEAR_SCALES + MOE_SCALES)
PLAIN = GLOBAL_PLAIN + (FULL + LINEAR) * LAYER_PLAIN + FULL * FULL_PLAIN + LINEAR * LINEAR_PLAIN
DEQUANTIZED = 2 * (FP8 + PLAIN)  # every weight in BF16
RESIDENT = FP8 + 4 * SCALES + 2 * PLAIN  # FP8 bytes, float32 scales, the rest BF16
STORED = FP8 + 2 * SCALES + 2 * PLAIN  # on disk: BF16 scales
KV_PER_TOKEN = FULL * 2 * KV * HD * 2
STATE = LINEAR * (CONV * (K - 1) * 2 + VH * KD * VD * 4)


def config(name: str) -> dict[str, object]:
    loaded: dict[str, object] = json.loads((MODELS / name / "config.json").read_text())
    return loaded


def test_the_hand_arithmetic_itself() -> None:
    assert DEQUANTIZED == 69_321_221_376 and RESIDENT == 35_712_082_176  # 34.66 B parameters
    assert KV_PER_TOKEN == 20_480 and STATE == 64_389_120


def test_qwen3_6_fp8_plan_is_the_hand_computed_one() -> None:
    plan = plan_memory(parse_config(config("Qwen3.6-35B-A3B-FP8")), SEQ)
    assert plan.weight_bytes("dequantize") == DEQUANTIZED
    assert plan.weight_bytes("resident") == RESIDENT
    assert plan.kv_bytes_per_token == KV_PER_TOKEN and plan.state_bytes_per_sequence == STATE
    assert plan.sequence_bytes == KV_PER_TOKEN * SEQ + STATE
    hbm = 64 * 2**30  # one Atlas A2 card: npu-smi's 65536 MB
    assert not plan.fits(hbm, "dequantize") and plan.fits(hbm, "resident")


def test_bf16_qwen3_5_and_qwen3_next() -> None:
    qwen35 = plan_memory(parse_config(config("Qwen3.5-35B-A3B")), SEQ)
    assert not qwen35.is_fp8 and qwen35.weight_bytes() == DEQUANTIZED
    assert qwen35.kv_bytes_per_token == KV_PER_TOKEN and qwen35.state_bytes_per_sequence == STATE
    nxt = plan_memory(parse_config(config("Qwen3-Next-80B-A3B-Instruct")), SEQ)
    assert nxt.kv_bytes_per_token == 12 * 2 * 2 * 256 * 2 == 24_576
    assert nxt.state_bytes_per_sequence == 36 * (CONV * 3 * 2 + VH * KD * VD * 4)


def engine_plan(*args: str) -> list[str]:
    result = subprocess.run([sys.executable, "-m", "engine.tools.plan", *args], cwd=ROOT,
                            capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0 and not result.stderr, result.stderr
    return result.stdout.splitlines()


def test_engine_plan_prints_the_plan_and_the_verdict() -> None:
    lines = engine_plan(str(MODELS / "Qwen3.6-35B-A3B-FP8" / "config.json"),
                        "--hbm-gb", "64", "--max-seq-len", str(SEQ))
    text = "\n".join(lines)
    assert lines[0].startswith("qwen3_5_moe: 10 full-attention + 30 linear-attention layers")
    assert f"{DEQUANTIZED:,} bytes" in text and f"{RESIDENT:,} bytes" in text
    assert f"KV cache: {KV_PER_TOKEN:,} bytes/token" in text
    assert f"linear-attention state: {STATE:,} bytes/sequence" in text
    assert any(line.startswith("dequantize:") and line.endswith("does not fit") for line in lines)
    assert any(line.startswith("resident:") and line.endswith(": fits") for line in lines)


def test_engine_plan_refuses_bad_input_in_one_line(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "engine.tools.plan", "/dev/zero"], cwd=ROOT,
                            capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "not a regular file" in result.stderr and "Traceback" not in result.stderr


def test_engine_plan_loads_no_torch() -> None:
    code = "import sys, engine.tools.plan; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("name", ["Qwen3.6-35B-A3B-FP8", "Qwen3.5-35B-A3B"])
def test_the_doctor_prints_the_same_numbers(tmp_path: Path, name: str) -> None:
    """npu.hbm-fit on header-only shards of the real shape (no NPU here: it still says what
    the model needs) prints the engine's plan lines, the same as `python -m engine.tools.plan`."""
    directory = tmp_path / name
    data_bytes = write_header_only(directory, config(name))
    ctx = Context(LiveHost(root="/", env={}), load_policy(None), model_dir=directory)
    missing = unavailable(CommandResult(("npu-smi", "info"), "not_found"), "no NPU driver")
    ctx.fact("npu", lambda: missing)
    finding = hbm_fit(ctx)
    doctor = [e.removeprefix("engine plan: ") for e in finding.evidence
              if e.startswith("engine plan: ")]
    engine = engine_plan(str(directory / "config.json"), "--max-seq-len", str(SEQ))
    assert doctor and doctor == engine[1:len(doctor) + 1]
    fp8 = name.endswith("FP8")
    assert data_bytes == (STORED if fp8 else DEQUANTIZED)
    assert f"{DEQUANTIZED:,} bytes" in doctor[0]
    if fp8:
        assert f"{RESIDENT:,} bytes" in doctor[1]
    plan = plan_memory(parse_config(config(name)), SEQ)
    assert doctor == plan_lines(plan)


@pytest.mark.parametrize("name", ["Qwen3-30B-A3B", "Qwen3-Coder-30B-A3B-Instruct",
                                  "Qwen3-235B-A22B-Instruct-2507-FP8",
                                  "Qwen3-Next-80B-A3B-Instruct", "Qwen3.5-35B-A3B",
                                  "Qwen3.6-35B-A3B-FP8"])
def test_the_plan_and_hbm_fit_size_kv_and_state_alike(tmp_path: Path, name: str) -> None:
    """One KV/state arithmetic: the engine's plan and npu.hbm-fit's per-chip need give the same
    bytes per token and per sequence for every real config (both come from kv_state_size)."""
    facts = parse_config(config(name))
    plan = plan_memory(facts, SEQ)
    size = kv_size(facts)
    assert plan.kv_bytes_per_token == size.kv_bytes_per_token > 0
    assert plan.state_bytes_per_sequence == size.state_bytes_per_sequence
    assert (plan.state_bytes_per_sequence > 0) == facts.is_hybrid
    write_header_only(tmp_path / name, config(name))
    ctx = Context(LiveHost(root="/", env={}), load_policy(None), model_dir=tmp_path / name)
    ctx.fact("npu", lambda: unavailable(CommandResult(("npu-smi", "info"), "not_found"), "none"))
    need = next(e for e in hbm_fit(ctx).evidence if e.startswith("needed per chip at tensor "))
    assert f"{plan.kv_bytes_per_token:,} bytes/token)" in need
    if facts.is_hybrid:
        # tensor parallel 1, batch 1: the whole state of one sequence
        assert f"+ {mb(plan.state_bytes_per_sequence)} linear-attention state" in need


def test_the_tensor_parallel_share_of_kv() -> None:
    """Each chip of a tensor-parallel group keeps ceil(kv_heads / tp) heads: 4 KV heads over 8
    chips are replicated, one per chip (the linear-attention state is not split here)."""
    facts = parse_config(config("Qwen3-30B-A3B"))
    whole = kv_state_size(facts, 2)
    assert whole.kv_bytes_per_token == 48 * 2 * 4 * 128 * 2
    assert kv_state_size(facts, 2, tp=2).kv_bytes_per_token == whole.kv_bytes_per_token // 2
    assert kv_state_size(facts, 2, tp=8).kv_bytes_per_token == whole.kv_bytes_per_token // 4
    int8 = kv_state_size(facts, 2, int8=True)
    assert int8.kv_bytes_per_token == 48 * 2 * 4 * (128 + 4) and int8.value_bytes == 1


def test_mla_caches_one_latent_per_token_and_layer() -> None:
    """DeepSeek-V3 as vLLM sizes it: kv_lora_rank 512 + qk_rope_head_dim 64 values per token on
    each of its 61 layers, one copy per tensor-parallel chip, no separate K and V."""
    facts = parse_config(config("DeepSeek-V3"))
    size = kv_state_size(facts, 2)
    assert size.kind == MLA and size.kv_bytes_per_token == 61 * (512 + 64) * 2 == 70_272
    assert kv_state_size(facts, 2, tp=8).kv_bytes_per_token == 70_272
    assert size.state_bytes_per_sequence == 0


def test_missing_shapes_are_named_not_zero() -> None:
    assert kv_state_size(parse_config({"num_hidden_layers": 4}), 2).kind == NO_KV
    hybrid = parse_config({"model_type": "qwen3_next", "num_hidden_layers": 4,
                           "full_attention_interval": 4, "num_attention_heads": 2,
                           "num_key_value_heads": 1, "head_dim": 8, "linear_num_key_heads": 0})
    size = kv_state_size(hybrid, 2)
    assert size.kv_bytes_per_token == 2 * 8 * 2 and "linear_num_key_heads" in size.state_note
