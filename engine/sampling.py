"""Choosing the next token: repetition penalty, temperature, top-k, top-p, seeded sampling.

The processors follow transformers' definitions so that a seeded run is reproducible and
greedy decoding (temperature 0) is a plain argmax.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.errors import EngineError


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    repetition_penalty: float = 1.0

    def validate(self) -> None:
        if self.temperature < 0:
            raise EngineError(f"temperature must be >= 0, got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise EngineError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise EngineError(f"top_k must be >= 0 (0 = off), got {self.top_k}")
        if self.repetition_penalty <= 0:
            raise EngineError(f"repetition_penalty must be > 0, got {self.repetition_penalty}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


def apply_repetition_penalty(logits: torch.Tensor, seen_ids: torch.Tensor,
                             penalty: float) -> torch.Tensor:
    """Divide positive / multiply negative logits of already seen tokens (CTRL-style)."""
    if penalty == 1.0 or seen_ids.numel() == 0:
        return logits
    picked = logits.gather(-1, seen_ids)
    picked = torch.where(picked < 0, picked * penalty, picked / penalty)
    return logits.scatter(-1, seen_ids, picked)


def apply_top_k(logits: torch.Tensor, top_k: int) -> torch.Tensor:
    if top_k <= 0 or top_k >= logits.shape[-1]:
        return logits
    threshold = torch.topk(logits, top_k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < threshold, float("-inf"))


def apply_top_p(logits: torch.Tensor, top_p: float) -> torch.Tensor:
    """Keep the smallest set of most likely tokens whose probability reaches top_p."""
    if top_p >= 1.0:
        return logits
    sorted_logits, sorted_ids = torch.sort(logits, descending=False, dim=-1)
    cumulative = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
    remove_sorted = cumulative <= (1 - top_p)
    remove_sorted[..., -1:] = False  # always keep the most likely token
    remove = remove_sorted.scatter(-1, sorted_ids, remove_sorted)
    return logits.masked_fill(remove, float("-inf"))


def next_token(logits: torch.Tensor, seen_ids: torch.Tensor, params: SamplingParams,
               generator: torch.Generator | None) -> int:
    """The next token id from float32 logits [vocab]; seen_ids holds prompt + output (int64)."""
    logits = apply_repetition_penalty(logits.float(), seen_ids, params.repetition_penalty)
    if params.greedy:
        return int(torch.argmax(logits).item())
    logits = apply_top_p(apply_top_k(logits / params.temperature, params.top_k), params.top_p)
    probs = torch.softmax(logits, dim=-1)
    return int(torch.multinomial(probs, 1, generator=generator).item())


def make_generator(seed: int | None, device: torch.device) -> torch.Generator | None:
    """A generator for reproducible sampling, or None to use torch's global RNG."""
    if seed is None:
        return None
    generator = torch.Generator(device=device)
    generator.manual_seed(seed)
    return generator
