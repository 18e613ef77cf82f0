"""Help screen: every key binding the app hands it, with what it does."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable


class HelpScreen(ModalScreen[None]):
    """A modal table of (key, description); Esc, q or ? closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close", key_display="Esc"),
        Binding("q", "close", "Close", show=False),
        Binding("question_mark", "close", "Close", show=False),
    ]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen #help-box {
        width: auto;
        max-width: 90%;
        height: auto;
        max-height: 90%;
        border: round $primary;
        background: $surface;
        padding: 0 1;
    }
    HelpScreen #help-keys { height: auto; max-height: 30; width: auto; }
    """

    def __init__(self, bindings: Sequence[tuple[str, str]]) -> None:
        super().__init__()
        self.key_bindings = list(bindings)

    def compose(self) -> ComposeResult:
        with Vertical(id="help-box") as box:
            box.border_title = "Keys"
            box.border_subtitle = "Esc, q or ? closes"  # on the frame: seen however long the list
            table: DataTable[Text] = DataTable(id="help-keys", cursor_type="row")
            table.add_column("Key", key="key")
            table.add_column("Does", key="description", width=self._description_width())
            for key, description in self.key_bindings:
                # a long description wraps in its row instead of being cut at the box's edge
                table.add_row(Text(key, style="bold"), Text(description), height=None)
            yield table

    def _description_width(self) -> int:
        """The widest description, or what the box (90% of the screen) leaves beside the keys
        and the cells' padding and border."""
        longest = max((len(d) for _, d in self.key_bindings), default=10)
        keys = max((len(k) for k, _ in self.key_bindings), default=3)
        room = int(self.app.size.width * 0.9) - keys - 10
        return max(20, min(longest, room))

    def action_close(self) -> None:
        self.dismiss()
