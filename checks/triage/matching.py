"""One pass over each block of input: which lines hit which signatures and error codes.

The signatures' patterns are compiled once (`Matcher.build`); a block is searched for the
literals of every pattern at once (checks.triage.literals), then only the lines holding one
are decoded and tested with the real patterns. Error codes are found by their shape: CANN's
six-character codes (E, a component character, four digits), the ACL/aclnn symbols
(`ACL_ERROR_RT_*`, `ACLNN_ERR_*`) and six-digit return codes after words that introduce one
(`error code is 507035`, `ret=507001`). `Tally` merges the hits: a count per key, the first
few places, and the context of the first.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from checks.triage.literals import (
    anchored,
    literal_options,
    rarest,
    required_literals,
    trie_pattern,
)
from checks.triage.model import Evidence, Limits
from checks.triage.rows import Signature
from probes.textsafe import one_line

SHOWN_CHARS = 300
# CANN's codes: level E, a component character, four digits (CANN error-code reference)
LETTER_CODE = re.compile(rb"E[0-9A-Z][0-9]{4}")
# MindIE's codes: MIE, a two-digit component, the level E, six hexadecimal digits (MindIE
# error-code reference, "usage instruction")
MINDIE_CODE = re.compile(rb"MIE[0-9]{2}E[0-9A-F]{6}")
_WORD_BYTES = frozenset(b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
NUMERIC_CODE = re.compile(
    r"(?:error[ _]?code|err[ _]?code|errcode|ret(?:urn)?[ _]?code|retcode|\bret|aclError)"
    r"\s*(?:is|=|:)?\s*[\[(]?\s*(\d{6})(?!\d)", re.IGNORECASE)
SYMBOL = re.compile(r"\b(ACL_ERROR_[A-Z0-9_]+|ACLNN_ERR_[A-Z0-9_]+)\b")
NUMERIC_TRIGGERS = (b"error code", b"error_code", b"errorcode", b"err code", b"err_code",
                    b"errcode", b"ret=", b"ret =", b"ret:", b"ret is", b"return code",
                    b"retcode", b"ret code", b"aclerror", b"acl_error_", b"aclnn_err_")
# lines that look like an error, sampled for the closest playbooks when nothing is recognised
GENERIC_TRIGGERS = (b"error", b"exception", b"failed", "错误".encode(), "失败".encode(),
                    "报错".encode())
GENERIC_SAMPLE = 40
SAMPLE_BYTES = 256 * 1024  # of the first block: how often each byte occurs in this input


@dataclass(frozen=True)
class Compiled:
    """One pattern: its regular expression and the literals that gate it (None: ungated)."""

    regex: re.Pattern[str]
    literals: frozenset[bytes] | None
    owner: int  # index of the signature
    required: bool  # a `requires_any` pattern (evidence elsewhere), not a `patterns` one
    # every literal set the pattern requires, `literals` first: the prefilter searches the one
    # rarest in the input ("EngineCore" is on every line of a vLLM V1 engine log)
    options: tuple[frozenset[bytes], ...] = ()


@dataclass(frozen=True)
class Matcher:
    signatures: tuple[Signature, ...]
    patterns: tuple[Compiled, ...]
    ungated: tuple[tuple[re.Pattern[bytes], int], ...]  # (bytes pattern, index in patterns)
    code_names: dict[str, str]  # ACL symbol -> code

    @classmethod
    def build(cls, signatures: Sequence[Signature], code_names: dict[str, str]) -> Matcher:
        compiled: list[Compiled] = []
        for index, sig in enumerate(signatures):
            for pattern, required in [*((p, False) for p in sig.patterns),
                                      *((p, True) for p in sig.requires_any)]:
                best = required_literals(pattern)
                others = tuple(o for o in literal_options(pattern) if o != best)
                compiled.append(Compiled(re.compile(pattern, re.IGNORECASE), best, index,
                                         required, (best, *others) if best else ()))
        ungated = tuple((re.compile(c.regex.pattern.encode("utf-8"), re.IGNORECASE), i)
                        for i, c in enumerate(compiled) if c.literals is None)
        return cls(tuple(signatures), tuple(compiled), ungated, dict(code_names))

    def prefilters(self, sample: bytes) -> tuple[re.Pattern[bytes], re.Pattern[bytes]]:
        """(the literal search, the same with the generic error words), tuned to `sample`,
        lowered input: each pattern's rarest literal set (checks.triage.literals.rarest), each
        word cut at its rarest byte (checks.triage.literals.anchored)."""
        chosen = {w for c in self.patterns if c.options for w in rarest(c.options, sample)}
        words = chosen | set(NUMERIC_TRIGGERS)
        plain = sorted(set(anchored(words, sample)))
        generic = sorted(set(anchored(words | set(GENERIC_TRIGGERS), sample)))
        return trie_pattern(plain), trie_pattern(generic)


@dataclass
class KeyTally:
    order: tuple[int, int]  # (input index, line) of the first hit
    count: int = 0
    evidence: list[Evidence] = field(default_factory=list)
    context: tuple[str, ...] = ()
    time: str = ""  # the first hit line's timestamp, "YYYY-MM-DD HH:MM:SS", when it has one


@dataclass
class Tally:
    """The hits of one triage, merged per key: `sig:<index>` or `code:<code>`."""

    limits: Limits
    keys: dict[str, KeyTally] = field(default_factory=dict)
    required_seen: set[int] = field(default_factory=set)  # indices into Matcher.patterns
    # lines hit by several keys, per set of keys: a finding that joins those keys counts each
    # such line once (ranking.line_count)
    together: dict[frozenset[str], int] = field(default_factory=dict)
    generic: list[str] = field(default_factory=list)
    prefilters: tuple[re.Pattern[bytes], re.Pattern[bytes]] | None = None

    def add(self, key: str, order: tuple[int, int], evidence: Evidence,
            context: Callable[[], tuple[str, ...]]) -> None:
        entry = self.keys.get(key)
        if entry is None:
            entry = self.keys[key] = KeyTally(order, context=context(),
                                              time=line_time(evidence.text))
        entry.count += 1
        if len(entry.evidence) < self.limits.evidence_per_finding:
            entry.evidence.append(evidence)


def scan_block(matcher: Matcher, tally: Tally, block: bytes, source: int, name: str,
               first_line: int) -> None:
    """Every hit of `block` (whole lines; its first line is `first_line`) into `tally`."""
    lowered = block.lower()
    if tally.prefilters is None:
        tally.prefilters = matcher.prefilters(lowered[:SAMPLE_BYTES])
    plain, generic = tally.prefilters
    prefilter = generic if len(tally.generic) < GENERIC_SAMPLE else plain
    spans = _spans(prefilter, lowered)
    spans |= _code_spans(block)
    forced: dict[int, set[int]] = {}
    for regex, index in matcher.ungated:
        for span in _spans(regex, block):
            spans.add(span)
            forced.setdefault(span[0], set()).add(index)
    line, at = first_line, 0
    for start, end in sorted(spans):
        line += block.count(b"\n", at, start)
        at = start
        _line(matcher, tally, block, lowered, (start, end), (source, line), name,
              forced.get(start, set()))


def _spans(regex: re.Pattern[bytes], data: bytes) -> set[tuple[int, int]]:
    """(start, end) of each line holding a match, each line once."""
    spans: set[tuple[int, int]] = set()
    pos = 0
    search = regex.search
    while True:
        found = search(data, pos)
        if found is None:
            return spans
        start = data.rfind(b"\n", 0, found.start()) + 1
        end = data.find(b"\n", found.end())
        end = len(data) if end < 0 else end
        spans.add((start, end))
        pos = end + 1


def _code_spans(block: bytes) -> set[tuple[int, int]]:
    spans: set[tuple[int, int]] = set()
    for regex in (LETTER_CODE, MINDIE_CODE):
        pos = 0
        while (found := regex.search(block, pos)) is not None:
            pos = found.end()
            if _bounded(block, found.start(), found.end()):
                start = block.rfind(b"\n", 0, found.start()) + 1
                end = block.find(b"\n", found.end())
                spans.add((start, len(block) if end < 0 else end))
    return spans


def _bounded(data: bytes, start: int, end: int) -> bool:
    return ((start == 0 or data[start - 1] not in _WORD_BYTES)
            and (end >= len(data) or data[end] not in _WORD_BYTES))


def _line(matcher: Matcher, tally: Tally, block: bytes, lowered: bytes, span: tuple[int, int],
          order: tuple[int, int], name: str, forced: set[int]) -> None:
    start, end = span
    cut = min(end, start + tally.limits.max_line_bytes)
    low = lowered[start:cut]
    text = block[start:cut].decode("utf-8", errors="replace")
    keys = [*_signature_keys(matcher, tally, text, low, forced), *_code_keys(matcher, text)]
    if not keys:
        if len(tally.generic) < GENERIC_SAMPLE:
            tally.generic.append(text[:SHOWN_CHARS])
        return
    evidence = Evidence(name, order[1], shown(text))
    unique = frozenset(keys)
    if len(unique) > 1:
        tally.together[unique] = tally.together.get(unique, 0) + 1
    for key in dict.fromkeys(keys):
        tally.add(key, order, evidence,
                  lambda: context_of(block, start, end, tally.limits.context_lines))


def _signature_keys(matcher: Matcher, tally: Tally, text: str, low: bytes,
                    forced: set[int]) -> list[str]:
    keys = []
    for index, compiled in enumerate(matcher.patterns):
        gated = compiled.literals is not None
        if gated and not any(w in low for w in compiled.literals or ()):
            continue
        if not gated and index not in forced:
            continue
        if compiled.regex.search(text) is None:
            continue
        if compiled.required:
            tally.required_seen.add(index)
        else:
            keys.append(f"sig:{compiled.owner}")
    return keys


def _code_keys(matcher: Matcher, text: str) -> list[str]:
    raw = text.encode("utf-8", errors="replace")
    codes = [m.group(0).decode() for regex in (LETTER_CODE, MINDIE_CODE)
             for m in regex.finditer(raw) if _bounded(raw, m.start(), m.end())]
    codes += [m.group(1) for m in NUMERIC_CODE.finditer(text)]
    codes += [matcher.code_names[m.group(1)] for m in SYMBOL.finditer(text)
              if m.group(1) in matcher.code_names]
    return [f"code:{c}" for c in codes]


_LINE_TIME = re.compile(r"(\d{4}-\d{2}-\d{2})[ T-](\d{2}:\d{2}:\d{2})")


def line_time(text: str) -> str:
    """The date and time a log line carries (plog `2026-12-07-09:14:07.1`, ISO-like), or ''.
    Stamps without a year (vLLM's `12-07 09:14:07`) cannot be compared across files: ''."""
    found = _LINE_TIME.search(text)
    return f"{found.group(1)} {found.group(2)}" if found else ""


def shown(text: str) -> str:
    """A line as evidence: cut to a screenful, every control character a visible escape."""
    text = text.rstrip("\r")
    return one_line(text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "…")


def context_of(block: bytes, start: int, end: int, around: int) -> tuple[str, ...]:
    """The hit line with up to `around` lines before and after it (within the block)."""
    first = start
    for _ in range(around):
        if first == 0:
            break
        first = block.rfind(b"\n", 0, first - 1) + 1
    last = end
    for _ in range(around):
        if last >= len(block) - 1:
            break
        nxt = block.find(b"\n", last + 1)
        last = len(block) if nxt < 0 else nxt
    lines = block[first:last].decode("utf-8", errors="replace").split("\n")
    return tuple(shown(line) for line in lines if line.strip())
