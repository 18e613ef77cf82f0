"""One reply: drive a backend's stream in a worker thread, batch the text, measure it.

`run_reply` talks to the UI only through `emit(event)`, and every event is an immutable
value (`ReplyDelta`, `ReplyDone`); the UI wraps them in its own messages.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from console.chat.backend import BackendError, ChatBackend, ChatSettings, ReplyChunk
from probes.textsafe import one_line, visible

DELTA_BATCH_S = 0.04  # at most ~25 UI updates a second; Markdown falls behind near 20 appends/s


@dataclass(frozen=True)
class ReplyStats:
    """Per-reply numbers as the user experienced them (measured around the backend call)."""

    tokens: int = 0
    ttft_s: float | None = None
    tokens_per_s: float | None = None
    elapsed_s: float = 0.0
    finish_reason: str = ""  # "stop" | "length" | "cancelled" | "error"
    max_tokens: int | None = None  # the limit the request set (max new tokens)

    def footer(self) -> str:
        parts = [f"TTFT {self.ttft_s * 1000:.0f} ms" if self.ttft_s is not None else "TTFT —",
                 f"{self.tokens_per_s:.1f} tok/s" if self.tokens_per_s is not None else "— tok/s",
                 f"{self.tokens} tokens"]
        if self.finish_reason == "length":  # OpenAI's word for "the token limit was reached"
            limit = f"{self.max_tokens}-token " if self.max_tokens else "token "
            parts.append(f"stopped at the {limit}limit")
        elif self.finish_reason and self.finish_reason != "stop":
            parts.append(self.finish_reason)
        return " · ".join(parts)


@dataclass(frozen=True, slots=True)
class ReplyDelta:
    """New characters of reply `reply_id` (several chunks may be batched into one delta)."""

    reply_id: int
    text: str
    tokens: int


@dataclass(frozen=True, slots=True)
class ReplyDone:
    """Reply `reply_id` ended: finished, hit its limit, was cancelled, or failed (`error`)."""

    reply_id: int
    stats: ReplyStats
    error: str = ""


ReplyEvent = ReplyDelta | ReplyDone
Emit = Callable[[ReplyEvent], object]


class Stopper:
    """Cancel flag for one reply: set from the UI, read by the worker between chunks."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def set(self) -> None:
        self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()


@dataclass
class _Tally:
    start: float
    tokens: int = 0
    reported: int | None = None
    first_at: float | None = None
    last_at: float = 0.0
    finish: str = "stop"

    def add(self, chunk: ReplyChunk, now: float) -> None:
        self.tokens += chunk.tokens
        if chunk.tokens and self.first_at is None:
            self.first_at = now
        if chunk.tokens:
            self.last_at = now
        if chunk.reported_tokens is not None:
            self.reported = chunk.reported_tokens
        if chunk.finish_reason:
            self.finish = chunk.finish_reason

    def stats(self, finish: str, elapsed_s: float, max_tokens: int | None = None) -> ReplyStats:
        tokens = self.reported if self.reported is not None else self.tokens
        ttft = None if self.first_at is None else self.first_at - self.start
        return ReplyStats(tokens, ttft, _rate(tokens, self.first_at, self.last_at), elapsed_s,
                          finish, max_tokens)


def run_reply(backend: ChatBackend, messages: Sequence[Mapping[str, str]],
              settings: ChatSettings, reply_id: int, emit: Emit, stopper: Stopper,
              clock: Callable[[], float] = time.perf_counter) -> ReplyStats:
    """Iterate backend.stream in this (worker) thread, emitting batched ReplyDelta events.

    Ends with exactly one ReplyDone. `stopper` is checked between chunks (so a cancel that
    arrives before the backend started is not lost); the caller also calls backend.cancel()
    to end a long wait sooner. Text from the backend is shown, never obeyed: control
    characters become visible escapes."""
    tally = _Tally(clock())
    pending: list[str] = []
    posted_at, finish, error = 0.0, "stop", ""
    try:
        for chunk in backend.stream(messages, settings):
            now = clock()
            tally.add(chunk, now)
            if chunk.text:
                pending.append(visible(chunk.text))
            if pending and (tally.first_at == now or now - posted_at >= DELTA_BATCH_S):
                emit(ReplyDelta(reply_id, "".join(pending), tally.tokens))
                pending, posted_at = [], now
            if stopper.is_set():
                break
        finish = "cancelled" if stopper.is_set() else tally.finish
    except BackendError as exc:
        finish, error = _failed(stopper, one_line(str(exc)))
    except Exception as exc:  # the engine's error is shown on the reply; the app keeps running
        finish, error = _failed(stopper, one_line(f"{type(exc).__name__}: {exc}"))
    if pending:
        emit(ReplyDelta(reply_id, "".join(pending), tally.tokens))
    stats = tally.stats(finish, clock() - tally.start, settings.max_new_tokens)
    emit(ReplyDone(reply_id, stats, error))
    return stats


def _failed(stopper: Stopper, error: str) -> tuple[str, str]:
    """A stream broken by our own cancel is a cancel, not an error."""
    return ("cancelled", "") if stopper.is_set() else ("error", error)


def _rate(tokens: int, first_at: float | None, last_at: float) -> float | None:
    """Decode speed: tokens after the first over the time after the first."""
    if first_at is None or tokens < 2 or last_at <= first_at:
        return None
    return (tokens - 1) / (last_at - first_at)
