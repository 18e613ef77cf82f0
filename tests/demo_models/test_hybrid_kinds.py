"""qwen3-next-tiny and qwen3.6-moe-fp8-tiny: the official layouts, loaded by transformers
(its CPU FP8 path dequantises to BF16: the reference) and by our engine in both fp8 modes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from demo_models.base import BuildOptions
from demo_models.build import build
from engine import Engine, GenerationConfig
from engine.fp8 import Fp8Weight
from probes.live import LiveHost
from probes.model.reader import read_model_dir

FP8_TINY, NEXT_TINY = "qwen3.6-moe-fp8-tiny", "qwen3-next-tiny"
HOST = LiveHost(root="/", env={})


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("hybrid-kinds")
    dirs = {kind: root / kind for kind in (FP8_TINY, NEXT_TINY)}
    for kind, out in dirs.items():
        assert build(out, BuildOptions(kind))[0]
    return dirs


def test_qwen3_6_fp8_tiny_is_the_official_layout(built: dict[str, Path]) -> None:
    out = built[FP8_TINY]
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["Qwen3_5MoeForConditionalGeneration"]
    text = config["text_config"]
    assert text["model_type"] == "qwen3_5_moe_text" and text["vocab_size"] == 248320
    assert text["layer_types"] == ["linear_attention"] * 3 + ["full_attention"]
    assert config["quantization_config"]["weight_block_size"] == [128, 128]
    model = read_model_dir(HOST, str(out))
    tensors = model.tensors
    p = "model.language_model.layers."
    fp8 = {n for n, t in tensors.items() if t.dtype == "F8_E4M3"}
    assert f"{p}0.linear_attn.in_proj_qkv.weight" in fp8 and f"{p}3.self_attn.q_proj.weight" in fp8
    assert f"{p}1.mlp.experts.7.down_proj.weight" in fp8
    assert f"{p}2.mlp.shared_expert.up_proj.weight" in fp8
    assert all(tensors[n + "_scale_inv"].dtype == "BF16" for n in fp8)
    assert tensors[f"{p}3.self_attn.q_proj.weight_scale_inv"].shape == (4, 1)  # 512 x 128
    for name in (f"{p}0.linear_attn.in_proj_a.weight", f"{p}0.linear_attn.A_log",
                 f"{p}0.linear_attn.conv1d.weight", f"{p}0.mlp.gate.weight",
                 f"{p}0.mlp.shared_expert_gate.weight", "lm_head.weight",
                 "model.language_model.embed_tokens.weight", f"{p}3.self_attn.q_norm.weight"):
        assert tensors[name].dtype == "BF16", name
    assert any(n.startswith("model.visual.blocks.0.attn.qkv") for n in tensors)
    assert "mtp.fc.weight" in tensors
    assert len(fp8) == 4 * (3 * 8 + 3) + 3 * 3 + 4  # experts + shared, DeltaNet, attention


def test_qwen3_6_tokenizer(built: dict[str, Path]) -> None:
    from transformers import AutoTokenizer

    tokenizer: Any = AutoTokenizer.from_pretrained(built[FP8_TINY])
    assert len(tokenizer) == 248077
    ids = tokenizer.apply_chat_template([{"role": "user", "content": "Hello world"}],
                                        add_generation_prompt=True, enable_thinking=False,
                                        tokenize=True)["input_ids"]
    assert ids[:3] == [248045, 846, 198] and ids[-5:] == [198, 248068, 271, 248069, 271]


@pytest.mark.parametrize("fp8", ["dequantize", "resident"])
def test_qwen3_6_fp8_tiny_matches_transformers_dequantised(built: dict[str, Path],
                                                           fp8: str) -> None:
    import transformers as tf

    out = built[FP8_TINY]
    reference = tf.Qwen3_5MoeForConditionalGeneration.from_pretrained(out).eval()
    assert {p.dtype for p in reference.parameters()} == {torch.bfloat16}  # dequantised
    ids = torch.randint(3, 248000, (1, 90), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        want = reference(ids).logits[0].float()
    eng = Engine.load(out, device="cpu", dtype="bfloat16", max_seq_len=128, fp8=fp8)
    got = eng.logits(ids[0])
    assert (got - want).abs().max().item() < 0.02 * want.abs().max().item()
    assert eng.stats.fp8_mode == fp8
    experts = eng.runner.model.blocks[0].moe
    assert experts is not None and experts.w.shared is not None
    resident = isinstance(experts.w.experts[0].gate, Fp8Weight)
    assert resident == (fp8 == "resident")
    assert isinstance(experts.w.shared.mlp.down, Fp8Weight) == resident


def test_qwen3_6_fp8_tiny_chats_and_notes_what_it_skips(built: dict[str, Path]) -> None:
    eng = Engine.load(built[FP8_TINY], device="cpu", dtype="bfloat16", max_seq_len=256,
                      fp8="resident")
    events = list(eng.chat([{"role": "user", "content": "你好"}],
                           GenerationConfig(max_new_tokens=8)))
    assert events and all(isinstance(e.token_id, int) for e in events)
    stats = eng.stats
    assert stats.architecture == "qwen3_5_moe"
    assert stats.kv_layout == "BSND on 1 of 4 layers + DeltaNet state on 3"
    assert stats.ignored_tensors == ("model.visual.* (vision tower): 21 tensors not loaded",
                                     "mtp.* (multi-token prediction head): 4 tensors not loaded")


def test_qwen3_next_tiny_matches_transformers(built: dict[str, Path]) -> None:
    import transformers as tf

    out = built[NEXT_TINY]
    assert "model.layers.0.linear_attn.in_proj_qkvz.weight" in read_model_dir(
        HOST, str(out)).tensors
    reference = tf.Qwen3NextForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
    ids = torch.randint(3, 151000, (1, 90), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = reference(ids).logits[0]
    got = Engine.load(out, device="cpu", dtype="float32", max_seq_len=128).logits(ids[0])
    assert (got - want).abs().max().item() < 1e-4 * want.abs().max().item()
