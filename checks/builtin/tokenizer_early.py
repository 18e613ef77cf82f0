"""The chat-template renderer of a --model run, started as the command line starts.

Its child (a fresh interpreter importing Jinja's sandbox, probes.model.chat_template) costs
more CPU than its renderings; started here, it loads on the second core while this process
imports the checks, and the tokenizer observation (checks.builtin.tokenizer) hands it the
template later. This process owns it: the observation takes it and finishes it, and the
command line discards it when the run ends without taking it (no template, a run that never
reached the tokenizer checks).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from probes.spawn import Started

_WAITING: list[Started] = []


def start() -> None:
    """Start the renderer now, unless one already waits."""
    from probes.model.chat_template import start_renderer

    if not _WAITING:
        _WAITING.append(start_renderer())


def waiting_fds() -> tuple[int, ...]:
    """This process's ends of the waiting renderer's pipes (a forked child closes them)."""
    return _WAITING[0].fds() if _WAITING else ()


def take() -> Started | None:
    """The waiting renderer, now the caller's to finish or discard; None when none waits."""
    return _WAITING.pop() if _WAITING else None


def discard() -> None:
    """End and reap the renderer if nobody took it."""
    while _WAITING:
        _WAITING.pop().discard()
