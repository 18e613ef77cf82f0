"""The int8 KV cache against the bfloat16 one on the demo models, teacher-forced over 512
positions of a fixed English text (tests/engine/data/kv_text.txt, written for this test).

Agreement counts a position when the int8 run's top-1 token is a top-1 token of the bfloat16
run: the bfloat16 logits are rounded to 8 significant bits, so the reference itself has exact
ties at a few percent of positions (20 of 512 for SmolLM2), where either token is its top-1.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from demo_models.base import BuildOptions, DemoError
from demo_models.build import build
from demo_models.smollm2 import smollm2_gguf_path
from engine import Engine

TEXT = Path(__file__).parent / "data" / "kv_text.txt"
POSITIONS = 512
MIN_AGREEMENT = 0.98
MAX_BYTES_RATIO = 0.55


def gguf_or_skip() -> Path:
    try:
        return smollm2_gguf_path()
    except DemoError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module", params=["smollm2", "smollm2-moe-fp8", "qwen3.6-moe-fp8-tiny"])
def model_path(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    gguf = gguf_or_skip() if request.param.startswith("smollm2") else None
    if request.param == "smollm2":
        assert gguf is not None
        return gguf
    out = tmp_path_factory.mktemp("kv") / request.param
    build(out, BuildOptions(request.param))
    return out


def top1_agreement(reference: torch.Tensor, other: torch.Tensor) -> float:
    """Share of positions where `other`'s argmax is a top-1 token of `reference` (ties kept)."""
    picked = reference.gather(-1, other.argmax(-1, keepdim=True))[:, 0]
    return float((picked == reference.max(-1).values).float().mean())


def test_top1_agreement_counts_ties_for_every_tied_token() -> None:
    reference = torch.tensor([[1.0, 3.0, 3.0], [2.0, 0.0, 1.0]])
    assert top1_agreement(reference, torch.tensor([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0]])) == 0.5


def test_int8_kv_agrees_with_the_bfloat16_cache(model_path: Path) -> None:
    plain = Engine.load(model_path, device="cpu", dtype="bfloat16", max_seq_len=POSITIONS)
    quant = Engine.load(model_path, device="cpu", dtype="bfloat16", max_seq_len=POSITIONS,
                        kv_cache="int8")
    ids = plain.tokenizer(TEXT.read_text(), add_special_tokens=False)["input_ids"][:POSITIONS]
    assert len(ids) == POSITIONS
    want, got = plain.logits(ids), quant.logits(ids)
    assert top1_agreement(want, got) >= MIN_AGREEMENT
    assert float((want - got).abs().mean()) < 0.05 * float(want.abs().mean())
    kv_bytes = [e.stats.kv_cache_bytes - e.stats.state_bytes for e in (plain, quant)]
    assert quant.stats.kv_cache_dtype == "int8"
    assert kv_bytes[1] <= MAX_BYTES_RATIO * kv_bytes[0]
