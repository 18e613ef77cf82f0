"""Every hard fact the user documentation states rests on a source, or is this project's own.

The playbooks' guard (test_sentences_sourced.py beside this file, whose rules it reuses) over
the docs a user reads (README.md and the guides below): each number with a unit and each
upper-case underscore name (an environment variable, an error code) in a sentence or a table
row is backed when

- the sentence carries a citation a reader can open or a status label ("project default",
  "project bound", "not in our data", "measured by this project", ...);
- the sentence names a file of this repository that exists: the sentence then describes this
  project's own behaviour, and the code (or the test, or the benchmark) is its source;
- it is a name that a row of checks/data/*.yaml states with that row's sources, or one of this
  project's own variables (`ASCEND_DOCTOR_*`, `ASCEND_CONSOLE_*`);
- CHECKED lists it with where it was checked.

docs/engine.md is left out: it is the design and measurement log of this project's CPU engine
(its numbers are runs on named machines, each section says which), and a person audits its
few vendor statements (issue 27).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from test_sentences_sourced import _FENCE_BLOCK_RE, facts, labelled, names_in_sourced_data
from test_sources import REPO, openable

DOCS = ("README.md", "docs/console.md", "docs/fleet.md", "docs/npu-inventory.md",
        "docs/recording.md", "docs/security.md", "docs/snapshot-format.md", "docs/triage.md")

# (doc, fact as written, where it was checked)
CHECKED: tuple[tuple[str, str, str], ...] = (
    ("docs/npu-inventory.md", "LM75A_TE", "an MCU sensor name as npu-smi prints it: "
     "tests/corpus/npu-smi/constructed/README.md, C01 (from a public exporter's test fixture)"),
)

PROJECT_NAME_RE = re.compile(r"^ASCEND_(?:DOCTOR|CONSOLE)_[A-Z0-9_]+$")
PROJECT_LABEL_RE = re.compile(r"\bproject (?:bounds?|limits?|defaults?)\b|\bthe doctor's bounds?\b",
                              re.IGNORECASE)
REPO_FILE_RE = re.compile(
    r"(?<![\w/.-])((?:probes|checks|engine|console|tests|bench|scripts|playbooks|docs)"
    r"/[\w./-]*\w\.(?:py|md|yaml|json|tcss|txt|sh))")
# A doc's sentence ends at . ! or ?, a blank line or a list item; a colon or a semicolon does
# not end it, as a doc puts its citation after one ("5 s by default: owner/repo path @ ref").
_SENTENCE_END_RE = re.compile(r"(?<=[.!?])\s+(?=[A-Z`(\"])|\n\s*\n|\n\s*(?:[-*]|\d+\.)\s+")
_TABLE_ROW_RE = re.compile(r"^\s*\|.*\|\s*$", re.MULTILINE)
_SEPARATOR_ROW_RE = re.compile(r"^\s*\|[\s|:-]+\|\s*$")


def units(markdown: str) -> Iterator[str]:
    """Each prose sentence and each table row (a row is one claim), code fences set aside."""
    markdown = _FENCE_BLOCK_RE.sub("\n\n", markdown)
    rows = [row for row in _TABLE_ROW_RE.findall(markdown) if not _SEPARATOR_ROW_RE.match(row)]
    yield from (" ".join(row.split()) for row in rows)
    prose = "\n".join(line for line in _TABLE_ROW_RE.sub("\n", markdown).splitlines()
                      if not line.startswith("#"))
    for sentence in _SENTENCE_END_RE.split(prose):
        if sentence.strip():
            yield " ".join(sentence.split())


def names_a_repository_file(sentence: str) -> bool:
    return any((REPO / match.group(1)).is_file() for match in REPO_FILE_RE.finditer(sentence))


def backed(sentence: str) -> bool:
    return (labelled(sentence) or bool(PROJECT_LABEL_RE.search(sentence))
            or names_a_repository_file(sentence))


def unsourced(doc: str, markdown: str,
              checked: tuple[tuple[str, str, str], ...] = CHECKED) -> list[str]:
    """`fact: sentence` for each fact of `markdown` that nothing backs."""
    allowed = {fact for name, fact, _where in checked if name == doc}
    known = names_in_sourced_data()
    return [f"{fact}: {sentence[:160]}"
            for sentence in units(markdown) if not backed(sentence)
            for fact in dict.fromkeys(facts(sentence))
            if fact not in known and fact not in allowed and not PROJECT_NAME_RE.match(fact)]


@pytest.mark.parametrize("doc", DOCS)
def test_every_number_and_variable_a_doc_states_is_sourced(doc: str) -> None:
    missing = unsourced(doc, (REPO / doc).read_text(encoding="utf-8"))
    assert not missing, (f"{doc}: cite the source of each in its sentence, name the file of "
                         "this repository that does it, or label it a project default or "
                         "bound:\n" + "\n".join(missing))


def test_every_checked_fact_names_a_doc_and_where_it_was_checked() -> None:
    bad = [entry for entry in CHECKED
           if entry[0] not in DOCS or not (openable(entry[2]) or names_a_repository_file(entry[2]))]
    assert not bad, bad


PLANTED = """# A planted guide

Intro. {sentence}

| what | limit |
|---|---|
| a header | 16 KiB (`probes/spawn.py`) |

```
export HCCL_BUFFSIZE=512   # commands, not claims
```
"""


@pytest.mark.parametrize("sentence, fact", [
    ("The AI Core throttles above 85 °C.", "85C"),
    ("Set `HCCL_PLANTED_TIMEOUT` higher.", "HCCL_PLANTED_TIMEOUT"),
    ("MindIE scrapes every 60 s (see `probes/not_a_file.py`).", "60s"),
    ("The exporter serves https://{ip}:8082/metrics and refreshes every 5 s.", "5s"),
    ("Alarm `0x80E0FFFF` means the fan failed.", "0x80E0FFFF"),
])
def test_a_planted_unsourced_fact_in_a_doc_is_found(sentence: str, fact: str) -> None:
    found = unsourced("planted.md", PLANTED.format(sentence=sentence))
    assert [line.split(":")[0] for line in found] == [fact]


@pytest.mark.parametrize("sentence", [
    "Every program gets 4 MiB of output (`probes/spawn.py`).",
    "A paste over 8 MiB is refused (project bound).",
    "`-updateTime` is 5 s by default (Ascend/mind-cluster main.go @ 1918bd079db6).",
    "Set `ASCEND_DOCTOR_CPU_KERNEL=0` to turn the kernels off.",
    "No figure is published for the throttle point; 85 °C is not in our data.",
])
def test_a_cited_labelled_or_own_fact_in_a_doc_passes(sentence: str) -> None:
    assert unsourced("planted.md", PLANTED.format(sentence=sentence)) == []


def test_a_table_row_is_judged_alone() -> None:
    markdown = PLANTED.format(sentence="Nothing.") + "| a member | 64 MiB |\n"
    assert [line.split(":")[0] for line in unsourced("planted.md", markdown)] == ["64MiB"]
