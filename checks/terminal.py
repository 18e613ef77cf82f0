"""The rich console for terminal output, made on first use: `--json` never imports rich."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console


def make_console() -> Console:
    from rich.console import Console

    console = Console(highlight=False)
    if not console.is_terminal:
        # a file or a pipe has no width to fit: never cut or wrap a line at 80 columns
        console = Console(highlight=False, width=160, soft_wrap=True)
    return console
