"""A fast first pass for many patterns: the literal text each pattern cannot match without.

Matching every signature's regular expression against every line costs a pass over the input
per pattern (and case-insensitive alternations of them are slower still). Instead, each pattern
names the literals one of which any match must contain (read from the pattern's parse tree);
all literals go into one regular expression shaped as a trie and are searched in the input
lowered once (bytes.lower changes ASCII only, so positions stay put). Only the lines that hold
a literal are decoded and given to the real patterns. A pattern with no usable literal is
searched over the input on its own (slower; the data should avoid such patterns).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from typing import Any

try:  # Python 3.11+
    import re._parser as _sre
except ImportError:  # pragma: no cover - Python 3.10
    import sre_parse as _sre

MIN_LITERAL_BYTES = 3
_C = _sre  # the opcode constants live beside the parser
LITERAL = _C.LITERAL
SUBPATTERN = _C.SUBPATTERN
BRANCH = _C.BRANCH
MAX_REPEAT = _C.MAX_REPEAT
MIN_REPEAT = _C.MIN_REPEAT
POSSESSIVE_REPEAT = getattr(_C, "POSSESSIVE_REPEAT", MAX_REPEAT)
ATOMIC_GROUP = getattr(_C, "ATOMIC_GROUP", SUBPATTERN)


def required_literals(pattern: str) -> frozenset[bytes] | None:
    """Lower-case UTF-8 literals, one of which every match of `pattern` (matched ignoring
    case) contains; None when the pattern has none long enough to be worth searching for."""
    try:
        parsed = _sre.parse(pattern, re.IGNORECASE)
    except re.error:
        return None
    return _best(_sequence(list(parsed)))


def literal_options(pattern: str) -> tuple[frozenset[bytes], ...]:
    """Every literal set a match of `pattern` must contain one of (each alone is enough to gate
    it), the longest first; empty when there is none long enough."""
    try:
        parsed = _sre.parse(pattern, re.IGNORECASE)
    except re.error:
        return ()
    usable = [o for o in _sequence(list(parsed)) if o and min(map(len, o)) >= MIN_LITERAL_BYTES]
    return tuple(sorted(set(usable), key=lambda o: (-min(map(len, o)), len(o), sorted(o))))


def rarest(options: tuple[frozenset[bytes], ...], sample: bytes) -> frozenset[bytes]:
    """The option whose words occur least in `sample` (lowered input); the first (longest) on
    a tie. Any one is sound: every match contains a word of each."""
    best, best_count = options[0], sum(sample.count(w) for w in options[0])
    for option in options[1:]:
        if best_count == 0:
            break
        count = sum(sample.count(w) for w in option)
        if count < best_count:
            best, best_count = option, count
    return best


def _literal_byte_len(text: str) -> int:
    return len(text.encode("utf-8"))


def _best(options: list[frozenset[bytes]]) -> frozenset[bytes] | None:
    usable = [o for o in options if o and min(map(len, o)) >= MIN_LITERAL_BYTES]
    if not usable:
        return None
    return max(usable, key=lambda o: (min(map(len, o)), -len(o)))


def _sequence(items: list[tuple[Any, Any]]) -> list[frozenset[bytes]]:
    """Every literal set that a match of this sequence must contain."""
    found: list[frozenset[bytes]] = []
    run: list[str] = []

    def flush() -> None:
        if run:
            found.append(frozenset({"".join(run).encode("utf-8")}))
            run.clear()

    for op, av in items:
        char = _foldable(op, av)
        if char is not None:
            run.append(char)
            continue
        flush()
        found.extend(_inner(op, av))
    flush()
    return found


def _foldable(op: Any, av: Any) -> str | None:
    """The lower-case character of a literal that bytes.lower() folds the same way (ASCII,
    or a character without case); None for anything else."""
    if op is not LITERAL:
        return None
    char = chr(av)
    if not char.isascii() and char.lower() != char.upper():
        return None
    return char.lower()


def _inner(op: Any, av: Any) -> list[frozenset[bytes]]:
    if op is SUBPATTERN or op is ATOMIC_GROUP:
        body = av[-1] if op is SUBPATTERN else av
        best = _best(_sequence(list(body)))
        return [best] if best else []
    if op in (MAX_REPEAT, MIN_REPEAT, POSSESSIVE_REPEAT) and av[0] >= 1:
        best = _best(_sequence(list(av[2])))
        return [best] if best else []
    if op is BRANCH:
        branches = [_best(_sequence(list(b))) for b in av[1]]
        if all(branches):
            return [frozenset().union(*branches)]  # type: ignore[arg-type]
    return []


def anchored(words: Iterable[bytes], sample: bytes) -> list[bytes]:
    """Each word cut to start at its rarest byte in `sample` (keeping at least
    MIN_LITERAL_BYTES): a piece of a required literal is still required, and a search whose
    candidates start with rare bytes skips most of the input without entering the pattern.
    A cut that is itself more common in `sample` than the word ("call" -> "all") is not made:
    it would make more lines candidates."""
    counts = Counter(sample)
    cut = []
    for word in words:
        last = max(1, len(word) - MIN_LITERAL_BYTES + 1)
        start = min(range(last), key=lambda i: counts.get(word[i], 0))
        piece = word[start:]
        if start and sample.count(piece) > sample.count(word):
            piece = word
        cut.append(piece)
    return cut


def trie_pattern(words: list[bytes]) -> re.Pattern[bytes]:
    """One regular expression matching any of `words`, shaped as a trie so each position of
    the input costs one branch per character, not one per word."""
    trie: dict[int, Any] = {}
    for word in words:
        node = trie
        for byte in word:
            node = node.setdefault(byte, {})
        node[-1] = {}
    return re.compile(_node(trie) or b"(?!)")


def _node(node: dict[int, Any]) -> bytes:
    ends = -1 in node
    alternatives = [re.escape(bytes([b])) + _node(sub) for b, sub in sorted(node.items())
                    if b != -1]
    if not alternatives:
        return b""
    body = alternatives[0] if len(alternatives) == 1 else b"(?:" + b"|".join(alternatives) + b")"
    return b"(?:" + body + b")?" if ends else body
