"""How this machine differs from a baseline: a pure function of two Baselines."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from checks.baseline.model import ABSENT, UNAVAILABLE, Baseline, Category, Drift

# -- comparing --------------------------------------------------------------------------------


def _counted(values: tuple[Any, ...]) -> str:
    """`910B4 x8`, or `910B4 x7, 910B3 x1`: order-free, short enough for one line."""
    counts = Counter("?" if v is None else str(v) for v in values)
    return ", ".join(f"{v} x{n}" for v, n in sorted(counts.items())) or "none"


def flatten(baseline: Baseline) -> dict[str, str]:
    """Every compared item as `name -> value`; absent items are left out."""
    out = {f"versions.{k}": v for k, v in baseline.versions.items()}
    out |= {f"environment.{k}": v for k, v in baseline.environment.items()}
    if baseline.npu is None:
        out["npu.count"] = UNAVAILABLE
    else:
        out["npu.count"] = str(baseline.npu.count)
        out["npu.chips"] = _counted(baseline.npu.chips)
        out["npu.hbm_total_mb"] = _counted(baseline.npu.hbm_total_mb)
    tok = baseline.tokenizer
    if tok is not None:
        out["tokenizer.vocab_size"] = str(tok.vocab_size)
        out |= {f"tokenizer.{k}": str(v) for k, v in tok.special_ids.items()}
        out["tokenizer.probe_ids"] = " ".join(str(i) for i in tok.ids)
        out["tokenizer.ids_dtype"] = tok.ids_dtype
        out["tokenizer.mask_dtype"] = str(tok.mask_dtype)
    return out


def category_of(name: str) -> Category:
    heads: dict[str, Category] = {"versions": "version", "environment": "environment",
                                  "npu": "inventory", "tokenizer": "tokenizer"}
    return heads[name.split(".", 1)[0]]


def _unknown_reason(name: str, unknown: Mapping[str, str]) -> str | None:
    for prefix, why in unknown.items():
        if name == prefix or name.startswith(prefix + "."):
            return why
    return None


def compare(base: Baseline, now: Baseline) -> tuple[list[Drift], dict[str, str]]:
    """(differences, name -> why it could not be compared). Pure."""
    before, after = flatten(base), flatten(now)
    if base.tokenizer is None:  # not fingerprinted then: nothing to compare now
        after = {k: v for k, v in after.items() if not k.startswith("tokenizer.")}
    elif now.tokenizer is None and "tokenizer" not in now.unknown:
        now = Baseline(now.recorded_at, now.host, unknown={
            **now.unknown, "tokenizer": "no --model given: the tokenizer was not compared"})
    drifts: list[Drift] = []
    skipped: dict[str, str] = {}
    for name in sorted(before.keys() | after.keys()):
        why = _unknown_reason(name, now.unknown)
        if why is not None:
            skipped[name] = why
            continue
        old, new = before.get(name, ABSENT), after.get(name, ABSENT)
        if old != new:
            drifts.append(Drift(name, category_of(name), old, new))
    return drifts, skipped
