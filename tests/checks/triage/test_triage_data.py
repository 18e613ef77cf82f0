"""The triage data as the engine needs it: every playbook named exists, the code families
cover CANN's component characters, every signature compiles and is found by its literals."""

from __future__ import annotations

import re

import playbooks
from checks import data
from checks.triage.literals import required_literals
from checks.triage.rows import ErrorCode, Signature

# CANN's error-code reference, "error code display" (the component characters)
CANN_COMPONENTS = "1234 78 BCDEFGHIJKLMNOPZ".replace(" ", "")


def test_every_row_points_at_a_playbook_that_exists() -> None:
    known = {book.id for book in playbooks.load_all()}
    rows: list[ErrorCode | Signature] = [*data.load("error_codes", ErrorCode),
                                         *data.load("signatures", Signature)]
    for row in rows:
        assert row.playbook in known, (row.id, row.playbook)


def test_the_families_cover_cann_components_and_the_acl_ranges() -> None:
    families = {r.id: r for r in data.load("error_codes", ErrorCode) if r.kind == "family"}
    assert {f"E{c}" for c in CANN_COMPONENTS} <= set(families)
    assert {"107", "207", "507", "100", "200", "500", "161", "361", "561"} <= set(families)
    assert families["EI"].component == "HCCL" and families["EZ"].component.startswith("op")


def test_code_rows_are_codes_with_the_header_names() -> None:
    rows = [r for r in data.load("error_codes", ErrorCode) if r.kind == "code"]
    for row in rows:
        assert re.fullmatch(r"\d{6}|E[0-9A-Z]\d{4}|MIE\d\dE[0-9A-F]{6}", row.id), row.id
        assert row.kind == "code" and row.meaning
    names = {r.id: r.name for r in rows}
    assert names["507035"] == "ACL_ERROR_RT_VECTOR_CORE_EXCEPTION"
    assert names["507015"] == "ACL_ERROR_RT_AICORE_EXCEPTION"
    assert names["100000"] == "ACL_ERROR_INVALID_PARAM"


def test_signatures_compile_and_core_rows_are_gated_by_a_literal() -> None:
    for sig in data.load("signatures", Signature):
        assert sig.role in ("cause", "consequence"), sig.id
        for pattern in (*sig.patterns, *sig.requires_any):
            re.compile(pattern, re.IGNORECASE)
        if sig.id.startswith("core."):
            assert all(required_literals(p) for p in sig.patterns), sig.id


def test_a_code_alone_names_one_failure() -> None:
    """One home per code: a code in `codes` makes its row's finding on its own, so no two rows
    may list it there; a code other failures log too belongs in `shared_codes`."""
    owners: dict[str, list[str]] = {}
    for sig in data.load("signatures", Signature):
        assert not set(sig.codes) & set(sig.shared_codes), sig.id
        for code in sig.codes:
            owners.setdefault(code, []).append(sig.id)
    shared = {code: ids for code, ids in owners.items() if len(ids) > 1}
    assert not shared, shared


def test_refinements_name_rows_and_form_no_cycle() -> None:
    refines = {sig.id: sig.refines for sig in data.load("signatures", Signature)}
    for start in refines:
        seen, todo = {start}, list(refines[start])
        while todo:
            general = todo.pop()
            assert general in refines, (start, general)
            assert general != start, f"{start} refines itself through a chain"
            if general not in seen:
                seen.add(general)
                todo.extend(refines[general])
