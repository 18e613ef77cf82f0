"""The micro-benchmark: which cases a model gets, their shapes and costs, and one short run.

Timings are never asserted (the machine is shared); the document's arithmetic is."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from demo_models.hybrid import QWEN3_6_TINY, QWEN3_NEXT_TINY
from demo_models.qwen3_moe import QWEN3_TINY
from engine.cache import LayerCache
from engine.config import load_config
from engine.tools.bench_math import fp8_weight_bytes, matmul_cost
from engine.tools.bench_timing import COLD_BYTES, Device, Settings, copies_for
from engine.tools.meta_model import build_meta_model
from engine.tools.microbench import SCHEMA, Case, bench, plan
from probes.model.memory import kv_state_size
from tests.engine.tiny_configs import write

ROOT = Path(__file__).resolve().parent.parent.parent
MODELS = ROOT / "tests" / "data" / "models"
QWEN36_FP8 = MODELS / "Qwen3.6-35B-A3B-FP8"
DEMO_CONFIGS: dict[str, dict[str, Any]] = {  # the demo checkpoints' configs (demo_models)
    "qwen3-moe-fp8-tiny": QWEN3_TINY, "qwen3-next-tiny": QWEN3_NEXT_TINY,
    "qwen3.6-moe-fp8-tiny": QWEN3_6_TINY}
TINY = Settings(samples=1, warmup=1, min_sample_s=0.0, max_reps=1, copy_bytes=2**20,
                matmul_n=64, contexts=(64, 1024), batches=(1, 4))
CPU = Device(torch.device("cpu"))


def _cases(directory: Path, fp8: str = "dequantize") -> dict[str, Case]:
    meta = build_meta_model(load_config(directory), torch.bfloat16, fp8, max_seq_len=1)
    return {case.name: case for case in plan(meta, CPU, TINY)}


def test_a_hybrid_moe_gets_every_hot_operator(tmp_path: Path) -> None:
    names = set(_cases(write(tmp_path, "qwen3_5_moe")))
    assert {"gemv attn.q_proj", "gemv attn.o_proj", "gemv deltanet.in_proj_qkv",
            "gemv deltanet.in_proj_z", "gemv deltanet.out_proj", "gemv moe.router",
            "gemv moe.shared_expert.gate_proj", "gemv moe.shared_expert_gate", "gemv lm_head",
            "expert swiglu 1 tokens", "expert swiglu 2 tokens", "attention decode 64 ctx",
            "attention decode 1024 ctx", "deltanet recurrent step", "router top-2 1 tokens",
            "router top-2 2048 tokens", "rmsnorm 1 tokens", "rmsnorm 2048 tokens"} <= names


def test_qwen3_next_fused_projections_and_dense_models(tmp_path: Path) -> None:
    assert "gemv deltanet.in_proj_qkvz" in _cases(write(tmp_path / "next", "qwen3_next"))
    dense = set(_cases(write(tmp_path / "llama", "llama")))
    assert {"gemv mlp.gate_proj", "gemv mlp.down_proj"} <= dense
    assert not any(name.startswith(("expert", "router", "deltanet")) for name in dense)


def test_case_costs_come_from_the_real_shapes(tmp_path: Path) -> None:
    cases = _cases(write(tmp_path, "qwen3_5_moe"))
    q = cases["gemv attn.q_proj"]
    # gated attention: q_proj emits query and gate, 2 x 4 heads x 32 = 256 rows of 64
    assert q.shape == "[1,64] x [256,64]^T"
    assert q.cost == matmul_cost(1, 256, 64, 256 * 64 * 2, 2)


@pytest.mark.parametrize("name", [*DEMO_CONFIGS, "Qwen3.6-35B-A3B-FP8", "Qwen3-30B-A3B"])
def test_attention_decode_reads_the_kv_the_engine_allocates(tmp_path: Path, name: str) -> None:
    """The decode case's KV bytes are kv_state_size's per-layer figure times the context, and
    that is what one full-attention layer of the engine's own cache holds per token."""
    directory = MODELS / name
    if name in DEMO_CONFIGS:
        directory = tmp_path / name
        directory.mkdir()
        (directory / "config.json").write_text(json.dumps(DEMO_CONFIGS[name]))
    meta = build_meta_model(load_config(directory), torch.bfloat16, "dequantize", max_seq_len=1)
    case = {c.name: c for c in plan(meta, CPU, TINY)}["attention decode 1024 ctx"]
    attn = next(b.attn for b in meta.decoder.blocks if b.attn is not None)
    kv_bytes = case.cost.bytes - 2 * attn.num_heads * attn.head_dim * 2  # less query, output
    assert meta.config.facts is not None
    size = kv_state_size(meta.config.facts, 2)
    assert kv_bytes == 1024 * size.kv_bytes_per_token_per_layer > 0
    # keys and values [batch 1, max_seq_len 1, kv_heads, head_dim] of a full-attention layer
    layer = next(c for c in meta.cache.layers if isinstance(c, LayerCache))
    assert kv_bytes == 1024 * sum(t.numel() * t.element_size() for t in layer.tensors())


def test_fp8_resident_weights_are_timed_with_their_dequantisation(tmp_path: Path) -> None:
    cases = _cases(write(tmp_path, "qwen3_5_moe", fp8=True), fp8="resident")
    q = cases["gemv attn.q_proj"]
    assert q.dtype == "fp8 (dequantised per use)"
    assert q.cost.bytes == fp8_weight_bytes(256, 64, (128, 128)) + (64 + 256) * 2
    assert cases["gemv lm_head"].dtype == "bfloat16"


def test_a_35b_model_costs_one_layers_tensors_at_most() -> None:
    """Cases allocate only while they run, each its own tensors: copies of small ones up to
    COLD_BYTES, a large one once (the 248k x 2048 lm_head is the largest)."""
    cases = _cases(QWEN36_FP8, "resident")
    largest = max(case.cost.bytes * copies_for(case.cost.bytes) for case in cases.values())
    assert largest < 2 * COLD_BYTES + 248320 * 2048 * 2
    assert "gemv deltanet.in_proj_qkv" in cases


def test_a_short_run_gives_a_consistent_document(tmp_path: Path) -> None:
    steps: list[tuple[int, int, str]] = []
    document = bench(load_config(write(tmp_path, "qwen3_5_moe")), torch.device("cpu"),
                     settings=TINY, progress=lambda *step: steps.append(step), model="tiny")
    assert document["schema"] == SCHEMA and document["architecture"] == "qwen3_5_moe"
    peaks = document["peaks"]
    assert peaks["copy_gb_per_s"] > 0 and peaks["matmul_tflop_per_s"] > 0
    operators = document["operators"]
    assert len(operators) == steps[-1][1] - 2 and steps[-1][0] == steps[-1][1]
    pcts = [op["pct_of_roofline"] for op in operators]
    assert pcts == sorted(pcts)
    copy_bps = peaks["copy_gb_per_s"] * 1e9
    for op in operators:
        assert op["median_s"] > 0 and op["bytes"] > 0
        assert op["gb_per_s"] == pytest.approx(op["bytes"] / op["median_s"] / 1e9)
        memory_s = op["bytes"] / copy_bps
        assert op["roofline_s"] >= memory_s * (1 - 1e-9)
        assert op["pct_of_roofline"] == pytest.approx(100 * op["roofline_s"] / op["median_s"])


def test_a_case_larger_than_half_the_free_memory_is_not_run(tmp_path: Path) -> None:
    import json

    from engine.config import parse_config

    document = json.loads((write(tmp_path, "llama") / "config.json").read_text())
    document["vocab_size"] = 10**9  # an lm_head of 2 TB in bfloat16
    result = bench(parse_config(document, "huge/config.json"), torch.device("cpu"),
                   settings=TINY)
    assert "gemv lm_head" not in {op["name"] for op in result["operators"]}
    assert result["notes"][-1].startswith("not run, their tensors exceed half the free memory")
    assert result["notes"][-1].endswith(": gemv lm_head")


def test_a_case_torch_refuses_is_a_note_not_a_traceback(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import engine.tools.microbench as microbench

    real = microbench.run_case

    def refusing(case: Case, device: Device, settings: Settings) -> object:
        if case.name == "gemv lm_head":
            raise RuntimeError("mat1 and mat2 shapes cannot be multiplied (1x8 and 12x16)")
        return real(case, device, settings)

    monkeypatch.setattr(microbench, "run_case", refusing)
    result = bench(load_config(write(tmp_path, "llama")), torch.device("cpu"), settings=TINY)
    assert "gemv lm_head" not in {op["name"] for op in result["operators"]}
    assert result["notes"][-1].startswith("failed, not measured: gemv lm_head (RuntimeError")


def test_a_config_no_set_of_devices_could_hold_is_refused_before_allocating(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The weights are priced as Engine.load prices them; here the device is made tiny (one
    byte free) so the refusal is proven without allocating anything large."""
    import engine.runner
    from engine.errors import ModelFormatError

    monkeypatch.setattr(engine.runner, "available_memory_bytes", lambda device: 1)
    with pytest.raises(ModelFormatError, match="more than 4096 devices") as info:
        bench(load_config(write(tmp_path, "llama")), torch.device("cpu"), settings=TINY)
    assert "\n" not in str(info.value)
