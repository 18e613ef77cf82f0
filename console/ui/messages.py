"""The messages workers post to the app: each carries one immutable value, never a widget.

Workers (threads) call `app.post_message(...)`, which is thread-safe; handlers on the app hand
the value to a controller, which owns the state and updates the widgets.
"""

from __future__ import annotations

from typing import Any

from textual.message import Message

from console.chat.reply import ReplyDelta, ReplyDone
from console.source import Source
from console.target import Found


class BackendProgress(Message):
    """The backend is getting ready: `stage` is what it is doing now."""

    def __init__(self, stage: str) -> None:
        super().__init__()
        self.stage = stage


class BackendReady(Message):
    """The backend can chat; `line` says how it got ready ("loaded in 3.1 s")."""

    def __init__(self, line: str) -> None:
        super().__init__()
        self.line = line


class BackendFailed(Message):
    """No chat: `reason` says what is wrong, `remedy` what to type to fix it."""

    def __init__(self, reason: str, remedy: str = "", transient: bool = False) -> None:
        super().__init__()
        self.reason = reason
        self.remedy = remedy
        self.transient = transient  # worth trying again later (an endpoint that is down)


class ReplyEvent(Message):
    """A piece of a reply (`ReplyDelta`) or its end (`ReplyDone`)."""

    def __init__(self, event: ReplyDelta | ReplyDone) -> None:
        super().__init__()
        self.event = event


class Sampled(Message):
    """One sample of a feed (console/sources.py); `aside`: what the sampled machine shows
    beside it (`Source.aside`), None where not knowable."""

    def __init__(self, feed: Source, snapshot: Any, aside: Any = None) -> None:
        super().__init__()
        self.feed = feed
        self.snapshot = snapshot
        self.aside = aside


class Replayed(Message):
    """One recorded sample replayed; `recorded_at` is the recording's clock (epoch seconds)."""

    def __init__(self, recorded_at: float, snapshot: object) -> None:
        super().__init__()
        self.recorded_at = recorded_at
        self.snapshot = snapshot


class ReplayEnded(Message):
    def __init__(self, error: str = "", skipped_rows: int = 0) -> None:
        super().__init__()
        self.error = error
        self.skipped_rows = skipped_rows  # damaged rows the player left out


class TargetFound(Message):
    """The target the panels and the doctor judge (console.target.find)."""

    def __init__(self, found: Found) -> None:
        super().__init__()
        self.found = found


class TargetFailed(Message):
    """The target could not be read: `reason` is one line naming the option."""

    def __init__(self, reason: str) -> None:
        super().__init__()
        self.reason = reason

