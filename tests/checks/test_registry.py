from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from checks import inputs
from checks.context import Context
from checks.model import Check, passed
from checks.options import HostOptions
from checks.policy import load_policy
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


FRONTED = sorted(c.id for c in BUILTIN if isinstance(c.fn, LazyCheckFn) and c.fn.front)


def _bare_context(root: Path) -> Context:
    """An empty tree of its own (--root): no NPU, no stack, no serving engine or process."""
    options = HostOptions(root=str(root))
    return inputs.context(inputs.observe(options), load_policy(None), None, options)


@pytest.mark.parametrize("check_id", FRONTED)
def test_a_front_says_what_its_check_says(check_id: str, tmp_path: Path) -> None:
    """Where the input is absent the front answers, and the check called directly (its tables
    imported) gives the very same Finding; the front is no second opinion."""
    fn = next(c.fn for c in BUILTIN if c.id == check_id)
    assert isinstance(fn, LazyCheckFn)
    early = resolve(fn.front)(_bare_context(tmp_path))
    assert early is not None and early.status == "skip"
    assert resolve(fn.target)(_bare_context(tmp_path)) == early


def test_a_front_that_answers_none_hands_over_to_the_check() -> None:
    seen: list[str] = []
    fronted = LazyCheckFn("checks.builtin.npu:no_such_function", "tests_front:none")
    plain = LazyCheckFn("checks.builtin.npu:no_such_function")
    assert fronted.front and not plain.front
    answer = passed("from the check")

    def fake_resolve(target: str) -> object:
        seen.append(target)
        return (lambda ctx: None) if target == "tests_front:none" else (lambda ctx: answer)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("checks.registry.resolve", fake_resolve)
        assert fronted(None) is answer  # type: ignore[arg-type]
    assert seen == ["tests_front:none", "checks.builtin.npu:no_such_function"]
