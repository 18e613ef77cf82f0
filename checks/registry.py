"""The registry of checks: built-in modules register with `@check`."""

from __future__ import annotations

import importlib
from collections.abc import Callable

from checks.model import Check, CheckFn

_CHECKS: dict[str, Check] = {}

BUILTIN_MODULES = (
    "checks.builtin.versions",
    "checks.builtin.npu",
    "checks.builtin.environment",
    "checks.builtin.logging",
    "checks.builtin.pcie",
    "checks.builtin.devices",
    "checks.builtin.checkpoint",
    "checks.builtin.tokenizer",
    "checks.builtin.hbm_fit",
    "checks.builtin.baseline",
)


def check(id: str, title: str, category: str, looks_at: str,
          playbook: str = "") -> Callable[[CheckFn], CheckFn]:
    def register(fn: CheckFn) -> CheckFn:
        if id in _CHECKS:
            raise ValueError(f"check id {id} registered twice")
        _CHECKS[id] = Check(id, title, category, looks_at, fn, playbook)
        return fn

    return register


def all_checks() -> tuple[Check, ...]:
    for name in BUILTIN_MODULES:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
    return tuple(sorted(_CHECKS.values(), key=lambda c: (c.category, c.id)))


def select(checks: tuple[Check, ...], only: list[str], skip: list[str]) -> tuple[Check, ...]:
    """Filter by ids; an unknown id is an error naming it."""
    known = {c.id for c in checks}
    for name in [*only, *skip]:
        if name not in known:
            raise KeyError(name)
    return tuple(c for c in checks if (not only or c.id in only) and c.id not in skip)
