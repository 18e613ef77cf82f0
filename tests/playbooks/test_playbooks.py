from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import playbooks
from playbooks import Playbook, PlaybookError, PlaybookNotFound
from playbooks._loader import (
    CHECK_SECTIONS,
    RULES_SECTION,
    SECTIONS,
    load_dir,
    parse_playbook,
    rule_list,
)
from playbooks._tokens import stem, tokenize

CHECK_IDS = (
    "versions.parity",
    "tokenizer.dtype",
    "tokenizer.token-ids",
    "logging.level",
    "pcie.contention",
    "checkpoint.fp8-scales",
    "checkpoint.format",
    "npu.health",
    "npu.temperature",
    "npu.hbm-fit",
    "cann.environment",
    "devices.nodes",
    "baseline.drift",
    "endpoint.health",
    "endpoint.smoke",
    "endpoint.metrics",
    "engine.op-coverage",
    "serving.support",
    "serving.flags",
)

SYMPTOM_IDS = (
    "symptom.exits-while-loading",
    "symptom.slow-first-token",
    "symptom.garbled-output",
    "symptom.memory-above-plan",
    "symptom.throughput-drops-under-load",
    "symptom.multi-card-scaling",
    "symptom.random-segfaults",
    "symptom.training-hangs",
    "symptom.container-no-cards",
    "symptom.long-sequence-memory",
    "symptom.latency-spikes",
    "symptom.slowdown-after-firmware-upgrade",
    "symptom.slow-operators",
)

FOLKLORE_IDS = (
    "folklore.atb-compiler",
    "folklore.log-level-reversed",
    "folklore.fp8-on-910b",
    "folklore.fp8-scale-range",
    "folklore.clamp-token-ids",
    "folklore.float-attention-mask",
    "folklore.npu-conf-temp-threshold",
    "folklore.version-last-two-digits",
    "folklore.hbm-bank-conflicts",
)

# FACTCHECK.md "what is invented": names that must never be offered as something to use.
INVENTED = (
    "atb_compiler",
    "--enable-fp8",
    "--disable-quant",
    "--fp8-scale-mode",
    "--dump-graph",
    "FP8_E4M3_A3B",
    "aclnnAttn",
    "aclnnFp8Matmul",
    "aclnnMemcpyAsync",
    "aclnnTokenize",
    "ACL_ERROR_INVALID_SIZE",
    "ACL_ERROR_INVALID_DTYPE",
    "MSL_ERROR_GRAPH_BUILD_FAILED",
    "npu-smi dmon",
    "/etc/npu/conf/npu.conf",
    "temp_threshold",
    "Adaptive Head Pruning",
    "cuda11.9",
)

PLAYBOOK_DIR = Path(playbooks.__file__).parent

VALID = """---
id: demo.ok
title: A demo
kind: check
symptoms: [it breaks]
checks: [npu.health]
sources: ["somewhere"]
---

## What you see

x

## Why it happens

x

## How to confirm

x

## How to fix

x

## What not to do

x
"""


def all_books() -> tuple[Playbook, ...]:
    return playbooks.load_all()


def book_text(book: Playbook) -> str:
    return " ".join((book.title, *book.symptoms, *book.sources, book.body))


# --- the shipped playbooks -------------------------------------------------------------


def test_every_file_loads_and_ids_equal_file_names() -> None:
    books = all_books()
    files = sorted(p.stem for p in PLAYBOOK_DIR.glob("*.md"))
    assert sorted(b.id for b in books) == files
    for book in books:
        assert Path(book.path).name == f"{book.id}.md"


def test_ids_are_unique() -> None:
    ids = [b.id for b in all_books()]
    assert len(ids) == len(set(ids))


def test_load_all_is_cached() -> None:
    assert playbooks.load_all() is playbooks.load_all()


@pytest.mark.parametrize("check_id", CHECK_IDS)
def test_every_check_has_its_playbook(check_id: str) -> None:
    book = playbooks.for_check(check_id)
    assert book is not None
    assert book.kind == "check"
    assert check_id in book.checks


@pytest.mark.parametrize("playbook_id", SYMPTOM_IDS + FOLKLORE_IDS)
def test_symptom_and_folklore_playbooks_exist(playbook_id: str) -> None:
    book = playbooks.get(playbook_id)
    assert book.kind == playbook_id.split(".", 1)[0]


def test_kind_matches_id_prefix() -> None:
    for book in all_books():
        if book.kind == "check":
            assert book.id in CHECK_IDS
        else:
            assert book.id.startswith(book.kind + ".")


def test_check_references_are_known_check_ids() -> None:
    for book in all_books():
        unknown = set(book.checks) - set(CHECK_IDS)
        assert not unknown, f"{book.id} links unknown checks {unknown}"
        if book.kind != "check":
            assert book.checks, f"{book.id} links no check"


def test_every_playbook_has_all_sections_and_a_source() -> None:
    for book in all_books():
        headings = tuple(re.findall(r"^## (.+)$", book.body, flags=re.MULTILINE))
        expected = CHECK_SECTIONS if book.kind == "check" and len(headings) == 6 else SECTIONS
        assert headings == expected, book.id
        for name in expected:
            assert book.section(name), f"{book.id}: empty {name}"
        assert book.sources, book.id
        assert book.symptoms, book.id


def test_no_invented_names_outside_folklore() -> None:
    for book in all_books():
        if book.kind == "folklore":
            continue
        text = book_text(book).lower()
        found = [name for name in INVENTED if name.lower() in text]
        assert not found, f"{book.id} mentions invented {found}"


def test_no_playbook_recommends_an_invented_name() -> None:
    for book in all_books():
        fix = book.section("How to fix").lower()
        found = [name for name in INVENTED if name.lower() in fix]
        assert not found, f"{book.id} recommends invented {found}"


def test_folklore_debunks_what_it_names() -> None:
    mentioned = {
        name for b in all_books() if b.kind == "folklore" for name in INVENTED if name in b.body
    }
    for name in ("atb_compiler", "npu-smi dmon", "/etc/npu/conf/npu.conf", "FP8_E4M3_A3B"):
        assert name in mentioned


def test_log_level_meanings_never_reversed_outside_folklore() -> None:
    for book in all_books():
        if book.kind == "folklore":
            continue
        text = book_text(book)
        assert not re.search(r"\b3\s*(=|is|means)\s*DEBUG", text), book.id
        assert not re.search(r"\b1\s*(=|is|means)\s*ERROR", text), book.id


def test_no_folklore_scale_range_recommended() -> None:
    for book in all_books():
        assert "2^-12" not in book.section("How to fix"), book.id


# --- lookup ------------------------------------------------------------------------------


def test_get_returns_the_playbook() -> None:
    assert playbooks.get("npu.health").title


def test_get_unknown_suggests_close_ids() -> None:
    with pytest.raises(PlaybookNotFound) as info:
        playbooks.get("npu.helth")
    assert isinstance(info.value, KeyError)
    assert "npu.health" in info.value.suggestions
    assert "npu.health" in str(info.value)


def test_get_suggests_full_id_for_a_bare_name() -> None:
    with pytest.raises(PlaybookNotFound) as info:
        playbooks.get("garbled-output")
    assert info.value.suggestions[0] == "symptom.garbled-output"


def test_get_falls_back_to_search_for_suggestions() -> None:
    with pytest.raises(PlaybookNotFound) as info:
        playbooks.get("fp8")
    assert info.value.suggestions
    assert all(s.startswith(("folklore.fp8", "checkpoint.")) for s in info.value.suggestions)


def test_for_check_ignores_other_kinds_and_unknown_ids() -> None:
    assert playbooks.for_check("symptom.garbled-output") is None
    assert playbooks.for_check("no.such-check") is None


# --- search ------------------------------------------------------------------------------


def top_ids(query: str, n: int = 1) -> list[str]:
    return [b.id for b, _ in playbooks.search(query, limit=n)]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("garbled output", {"symptom.garbled-output"}),
        ("device busy -8020", {"npu.health"}),
        ("log level", {"logging.level"}),
        ("65535", {"tokenizer.token-ids", "folklore.clamp-token-ids"}),
        ("fp8 910b", {"folklore.fp8-on-910b", "checkpoint.format"}),
        ("Garbled OUTPUT!!", {"symptom.garbled-output"}),
        ("container does not see the cards", {"symptom.container-no-cards"}),
        ("atb_compiler", {"folklore.atb-compiler"}),
        ("npu-smi dmon", {"folklore.npu-conf-temp-threshold"}),
        ("ASCEND_RT_VISIBLE_DEVICES", {"cann.environment"}),
        ("training hangs", {"symptom.training-hangs"}),
    ],
)
def test_search_ranks_the_right_playbook_first(query: str, expected: set[str]) -> None:
    assert top_ids(query)[0] in expected


def test_search_65535_finds_both_token_id_playbooks() -> None:
    assert set(top_ids("65535", 2)) == {"tokenizer.token-ids", "folklore.clamp-token-ids"}


def test_search_scores_are_positive_sorted_and_limited() -> None:
    hits = playbooks.search("slow first token", limit=3)
    assert 0 < len(hits) <= 3
    scores = [s for _, s in hits]
    assert scores == sorted(scores, reverse=True)
    assert all(s > 0 for s in scores)


def test_search_is_deterministic() -> None:
    assert playbooks.search("slow npu", 10) == playbooks.search("slow npu", 10)


def test_search_without_matches_or_words_is_empty() -> None:
    assert playbooks.search("zzzqqqxxy") == []
    assert playbooks.search("   ") == []
    assert playbooks.search("the of and") == []
    assert playbooks.search("garbled", limit=0) == []


def test_tokenize_folds_case_plurals_and_endings() -> None:
    assert tokenize("Garbled OUTPUTS") == tokenize("garble output")
    assert tokenize("ret is -8020") == ["ret", "8020"]
    assert stem("logging") == stem("logs") == "log"
    assert stem("caches") == stem("cache")
    assert stem("910b") == "910b"


# --- malformed files ---------------------------------------------------------------------


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return path


def test_load_dir_reads_a_valid_directory(tmp_path: Path) -> None:
    write(tmp_path, "demo.ok.md", VALID)
    write(tmp_path, "notes.txt", "ignored")
    (book,) = load_dir(tmp_path)
    assert book.id == "demo.ok"
    assert book.symptoms == ("it breaks",)
    assert book.section("How to fix") == "x"


@pytest.mark.parametrize(
    ("name", "text", "problem"),
    [
        ("demo.ok.md", "no front matter\n", "must start with"),
        ("demo.ok.md", "---\nid: demo.ok\n", "never closed"),
        ("demo.ok.md", VALID.replace("kind: check", "kind: [check"), "not valid YAML"),
        ("demo.ok.md", "---\n- a\n---\n", "mapping"),
        ("other.md", VALID, "does not match the file name"),
        ("demo.ok.md", VALID.replace("kind: check", "kind: rumour"), "kind"),
        ("demo.ok.md", VALID.replace('sources: ["somewhere"]', "sources: []"), "sources"),
        ("demo.ok.md", VALID.replace("symptoms: [it breaks]", "symptoms: it breaks"), "symptoms"),
        ("demo.ok.md", VALID.replace("title: A demo\n", ""), "title"),
        ("demo.ok.md", VALID.replace("title:", "tilte:"), "unknown front-matter key"),
        ("demo.ok.md", VALID.replace("id: demo.ok", "id: Demo OK"), "lowercase"),
        ("demo.ok.md", VALID.replace("## How to fix\n\nx\n\n", ""), "How to fix"),
        (
            "demo.ok.md",
            VALID.replace("## What you see", "## Why it happens", 1),
            "in this order",
        ),
        ("demo.ok.md", VALID.replace("## What not to do\n\nx\n", "## What not to do\n"), "empty"),
    ],
)
def test_malformed_file_raises_naming_file_and_problem(
    tmp_path: Path, name: str, text: str, problem: str
) -> None:
    path = write(tmp_path, name, text)
    with pytest.raises(PlaybookError) as info:
        load_dir(tmp_path)
    assert str(path) in str(info.value)
    assert problem in str(info.value)


def test_headings_inside_code_fences_are_not_sections(tmp_path: Path) -> None:
    text = VALID.replace(
        "## How to confirm\n\nx\n", "## How to confirm\n\n```\n## not a heading\n```\n"
    )
    write(tmp_path, "demo.ok.md", text)
    (book,) = load_dir(tmp_path)
    assert "## not a heading" in book.section("How to confirm")


def test_non_utf8_file_raises(tmp_path: Path) -> None:
    path = tmp_path / "demo.ok.md"
    path.write_bytes(b"---\nid: \xff\xfe\n---\n")
    with pytest.raises(PlaybookError, match="UTF-8"):
        load_dir(tmp_path)


def test_parse_playbook_without_expected_id() -> None:
    book = parse_playbook(VALID, "inline")
    assert book.path == "inline"
    assert book.kind == "check"


def test_import_pulls_in_no_heavy_packages() -> None:
    code = (
        "import sys, playbooks; playbooks.load_all(); playbooks.search('garbled');"
        "bad = [m for m in ('torch', 'textual', 'rich') if m in sys.modules];"
        "print(','.join(bad))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == ""


def test_a_check_playbook_may_say_what_the_check_does() -> None:
    rules = ("- `npu-smi-hung` (fail): it hung.\n- `no-npu` (skip): none.\n"
             "- `health-word` (warn/fail): a word\n  over two lines.\n")
    body = "".join(f"## {name}\n\n{rules if name == RULES_SECTION else 'x'}\n\n"
                   for name in CHECK_SECTIONS)
    text = f"---\nid: a.check\ntitle: T\nkind: check\nsources: [s]\n---\n{body}"
    book = parse_playbook(text, "a.check.md")
    assert book.rules() == {"npu-smi-hung": "fail", "no-npu": "skip", "health-word": "warn/fail"}
    assert rule_list("- `x` (warn) no colon\n* `y` (fail): not a dash\n") == {}
    symptom = text.replace("kind: check", "kind: symptom")
    with pytest.raises(PlaybookError, match="exactly these '## ' sections"):
        parse_playbook(symptom, "a.check.md")
    assert parse_playbook(text.replace(f"## {RULES_SECTION}\n\n{rules}\n\n", ""),
                          "a.check.md").rules() == {}
