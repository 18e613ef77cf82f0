"""A check's playbook says what the check does, rule by rule, and names only rules the code has.

A rule is one named way a check reaches a verdict other than a plain pass: a warn, a fail or a
skip, and why. Each check module declares its rules (`CHECK_RULES`: check id -> {rule: the
statuses it gives}); the check's playbook lists the same rules, with the same statuses, under
"What the check does". Both directions are tested: the playbook names no rule the code lacks,
and the code has no rule the playbook omits. Where findings name the rules that decided them
(`Finding.rules`), every tag in the code is a declared rule, and every declared rule is asserted
on a real finding by the check's own tests.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path
from types import ModuleType

import pytest

import playbooks
from checks.registry import all_checks

TESTS = Path(__file__).resolve().parent
CHECKS = {check.id: check for check in all_checks()}
STATUS_WORDS = {"pass", "warn", "fail", "skip"}
RULE_NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")

# Findings name their rules, and each rule is asserted on a finding by the check's tests.
TAGGED = frozenset({
    "npu.health", "npu.temperature", "devices.nodes", "baseline.drift", "tokenizer.dtype",
    "tokenizer.token-ids", "endpoint.health", "endpoint.smoke", "endpoint.metrics",
    "npu.hbm-fit", "checkpoint.format", "checkpoint.fp8-scales", "engine.op-coverage",
    "cann.environment", "logging.level", "pcie.contention", "versions.parity",
    "serving.support", "serving.flags",
})
# Rules declared and listed, but the findings do not name them (none now).
DECLARED_ONLY: frozenset[str] = frozenset()
# Checks whose rules are being reworked (none now): a strict expected failure each, so a
# finished rework turns the suite red until its entry is removed here.
PENDING: dict[str, str] = {}
# Declared rules no test reaches, and why (the verdict is not this test's to change).
UNREACHED: dict[tuple[str, str], str] = {}


def module_of(check_id: str) -> ModuleType:
    target = CHECKS[check_id].fn.target  # type: ignore[attr-defined]
    return importlib.import_module(target.partition(":")[0])


def declared(check_id: str) -> dict[str, str]:
    rules: dict[str, dict[str, str]] = getattr(module_of(check_id), "CHECK_RULES", {})
    return rules.get(check_id, {})


def listed(check_id: str) -> dict[str, str]:
    return playbooks.get(CHECKS[check_id].playbook_id).rules()


def test_every_check_is_in_exactly_one_list() -> None:
    groups = [TAGGED, DECLARED_ONLY, frozenset(PENDING)]
    assert set().union(*groups) == set(CHECKS)
    assert sum(len(g) for g in groups) == len(CHECKS)


def _same_rules(check_id: str) -> None:
    code, book = declared(check_id), listed(check_id)
    where = CHECKS[check_id].playbook_id
    assert code, f"{check_id}: its module declares no CHECK_RULES for it"
    assert not set(book) - set(code), \
        f"playbook {where} names rules the code does not have: {sorted(set(book) - set(code))}"
    assert not set(code) - set(book), \
        f"the code has rules playbook {where} omits: {sorted(set(code) - set(book))}"
    assert book == code, f"playbook {where} gives other statuses or another order than the code"


@pytest.mark.parametrize("check_id", sorted(TAGGED | DECLARED_ONLY))
def test_the_playbook_lists_exactly_the_rules_the_code_has(check_id: str) -> None:
    _same_rules(check_id)


@pytest.mark.parametrize("check_id", [
    pytest.param(check_id, marks=pytest.mark.xfail(strict=True, reason=why))
    for check_id, why in sorted(PENDING.items())])
def test_pending_checks_list_their_rules_when_their_rework_lands(check_id: str) -> None:
    _same_rules(check_id)


def test_rule_names_and_statuses_are_the_doctor_s_words() -> None:
    for check_id in TAGGED | DECLARED_ONLY:
        for name, statuses in declared(check_id).items():
            assert RULE_NAME.match(name), f"{check_id}: rule name {name!r}"
            words = set(statuses.split("/"))
            assert statuses == "policy" or words <= STATUS_WORDS, f"{check_id}: {statuses!r}"


def _tags_in(source: str) -> set[str]:
    """String literals inside `rules=` arguments of calls (the tags written in place)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            for keyword in node.keywords:
                if keyword.arg == "rules":
                    found |= {n.value for n in ast.walk(keyword.value)
                              if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    return found


@pytest.mark.parametrize("check_id", sorted(TAGGED))
def test_every_tag_written_in_the_code_is_a_declared_rule(check_id: str) -> None:
    module = module_of(check_id)
    same_module = {c for c in TAGGED if module_of(c) is module}
    known = set().union(*(declared(c) for c in same_module))
    assert _tags_in(inspect.getsource(module)) <= known


def _asserted_in_tests() -> str:
    """Lines of the checks' tests that assert a finding's rules."""
    lines = []
    for path in sorted(TESTS.glob("test_*.py")):
        if path.name != Path(__file__).name:
            lines += [ln for ln in path.read_text().splitlines() if "rules" in ln]
    return "\n".join(lines)


@pytest.mark.parametrize("check_id", sorted(TAGGED))
def test_every_rule_of_a_tagged_check_is_asserted_on_a_finding(check_id: str) -> None:
    asserted = _asserted_in_tests()
    missing = [name for name in declared(check_id)
               if (check_id, name) not in UNREACHED and f'"{name}"' not in asserted]
    assert not missing, f"{check_id}: no test asserts a finding naming {missing}"


def test_unreached_rules_are_declared_and_still_unasserted() -> None:
    asserted = _asserted_in_tests()
    for (check_id, name), why in UNREACHED.items():
        assert name in declared(check_id) and why
        assert f'"{name}"' not in asserted, f"{name} is asserted now: drop it from UNREACHED"
