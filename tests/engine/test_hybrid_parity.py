"""The hybrids (Gated DeltaNet + gated attention + shared-expert MoE) against transformers.

Prompts are 100 tokens, longer than one 64-token DeltaNet chunk, so the chunked rule carries
its state across chunks; decode then runs the recurrent rule one token at a time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from engine import Engine, GenerationConfig
from engine.cache import LayerCache, LinearState
from engine.deltanet import chunked_delta_rule, recurrent_delta_rule
from tests.engine.hybrid_models import HYBRIDS, VOCAB_SIZE, save

PROMPT_LEN = 100


@pytest.fixture(scope="module", params=HYBRIDS)
def hybrid(request: pytest.FixtureRequest,
           tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Any, Path]:
    kind = request.param
    directory = tmp_path_factory.mktemp(kind)
    return kind, save(kind, directory), directory


def prompt(seed: int, length: int = PROMPT_LEN) -> torch.Tensor:
    return torch.randint(3, VOCAB_SIZE, (1, length), generator=torch.Generator().manual_seed(seed))


def load(directory: Path, **kwargs: Any) -> Engine:
    options: dict[str, Any] = {"device": "cpu", "dtype": "float32", "max_seq_len": 256,
                               "require_tokenizer": False, **kwargs}
    return Engine.load(directory, **options)


def test_logits_match_transformers(hybrid: tuple[str, Any, Path]) -> None:
    kind, model, directory = hybrid
    eng = load(directory)
    assert eng.config.architecture == kind
    ids = prompt(1)
    with torch.no_grad():
        want = model(ids).logits[0]
    got = eng.logits(ids[0])
    assert got.shape == (PROMPT_LEN, VOCAB_SIZE)
    scale = want.abs().max().item()
    assert (got - want).abs().max().item() < 1e-4 * scale
    assert eng.stats.kernel_layers == ""  # zero-centred norms: no layer runs in the CPU kernel


def test_greedy_64_tokens_match_generate(hybrid: tuple[str, Any, Path]) -> None:
    _, model, directory = hybrid
    ids = prompt(2, 24)
    with torch.no_grad():
        want = model.generate(ids, do_sample=False, max_new_tokens=64)[0, 24:].tolist()
    got = [e.token_id for e in load(directory).generate(ids[0], GenerationConfig(
        max_new_tokens=64))]
    assert len(want) == 64 and got == want


def test_prefill_then_decode_equals_one_prefill(hybrid: tuple[str, Any, Path]) -> None:
    _, _, directory = hybrid
    eng = load(directory)
    ids = prompt(3)[0].tolist()
    full = eng.logits(ids)
    runner = eng.runner
    steps = [runner.prefill(ids[:40])[-1]] + [runner.decode(token) for token in ids[40:]]
    scale = full.abs().max().item()
    assert (torch.stack(steps) - full[39:]).abs().max().item() < 1e-4 * scale


def test_the_cache_holds_kv_or_state_per_layer_in_place(hybrid: tuple[str, Any, Path]) -> None:
    kind, _, directory = hybrid
    eng = load(directory, max_seq_len=128)
    cache = eng.runner.cache
    assert [type(layer) for layer in cache.layers] == [LinearState] * 3 + [LayerCache]
    conv, recurrent = cache.layers[0].tensors()
    # conv: 2 x 2 key heads x 16 + 4 value heads x 16 channels, kernel 4 - 1 inputs kept
    assert tuple(conv.shape) == (1, 128, 3) and tuple(recurrent.shape) == (1, 4, 16, 16)
    assert recurrent.dtype == torch.float32
    kv_bytes = 2 * 1 * 128 * 2 * 32 * 4  # one full-attention layer, 2 KV heads x 32, float32
    state_bytes = 3 * (128 * 3 * 4 + 4 * 16 * 16 * 4)
    stats = eng.stats
    assert stats.state_bytes == state_bytes and stats.state_layers == 3 and stats.kv_layers == 1
    assert stats.kv_cache_bytes == kv_bytes + state_bytes
    assert stats.kv_layout == "BSND on 1 of 4 layers + DeltaNet state on 3"
    before = [(id(t), t.data_ptr()) for layer in cache.layers for t in layer.tensors()]
    events = list(eng.generate(prompt(4, 30)[0], GenerationConfig(max_new_tokens=20)))
    assert [(id(t), t.data_ptr()) for layer in cache.layers for t in layer.tensors()] == before
    assert stats.kv_tokens_used == 0 and eng.stats.kv_tokens_used == 30 + len(events) - 1
    if kind == "qwen3_5_moe":
        assert eng.stats.ignored_tensors == (
            "model.visual.* (vision tower): 2 tensors not loaded",
            "mtp.* (multi-token prediction head): 2 tensors not loaded")
    else:
        assert eng.stats.ignored_tensors == ()


def test_bfloat16_matches_transformers_in_bfloat16(hybrid: tuple[str, Any, Path]) -> None:
    """bf16 itself moves these random MoEs far from float32 (a flipped expert choice), for
    transformers as for us; the same computation in bf16 must agree to rounding."""
    import copy

    _, model, directory = hybrid
    ids = prompt(5)
    with torch.no_grad():
        want = copy.deepcopy(model).to(torch.bfloat16)(ids).logits[0].float()
    got = load(directory, dtype="bfloat16").logits(ids[0])
    assert (got - want).abs().max().item() < 0.02 * want.abs().max().item()


@pytest.mark.parametrize("length", [1, 63, 64, 65, 150])
def test_chunked_and_recurrent_rules_agree_from_a_state(length: int) -> None:
    gen = torch.Generator().manual_seed(length)
    q, k = torch.randn(1, length, 2, 16, generator=gen), torch.randn(1, length, 2, 16,
                                                                     generator=gen)
    v = torch.randn(1, length, 4, 8, generator=gen)
    decay = -torch.rand(1, length, 4, generator=gen)
    beta = torch.rand(1, length, 4, generator=gen)
    start = torch.randn(1, 4, 16, 8, generator=gen)
    chunked_state, recurrent_state = start.clone(), start.clone()
    chunked = chunked_delta_rule(q, k, v, decay, beta, chunked_state)
    stepped = torch.cat([recurrent_delta_rule(q[:, t:t + 1], k[:, t:t + 1], v[:, t:t + 1],
                                              decay[:, t:t + 1], beta[:, t:t + 1],
                                              recurrent_state) for t in range(length)], dim=1)
    assert torch.allclose(chunked, stepped, atol=1e-4, rtol=1e-4)
    assert torch.allclose(chunked_state, recurrent_state, atol=1e-4, rtol=1e-4)


def test_deltanet_in_projections_decode_as_one_stack(hybrid: tuple[str, Any, Path]) -> None:
    """Where the CPU kernel exists, a DeltaNet layer's in-projections (qkv, z, b, a or qkvz,
    ba) are one stacked GEMV over the same weights: no copy, the same bytes."""
    from engine import cpu_kernel

    _, _, directory = hybrid
    eng = Engine.load(directory, device="cpu", dtype="float32", max_seq_len=64,
                      require_tokenizer=False)
    assert eng.stats.fused_ops == ()  # the zero-centred norm keeps the standard path
    net = next(block.linear for block in eng.runner.model.blocks if block.linear is not None)
    stack = net.project.stack
    if cpu_kernel.kernel() is None:
        assert stack is None
        return
    weights = [w for name, w in vars(net.project).items() if name != "stack"]
    assert stack is not None and stack.bound.splits == tuple(w.nk.shape[0] for w in weights)
    assert stack.bound.nbytes == sum(w.nbytes for w in weights)
