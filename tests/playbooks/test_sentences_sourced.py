"""Every hard fact a playbook states rests on a source a reader can open, or says it is ours.

A playbook's prose is read sentence by sentence. The facts a machine can spot are numbers with
a unit (32 GB, 95 °C, 200 ms, 90 %) and upper-case names with an underscore (environment
variables and error codes: ASCEND_RT_VISIBLE_DEVICES, ACL_ERROR_RT_...). Each one must be
backed in one of three ways:

- the playbook's front-matter `sources` name it: the entry that states it carries the address;
- its sentence carries a citation a reader can open (the patterns of tests/test_sources.py) or
  a status label ("project default", "unknown", "not in our data", ...);
- for a name or a code: a row of the project's data (checks/data/*.yaml) that names it carries
  its own sources (one home per piece of knowledge: a playbook may name what the data holds);
- CHECKED below lists it with the source it was checked against.

The guard cannot tell a true sentence from a false one; it makes an unsourced number or name
visible, so a new sentence needs its source written next to it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator

import pytest
from test_sources import IN_REPO_PATH_RE, REPO, STATUS_RE, openable

import playbooks
from checks import data, datafiles
from playbooks import Playbook
from playbooks._loader import parse_playbook

# Being rewritten by other engineers right now (issue 27): reported as expected failures (xfail,
# not strict) until their branches land; the lead then empties this set.
OTHERS_EDITING: frozenset[str] = frozenset()

# (playbook id, fact as written, where it was checked): facts a sentence states without a
# citation next to it, checked by hand against the named source.
CHECKED: tuple[tuple[str, str, str], ...] = (
    # The project's own output and worked examples of its rules: the code is the source.
    ("baseline.drift", "ASCEND_RT_VISIBLE_DEVICES", "example of checks/builtin/baseline.py"),
    ("endpoint.metrics", "48%", "worked example of probes/serving_metrics.py"),
    ("endpoint.metrics", "47%", "worked example of probes/serving_metrics.py"),
    ("endpoint.metrics", "95%", "worked example of probes/serving_metrics.py"),
    ("npu.temperature", "97C", "an example message of checks/builtin/npu.py"),
    ("npu.temperature", "56C", "an example message of checks/builtin/npu.py"),
    ("npu.temperature", "19C", "an example message of checks/builtin/npu.py"),
    ("npu.temperature", "37C", "an example message of checks/builtin/npu.py"),
    # Folklore quoted in order to refute it: no source states these (none found).
    ("folklore.910b-hbm-32gb", "28.4GB", "the folklore's figure; none found in any vendor source"),
    ("folklore.910b-hbm-32gb", "3.6GB", "the folklore's figure; none found in any vendor source"),
    ("folklore.fp8-on-910b", "FP8_E4M3_A3B", "the folklore's name; none found in any source"),
    ("folklore.npu-conf-temp-threshold", "85C", "the folklore's figure; none found"),
    ("folklore.npu-conf-temp-threshold", "75C", "the folklore's figure; none found"),
    ("npu.temperature", "85C", "the folklore's throttle figure; none found"),
)

# Seconds and minutes only after a space: "10 s" is a duration, "1s" is plural ones.
_UNIT = (r"(?:\s?(?:GiB|MiB|KiB|TiB|GB/s|GB|MB|KB|TB|°?C|ms|µs|us|%|W|Gbit/s|Gb/s)|\s(?:s|min))")
NUMBER_UNIT_RE = re.compile(rf"(?<![\w.])(\d+(?:\.\d+)?){_UNIT}(?![\w/])")
NAME_RE = re.compile(r"(?<![\w$])\$?([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)\b")
# Error codes: fault codes (0x80E00209), CANN codes (EZ1001, EI0006), ACL return codes (507035),
# DCMI return codes (-8020).
CODE_RE = re.compile(r"(?<![\w-])(0x[0-9A-Fa-f]{8}|[EWI][A-Z0-9]\d{4}|[1-5]0\d{4}|-80\d\d)(?!\w)")
LABEL_RE = re.compile(r"\bnot in our data\b|\bnot published\b|\bno vendor (?:figure|page)\b",
                      re.IGNORECASE)
_FENCE_BLOCK_RE = re.compile(r"^\s*```.*?^\s*```[^\n]*$", re.MULTILINE | re.DOTALL)
_SENTENCE_END_RE = re.compile(r"(?<=[.!?:;])\s+(?=[A-Z`(\"])|\n\s*\n|\n\s*(?:[-*]|\d+\.)\s+")


def facts(sentence: str) -> Iterator[str]:
    """Each number-with-unit (spaces dropped) and upper-case underscore name of a sentence."""
    for match in NUMBER_UNIT_RE.finditer(sentence):
        yield _canonical(match.group(0))
    for match in NAME_RE.finditer(sentence):
        yield match.group(1)
    for match in CODE_RE.finditer(sentence):
        yield match.group(1)


def _canonical(fact: str) -> str:
    """Spaces, backticks and the degree sign dropped: `95 °C` in prose is `95 C` in a source."""
    return re.sub(r"[\s`°]+", "", fact)



def sentences(body: str) -> Iterator[str]:
    """Prose sentences of a playbook body, code fences and headings set aside."""
    prose = _FENCE_BLOCK_RE.sub("\n\n", body)
    prose = "\n".join(line for line in prose.splitlines() if not line.startswith("#"))
    for sentence in _SENTENCE_END_RE.split(prose):
        if sentence.strip():
            yield " ".join(sentence.split())


def labelled(sentence: str) -> bool:
    return openable(sentence) or bool(STATUS_RE.search(sentence) or LABEL_RE.search(sentence))


@functools.cache
def names_in_sourced_data() -> frozenset[str]:
    """Names and codes that rows of checks/data/*.yaml state, each row with its own sources."""
    names: set[str] = set()
    for topic in data.topics():
        for row in datafiles.load(f"data/{topic}.yaml")["rows"]:
            if isinstance(row, dict) and row.get("sources"):
                text = " ".join(str(value) for key, value in row.items() if key != "sources")
                names.update(match.group(1) for pattern in (NAME_RE, CODE_RE)
                             for match in pattern.finditer(text))
    return frozenset(names)


def unsourced(book: Playbook, checked: tuple[tuple[str, str, str], ...] = CHECKED) -> list[str]:
    """`fact: sentence` for each fact of `book` that nothing backs."""
    cited = set(facts(" ".join(book.sources))) | names_in_sourced_data()
    allowed = {fact for book_id, fact, _where in checked if book_id == book.id}
    return [f"{fact}: {sentence[:160]}"
            for sentence in sentences(book.body) if not labelled(sentence)
            for fact in dict.fromkeys(facts(sentence))
            if fact not in cited and fact not in allowed]


def _says_where(where: str) -> bool:
    """An address, a status label, or a file of this repository (for the project's own output)."""
    return bool(openable(where) or STATUS_RE.search(where)
                or any((REPO / m.group(0)).is_file() for m in IN_REPO_PATH_RE.finditer(where)))


def _judged() -> list[Playbook]:
    return [book for book in playbooks.load_all() if book.id not in OTHERS_EDITING]


def _cases() -> list[object]:
    edited = pytest.mark.xfail(reason="being edited on another branch (issue 27)", strict=False)
    return [pytest.param(book, id=book.id, marks=edited if book.id in OTHERS_EDITING else ())
            for book in playbooks.load_all()]


@pytest.mark.parametrize("book", _cases())
def test_every_number_and_variable_a_playbook_states_is_sourced(book: Playbook) -> None:
    missing = unsourced(book)
    assert not missing, (f"{book.path}: name the source of each (in `sources`, or in the "
                         "sentence), or label it project default:\n" + "\n".join(missing))


def test_every_checked_fact_names_where_it_was_checked() -> None:
    ids = {book.id for book in playbooks.load_all()}
    bad = [entry for entry in CHECKED if entry[0] not in ids or not _says_where(entry[2])]
    assert not bad, bad


def test_the_set_being_edited_names_only_playbooks_that_exist() -> None:
    assert {book.id for book in playbooks.load_all()} >= OTHERS_EDITING


PLANTED = """---
id: symptom.planted
title: A planted playbook
kind: symptom
symptoms: [planted]
checks: []
sources:
  - "ASCEND_RT_VISIBLE_DEVICES takes logical ids: CANN environment-variable reference, \
envref_07_0028"
---

## What you see

The service slows down. {sentence}

## Why it happens

`ASCEND_RT_VISIBLE_DEVICES` hides cards.

## How to confirm

```
export HCCL_BUFFSIZE=512   # code blocks are commands, not claims
```

## How to fix

Nothing.

## What not to do

Nothing.
"""


def planted(sentence: str) -> Playbook:
    return parse_playbook(PLANTED.format(sentence=sentence), "planted.md")


@pytest.mark.parametrize("sentence, fact", [
    ("The AI Core throttles above 85 °C.", "85C"),
    ("Set `HCCL_PLANTED_TIMEOUT` higher.", "HCCL_PLANTED_TIMEOUT"),
    ("About 28.4 GB of the card is usable.", "28.4GB"),
    ("- Latency rises 30% at INFO level.", "30%"),
    ("Alarm `0x80E0FFFF` means the fan failed.", "0x80E0FFFF"),
    ("The runtime then prints EE9999.", "EE9999"),
])
def test_a_planted_unsourced_fact_is_found(sentence: str, fact: str) -> None:
    assert [line.split(":")[0] for line in unsourced(planted(sentence))] == [fact]


@pytest.mark.parametrize("sentence", [
    "A chip 15 °C above its peers is worth a look (project default).",
    "HBM above 95 °C raises 0x80E00209 (owner/repo data/kg-config.json @ v1.0).",
    "HBM above 95 °C raises 0x80E00209 (https://www.hiascend.com/planted/page.html).",
    "Set `HCCL_PLANTED_TIMEOUT` (vllm-project/vllm-ascend#5468).",
    "Raise `HCCL_CONNECT_TIMEOUT`, which the error-code data names with its sources.",
    "No figure is published for the throttle point; 85 °C is not in our data.",
    "The log shows `507035`, a vector core exception.",
    "Expect 1s on real tokens and 0s on padding.",
])
def test_a_labelled_or_cited_fact_passes(sentence: str) -> None:
    assert unsourced(planted(sentence)) == []


def test_a_checked_fact_passes_only_for_its_own_playbook() -> None:
    book = planted("About 28.4 GB of the card is usable.")
    assert unsourced(book, (("symptom.planted", "28.4GB", "none found"),)) == []
    assert unsourced(book, (("symptom.other", "28.4GB", "none found"),))
