"""What the app hands each controller: itself (workers, messages, notifications), the main
screen, and what the command line decided. Controllers never import the app."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from textual.app import App
from textual.screen import Screen
from textual.widget import Widget

from checks.policy import Policy
from console.options import ConsoleOptions

W = TypeVar("W", bound=Widget)


@dataclass(frozen=True)
class Wiring:
    app: App[Any]
    options: ConsoleOptions
    policy: Policy
    clock: Callable[[], float]
    screen: Callable[[], Screen[Any]]  # the main screen, whichever screen is on top

    def widget(self, kind: type[W]) -> W:
        return self.screen().query_one(kind)
