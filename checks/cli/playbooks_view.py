"""`ascend-doctor playbooks`: the search's answer as a table, a 'nothing matched' line, or the
ascend-playbooks/1 JSON document.

The document: {"schema": "ascend-playbooks/1", "query": str, "results": [{"id", "title",
"kind", "score"}], "closest": [the same fields]}. "results" holds the playbooks above the
relevance floor, best first (every playbook, score null, when no text was given); "closest"
holds the nearest ones below the floor, and only when "results" is empty.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from checks.errors import EXIT_OK
from checks.terminal import make_console
from probes.textsafe import json_text

if TYPE_CHECKING:
    from rich.console import Console

    from playbooks import Playbook, Ranking

SCHEMA = "ascend-playbooks/1"


def show(text: str, as_json: bool) -> int:
    """`ascend-doctor playbooks [TEXT] [--json]`: always exit 0, matched or not."""
    import playbooks

    if not text:
        books = playbooks.load_all()
        if as_json:
            return _print_json(listing(books))
        print_table(make_console(), "playbooks", books)
        return EXIT_OK
    ranking = playbooks.find(text, limit=10)
    if as_json:
        return _print_json(document(text, ranking))
    console = make_console()
    if ranking.hits:
        print_table(console, f"playbooks matching '{text}'", [b for b, _ in ranking.hits])
    else:
        print_no_match(console, text, ranking)
    return EXIT_OK


def _print_json(doc: dict[str, Any]) -> int:
    print(json_text(json.dumps(doc, indent=2, ensure_ascii=False)))
    return EXIT_OK


def _row(book: Playbook, score: float | None) -> dict[str, Any]:
    return {"id": book.id, "title": book.title, "kind": book.kind, "score": score}


def document(query: str, ranking: Ranking) -> dict[str, Any]:
    """The JSON document of a search."""
    return {
        "schema": SCHEMA,
        "query": query,
        "results": [_row(book, score) for book, score in ranking.hits],
        "closest": [_row(book, score) for book, score in ranking.closest],
    }


def listing(books: Iterable[Playbook]) -> dict[str, Any]:
    """The JSON document of the whole list (no query, no scores)."""
    return {"schema": SCHEMA, "query": "", "results": [_row(b, None) for b in books],
            "closest": []}


def print_table(console: Console, title: str, books: Iterable[Playbook]) -> None:
    from rich.table import Table
    from rich.text import Text

    table = Table(title=Text(title), title_justify="left")
    for header in ("id", "kind", "title"):
        table.add_column(header)
    for book in books:
        table.add_row(book.id, book.kind, Text(book.title))
    console.print(table)
    console.print(Text("read one with: ascend-doctor explain ID", style="dim"))


def print_no_match(console: Console, query: str, ranking: Ranking) -> None:
    from rich.text import Text

    unknown = ", ".join(ranking.unknown_codes)
    named = f" (no playbook names {unknown})" if unknown else ""
    ids = ", ".join(book.id for book, _ in ranking.closest)
    tail = f"; closest: {ids}" if ids else "; try other words, a code or a log line"
    console.print(Text(f"nothing matched '{query}'{named}{tail}"))
    if ids:
        console.print(Text("read one with: ascend-doctor explain ID", style="dim"))
