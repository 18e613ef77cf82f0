"""The messages workers post to the app: each carries immutable values, never a widget.

Workers (thread or async) call `app.post_message(...)` (thread-safe); handlers on the App own
state and update widgets. Keep every event the console reacts to here, by name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual.message import Message

if TYPE_CHECKING:
    from console.engine_worker import ChatEngine, ReplyStats
    from console.snapshots import HostSnapshot, NpuSnapshot


# --- the model -------------------------------------------------------------------------------


class ModelLoading(Message):
    """Engine.load started in a worker."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path


class ModelLoaded(Message):
    """The engine is ready; `engine` is the handle the chat worker drives."""

    def __init__(self, engine: ChatEngine, path: str, load_s: float) -> None:
        super().__init__()
        self.engine = engine
        self.path = path
        self.load_s = load_s


class ModelUnavailable(Message):
    """No engine: `reason` says what is wrong, `remedy` what to type to fix it."""

    def __init__(self, reason: str, remedy: str = "") -> None:
        super().__init__()
        self.reason = reason
        self.remedy = remedy


# --- one chat reply ----------------------------------------------------------------------------


class ReplyDelta(Message):
    """New characters of reply `reply_id` (several tokens may be batched into one delta)."""

    def __init__(self, reply_id: int, text: str, tokens: int) -> None:
        super().__init__()
        self.reply_id = reply_id
        self.text = text
        self.tokens = tokens


class ReplyFinished(Message):
    """Reply `reply_id` ended: finished, hit its limit, was cancelled, or failed (`error`)."""

    def __init__(self, reply_id: int, stats: ReplyStats, error: str = "") -> None:
        super().__init__()
        self.reply_id = reply_id
        self.stats = stats
        self.error = error


# --- telemetry ---------------------------------------------------------------------------------


class NpuSampled(Message):
    def __init__(self, snapshot: NpuSnapshot) -> None:
        super().__init__()
        self.snapshot = snapshot


class HostSampled(Message):
    def __init__(self, snapshot: HostSnapshot) -> None:
        super().__init__()
        self.snapshot = snapshot


class ReplayTick(Message):
    """One recorded sample replayed; `recorded_at` is the recording's clock (epoch seconds)."""

    def __init__(self, recorded_at: float, npu: NpuSnapshot | None, host: HostSnapshot | None,
                 engine: Any = None) -> None:
        super().__init__()
        self.recorded_at = recorded_at
        self.npu = npu
        self.host = host
        self.engine = engine


class ReplayEnded(Message):
    def __init__(self, error: str = "", skipped_rows: int = 0) -> None:
        super().__init__()
        self.error = error
        self.skipped_rows = skipped_rows  # damaged rows the player left out
