"""The panels' layout: one widget per feed of the sources in console/sources.py, in the list's
order, each widget the class its source names (`Source.panel`, "module:Class"). The pressure
panel reads every NPU feed, so it follows the last NPU panel.

A source's widget implements `console.ui.widgets.feed.FeedPanel`.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

from textual.widget import Widget

from console.ui.widgets.feed import FeedPanel, PanelSetup
from console.ui.widgets.npu import NpuPanel
from console.ui.widgets.pressure import PressurePanel

if TYPE_CHECKING:
    from console.source import Source


def panel_id(kind: str, index: int) -> str:
    """The widget id of a kind's `index`th feed: "npu", "npu-1", ..."""
    return f"{kind}-{index}" if index else kind


def panel_class(source: Source | type[Source]) -> type[FeedPanel]:
    """The widget class a source names; imported here so console/sources.py stays headless."""
    module, _, name = source.panel.partition(":")
    return cast("type[FeedPanel]", getattr(importlib.import_module(module), name))


def layout(feeds: Sequence[tuple[Source, str]], setup: PanelSetup) -> list[Widget]:
    """The panels, top to bottom, for (feed, widget id) pairs in the list's order."""
    panels = [panel_class(feed).for_feed(feed, panel_id, setup) for feed, panel_id in feeds]
    npu = [i for i, panel in enumerate(panels) if isinstance(panel, NpuPanel)]
    panels.insert(npu[-1] + 1 if npu else len(panels), PressurePanel(id="pressure"))
    return panels
