"""What a source's panel implements (`FeedPanel`) and what it is given: `PanelSetup` to be built,
a `FeedView` to draw. The layout is console/ui/panels.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from textual.widget import Widget

    from checks.policy import Policy
    from console.history import History
    from console.options import ConsoleOptions
    from console.source import Source


@dataclass(frozen=True)
class PanelSetup:
    """What a panel may need to be built: the policy, the options, whose deployment it is."""

    policy: Policy
    options: ConsoleOptions
    target_line: str


@dataclass(frozen=True)
class FeedView:
    """One feed to draw: its latest snapshot (None: nothing yet, or nothing any more), its last
    good one, the histories, the time now (the recording's, in a replay), and staleness."""

    latest: Any
    last_good: Any
    history: History
    now: float
    stale: bool


class FeedPanel(Protocol):
    @classmethod
    def for_feed(cls, feed: Source, panel_id: str, setup: PanelSetup) -> Widget: ...

    def show_feed(self, view: FeedView) -> None: ...
