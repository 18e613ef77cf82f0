"""The one door for text from outside into a widget: shown literally, never obeyed.

Process names and cells from npu-smi, exporter and serving labels and errors, host names, a
replayed recording, engine and endpoint errors, model replies and playbook text are written by
others. Two things would let such text act instead of being read:

- control characters: rich's `Text` drops only a few of them (BEL, backspace, ...), so an ESC
  reaches the terminal and starts a sequence (a window title, a cleared screen);
- markup: Textual parses console markup in a `str` given to `Static`, `Label`, `update()`,
  `notify()` or `border_title`, so `[/x]` raises and `[link=...]` is obeyed.

Every widget shows outside text through these helpers, which pass it through
`probes.textsafe` (controls become visible escapes such as `\\x1b`) and hand Textual a `Text`,
or a `str` only to sinks that parse no markup. Text the console writes itself may still be a
literal `str`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text

from probes.textsafe import one_line, visible

if TYPE_CHECKING:
    from textual.app import App
    from textual.notifications import SeverityLevel

NO_VALUE = "–"


def text(value: object, style: str = "") -> Text:
    """One line of outside text (a cell, a name, an error): newline and tab shown as `\\n`,
    `\\t`; None shows as "–"."""
    return Text(line(value), style=style)


def block(value: object, style: str = "") -> Text:
    """Outside text that may span lines (a playbook's remedy, a reason and its remedy)."""
    return Text(visible(_str(value)), style=style)


def line(value: object) -> str:
    """A one-line `str` for sinks that take a string but parse no markup: the header's
    sub-title, `OptionList(markup=False)` prompts."""
    return one_line(_str(value))


def markdown(value: str) -> str:
    """Markdown source for a `Markdown` widget (a reply, a playbook): controls shown as
    escapes; Markdown is not console markup, so brackets stay text."""
    return visible(value)


def notify(app: App[Any], message: object, *, title: object = "",
           severity: SeverityLevel = "information", timeout: float | None = None) -> None:
    """A toast whose message and title are outside text: neutralised, markup off."""
    app.notify(visible(_str(message)), title=line(title), severity=severity, timeout=timeout,
               markup=False)


def _str(value: object) -> str:
    return NO_VALUE if value is None else str(value)
