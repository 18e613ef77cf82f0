"""Rank playbooks against what a person types: BM25 per field, fields weighted.

Symptom phrases weigh most, then the title, then check ids and the playbook id, then the
body, then the source list. On top, a playbook earns a bonus when the query closely
matches one whole symptom phrase (Jaccard overlap of the word sets), so "log level" prefers
the playbook listing exactly that phrase over one listing "set log level 1 for production".
Small, pure and deterministic (ties broken by id).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from playbooks._loader import Playbook

FIELD_WEIGHTS: dict[str, float] = {
    "symptoms": 4.0,
    "title": 2.5,
    "ids": 2.0,
    "body": 1.0,
    "sources": 0.5,
}
PHRASE_WEIGHT = 4.0
_K1 = 1.2
_B = 0.75
_WORD_RE = re.compile(r"[a-z0-9]+")
# fmt: off
_STOPWORDS = frozenset((
    "a", "an", "the", "of", "to", "in", "on", "at", "is", "are", "be", "was", "and", "or",
    "for", "with", "it", "its", "my", "i", "we", "our", "this", "that", "by", "as", "from",
    "into", "after", "when", "how", "what", "why", "do", "does",
))
# fmt: on


def stem(word: str) -> str:
    """Fold simple plurals and -ing/-ed/-e endings so 'garbled' meets 'garble'."""
    if word.isdigit() or len(word) <= 3:
        return word
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    for suffix in ("ing", "ed"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            if word[-1] == word[-2] and word[-1] not in "lsz":
                word = word[:-1]  # logging -> log, stopped -> stop
            break
    if word.endswith("e") and len(word) > 3:
        word = word[:-1]
    return word


def tokenize(text: str) -> list[str]:
    """Lowercase, split on anything not a letter or digit, drop stopwords, stem."""
    return [stem(w) for w in _WORD_RE.findall(text.lower()) if w not in _STOPWORDS]


@dataclass(frozen=True)
class _Doc:
    book: Playbook
    fields: dict[str, Counter[str]]
    lengths: dict[str, int]
    phrases: tuple[frozenset[str], ...]


@dataclass(frozen=True)
class Index:
    docs: tuple[_Doc, ...]
    avg_len: dict[str, float]
    idf: dict[str, float]


def _fields(book: Playbook) -> dict[str, list[str]]:
    return {
        "symptoms": tokenize(" ".join(book.symptoms)),
        "title": tokenize(book.title),
        "ids": tokenize(" ".join((book.id, *book.checks))),
        "body": tokenize(book.body),
        "sources": tokenize(" ".join(book.sources)),
    }


def build_index(books: Sequence[Playbook]) -> Index:
    docs: list[_Doc] = []
    df: Counter[str] = Counter()
    totals: Counter[str] = Counter()
    for book in books:
        tokens = _fields(book)
        counters = {name: Counter(words) for name, words in tokens.items()}
        lengths = {name: len(words) for name, words in tokens.items()}
        totals.update(lengths)
        df.update({t for c in counters.values() for t in c})
        phrases = tuple(frozenset(tokenize(p)) for p in book.symptoms)
        docs.append(_Doc(book, counters, lengths, tuple(p for p in phrases if p)))
    n = max(len(docs), 1)
    avg_len = {name: max(totals[name] / n, 1.0) for name in FIELD_WEIGHTS}
    idf = {t: math.log(1.0 + (n - d + 0.5) / (d + 0.5)) for t, d in df.items()}
    return Index(tuple(docs), avg_len, idf)


def _field_score(tf: int, length: int, avg_len: float) -> float:
    if tf == 0:
        return 0.0
    norm = _K1 * (1.0 - _B + _B * length / avg_len)
    return tf * (_K1 + 1.0) / (tf + norm)


def _phrase_bonus(index: Index, doc: _Doc, terms: Sequence[str]) -> float:
    query = frozenset(terms)
    best = 0.0
    for phrase in doc.phrases:
        shared = query & phrase
        if shared:
            jaccard = len(shared) / len(query | phrase)
            best = max(best, jaccard * sum(index.idf.get(t, 0.0) for t in shared))
    return PHRASE_WEIGHT * best


def score(index: Index, doc: _Doc, terms: Sequence[str]) -> float:
    total = _phrase_bonus(index, doc, terms)
    for term in terms:
        idf = index.idf.get(term)
        if idf is None:
            continue
        for name, weight in FIELD_WEIGHTS.items():
            tf = doc.fields[name][term]
            total += weight * idf * _field_score(tf, doc.lengths[name], index.avg_len[name])
    return total


def rank(index: Index, text: str, limit: int) -> list[tuple[Playbook, float]]:
    terms = list(dict.fromkeys(tokenize(text)))
    if not terms or limit <= 0:
        return []
    scored = [(doc.book, score(index, doc, terms)) for doc in index.docs]
    hits = [(book, round(s, 6)) for book, s in scored if s > 0.0]
    hits.sort(key=lambda pair: (-pair[1], pair[0].id))
    return hits[:limit]
