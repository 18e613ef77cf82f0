from __future__ import annotations

import inspect

import pytest

from checks.model import Check
from checks.registry import BUILTIN, LazyCheckFn, all_checks, resolve, select

IDS = sorted(c.id for c in BUILTIN)


@pytest.mark.parametrize("check_id", IDS)
def test_every_declared_check_resolves_to_a_function_of_one_argument(check_id: str) -> None:
    check = next(c for c in BUILTIN if c.id == check_id)
    assert isinstance(check.fn, LazyCheckFn)
    fn = resolve(check.fn.target)
    assert callable(fn)
    assert list(inspect.signature(fn).parameters) == ["ctx"]


def test_ids_are_unique_and_listed_by_category_then_id() -> None:
    assert len(IDS) == len(set(IDS))
    listed = all_checks()
    assert [(c.category, c.id) for c in listed] == sorted((c.category, c.id) for c in listed)


def test_checks_that_need_a_model_or_a_baseline_say_so() -> None:
    needs = {c.id: c.needs for c in BUILTIN}
    for check_id in ("checkpoint.format", "checkpoint.fp8-scales", "npu.hbm-fit",
                     "tokenizer.dtype", "tokenizer.token-ids"):
        assert needs[check_id] == ("model",)
    assert needs["baseline.drift"] == ("baseline",)
    assert needs["versions.parity"] == ()


def test_select_names_an_unknown_id() -> None:
    with pytest.raises(KeyError, match="nope"):
        select(all_checks(), ["nope"], [])
    only = select(all_checks(), ["npu.health", "pcie.contention"], ["pcie.contention"])
    assert [c.id for c in only] == ["npu.health"]


def test_a_wrong_target_fails_when_it_runs_not_at_import() -> None:
    check = Check("x", "x", "t", "x", LazyCheckFn("checks.builtin.npu:no_such_function"))
    with pytest.raises(AttributeError):
        check.fn(None)  # type: ignore[arg-type]
