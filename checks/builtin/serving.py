"""serving.support and serving.flags, entered here: whether there is a serving engine (or, for
the flags, a serving process) to judge is read from the shared facts first, and the support
and flag tables with their row types are imported only when there is. A machine without a
serving stack, the doctor's bare run, never builds them (bench/bench_doctor.py)."""

from __future__ import annotations

from typing import Any

from checks.builtin.serving_engine import engine, nothing_to_lint
from checks.context import Context
from checks.model import Finding, skipped


def support(ctx: Context) -> Finding:
    found = engine(ctx)
    if not found.name:  # the same verdict serving_support gives, without its tables
        return skipped(f"no serving engine to judge: {found.why_none}", rules=("no-engine",))
    from checks.builtin.serving_support import serving_support

    return serving_support(ctx)


def flags(ctx: Context) -> Finding:
    nothing = nothing_to_lint(ctx)
    if nothing is not None:
        return skipped(nothing, rules=("no-engine",))
    from checks.builtin.serving_flags import serving_flags

    return serving_flags(ctx)


def __getattr__(name: str) -> Any:
    """CHECK_RULES of both checks, read from their modules when asked (tests, `explain`)."""
    if name != "CHECK_RULES":
        raise AttributeError(name)
    from checks.builtin import serving_flags, serving_support

    return {**serving_support.CHECK_RULES, **serving_flags.CHECK_RULES}
