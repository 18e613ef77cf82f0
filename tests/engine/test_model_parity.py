"""Our decoder against transformers on tiny random models of every supported architecture."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file, save_file

from engine import Engine, GenerationConfig, cpu_kernel
from engine.cpu_decode import ResidentFp8, Rows, Stack, Transposed
from engine.fp8 import quantize_block as quantize_block_fp8
from tests.engine.tiny_models import ARCHITECTURES, VOCAB_SIZE, save_tiny

PROMPT_LEN = 12


@pytest.fixture(scope="module", params=ARCHITECTURES)
def tiny(request: pytest.FixtureRequest,
         tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Any, Path]:
    architecture = request.param
    directory = tmp_path_factory.mktemp(architecture)
    return architecture, save_tiny(architecture, directory), directory


def prompt(seed: int = 1, length: int = PROMPT_LEN) -> torch.Tensor:
    return torch.randint(3, VOCAB_SIZE, (1, length), generator=torch.Generator().manual_seed(seed))


def test_logits_match_transformers(tiny: tuple[str, Any, Path]) -> None:
    architecture, model, directory = tiny
    eng = Engine.load(directory, device="cpu", dtype="float32", max_seq_len=128)
    assert eng.config.architecture == architecture
    ids = prompt()
    with torch.no_grad():
        want = model(ids).logits[0]
    got = eng.logits(ids[0])
    assert got.dtype == torch.float32 and got.shape == (PROMPT_LEN, VOCAB_SIZE)
    scale = want.abs().max().item()
    assert (got - want).abs().max().item() < 1e-4 * scale


def test_greedy_64_tokens_match_transformers(tiny: tuple[str, Any, Path]) -> None:
    _, model, directory = tiny
    eng = Engine.load(directory, device="cpu", dtype="float32", max_seq_len=128)
    ids = prompt(seed=2)
    with torch.no_grad():
        want = model.generate(ids, do_sample=False, max_new_tokens=64)[0, PROMPT_LEN:].tolist()
    got = [ev.token_id for ev in eng.generate(ids[0], GenerationConfig(max_new_tokens=64))]
    assert got == want


def test_decode_path_matches_prefill_path(tiny: tuple[str, Any, Path]) -> None:
    _, _, directory = tiny
    eng = Engine.load(directory, device="cpu", dtype="float32", max_seq_len=64)
    ids = prompt(seed=3, length=20)[0].tolist()
    full = eng.logits(ids)
    runner = eng.runner
    stepwise = [runner.prefill(ids[:5])[-1]]
    stepwise += [runner.decode(token) for token in ids[5:]]
    assert torch.allclose(torch.stack(stepwise), full[4:], atol=1e-5, rtol=1e-4)


def test_bfloat16_tracks_float32(tiny: tuple[str, Any, Path]) -> None:
    _, _, directory = tiny
    ids = prompt(seed=4)[0]
    reference = Engine.load(directory, device="cpu", dtype="float32", max_seq_len=32).logits(ids)
    eng = Engine.load(directory, device="cpu", dtype="bfloat16", max_seq_len=32)
    got = eng.logits(ids)
    assert eng.stats.dtype == "bfloat16"
    assert (got - reference).abs().max().item() < 0.1 * reference.abs().max().item()


def test_int8_kv_cache_tracks_float_cache(tiny: tuple[str, Any, Path]) -> None:
    _, _, directory = tiny
    ids = prompt(seed=5)[0].tolist()
    plain = Engine.load(directory, device="cpu", dtype="float32", max_seq_len=32)
    quant = Engine.load(directory, device="cpu", dtype="float32", max_seq_len=32,
                        kv_cache="int8")
    assert quant.stats.kv_cache_dtype == "int8"
    assert quant.stats.kv_cache_bytes < plain.stats.kv_cache_bytes
    runner_p, runner_q = plain.runner, quant.runner
    runner_p.prefill(ids[:6])
    runner_q.prefill(ids[:6])
    for token in ids[6:]:
        want, got = runner_p.decode(token), runner_q.decode(token)
        assert (got - want).abs().max().item() < 0.05 * want.abs().max().item()


# --- FP8 checkpoints ------------------------------------------------------------------------

FP8_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def quantize_dir(directory: Path, out: Path) -> Path:
    """The tiny model rewritten in the Qwen3-FP8 block format (ragged 64/32 dims)."""
    out.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (out / name).write_bytes((directory / name).read_bytes())
    config = json.loads((directory / "config.json").read_text())
    config["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3",
                                     "activation_scheme": "dynamic",
                                     "weight_block_size": [128, 128]}
    (out / "config.json").write_text(json.dumps(config))
    tensors: dict[str, torch.Tensor] = {}
    for name, tensor in load_file(str(directory / "model.safetensors")).items():
        if any(f"{t}.weight" in name for t in FP8_TARGETS):
            tensors[name], tensors[name + "_scale_inv"] = quantize_block_fp8(
                tensor, scale_dtype=torch.bfloat16)
        else:
            tensors[name] = tensor.to(torch.bfloat16)
    save_file(tensors, str(out / "model.safetensors"))
    return out


@pytest.fixture(scope="module")
def fp8_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("moe")
    save_tiny("qwen3_moe", base)
    return quantize_dir(base, tmp_path_factory.mktemp("fp8") / "model")


def test_fp8_resident_equals_dequantize(fp8_dir: Path) -> None:
    ids = prompt(seed=6)[0]
    loaded = Engine.load(fp8_dir, device="cpu", dtype="float32", max_seq_len=32)
    resident = Engine.load(fp8_dir, device="cpu", dtype="float32", max_seq_len=32,
                           fp8="resident")
    assert resident.stats.fp8_mode == "resident"
    assert resident.stats.weight_bytes < loaded.stats.weight_bytes
    assert torch.allclose(resident.logits(ids), loaded.logits(ids), atol=1e-5)


def test_fp8_resident_decode_dequantizes_only_selected_experts(
        fp8_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    eng = Engine.load(fp8_dir, device="cpu", dtype="float32", max_seq_len=32, fp8="resident")
    for block in eng.runner.model.blocks:  # the torch path's calls (the kernel's MoE step runs
        block.kernel = None  # the picked experts in one C call: tests/engine/test_cpu_kernel.py)
    eng.runner.prefill(prompt(seed=7)[0].tolist())
    expert_weights = {id(w): layer for layer, block in enumerate(eng.runner.model.blocks)
                      if block.moe is not None
                      for mlp in block.moe.w.experts for w in (mlp.gate, mlp.up, mlp.down)}
    stacks = {id(mlp.gate_up): layer for layer, block in enumerate(eng.runner.model.blocks)
              if block.moe is not None for mlp in block.moe.w.experts}
    calls: list[int] = []
    original = ResidentFp8.matmul  # both paths: the compiled kernel, or dequantise per use
    original_split = Stack.split  # gate and up as one kernel GEMV, where there is a kernel

    def counting(self: ResidentFp8, x: torch.Tensor) -> torch.Tensor:
        if id(self) in expert_weights:
            calls.append(expert_weights[id(self)])
        return original(self, x)

    def counting_split(self: Stack, x: torch.Tensor) -> tuple[torch.Tensor, ...] | None:
        parts = original_split(self, x)
        if parts is not None and id(self) in stacks:
            calls.extend([stacks[id(self)]] * len(parts))
        return parts

    monkeypatch.setattr(ResidentFp8, "matmul", counting)
    monkeypatch.setattr(Stack, "split", counting_split)
    eng.runner.decode(5)
    top_k, layers = eng.config.num_experts_per_tok, eng.config.num_layers
    assert sorted(calls) == sorted([layer for layer in range(layers)] * top_k * 3)


def test_cpu_projection_layouts(tiny: tuple[str, Any, Path]) -> None:
    """With the compiled kernel every projection stays [out, in] as loaded (no copy, a tied
    lm_head shares the embedding); without it float32 ones are stored [in, out] for MKL."""
    _, _, directory = tiny
    fp32 = Engine.load(directory, device="cpu", dtype="float32", max_seq_len=16)
    bf16 = Engine.load(directory, device="cpu", dtype="bfloat16", max_seq_len=16)
    fp32_q = fp32.runner.model.blocks[0].attn.w.q
    out_features = bf16.config.num_heads * bf16.config.head_dim
    bf16_q = bf16.runner.model.blocks[0].attn.w.q
    assert isinstance(bf16_q, Rows) and bf16_q.nk.shape[0] == out_features
    if cpu_kernel.kernel() is None:
        assert isinstance(fp32_q, Transposed)
        if fp32.config.tie_word_embeddings:  # the [in, out] lm_head is an extra copy
            assert fp32.stats.weight_bytes > 2 * bf16.stats.weight_bytes
    else:
        assert isinstance(fp32_q, Rows) and fp32_q.kernel is not None
        assert fp32_q.nk.shape[0] == out_features
        assert fp32.stats.weight_bytes == 2 * bf16.stats.weight_bytes
        # q, k, v and gate, up decode as one GEMV each, over the same tensors (no copies)
        block = fp32.runner.model.blocks[0]
        ffn = block.mlp or (block.moe.w.experts[0] if block.moe is not None else None)
        assert block.attn is not None and block.attn.w.qkv is not None
        assert ffn is not None and ffn.gate_up is not None
