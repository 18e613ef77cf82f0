"""Sparse mixture-of-experts block: routers as the checkpoints define them, grouped experts,
and (Qwen3-Next, Qwen3.5/3.6) an always-on shared expert gated by sigmoid(shared_expert_gate(x)).

Prefill sorts the (token, slot) pairs by expert and runs each hit expert once on its group of
tokens; decode runs only the experts the router picked. Resident FP8 experts are therefore
dequantised only when selected.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.errors import UnsupportedArchitecture
from engine.layers import MlpWeights, Weight, linear, swiglu

ROUTERS = ("softmax_topk", "topk_softmax")
# Tokens grouped at once: the sorted inputs and outputs are [tokens x top_k, hidden] each
# (Qwen3.6-35B-A3B, top-8 of hidden 2048 in bfloat16: 32 MiB each at 1,024 tokens).
GROUP_TOKENS = 1024


@dataclass
class SharedExpert:
    mlp: MlpWeights
    gate: Weight  # [1, hidden]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(linear(x, self.gate)) * swiglu(x, self.mlp)


@dataclass
class MoeWeights:
    router: Weight  # [num_experts, hidden]
    experts: list[MlpWeights]
    shared: SharedExpert | None = None


def route(logits: torch.Tensor, top_k: int, style: str,
          norm_topk_prob: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(weights [N, k], expert ids [N, k] int64) from router logits [N, E]."""
    if style == "softmax_topk":
        # Qwen3-MoE: float32 softmax over all experts, top-k, optional renormalisation,
        # weights cast back to the logits dtype.
        probs = torch.softmax(logits, dim=-1, dtype=torch.float32)
        weights, ids = torch.topk(probs, top_k, dim=-1)
        if norm_topk_prob:
            weights = weights / weights.sum(dim=-1, keepdim=True)
        return weights.to(logits.dtype), ids
    if style == "topk_softmax":
        # Mixtral: softmax over the top-k logits, computed as transformers does
        # (float32 softmax, top-k, renormalise) and kept in float32.
        probs = torch.softmax(logits.float(), dim=-1)
        weights, ids = torch.topk(probs, top_k, dim=-1)
        return weights / weights.sum(dim=-1, keepdim=True), ids
    raise UnsupportedArchitecture(f"router {style!r} is not supported (supported: {ROUTERS})")


class SparseMoe:
    def __init__(self, weights: MoeWeights, top_k: int, router_style: str,
                 norm_topk_prob: bool) -> None:
        self.w = weights
        self.top_k = top_k
        self.router_style = router_style
        self.norm_topk_prob = norm_topk_prob

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        flat = x.reshape(-1, shape[-1])
        weights, ids = route(linear(flat, self.w.router), self.top_k, self.router_style,
                             self.norm_topk_prob)
        if flat.shape[0] == 1:
            out = self._decode(flat, weights, ids)
        else:  # in slices, so the sorted copies stay small on a long prompt
            parts = [self._grouped(flat[i:i + GROUP_TOKENS], weights[i:i + GROUP_TOKENS],
                                   ids[i:i + GROUP_TOKENS])
                     for i in range(0, flat.shape[0], GROUP_TOKENS)]
            out = parts[0] if len(parts) == 1 else torch.cat(parts)
        if self.w.shared is not None:
            out = out + self.w.shared.forward(flat)
        return out.view(shape)

    def _decode(self, x: torch.Tensor, weights: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """One token: run only its k selected experts, in ascending expert order."""
        out = torch.zeros_like(x)
        order = torch.argsort(ids[0])
        for slot, expert in zip(order.tolist(), ids[0, order].tolist(), strict=True):
            y = swiglu(x, self.w.experts[expert]) * weights[0, slot]
            out += y.to(out.dtype)
        return out

    def _grouped(self, x: torch.Tensor, weights: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """Many tokens: (token, slot) pairs sorted by expert, one gather of their inputs, one
        matmul chain per hit expert on its contiguous run, then each token's k outputs added
        in ascending expert order, rounding to x's dtype after each add (transformers
        accumulates its experts into the output in that order)."""
        tokens, top_k = ids.shape
        flat_ids = ids.reshape(-1)
        order = torch.argsort(flat_ids, stable=True)
        counts = torch.bincount(flat_ids, minlength=len(self.w.experts)).tolist()
        inputs = x.index_select(0, order // top_k)  # index_select: a row copy, 5x x[rows]
        outputs = []
        begin = 0
        for expert, count in enumerate(counts):
            if count:
                outputs.append(swiglu(inputs[begin:begin + count], self.w.experts[expert]))
                begin += count
        sorted_out = (torch.cat(outputs) * weights.reshape(-1)[order, None]).to(x.dtype)
        # Row of each (token, slot) pair in sorted_out, the slots of a token by expert id.
        row_of = torch.argsort(order)
        by_expert = torch.argsort(ids, dim=-1) + torch.arange(tokens, device=x.device)[:, None] \
            * top_k
        rows = row_of[by_expert]
        out = sorted_out.index_select(0, rows[:, 0])
        for slot in range(1, top_k):
            out += sorted_out.index_select(0, rows[:, slot])
        return out
