"""The playbook search on real queries: symptoms, codes, pasted log lines, Chinese, folklore;
the relevance floor; the tokenizer; `ascend-doctor playbooks --json` as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import playbooks
from playbooks import Playbook
from playbooks._loader import parse_playbook
from playbooks._search import build_index, lookup
from playbooks._tokens import code_names, error_codes, tokenize
from tests.playbooks.search_cases import (
    CASES,
    FORBIDDEN,
    HELD_OUT,
    NEGATIVE,
    REAL_THREADS,
    UNKNOWN_CODES,
    right_in_top3,
)

ROOT = Path(__file__).resolve().parents[2]


def top_ids(query: str, n: int = 3) -> list[str]:
    return [book.id for book, _ in playbooks.search(query, limit=n)]


# --- the table -------------------------------------------------------------------------------


@pytest.mark.parametrize(("query", "acceptable"), CASES + HELD_OUT,
                         ids=[q[:40] for q, _ in CASES + HELD_OUT])
def test_a_right_playbook_is_in_the_top_three(query: str, acceptable: tuple[str, ...]) -> None:
    ids = top_ids(query)
    assert right_in_top3(ids, acceptable), f"{query!r} -> {ids}"
    assert not set(ids) & FORBIDDEN.get(query, frozenset()), f"{query!r} -> {ids}"


@pytest.mark.parametrize(("url", "excerpt", "acceptable"), REAL_THREADS,
                         ids=[u.split("github.com/")[-1] for u, _, _ in REAL_THREADS])
def test_a_reporters_own_words_find_the_playbook(url: str, excerpt: str,
                                                 acceptable: tuple[str, ...]) -> None:
    ids = top_ids(excerpt)
    assert right_in_top3(ids, acceptable), f"{url}: {ids}"


def test_the_table_is_big_and_mixed() -> None:
    chinese = [q for q, _ in CASES if any("\u4e00" <= c <= "\u9fff" for c in q)]
    folklore = [q for q, ids in CASES if any(i.startswith("folklore.") for i in ids)]
    assert len(CASES) >= 30 and len(chinese) >= 10 and len(folklore) >= 5
    assert len(FORBIDDEN) >= 5


@pytest.mark.parametrize("query", NEGATIVE)
def test_ordinary_words_match_nothing(query: str) -> None:
    assert playbooks.search(query, limit=10) == []


@pytest.mark.parametrize("query", UNKNOWN_CODES)
def test_a_code_no_playbook_names_ranks_nothing_that_ignores_it(query: str) -> None:
    codes = error_codes(query)
    assert codes
    for book, _ in playbooks.search(query, limit=10):
        assert codes & set(tokenize(_text(book))), f"{book.id} does not name {codes}"


def test_error_code_words_no_longer_pull_the_health_check_first() -> None:
    ranking = playbooks.find("error code is 507035")
    assert "npu.health" not in [b.id for b, _ in ranking.hits]
    if not ranking.hits:
        assert ranking.closest[0][0].id == "npu.health"
        assert len(ranking.closest) == 3


def test_nothing_at_all_in_common_has_no_closest_either() -> None:
    # shaped like a CANN code, named by no playbook, sharing no word with any
    assert playbooks.find("EZ9876") == playbooks.Ranking((), (), ("EZ9876",))


def test_the_codes_no_playbook_names_are_reported_as_written() -> None:
    assert playbooks.find("EZ9876 then EZ9876 and -8020").unknown_codes == ("EZ9876",)
    assert playbooks.find("ret is -8020").unknown_codes == ()


def test_a_code_a_playbook_names_wins_over_the_words_around_it() -> None:
    assert top_ids("error code 207018", 1) == ["npu.hbm-fit"]
    assert top_ids("ret is -8020", 1) == ["npu.health"]
    assert top_ids("EI0006", 1)[0] in ("symptom.hccl-settings", "symptom.training-hangs")
    assert top_ids("fault 0x80DE0207", 1) == ["npu.temperature"]


def test_a_huge_paste_is_read_up_to_the_cap() -> None:
    from playbooks._search import MAX_QUERY_CHARS

    head = ("RuntimeError: NPU out of memory. " * 3000)[:MAX_QUERY_CHARS]
    tail = " dcmi module initialize failed ret is -8005 \x1b[31m 显存不足" * 1000
    assert playbooks.find(head + tail) == playbooks.find(head)
    assert top_ids(head + tail, 1) == ["npu.hbm-fit"]


# --- folklore ----------------------------------------------------------------------------------


FOLKLORE_WORDING = (
    "driver version", "which CANN version", "version mismatch", "910b hbm size",
    "how much hbm does 910b have", "HBM memory usage", "log level", "fp8 scale",
    "attention mask dtype", "token ids above vocab", "kv cache layout", "temperature alarm",
)


@pytest.mark.parametrize("query", FOLKLORE_WORDING)
def test_folklore_stays_out_of_ordinary_wording(query: str) -> None:
    assert not [i for i in top_ids(query, 10) if i.startswith("folklore.")]


@pytest.mark.parametrize(
    ("query", "myth"),
    [
        ("the last two digits of the driver version must be 12", "version-last-two-digits"),
        ("910b 32gb", "910b-hbm-32gb"),
        ("only 28.4 GB usable", "910b-hbm-32gb"),
        ("log level 3 is debug", "log-level-reversed"),
        ("FP8_E4M3_A3B", "fp8-on-910b"),
        ("npu-smi dmon -s 1", "npu-conf-temp-threshold"),
        ("hbm bank conflict", "hbm-bank-conflicts"),
        ("convert attention mask to float16", "float-attention-mask"),
    ],
)
def test_folklore_ranks_when_its_myth_is_stated(query: str, myth: str) -> None:
    assert f"folklore.{myth}" in top_ids(query)


# --- the index on a corpus of our own ------------------------------------------------------------


def _book(pid: str, kind: str, symptoms: list[str], codes: list[str] | None = None,
          body_words: str = "text") -> Playbook:
    sections = "".join(f"## {name}\n\n{body_words}\n\n" for name in playbooks.SECTIONS)
    front = {"id": pid, "title": pid, "kind": kind, "symptoms": symptoms, "sources": ["s"]}
    if codes is not None:
        front["codes"] = codes
    return parse_playbook(f"---\n{json.dumps(front)}\n---\n{sections}", f"{pid}.md")


def test_the_floor_and_the_codes_on_a_small_corpus() -> None:
    books = [
        _book("a.one", "check", ["device error code"], body_words="error code device"),
        _book("a.two", "check", ["socket timeout"], codes=["EI0006"]),
        _book("folklore.x", "folklore", ["driver suffix must be 12"]),
        *[_book(f"b.{i}", "check", [f"filler{i} words"], body_words="error") for i in range(40)],
    ]
    index = build_index(books)
    assert [b.id for b, _ in lookup(index, "EI0006 in the log", 3).hits] == ["a.two"]
    assert lookup(index, "error code EZ9999", 3).hits == ()
    assert not [b for b, _ in lookup(index, "driver 12", 10).hits if b.kind == "folklore"]
    assert [b.id for b, _ in lookup(index, "the driver suffix must be 12", 1).hits] == [
        "folklore.x"]
    # a new playbook that writes its code among its symptoms ranks for it just the same
    index = build_index([*books, _book("c.new", "symptom", ["507035 vector core exception"])])
    assert [b.id for b, _ in lookup(index, "error code is 507035", 3).hits] == ["c.new"]


def test_codes_front_matter_is_a_list_of_strings() -> None:
    book = _book("a.one", "check", ["x"], codes=["EZ1001", "-8020"])
    assert book.codes == ("EZ1001", "-8020")
    assert _book("a.two", "check", ["x"]).codes == ()
    with pytest.raises(playbooks.PlaybookError, match="'codes' must be a list"):
        _book("a.three", "check", ["x"], codes="EZ1001")  # type: ignore[arg-type]


def _text(book: Playbook) -> str:
    return " ".join((book.title, *book.symptoms, *book.codes, *book.sources, book.body))


def test_every_listed_code_is_named_by_the_playbooks_sources_or_body() -> None:
    for book in playbooks.load_all():
        named = (" ".join(book.sources) + book.body).lower()
        missing = [code for code in book.codes if code.lower() not in named]
        assert not missing, f"{book.id}: codes {missing} appear in neither sources nor body"


def test_chinese_phrases_are_on_the_playbooks_that_need_them() -> None:
    with_chinese = [b.id for b in playbooks.load_all()
                    if any("\u4e00" <= c <= "\u9fff" for s in b.symptoms for c in s)]
    assert len(with_chinese) >= 25


# --- the tokenizer -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("EZ1001", ["ez1001"]),
        ("error 507035", ["error", "507035"]),
        ("ACL_ERROR_RT_AICORE_EXCEPTION",
         ["acl_error_rt_aicore_exception", "acl", "error", "rt", "aicor", "exception"]),
        ("RuntimeError:", ["runtimeerror", "runtim", "error"]),
        ("libatb.so", ["libatb.so", "libatb"]),
        ("AscendFp8Config", ["ascendfp8config", "ascend", "fp8", "config"]),
        ("NPUErrorCodes", ["npuerrorcodes", "npu", "error", "cod"]),
        ("npu-smi", ["npu-smi", "npu", "smi"]),
        ("torch_npu 2.5.1.post1", ["torch_npu", "torch", "npu", "2.5.1.post1", "post1"]),
        ("7.0.1.12", ["7.0.1.12"]),
        ("0x80E00209", ["0x80e00209"]),
        ("ret is -8020", ["ret", "8020"]),
        ("910B4", ["910b4"]),
        ("显存不足", ["显存", "存不", "不足"]),
        ("首token时延", ["首", "token", "时延"]),
        ("HCCL超时", ["hccl", "超时"]),
        ("\x1b[31mERROR\x1b[0m EZ1001", ["error", "ez1001"]),
        ("", []),
        ("the of and", []),
    ],
)
def test_tokenize(text: str, expected: list[str]) -> None:
    assert tokenize(text) == expected


def test_a_chinese_phrase_matches_inside_a_longer_sentence() -> None:
    assert set(tokenize("显存不足")) <= set(tokenize("推理的时候显存不足了"))


def test_code_names_keep_what_was_written() -> None:
    assert code_names("ret is -8020, EZ1001, then -8020 again") == ("-8020", "EZ1001")


@pytest.mark.parametrize(
    ("text", "codes"),
    [
        ("EZ1001: op failed", {"ez1001"}),
        ("EI0006 and then 507035", {"ei0006", "507035"}),
        ("ret is -8020", {"8020"}),
        ("\x1b[1;31mEZ1001\x1b[0m", {"ez1001"}),
        ("fault 0x80E00209", {"0x80e00209"}),
        ("ACL_ERROR_RT_AICORE_EXCEPTION", {"acl_error_rt_aicore_exception"}),
        ("(PID:176930, Device:0) on port 8000, 65535 tokens", set()),
        ("version 8.0.RC1, 2.00 GiB", set()),
    ],
)
def test_error_codes(text: str, codes: set[str]) -> None:
    assert error_codes(text) == codes


# --- the command line --------------------------------------------------------------------------


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "checks.cli", "playbooks", *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120)


def test_json_through_the_cli() -> None:
    out = run_cli("--json", "多卡训练卡住了，HCCL通信超时")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["schema"] == "ascend-playbooks/1"
    assert doc["query"] == "多卡训练卡住了，HCCL通信超时"
    assert doc["results"][0]["id"] == "symptom.training-hangs"
    assert set(doc["results"][0]) == {"id", "title", "kind", "score"}
    assert doc["results"][0]["score"] > 0 and doc["closest"] == []


def test_json_when_nothing_matched_gives_the_closest() -> None:
    out = run_cli("--json", "error")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["results"] == [] and len(doc["closest"]) == 3
    assert all(set(row) == {"id", "title", "kind", "score"} for row in doc["closest"])
    assert [row["id"] for row in doc["closest"]] == [
        b.id for b, _ in playbooks.find("error").closest]


def test_json_without_text_lists_every_playbook() -> None:
    doc = json.loads(run_cli("--json").stdout)
    assert len(doc["results"]) == len(playbooks.load_all())
    assert all(row["score"] is None for row in doc["results"])


def test_text_output_says_nothing_matched_and_names_the_closest() -> None:
    out = run_cli("error")
    assert out.returncode == 0
    closest = ", ".join(b.id for b, _ in playbooks.find("error").closest)
    assert f"nothing matched 'error'; closest: {closest}" in out.stdout
    assert "Traceback" not in out.stderr
    assert "symptom.container-no-cards" in run_cli("-8020").stdout
    assert "nothing matched 'EZ9876' (no playbook names EZ9876)" in run_cli("EZ9876").stdout
    assert "Exit code 0" in run_cli("--help").stdout


def test_the_index_is_built_only_for_a_search() -> None:
    code = ("import playbooks, checks.cli; playbooks.load_all(); playbooks.get('npu.health');"
            "print(playbooks._index.cache_info().currsize)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.stdout.strip() == "0", out.stderr
