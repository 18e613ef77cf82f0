"""Playbook screens: one playbook rendered as Markdown, and a browser with symptom search."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Input, Markdown, OptionList, Static
from textual.widgets.option_list import Option

import playbooks
from playbooks import Playbook, PlaybookNotFound

SEARCH_LIMIT = 20


def playbook_markdown(book: Playbook) -> str:
    """Title, id and kind, the body, then the sources the playbook rests on."""
    parts = [f"# {book.title}", f"`{book.id}` · {book.kind}", book.body.strip()]
    if book.checks:
        parts.append("## Checks\n\n" + "\n".join(f"- `{check}`" for check in book.checks))
    if book.sources:
        parts.append("## Sources\n\n" + "\n".join(f"- {source}" for source in book.sources))
    return "\n\n".join(parts) + "\n"


def not_found_markdown(error: PlaybookNotFound) -> str:
    lines = [f"# No playbook `{error.playbook_id}`", ""]
    if error.suggestions:
        lines.append("Closest playbooks: " + ", ".join(f"`{s}`" for s in error.suggestions))
    lines.append("\nPress `/` in the console to search the playbooks by symptom.")
    return "\n".join(lines) + "\n"


class PlaybookScreen(Screen[None]):
    """One playbook, looked up by id; an unknown id shows the closest ones instead."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Back"),
        Binding("q", "close", "Back", show=False),
    ]
    DEFAULT_CSS = """
    PlaybookScreen #playbook-scroll { padding: 0 2; }
    """

    def __init__(self, playbook_id: str) -> None:
        super().__init__()
        self.playbook_id = playbook_id
        self.playbook: Playbook | None = None
        self.markdown_text = self._load()

    def _load(self) -> str:
        try:
            self.playbook = playbooks.get(self.playbook_id)
        except PlaybookNotFound as error:
            self.sub_title = "not found"
            return not_found_markdown(error)
        self.sub_title = self.playbook.title
        return playbook_markdown(self.playbook)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="playbook-scroll"):
            yield Markdown(self.markdown_text, id="playbook-body")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#playbook-scroll").focus()

    def action_close(self) -> None:
        self.dismiss()


class PlaybookBrowser(Screen[None]):
    """Type symptom words; the best-matching playbooks are listed; Enter opens one."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Back"),
        Binding("down", "focus_list", "Results", show=False),
    ]
    DEFAULT_CSS = """
    PlaybookBrowser #browser-search { margin: 0 1; }
    PlaybookBrowser #browser-hint { height: 1; margin: 0 2; color: $text-muted; }
    PlaybookBrowser #browser-results { height: 1fr; margin: 0 1; }
    """

    def compose(self) -> ComposeResult:
        yield Input(placeholder="describe the symptom, e.g. garbled output", id="browser-search")
        yield Static("", id="browser-hint")
        yield OptionList(id="browser-results", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self._list(self._all())
        self.query_one("#browser-search", Input).focus()

    @staticmethod
    def _all() -> list[Playbook]:
        return list(playbooks.load_all())

    @staticmethod
    def _option(book: Playbook) -> Option:
        return Option(f"{book.id:<40} {book.title}", id=book.id)

    def _list(self, books: list[Playbook], query: str = "") -> None:
        results = self.query_one("#browser-results", OptionList)
        results.clear_options()
        results.add_options(self._option(book) for book in books)
        if books:
            results.highlighted = 0
        hint = (f"{len(books)} playbooks" if not query
                else f"{len(books)} matches for {query!r}" if books
                else f"nothing matches {query!r}; try other words")
        self.query_one("#browser-hint", Static).update(Text(hint))

    @property
    def result_ids(self) -> list[str]:
        results = self.query_one("#browser-results", OptionList)
        return [str(results.get_option_at_index(i).id) for i in range(results.option_count)]

    @on(Input.Changed, "#browser-search")
    def _search(self, event: Input.Changed) -> None:
        text = event.value.strip()
        books = [book for book, _ in playbooks.search(text, SEARCH_LIMIT)] if text else self._all()
        self._list(books, text)

    @on(Input.Submitted, "#browser-search")
    def _open_highlighted(self) -> None:
        results = self.query_one("#browser-results", OptionList)
        if results.highlighted is not None:
            self._open(results.get_option_at_index(results.highlighted).id)

    @on(OptionList.OptionSelected, "#browser-results")
    def _open_selected(self, event: OptionList.OptionSelected) -> None:
        self._open(event.option.id)

    def _open(self, playbook_id: str | None) -> None:
        if playbook_id:
            self.app.push_screen(PlaybookScreen(playbook_id))

    def action_focus_list(self) -> None:
        self.query_one("#browser-results", OptionList).focus()

    def action_close(self) -> None:
        self.dismiss()
