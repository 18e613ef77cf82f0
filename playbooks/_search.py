"""Rank playbooks against what a person types or pastes: BM25 per field, fields weighted.

Codes (error codes, exception and library names) weigh most, then symptom phrases, the
title, the ids, the sections' text and the source list. The idf of BM25 makes words every
playbook uses ("error", "model", "npu") weigh little. On top:

- a playbook earns a bonus for each symptom phrase or code the query covers (weighted by how
  much of the phrase's idf it covers), so "log level" prefers the playbook listing exactly that;
- when the query carries error codes, a playbook that mentions none of them keeps only a
  quarter of its score: "error code is 507035" is about 507035, not about the words around it;
- a folklore playbook ranks only when the query states its myth: one of its symptom phrases or
  codes, whole and specific (ordinary "driver version" or "HBM size" wording does not count);
- a relevance floor: below it nothing matched, and the nearest few are offered as "closest".

Small, pure and deterministic (ties broken by id).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from playbooks._loader import Playbook
from playbooks._tokens import HAN_COMMON, code_names, code_term, error_codes, is_han, tokenize

FIELD_WEIGHTS: dict[str, float] = {
    "codes": 5.0,
    "symptoms": 4.0,
    "title": 2.5,
    "ids": 2.0,
    "body": 1.0,
    "sources": 0.5,
}
PHRASE_WEIGHT = 3.0
# Calibrated on tests/playbooks/test_search.py: one specific term in a symptom phrase clears
# it, a few common words ("error code", "the model") do not.
FLOOR = 15.0
RELATIVE_FLOOR = 0.2  # a hit scoring under this share of the best one is noise
CODE_MISS_FACTOR = 0.25
MYTH_MIN_IDF = 2.0  # a stated myth needs at least one fairly rare term,
MYTH_MIN_TERMS = 4  # or a whole phrase of this many terms
CLOSEST = 3
# A search reads at most this much of a paste: a whole log is triage's job, and the cap keeps
# a keystroke-driven search in the console quick whatever lands in its box.
MAX_QUERY_CHARS = 65536
# A Chinese bigram is weaker evidence than a word: only the symptom phrases carry Chinese, so
# idf sees every bigram as rare; everyday ones (模型, 服务, 报错) weigh least.
HAN_WEIGHT = 0.7
HAN_COMMON_WEIGHT = 0.2
_K1 = 1.2
# How much a long field dilutes a match: a code is a code however many the playbook lists.
_B: dict[str, float] = {"codes": 0.0, "symptoms": 0.5}
_B_DEFAULT = 0.75


@dataclass(frozen=True)
class _Doc:
    book: Playbook
    fields: dict[str, Counter[str]]
    lengths: dict[str, int]
    phrases: tuple[frozenset[str], ...]
    terms: frozenset[str]


@dataclass(frozen=True)
class Index:
    docs: tuple[_Doc, ...]
    avg_len: dict[str, float]
    idf: dict[str, float]


@dataclass(frozen=True)
class Ranking:
    """Hits above the floor, best first; when there are none, the closest ones below it;
    and the error codes of the query that no playbook names."""

    hits: tuple[tuple[Playbook, float], ...]
    closest: tuple[tuple[Playbook, float], ...]
    unknown_codes: tuple[str, ...] = ()


def _fields(book: Playbook) -> dict[str, list[str]]:
    # an error code written among the symptoms or in the title counts as a listed code
    written = sorted(error_codes(" ".join((book.title, *book.symptoms))))
    return {
        "codes": list(dict.fromkeys([*tokenize(" ".join(book.codes)), *written])),
        "symptoms": tokenize(" ".join(book.symptoms)),
        "title": tokenize(book.title),
        "ids": tokenize(" ".join((book.id, *book.checks))),
        "body": tokenize(book.body),
        "sources": tokenize(" ".join(book.sources)),
    }


def _phrases(book: Playbook) -> tuple[frozenset[str], ...]:
    sets = (frozenset(tokenize(p)) for p in (*book.symptoms, *book.codes))
    return tuple(s for s in sets if s)


def _doc(book: Playbook) -> _Doc:
    tokens = _fields(book)
    counters = {name: Counter(words) for name, words in tokens.items()}
    lengths = {name: len(words) for name, words in tokens.items()}
    terms = frozenset(t for c in counters.values() for t in c)
    return _Doc(book, counters, lengths, _phrases(book), terms)


def build_index(books: Sequence[Playbook]) -> Index:
    docs = tuple(_doc(book) for book in books)
    df: Counter[str] = Counter(t for doc in docs for t in doc.terms)
    n = max(len(docs), 1)
    avg_len = {
        name: max(sum(d.lengths[name] for d in docs) / n, 1.0) for name in FIELD_WEIGHTS
    }
    idf = {t: math.log(1.0 + (n - d + 0.5) / (d + 0.5)) for t, d in df.items()}
    return Index(docs, avg_len, idf)


def _field_score(tf: int, length: int, avg_len: float, b: float) -> float:
    if tf == 0:
        return 0.0
    norm = _K1 * (1.0 - b + b * length / avg_len)
    return tf * (_K1 + 1.0) / (tf + norm)


def _weight(index: Index, term: str) -> float:
    """The term's idf, lowered for Chinese bigrams."""
    idf = index.idf.get(term, 0.0)
    if not is_han(term):
        return idf
    return idf * (HAN_COMMON_WEIGHT if term in HAN_COMMON else HAN_WEIGHT)


def _idf_sum(index: Index, terms: Iterable[str]) -> float:
    return sum(_weight(index, t) for t in terms)


def _phrase_bonus(index: Index, doc: _Doc, query: frozenset[str]) -> float:
    best = 0.0
    for phrase in doc.phrases:
        shared = _idf_sum(index, query & phrase)
        whole = _idf_sum(index, phrase)
        if shared > 0.0 and whole > 0.0:
            best = max(best, (shared / whole) ** 2 * shared)
    return PHRASE_WEIGHT * best


def states_myth(index: Index, doc: _Doc, query: frozenset[str]) -> bool:
    """The query holds one of the playbook's phrases or codes whole, with a rare term in it or
    long enough to be a statement (a whole sentence of common words states the myth too: the
    idf of its words falls as playbooks are added)."""
    return any(
        phrase <= query and (len(phrase) >= MYTH_MIN_TERMS
                             or max(index.idf.get(t, 0.0) for t in phrase) >= MYTH_MIN_IDF)
        for phrase in doc.phrases
    )


def score(
    index: Index, doc: _Doc, terms: Sequence[str], codes: frozenset[str] = frozenset()
) -> float:
    """One playbook's score for the query's terms; `codes` are the error codes among them."""
    query = frozenset(terms)
    if doc.book.kind == "folklore" and not states_myth(index, doc, query):
        return 0.0
    total = _phrase_bonus(index, doc, query)
    for term in query & doc.terms:
        term_weight = _weight(index, term)
        for name, weight in FIELD_WEIGHTS.items():
            tf = doc.fields[name][term]
            b = _B.get(name, _B_DEFAULT)
            total += weight * term_weight * _field_score(
                tf, doc.lengths[name], index.avg_len[name], b)
    if codes and not codes & doc.terms:
        total *= CODE_MISS_FACTOR
    return total


def lookup(index: Index, text: str, limit: int, closest: int = CLOSEST) -> Ranking:
    """The hits above the floor (at most `limit`), or else the `closest` below it."""
    text = text[:MAX_QUERY_CHARS]
    terms = tokenize(text)
    if not terms or limit <= 0:
        return Ranking((), ())
    names = code_names(text)
    codes = frozenset(code_term(name) for name in names)
    unknown = tuple(name for name in names if code_term(name) not in index.idf)
    scored = [(doc.book, round(score(index, doc, terms, codes), 6)) for doc in index.docs]
    scored = [pair for pair in scored if pair[1] > 0.0]
    scored.sort(key=lambda pair: (-pair[1], pair[0].id))
    if not scored:
        return Ranking((), (), unknown)
    floor = max(FLOOR, RELATIVE_FLOOR * scored[0][1])
    hits = tuple(pair for pair in scored if pair[1] >= floor)[:limit]
    return Ranking(hits, () if hits else tuple(scored[:closest]), unknown)


def rank(index: Index, text: str, limit: int) -> list[tuple[Playbook, float]]:
    """The hits above the floor, best first (empty when nothing matched)."""
    return list(lookup(index, text, limit).hits)
