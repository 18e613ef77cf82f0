"""The sparse MoE block's grouped (many-token) path against an expert-by-expert reference."""

from __future__ import annotations

import pytest
import torch

from engine import moe as moe_module
from engine.layers import MlpWeights, swiglu
from engine.moe import MoeWeights, SparseMoe, route

HIDDEN, INTER = 64, 32


def _experts(count: int, dtype: torch.dtype) -> list[MlpWeights]:
    return [MlpWeights(torch.randn(INTER, HIDDEN, dtype=dtype),
                       torch.randn(INTER, HIDDEN, dtype=dtype),
                       torch.randn(HIDDEN, INTER, dtype=dtype)) for _ in range(count)]


def _expert_by_expert(moe: SparseMoe, x: torch.Tensor) -> torch.Tensor:
    """Each expert on the tokens that picked it (in token order, one matmul chain, so its
    rows round as the grouped path's do), added into each token's sum in ascending expert
    order, each output cast to x's dtype first (how transformers accumulates)."""
    weights, ids = route(torch.nn.functional.linear(x, moe.w.router), moe.top_k,
                         moe.router_style, moe.norm_topk_prob)
    out = torch.zeros_like(x)
    for expert, mlp in enumerate(moe.w.experts):
        tokens, slots = (ids == expert).nonzero(as_tuple=True)
        if len(tokens):
            y = swiglu(x[tokens], mlp) * weights[tokens, slots][:, None]
            for row, token in enumerate(tokens.tolist()):
                out[token] += y[row].to(x.dtype)
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("style", ["softmax_topk", "topk_softmax"])
@pytest.mark.parametrize(("experts", "top_k", "tokens"), [(32, 4, 96), (8, 2, 5), (4, 1, 3),
                                                          (16, 8, 40)])
def test_grouped_experts_match_expert_by_expert(dtype: torch.dtype, style: str, experts: int,
                                              top_k: int, tokens: int) -> None:
    torch.manual_seed(experts * 100 + tokens)
    moe = SparseMoe(MoeWeights(torch.randn(experts, HIDDEN, dtype=dtype),
                               _experts(experts, dtype)), top_k, style, True)
    x = torch.randn(tokens, HIDDEN, dtype=dtype)
    assert torch.equal(moe.forward(x), _expert_by_expert(moe, x))


def test_experts_nobody_picked_are_skipped() -> None:
    torch.manual_seed(1)
    experts = _experts(4, torch.float32)
    router = torch.tensor([0.5, -1.0, 1.0, -1.0])[:, None].expand(4, HIDDEN).contiguous()
    experts[3] = MlpWeights(torch.full((INTER, HIDDEN), float("nan")),
                            torch.full((INTER, HIDDEN), float("nan")),
                            torch.full((HIDDEN, INTER), float("nan")))
    moe = SparseMoe(MoeWeights(router, experts), 2, "softmax_topk", True)
    x = torch.rand(6, HIDDEN) + 0.5  # positive: every token picks experts 2 and 0, never 3
    out = moe.forward(x)
    assert not out.isnan().any()
    assert torch.equal(out, _expert_by_expert(moe, x))


def test_a_long_prompt_is_grouped_in_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(2)
    moe = SparseMoe(MoeWeights(torch.randn(8, HIDDEN, dtype=torch.bfloat16),
                               _experts(8, torch.bfloat16)), 2, "softmax_topk", True)
    x = torch.randn(23, HIDDEN, dtype=torch.bfloat16)
    whole = moe.forward(x)
    monkeypatch.setattr(moe_module, "GROUP_TOKENS", 5)
    sliced = moe.forward(x)
    assert torch.equal(sliced, whole) and torch.equal(sliced, _expert_by_expert(moe, x))
