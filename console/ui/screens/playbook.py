"""Playbook screens: one playbook rendered as Markdown, and a browser with symptom search.

A playbook's sources are shown as `ascend-doctor explain` prints them (`checks.sources_view`):
each source's sentence wraps, and each web address it cites is a link on a line of its own that
is never folded (the page scrolls sideways for an address wider than the screen), so it can be
opened (click, or Tab then Enter) and copied whole.
"""

from __future__ import annotations

from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import ScrollableContainer, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Input, Markdown, OptionList, Static
from textual.widgets.option_list import Option

import playbooks
from checks.sources_view import split_source
from console.ui import safe
from playbooks import Playbook, PlaybookNotFound

SEARCH_LIMIT = 20


def playbook_markdown(book: Playbook) -> str:
    """Title, id and kind, the body and the checks; the sources follow as `SourceList`."""
    parts = [f"# {book.title}", f"`{book.id}` · {book.kind}", book.body.strip()]
    if book.checks:
        parts.append("## Checks\n\n" + "\n".join(f"- `{check}`" for check in book.checks))
    if book.sources:
        parts.append("## Sources")
    return "\n\n".join(parts) + "\n"


class SourceList(ScrollableContainer, can_focus=False):
    """Each source: its sentence (wrapped), then each address it cites as an unfolded link."""

    DEFAULT_CSS = """
    SourceList { layout: vertical; height: auto; overflow-x: auto; overflow-y: hidden; }
    SourceList .source-url { width: auto; margin-left: 2; text-wrap: nowrap; }
    """

    def __init__(self, sources: tuple[str, ...]) -> None:
        super().__init__(id="playbook-sources")
        self.sources = sources

    def compose(self) -> ComposeResult:
        for source in self.sources:
            prose, urls = split_source(source)
            yield Static(safe.text(f"• {prose}"), classes="source-prose")
            for url in urls:
                shown = safe.line(url)
                yield Static(Text(shown, style=Style(link=shown)), classes="source-url")


def not_found_markdown(error: PlaybookNotFound) -> str:
    lines = [f"# No playbook `{error.playbook_id}`", ""]
    if error.suggestions:
        lines.append("Closest playbooks: " + ", ".join(f"`{s}`" for s in error.suggestions))
    lines.append("\nPress `/` in the console to search the playbooks by symptom.")
    return "\n".join(lines) + "\n"


class PlaybookScreen(Screen[None]):
    """One playbook, looked up by id; an unknown id shows the closest ones instead."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Back", key_display="Esc"),
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
        self.sub_title = safe.line(self.playbook.title)
        return playbook_markdown(self.playbook)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="playbook-scroll"):
            yield Markdown(safe.markdown(self.markdown_text), id="playbook-body")
            if self.playbook is not None and self.playbook.sources:
                yield SourceList(self.playbook.sources)
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#playbook-scroll").focus()

    def action_close(self) -> None:
        self.dismiss()


class PlaybookBrowser(Screen[None]):
    """Type symptom words; the best-matching playbooks are listed; Enter opens one."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Back", key_display="Esc"),
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
        return Option(safe.line(f"{book.id:<40} {book.title}"), id=book.id)

    def _list(self, books: list[Playbook], query: str = "") -> None:
        results = self.query_one("#browser-results", OptionList)
        results.clear_options()
        results.add_options(self._option(book) for book in books)
        if books:
            results.highlighted = 0
        hint = (f"{len(books)} playbooks" if not query
                else f"{len(books)} matches for {query!r}" if books
                else f"nothing matches {query!r}; try other words")
        self.query_one("#browser-hint", Static).update(safe.text(hint))

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
