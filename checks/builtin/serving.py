"""The fronts of serving.support and serving.flags (checks/registry.py): whether there is a
serving engine (or, for the flags, a serving process or a setting they read) is answered from
the shared facts, before the support and flag tables and their row types are imported. A
machine without a serving stack, the doctor's bare run, never builds them."""

from __future__ import annotations

from checks.builtin.serving_engine import engine, nothing_to_lint
from checks.context import Context
from checks.model import Finding, skipped


def support_front(ctx: Context) -> Finding | None:
    """serving.support's skip without an engine (serving_support gives the same)."""
    found = engine(ctx)
    if found.name:
        return None
    return skipped(f"no serving engine to judge: {found.why_none}", rules=("no-engine",))


def flags_front(ctx: Context) -> Finding | None:
    """serving.flags' skip with nothing to lint (serving_flags gives the same)."""
    nothing = nothing_to_lint(ctx)
    return None if nothing is None else skipped(nothing, rules=("no-engine",))
