"""Which model family a tokenizer and an embedding belong to, by their sizes (the rows are in
checks/data/tokenizer_families.yaml, each with its source).

A tokenizer whose id count is one family's, on an embedding whose row count is another's, is
another model's tokenizer: the ids mean other tokens, and the output is garbage from the
first token (Qwen3 and Qwen3.5/3.6 share 281 ids of their vocabularies).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TokenizerFamily:
    """One family's tokenizer size (regular + added ids) and embedding rows (vocab_size)."""

    id: str
    family: str  # as said to a person, e.g. "Qwen3.5/3.6"
    tokenizer_ids: int
    vocab_size: int
    sources: tuple[str, ...]


def families() -> tuple[TokenizerFamily, ...]:
    from checks.data import load

    return load("tokenizer_families", TokenizerFamily)


def mismatch(tokenizer_ids: int, vocab_size: int | None,
             rows: tuple[TokenizerFamily, ...]) -> tuple[TokenizerFamily, TokenizerFamily] | None:
    """(the tokenizer's family, the model's family) when they are known and differ."""
    if vocab_size is None:
        return None
    theirs = next((r for r in rows if r.tokenizer_ids == tokenizer_ids), None)
    model = next((r for r in rows if r.vocab_size == vocab_size), None)
    if theirs is None or model is None or theirs.family == model.family:
        return None
    return theirs, model
