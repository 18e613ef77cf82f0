"""`ascend-doctor bench --compare FILE`: which operators got slower than on another machine.

Both sides are ascend-doctor-bench/1 documents; operators are matched by name (the names are
stable: `gemv attn.q_proj`, `attention decode 4096 ctx`, ...). A ratio is this machine's median
time over the other's, so 1.35 reads "35% slower here". The other document is outside input:
it is size-capped and validated before use, and its text is only ever shown.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from probes import json_limits

SCHEMA = "ascend-doctor-bench/1"
MAX_DOCUMENT_BYTES = 16 * 2**20


class CompareError(ValueError):
    """The other document cannot be compared; the message names the file and the field."""


@dataclass(frozen=True)
class Delta:
    name: str
    then_s: float | None  # None: not measured there
    now_s: float | None  # None: not measured here
    shape_changed: bool = False

    @property
    def ratio(self) -> float | None:
        if self.then_s is None or self.now_s is None:
            return None
        return self.now_s / self.then_s


@dataclass(frozen=True)
class PeakDelta:
    name: str  # copy | matmul
    unit: str
    then: float
    now: float

    @property
    def ratio(self) -> float:
        """Rate here over rate there: below 1 means this machine's peak is lower."""
        return self.now / self.then


@dataclass(frozen=True)
class Comparison:
    other: str  # the other machine, as its document names it
    deltas: tuple[Delta, ...]  # slowest (highest ratio) first, unmatched last
    peaks: tuple[PeakDelta, ...]
    slower_pct: float

    @property
    def slower(self) -> tuple[Delta, ...]:
        limit = 1 + self.slower_pct / 100
        return tuple(d for d in self.deltas if d.ratio is not None and d.ratio > limit)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and value > 0 else None


def validate(document: Any, where: str) -> Mapping[str, Any]:
    """The document if it is a bench result; CompareError naming what is wrong."""
    if not isinstance(document, Mapping) or document.get("schema") != SCHEMA:
        raise CompareError(f"{where}: not an {SCHEMA} document (write one with "
                           "`ascend-doctor bench --model DIR -o FILE`)")
    operators = document.get("operators")
    if not isinstance(operators, list):
        raise CompareError(f"{where}: field 'operators' must be a list")
    for i, op in enumerate(operators):
        if not isinstance(op, Mapping) or not isinstance(op.get("name"), str) \
                or _number(op.get("median_s")) is None:
            raise CompareError(f"{where}: operators[{i}] needs a 'name' and a positive "
                               "'median_s'")
    return document


def load(path: Path) -> Mapping[str, Any]:
    try:
        with path.open("rb") as stream:
            raw = stream.read(MAX_DOCUMENT_BYTES + 1)
    except OSError as exc:
        raise CompareError(f"{path}: {exc.strerror or exc}") from None
    if len(raw) > MAX_DOCUMENT_BYTES:
        raise CompareError(f"{path}: larger than {MAX_DOCUMENT_BYTES // 2**20} MiB; not a "
                           "bench result")
    try:
        document = json_limits.loads(raw, str(path), MAX_DOCUMENT_BYTES)
    except ValueError as exc:
        raise CompareError(f"{path}: not JSON ({exc})") from None
    return validate(document, str(path))


def _by_name(document: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {op["name"]: op for op in document.get("operators", [])}


def _peaks(now: Mapping[str, Any], then: Mapping[str, Any]) -> tuple[PeakDelta, ...]:
    found = []
    for name, key, unit in (("copy", "copy_gb_per_s", "GB/s"),
                            ("matmul", "matmul_tflop_per_s", "TFLOP/s")):
        a = _number((then.get("peaks") or {}).get(key))
        b = _number((now.get("peaks") or {}).get(key))
        if a is not None and b is not None:
            found.append(PeakDelta(name, unit, a, b))
    return tuple(found)


def compare(now: Mapping[str, Any], then: Mapping[str, Any],
            slower_pct: float = 10.0) -> Comparison:
    here, there = _by_name(now), _by_name(then)
    deltas = []
    for name in dict.fromkeys([*here, *there]):
        a, b = there.get(name), here.get(name)
        changed = a is not None and b is not None and a.get("shape") != b.get("shape")
        deltas.append(Delta(name, _number(a.get("median_s")) if a else None,
                            _number(b.get("median_s")) if b else None, changed))
    deltas.sort(key=lambda d: (d.ratio is None, -(d.ratio or 0.0)))
    other = " ".join(str(then.get(k) or "") for k in ("device_name", "device", "torch")).strip()
    return Comparison(other or "the other machine", tuple(deltas), _peaks(now, then),
                      slower_pct)


def change_text(ratio: float | None) -> str:
    """+35% slower / -20% faster / = (within 0.5%)."""
    if ratio is None:
        return "-"
    pct = (ratio - 1) * 100
    if abs(pct) < 0.5:
        return "="
    return f"{pct:+.0f}% {'slower' if pct > 0 else 'faster'}"


def summary(comparison: Comparison) -> str:
    slower = comparison.slower
    if not slower:
        return (f"no operator is more than {comparison.slower_pct:g}% slower than on "
                f"{comparison.other}")
    worst: Sequence[Delta] = slower[:3]
    names = ", ".join(f"{d.name} {change_text(d.ratio)}" for d in worst)
    more = f" and {len(slower) - 3} more" if len(slower) > 3 else ""
    return (f"{len(slower)} operators more than {comparison.slower_pct:g}% slower than on "
            f"{comparison.other}: {names}{more}")
