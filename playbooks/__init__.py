"""Playbooks: one markdown file per finding, symptom or piece of folklore.

Pure data plus a small loader: no torch, textual or rich here.
"""

from __future__ import annotations

import difflib
from functools import lru_cache
from importlib import resources

from playbooks._loader import (
    CHECK_SECTIONS,
    KINDS,
    RULES_SECTION,
    SECTIONS,
    Playbook,
    PlaybookError,
    load_dir,
    parse_playbook,
    rule_list,
    split_sections,
)
from playbooks._search import Index, Ranking, build_index, lookup
from playbooks._tokens import tokenize

__all__ = [
    "CHECK_SECTIONS",
    "KINDS",
    "RULES_SECTION",
    "SECTIONS",
    "Playbook",
    "PlaybookError",
    "PlaybookNotFound",
    "Ranking",
    "find",
    "for_check",
    "get",
    "load_all",
    "parse_playbook",
    "rule_list",
    "search",
    "split_sections",
    "tokenize",
]


class PlaybookNotFound(KeyError):
    """No playbook has this id; `suggestions` holds the closest ids."""

    def __init__(self, playbook_id: str, suggestions: tuple[str, ...]) -> None:
        super().__init__(playbook_id)
        self.playbook_id = playbook_id
        self.suggestions = suggestions

    def __str__(self) -> str:
        hint = f"; did you mean: {', '.join(self.suggestions)}?" if self.suggestions else ""
        return f"no playbook {self.playbook_id!r}{hint}"


@lru_cache(maxsize=1)
def load_all() -> tuple[Playbook, ...]:
    """Every playbook shipped with the package, sorted by id (read once, then cached)."""
    return load_dir(resources.files(__name__))


@lru_cache(maxsize=1)
def _by_id() -> dict[str, Playbook]:
    return {book.id: book for book in load_all()}


@lru_cache(maxsize=1)
def _index() -> Index:
    return build_index(load_all())


def _suggest(playbook_id: str, ids: list[str]) -> tuple[str, ...]:
    wanted = playbook_id.strip().lower()
    tail = [i for i in ids if i.endswith("." + wanted) or i.split(".", 1)[-1] == wanted]
    close = difflib.get_close_matches(wanted, ids, n=3, cutoff=0.5)
    ranking = find(playbook_id, limit=3)
    found = [book.id for book, _ in ranking.hits or ranking.closest]
    return tuple(dict.fromkeys([*tail, *close, *found]))[:3]


def get(playbook_id: str) -> Playbook:
    """The playbook with this id; raises PlaybookNotFound (a KeyError) with suggestions."""
    books = _by_id()
    try:
        return books[playbook_id]
    except KeyError:
        raise PlaybookNotFound(playbook_id, _suggest(playbook_id, sorted(books))) from None


def for_check(check_id: str) -> Playbook | None:
    """The `kind: check` playbook written for this check id, if there is one."""
    book = _by_id().get(check_id)
    return book if book is not None and book.kind == "check" else None


def search(text: str, limit: int = 5) -> list[tuple[Playbook, float]]:
    """Playbooks that match what a person typed or pasted, best first, with their scores;
    empty when nothing clears the relevance floor."""
    return list(find(text, limit).hits)


def find(text: str, limit: int = 10) -> Ranking:
    """Like `search`, and when nothing matched, the closest playbooks below the floor."""
    return lookup(_index(), text, limit)
