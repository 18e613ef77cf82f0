"""From merged hits to ranked findings.

Correlation rules (checks.triage.rows.Signature says what the fields mean):
- a signature with `requires_any` counts only when one of those patterns matched somewhere in
  the same input;
- an error code that a hit signature lists in `codes` or `shared_codes` is part of that
  signature's finding (its hits and count join it); a code listed in `codes` by a signature
  that did not hit by its patterns makes that signature's finding, since the code names what
  the signature explains; a code only in `shared_codes` (a generic code) makes none;
- a signature that `refines` another absorbs it when both hit, and with it what that one
  refines (a chain: MTE out of range -> vector core exception -> AI Core error);
- what is left of the codes becomes a finding of its own: known (a row of error_codes), or
  "code X from component Y, not in our data" when only its family is known, or from an
  unknown component when not even that.
Order: causes (signatures and known codes) first, then codes not in the data, then
consequences; within each, the earliest first hit first, then the signature's weight. In one
input "earliest" is the line order; across inputs it is the time the first hit lines carry
when both carry a full date and time, else the order the inputs were read.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from checks.triage.matching import KeyTally, Matcher, Tally
from checks.triage.model import Finding
from checks.triage.rows import ErrorCode, Signature

UNKNOWN_COMPONENT = "an unknown component"


@dataclass(frozen=True)
class CodeBook:
    """The error_codes rows by code, by family prefix and by symbol."""

    codes: Mapping[str, ErrorCode]
    families: Mapping[str, ErrorCode]

    @classmethod
    def of(cls, rows: Sequence[ErrorCode]) -> CodeBook:
        return cls({r.id: r for r in rows if r.kind != "family"},
                   {r.id: r for r in rows if r.kind == "family"})

    def names(self) -> dict[str, str]:
        return {r.name: r.id for r in self.codes.values() if r.name}

    def family(self, code: str) -> ErrorCode | None:
        if code.startswith("MIE"):
            return self.families.get(code[:5])
        return self.families.get(code[:2] if code[0].isalpha() else code[:3])


def rank(matcher: Matcher, book: CodeBook, tally: Tally) -> tuple[Finding, ...]:
    sigs = matcher.signatures
    required_ok = _required_ok(matcher, tally)
    merged: dict[int, KeyTally] = {}
    members: dict[int, set[str]] = {}  # the tally keys each finding joins
    for key, entry in tally.keys.items():
        kind, _, value = key.partition(":")
        if kind == "sig" and required_ok[int(value)]:
            merged[int(value)] = _join(merged.get(int(value)), entry)
            members[int(value)] = {key}
    codes: dict[str, KeyTally] = {}
    explained: dict[int, list[str]] = {}
    for key, entry in tally.keys.items():
        kind, _, code = key.partition(":")
        if kind != "code":
            continue
        owner = _owner(sigs, code, merged, required_ok)
        if owner is None:
            codes[code] = entry
        else:
            merged[owner] = _join(merged.get(owner), entry)
            members.setdefault(owner, set()).add(key)
            explained.setdefault(owner, []).append(_label(book, code))
    _absorb_refined(sigs, merged, members)
    for index, entry in merged.items():
        entry.count = line_count(tally, members[index], entry.count)
    found = [(_tier(sigs[i].role), e, -sigs[i].weight,
              _from_signature(sigs[i], e, explained.get(i, [])))
             for i, e in merged.items()]
    for code, entry in codes.items():
        finding = _from_code(book, code, entry)
        found.append((0 if finding.known else 1, entry, 0, finding))
    found.sort(key=functools.cmp_to_key(_compare))
    return tuple(item[3] for item in found)


Ranked = tuple[int, KeyTally, int, Finding]


def _compare(a: Ranked, b: Ranked) -> int:
    if a[0] != b[0]:
        return a[0] - b[0]
    first = _earlier(a[1], b[1])
    return first if first else a[2] - b[2]


def _earlier(a: KeyTally, b: KeyTally) -> int:
    """-1 when `a` came first, 1 when `b` did, 0 when at the same place."""
    if a.order[0] != b.order[0] and a.time and b.time and a.time != b.time:
        return -1 if a.time < b.time else 1
    return (a.order > b.order) - (a.order < b.order)


def _tier(role: str) -> int:
    return 2 if role == "consequence" else 0


def _required_ok(matcher: Matcher, tally: Tally) -> list[bool]:
    ok = [not sig.requires_any for sig in matcher.signatures]
    for index in tally.required_seen:
        ok[matcher.patterns[index].owner] = True
    return ok


def _join(into: KeyTally | None, entry: KeyTally) -> KeyTally:
    if into is None:
        return KeyTally(entry.order, entry.count, list(entry.evidence), entry.context,
                        entry.time)
    first = entry if _earlier(entry, into) < 0 else into
    later = into if first is entry else entry
    evidence = list({(e.file, e.line, e.text): e
                     for e in (*first.evidence, *later.evidence)}.values())
    return KeyTally(first.order, into.count + entry.count, evidence[:max(5, len(into.evidence))],
                    first.context, first.time)


def _owner(sigs: Sequence[Signature], code: str, merged: Mapping[int, KeyTally],
           required_ok: Sequence[bool]) -> int | None:
    """The signature that explains `code`: one that hit, else one the code alone names; the
    most specific (highest weight) among several."""
    hit = [i for i in merged if code in sigs[i].codes or code in sigs[i].shared_codes]
    pool = hit or [i for i, s in enumerate(sigs) if code in s.codes and required_ok[i]]
    return max(pool, key=lambda i: sigs[i].weight) if pool else None


def line_count(tally: Tally, keys: set[str], hits: int) -> int:
    """The lines a finding joining `keys` stands on: `hits` (the sum of its keys' counts) less
    the extra times a line hit by several of them was counted."""
    extra = sum((len(combo & keys) - 1) * lines for combo, lines in tally.together.items()
                if len(combo & keys) > 1)
    return hits - extra


def _absorb_refined(sigs: Sequence[Signature], merged: dict[int, KeyTally],
                    members: dict[int, set[str]]) -> None:
    ids = {sig.id: i for i, sig in enumerate(sigs)}
    for index in sorted(merged, key=lambda i: -sigs[i].weight):
        if index not in merged:
            continue
        for other in _refined(sigs, ids, index):
            if other in merged:
                merged[index] = _join(merged[index], merged.pop(other))
                members[index] |= members.pop(other)


def _refined(sigs: Sequence[Signature], ids: Mapping[str, int], index: int) -> list[int]:
    """Every signature `index` refines, directly or through another (cycles cut)."""
    seen = {index}
    todo = [index]
    found = []
    while todo:
        for general in sigs[todo.pop()].refines:
            other = ids.get(general)
            if other is not None and other not in seen:
                seen.add(other)
                found.append(other)
                todo.append(other)
    return found


def _label(book: CodeBook, code: str) -> str:
    row = book.codes.get(code)
    return f"{code} ({row.name})" if row is not None and row.name else code


def _from_signature(sig: Signature, entry: KeyTally, codes: Sequence[str]) -> Finding:
    cause = sig.meaning.strip()
    if codes:
        cause = f"Error code {', '.join(sorted(codes))}. {cause}"
    if sig.causes:
        cause += " Known causes: " + "; ".join(sig.causes) + "."
    if sig.tell_apart:
        cause += " Telling them apart: " + sig.tell_apart.strip()
    fix = sig.fix.strip()
    if sig.first_steps:
        fix += " First steps: " + "; ".join(sig.first_steps) + "."
    return Finding(id=sig.id, title=sig.title, playbook=sig.playbook, cause=cause, fix=fix,
                   sources=sig.sources, evidence=tuple(entry.evidence), context=entry.context,
                   count=entry.count, component=sig.component, role=sig.role)


def _from_code(book: CodeBook, code: str, entry: KeyTally) -> Finding:
    row = book.codes.get(code)
    family = book.family(code)
    if row is not None:
        label = f"{code} {row.name}".strip()
        fix = row.fix or (family.fix if family else "") or f"See playbook {row.playbook}."
        return Finding(id=code, title=f"{label} ({row.component})", playbook=row.playbook,
                       cause=f"{label}: {row.meaning}", fix=fix, sources=row.sources,
                       evidence=tuple(entry.evidence), context=entry.context,
                       count=entry.count, component=row.component)
    component = family.component if family else UNKNOWN_COMPONENT
    cause = f"code {code} from {component}, not in our data"
    if family:
        cause += f" ({family.id}: {family.meaning})"
    return Finding(id=code, title=f"{code}, not in our data ({component})",
                   playbook=family.playbook if family else "symptom.cann-error-code",
                   cause=cause,
                   fix=(family.fix if family and family.fix else
                        "Search the vendor's error-code reference for this code."),
                   sources=family.sources if family else (), evidence=tuple(entry.evidence),
                   context=entry.context, count=entry.count, component=component, known=False)
