"""A playbook's sources in the terminal: the sentence wrapped, the web addresses whole.

An address that rich folds at the terminal width can be neither clicked nor copied as one, so
each address is taken out of its sentence and printed on a line of its own that rich never
breaks; the terminal wraps it softly, which keeps it one line for copying and link detection.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

_URL_RE = re.compile(r"https?://[^\s,;]+")
# punctuation that ends a sentence or a bracket rather than the address
_URL_TAIL = ".)]'\""
# a separator the removed address leaves behind: after another one, a colon or a bracket, or last
_DOUBLED_SEPARATOR_RE = re.compile(r"([:;,(])\s*[;,]")
_TRAILING_SEPARATOR_RE = re.compile(r"\s*[;,]\s*$")
_EMPTY_BRACKETS_RE = re.compile(r"\(\s*\)")
_SPACES_RE = re.compile(r"\s{2,}")


def split_source(source: str) -> tuple[str, tuple[str, ...]]:
    """The sentence of one source without its web addresses, and the addresses in order."""
    urls: list[str] = []
    pieces: list[str] = []
    last = 0
    for match in _URL_RE.finditer(source):
        url = match.group(0).rstrip(_URL_TAIL)
        pieces.append(source[last : match.start()])
        last = match.start() + len(url)
        urls.append(url)
    pieces.append(source[last:])
    prose = _EMPTY_BRACKETS_RE.sub("", "".join(pieces))
    prose = _TRAILING_SEPARATOR_RE.sub("", _DOUBLED_SEPARATOR_RE.sub(r"\1", prose))
    return _SPACES_RE.sub(" ", prose).strip(), tuple(urls)


def print_sources(console: Console, sources: Sequence[str]) -> None:
    """A 'Sources' heading, then each source as a bullet with its addresses below it.

    The sentence wraps at the console width under a hanging indent; a console that never wraps
    (a file or a pipe) gets it on one line. Addresses are never wrapped by rich."""
    from rich.style import Style
    from rich.text import Text

    console.print()
    console.print(Text("Sources", style="bold"))
    for source in sources:
        prose, urls = split_source(source)
        if console.soft_wrap:
            lines = [Text(prose)]
        else:
            lines = list(Text(prose).wrap(console, max(console.width - 3, 20)))
        for index, line in enumerate(lines):
            line.rstrip()
            console.print(Text.assemble(" • " if index == 0 else "   ", line), soft_wrap=True)
        for url in urls:
            console.print(Text.assemble("   ", (url, Style(link=url))), soft_wrap=True)
