"""The incident corpus: real failures from public threads, each teaching a signature.

Every incident in tests/data/incidents/*.yaml carries the user's own log (`excerpt`), the same
failure with other numbers, ranks, paths or wording inside a longer log (`variant`), and a
healthy log with the same words (`healthy`). The pattern tests need no triage engine: they
compile checks/data/signatures.yaml as triage does (any pattern, case-insensitive `re.search`,
per line; `requires_any` anywhere in the input). The ranking test runs the triage engine
itself (`checks.triage.triage_text`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from checks import data
from checks.triage import triage_text
from checks.triage.rows import Signature
from playbooks import _loader

ROOT = Path(__file__).resolve().parents[3]
INCIDENT_DIR = ROOT / "tests" / "data" / "incidents"
PLAYBOOK_DIR = ROOT / "playbooks"
EXCERPT_MAX_CHARS = 600
REQUIRED = ("id", "url", "component", "class", "excerpt", "cause", "expect", "variant", "healthy")
TOP = 3


@dataclass(frozen=True)
class Incident:
    id: str
    url: str
    component: str
    klass: str
    excerpt: str
    cause: str
    findings: tuple[str, ...]
    playbooks: tuple[str, ...]
    variant: str
    healthy: str
    file: str


@dataclass(frozen=True)
class Compiled:
    row: Signature
    patterns: tuple[re.Pattern[str], ...]
    requires: tuple[re.Pattern[str], ...]

    def hits(self, text: str) -> bool:
        """A line matches a pattern, and `requires_any` (if any) matches somewhere."""
        if self.requires and not any(r.search(text) for r in self.requires):
            return False
        return any(p.search(line) for line in text.splitlines() for p in self.patterns)


def _raw_incidents() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in sorted(INCIDENT_DIR.glob("*.yaml")):
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
        for raw in document["incidents"]:
            found.append((path.name, raw))
    return found


def _incident(file: str, raw: dict[str, Any]) -> Incident:
    expect = raw.get("expect") or {}
    return Incident(
        id=raw.get("id", ""), url=raw.get("url", ""), component=raw.get("component", ""),
        klass=raw.get("class", ""), excerpt=raw.get("excerpt", ""), cause=raw.get("cause", ""),
        findings=tuple(expect.get("finding", ())), playbooks=tuple(expect.get("playbook", ())),
        variant=raw.get("variant", ""), healthy=raw.get("healthy", ""), file=file)


@cache
def incidents() -> tuple[Incident, ...]:
    return tuple(_incident(file, raw) for file, raw in _raw_incidents())


@cache
def signatures() -> dict[str, Compiled]:
    def comp(texts: tuple[str, ...]) -> tuple[re.Pattern[str], ...]:
        return tuple(re.compile(t, re.IGNORECASE) for t in texts)

    rows = data.load("signatures", Signature)
    return {r.id: Compiled(r, comp(r.patterns), comp(r.requires_any)) for r in rows}


def expected_hits(incident: Incident, text: str) -> list[str]:
    return [fid for fid in incident.findings if signatures()[fid].hits(text)]


IDS = [i.id for i in incidents()]


def test_the_corpus_holds_at_least_sixty_incidents_with_unique_ids() -> None:
    assert len(IDS) >= 60, len(IDS)
    assert len(set(IDS)) == len(IDS), [i for i in IDS if IDS.count(i) > 1]


def test_every_incident_has_every_field() -> None:
    for file, raw in _raw_incidents():
        missing = [k for k in REQUIRED if not raw.get(k)]
        assert not missing, f"{file}: {raw.get('id')}: missing {missing}"
        assert raw["expect"].get("finding") and raw["expect"].get("playbook"), raw["id"]


@pytest.mark.parametrize("incident", incidents(), ids=IDS)
def test_incident_fields_are_sound(incident: Incident) -> None:
    assert incident.url.startswith("https://github.com/"), incident.url
    assert re.fullmatch(r"[a-z0-9]+(?:[.-][a-z0-9]+)*", incident.id), incident.id
    assert len(incident.excerpt) <= EXCERPT_MAX_CHARS, len(incident.excerpt)
    assert incident.variant.strip() != incident.excerpt.strip()


@pytest.mark.parametrize("incident", incidents(), ids=IDS)
def test_expected_findings_and_playbooks_exist(incident: Incident) -> None:
    unknown = [f for f in incident.findings if f not in signatures()]
    assert not unknown, unknown
    books = {b.id for b in _loader.load_dir(PLAYBOOK_DIR)}
    assert set(incident.playbooks) <= books, set(incident.playbooks) - books
    own = {signatures()[f].row.playbook for f in incident.findings}
    assert own & set(incident.playbooks), (own, incident.playbooks)


@pytest.mark.parametrize("incident", incidents(), ids=IDS)
def test_signature_patterns_recognise_the_excerpt(incident: Incident) -> None:
    assert expected_hits(incident, incident.excerpt), incident.excerpt


@pytest.mark.parametrize("incident", incidents(), ids=IDS)
def test_signature_patterns_recognise_the_variant(incident: Incident) -> None:
    assert expected_hits(incident, incident.variant), incident.variant


@pytest.mark.parametrize("incident", incidents(), ids=IDS)
def test_the_healthy_twin_matches_no_expected_signature(incident: Incident) -> None:
    assert not expected_hits(incident, incident.healthy), expected_hits(incident, incident.healthy)


def _documented(sig: Compiled) -> bool:
    """A `core.` row: it rests on its owner's documents (a source that is not a GitHub thread).

    Those rows recognise lines their owners define (the CANN runtime's AI Core error line,
    Python's traceback header); no public thread we found states a cause for such a line on its
    own, since the cause is the operator or exception it names, so no incident teaches them.
    """
    return sig.row.id.startswith("core.") and any(
        not src.startswith("https://github.com/") for src in sig.row.sources)


def test_every_cause_signature_matches_a_real_excerpt() -> None:
    """No cause is invented: each one recognises the user's own text of a public thread, or
    is a `core.` row that its owner's documents define.

    A consequence (a traceback tail) only has to recognise some incident's log.
    """
    def taught(sig: Compiled) -> bool:
        texts = [i.excerpt for i in incidents()]
        if sig.row.role == "consequence":
            texts += [i.variant for i in incidents()]
        return any(sig.hits(text) for text in texts)

    untaught = sorted(sid for sid, sig in signatures().items()
                      if not taught(sig) and not _documented(sig))
    assert not untaught, untaught


def test_signature_ids_playbooks_and_refines_are_sound() -> None:
    books = {b.id for b in _loader.load_dir(PLAYBOOK_DIR)}
    for sid, sig in signatures().items():
        assert re.fullmatch(r"[a-z0-9-]+(?:\.[a-z0-9-]+)+", sid), sid
        if sid.startswith("core."):
            assert _documented(sig), f"{sid}: a core. row needs a vendor or language document"
        assert sig.row.playbook in books, (sid, sig.row.playbook)
        assert set(sig.row.refines) <= set(signatures()) - {sid}, (sid, sig.row.refines)


def test_roles_are_cause_or_consequence() -> None:
    assert {sig.row.role for sig in signatures().values()} <= {"cause", "consequence"}


def test_docs_list_every_incident_thread() -> None:
    listing = (ROOT / "docs" / "incidents.md").read_text(encoding="utf-8")
    missing = [i.id for i in incidents() if f"`{i.id}`" not in listing or i.url not in listing]
    assert not missing, f"docs/incidents.md does not list {missing}"


def test_every_pattern_compiles_and_matches_no_empty_line() -> None:
    for sig in signatures().values():
        assert sig.patterns, sig.row.id
        assert not any(p.search("") for p in sig.patterns), sig.row.id


@pytest.mark.parametrize("incident", incidents(), ids=IDS)
def test_the_healthy_twin_matches_no_signature_at_all(incident: Incident) -> None:
    """Stronger than the check above: a healthy log with the same words yields no finding."""
    hits = sorted(sid for sid, sig in signatures().items() if sig.hits(incident.healthy))
    assert not hits, hits


# -- the data's own order, without the engine ---------------------------------------------------
# The order checks/triage/rows.py documents for these rows: a row absorbs the rows it refines,
# causes outrank consequences, then weight. It keeps the rows right whatever the engine's
# evidence rules (codes, line order, time) add; the engine's ranking is tested below.


def fallback_ranking(text: str) -> list[tuple[str, str]]:
    hits = [sig for sig in signatures().values() if sig.hits(text)]
    hit_ids = {sig.row.id for sig in hits}
    absorbed = {r for sig in hits for r in sig.row.refines if r in hit_ids}
    kept = [sig for sig in hits if sig.row.id not in absorbed]
    kept.sort(key=lambda sig: (sig.row.role != "cause", -sig.row.weight, sig.row.id))
    return [(sig.row.id, sig.row.playbook) for sig in kept]


@pytest.mark.parametrize("incident", incidents(), ids=IDS)
def test_fallback_ranking_puts_an_expected_finding_in_the_top_three(incident: Incident) -> None:
    for text in (incident.excerpt, incident.variant):
        top = fallback_ranking(text)[:TOP]
        assert any(f in incident.findings or p in incident.playbooks for f, p in top), top


# -- with the triage engine ---------------------------------------------------------------------


def _top(report: Any) -> list[tuple[str, str]]:
    return [(f.id, f.playbook) for f in report.findings[:TOP]]


@pytest.mark.parametrize("incident", incidents(), ids=IDS)
def test_triage_puts_an_expected_finding_in_the_top_three(incident: Incident) -> None:
    for text in (incident.excerpt, incident.variant):
        top = _top(triage_text(text))
        assert any(f in incident.findings or p in incident.playbooks for f, p in top), top
    healthy_ids = {f.id for f in triage_text(incident.healthy).findings}
    assert not healthy_ids & set(incident.findings), healthy_ids
