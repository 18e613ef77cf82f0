from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

import playbooks
from checks.sources_view import print_sources, split_source

ANSI_RE = re.compile(r"\x1b\[[0-9;]*m|\x1b\]8;[^\x1b]*\x1b\\")
LONG_URL = ("https://www.hiascend.com/document/detail/zh/CANNCommunityEdition/850/opdevg/"
            "Ascendcopdevg/atlas_ascendc_best_practices_10_0025.html")


def rendered(sources: list[str], *, terminal: bool, width: int = 80) -> list[str]:
    out = io.StringIO()
    if terminal:
        console = Console(file=out, width=width, force_terminal=True, highlight=False)
    else:  # what checks.terminal.make_console builds for a file or a pipe
        console = Console(file=out, width=160, soft_wrap=True, highlight=False)
    print_sources(console, sources)
    return ANSI_RE.sub("", out.getvalue()).splitlines()


@pytest.mark.parametrize(("source", "prose", "urls"), [
    ("levels: page envref_07_0122, https://a.example/x.html",
     "levels: page envref_07_0122", ("https://a.example/x.html",)),
    ("precedence: https://a.example/1.html; https://a.example/2.html",
     "precedence:", ("https://a.example/1.html", "https://a.example/2.html")),
    ("ratios: https://a.example/x.html; Ascend/msprof docs/x.md @ 9ba1ac7be913",
     "ratios: Ascend/msprof docs/x.md @ 9ba1ac7be913", ("https://a.example/x.html",)),
    ("masks (https://a.example/g#attention-mask) are integers",
     "masks are integers", ("https://a.example/g#attention-mask",)),
    ("no address: owner/repo path @ v1.0", "no address: owner/repo path @ v1.0", ()),
])
def test_split_source_takes_the_addresses_out_of_the_sentence(
        source: str, prose: str, urls: tuple[str, ...]) -> None:
    assert split_source(source) == (prose, urls)


def test_a_long_address_stays_on_one_line_in_a_narrow_terminal() -> None:
    source = f"The 32-byte banks are in the on-chip Unified Buffer, not in HBM: {LONG_URL}"
    lines = rendered([source], terminal=True, width=80)
    assert lines[1] == "Sources"
    assert f"   {LONG_URL}" in lines
    prose_lines = [line for line in lines if "https://" not in line]
    assert all(len(line) <= 80 for line in prose_lines)
    assert lines[2].startswith(" • The 32-byte") and lines[3].startswith("   ")


def test_a_pipe_gets_each_sentence_on_one_line() -> None:
    source = "x " * 100 + f"end: {LONG_URL}"
    lines = rendered([source], terminal=False)
    assert lines[2] == " • " + "x " * 100 + "end:"
    assert lines[3] == f"   {LONG_URL}"


def test_every_playbook_address_survives_an_80_column_terminal() -> None:
    for book in playbooks.load_all():
        text = "\n".join(rendered(list(book.sources), terminal=True, width=80))
        for source in book.sources:
            for url in split_source(source)[1]:
                assert f"   {url}\n" in text + "\n", f"{book.id}: {url} was broken"
