"""Sampling processors agree with transformers' own; seeded sampling is reproducible."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from transformers.generation.logits_process import (
    RepetitionPenaltyLogitsProcessor,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from engine import Engine, EngineError, GenerationConfig
from engine.sampling import (
    SamplingParams,
    apply_repetition_penalty,
    apply_top_k,
    apply_top_p,
    make_generator,
    next_token,
)
from tests.engine.tiny_models import save_tiny

VOCAB = 50


def logits(seed: int = 0) -> torch.Tensor:
    return torch.randn(1, VOCAB, generator=torch.Generator().manual_seed(seed)) * 3


def test_repetition_penalty_matches_transformers() -> None:
    x = logits()
    seen = torch.tensor([[3, 7, 7, 12, 40]])
    want = RepetitionPenaltyLogitsProcessor(1.3)(seen, x.clone())
    assert torch.equal(apply_repetition_penalty(x, seen, 1.3), want)
    assert torch.equal(apply_repetition_penalty(x, seen, 1.0), x)


@pytest.mark.parametrize("top_k", [1, 5, 49])
def test_top_k_matches_transformers(top_k: int) -> None:
    x = logits(1)
    assert torch.equal(apply_top_k(x, top_k), TopKLogitsWarper(top_k)(None, x.clone()))
    assert torch.equal(apply_top_k(x, 0), x)


@pytest.mark.parametrize("top_p", [0.1, 0.5, 0.9, 0.99])
def test_top_p_matches_transformers(top_p: float) -> None:
    x = logits(2)
    assert torch.equal(apply_top_p(x, top_p), TopPLogitsWarper(top_p)(None, x.clone()))


def test_greedy_is_argmax_and_ignores_the_generator() -> None:
    x = logits(3)[0]
    empty = torch.empty(0, dtype=torch.int64)
    assert next_token(x, empty, SamplingParams(), make_generator(1, torch.device("cpu"))) == \
        int(x.argmax())


def test_top_k_one_is_greedy_even_when_sampling() -> None:
    x = logits(4)[0]
    params = SamplingParams(temperature=1.5, top_k=1)
    picks = {next_token(x, torch.empty(0, dtype=torch.int64), params, None) for _ in range(20)}
    assert picks == {int(x.argmax())}


def test_sampling_follows_the_distribution() -> None:
    x = torch.tensor([0.0, 1.0, 2.0, -30.0])
    params = SamplingParams(temperature=1.0)
    generator = make_generator(0, torch.device("cpu"))
    empty = torch.empty(0, dtype=torch.int64)
    counts = torch.bincount(torch.tensor(
        [next_token(x, empty, params, generator) for _ in range(3000)]), minlength=4)
    expected = torch.softmax(x, 0) * 3000
    assert counts[3] == 0
    assert torch.allclose(counts[:3].float(), expected[:3], rtol=0.15)


@pytest.mark.parametrize("params", [SamplingParams(temperature=-1), SamplingParams(top_p=0),
                                    SamplingParams(top_k=-2),
                                    SamplingParams(repetition_penalty=0)])
def test_invalid_params(params: SamplingParams) -> None:
    with pytest.raises(EngineError):
        params.validate()


@pytest.fixture(scope="module")
def eng(tmp_path_factory: pytest.TempPathFactory) -> Engine:
    directory: Path = tmp_path_factory.mktemp("qwen3")
    save_tiny("qwen3", directory)
    return Engine.load(directory, device="cpu", dtype="float32", max_seq_len=64)


def sample(eng: Engine, seed: int | None, **kwargs: Any) -> list[int]:
    config = GenerationConfig(max_new_tokens=24, temperature=1.0, seed=seed, **kwargs)
    return [ev.token_id for ev in eng.generate([5, 6, 7], config)]


def test_seeded_sampling_is_reproducible(eng: Engine) -> None:
    assert sample(eng, 7) == sample(eng, 7)
    assert sample(eng, 7, top_p=0.9, top_k=20, repetition_penalty=1.2) == \
        sample(eng, 7, top_p=0.9, top_k=20, repetition_penalty=1.2)
    assert sample(eng, 7) != sample(eng, 8)


def test_repetition_penalty_changes_greedy_output(eng: Engine) -> None:
    plain = [ev.token_id for ev in eng.generate([5, 6, 7], GenerationConfig(max_new_tokens=30))]
    penalised = [ev.token_id for ev in eng.generate(
        [5, 6, 7], GenerationConfig(max_new_tokens=30, repetition_penalty=100.0))]
    assert len(set(penalised)) == len(penalised)  # a huge penalty forbids every repeat
    assert penalised != plain or len(set(plain)) == len(plain)
