"""Every fact docs/sources.md lists names where to read it, or says that nothing was found.

docs/sources.md is the fact base the checks and playbooks rest on: one bullet per fact, under
one heading per area. A bullet passes when it carries an address a reader can open (the
patterns of tests/test_sources.py), a status label ("unknown", "none found", "project
default", ...) or a file of this repository (a recorded sample under tests/corpus/, say).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from test_sources import REPO, STATUS_RE, openable

SOURCES_DOC = REPO / "docs" / "sources.md"
# The legend says how sure each word is; it states no fact of its own.
LEGEND = "How to read the references"
REPO_FILE_RE = re.compile(r"\btests/[\w./-]+")


def bullets(markdown: str) -> Iterator[tuple[str, str]]:
    """(heading, bullet text on one line) for each top-level bullet outside the legend."""
    heading = ""
    current: list[str] = []
    for line in [*markdown.splitlines(), ""]:
        starts = line.startswith(("- ", "## ")) or not line.strip()
        if current and starts:
            yield heading, " ".join(" ".join(current).split())
            current = []
        if line.startswith("## "):
            heading = line[3:].strip()
        elif line.startswith("- ") or (current and line.startswith("  ")):
            current.append(line)


def says_where(bullet: str) -> bool:
    return bool(openable(bullet) or STATUS_RE.search(bullet)
                or re.search(r"\bnot in our data\b", bullet, re.IGNORECASE)
                or any((REPO / m.group(0).rstrip(".,;)`")).exists()
                       for m in REPO_FILE_RE.finditer(bullet)))


def unsourced(markdown: str) -> list[str]:
    return [f"{heading}: {text[:160]}" for heading, text in bullets(markdown)
            if heading and heading != LEGEND and not says_where(text)]


def test_every_fact_of_the_fact_base_says_where_to_read_it() -> None:
    missing = unsourced(SOURCES_DOC.read_text(encoding="utf-8"))
    assert not missing, "docs/sources.md: name the source or say none was found:\n" + "\n".join(
        missing)


def test_the_fact_base_has_facts_to_judge() -> None:
    facts = [b for b in bullets(SOURCES_DOC.read_text(encoding="utf-8")) if b[0] != LEGEND]
    assert len(facts) > 50


@pytest.mark.parametrize("bullet", [
    "- **Chips throttle at 85 °C.** Every operator knows it.",
    "- **HBM is 32 GB.** See the vendor's\n  documentation.",
])
def test_a_planted_fact_without_a_source_is_found(bullet: str) -> None:
    assert unsourced(f"## Hardware\n\n{bullet}\n") != []


@pytest.mark.parametrize("bullet", [
    "- **HBM alarm.** 95 °C (*vendor*: Ascend/mind-cluster\n  `kg-config.json` @ 22bb3d987bc0).",
    "- **Throttle point: unknown.** No document states one.",
    "- **Columns.** *Observed*: `tests/corpus/npu-smi/INDEX.md`.",
])
def test_a_fact_with_a_source_or_a_status_passes(bullet: str) -> None:
    assert unsourced(f"## Hardware\n\n{bullet}\n") == []
