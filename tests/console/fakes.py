"""Test doubles for the console: a scripted in-process engine (tests and benchmarks only).

`FakeEngine` has the `ChatEngine` protocol of `console.chat.local` (`engine.Engine` has the
same): wrap it in `LocalBackend(engine=..., config_of=lambda s: s)` so no torch is imported.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from console.chat.local import LocalBackend


def _rate(tokens: int, first_at: float | None, last_at: float) -> float | None:
    if first_at is None or tokens < 2 or last_at <= first_at:
        return None
    return (tokens - 1) / (last_at - first_at)


@dataclass(frozen=True)
class FakeEvent:
    token_id: int
    text: str
    index: int
    finish_reason: str | None = None
    fp8_decode: str = ""


@dataclass(frozen=True)
class FakeModelConfig:
    architecture: str = "fake"
    num_layers: int = 2
    num_experts: int = 0
    num_experts_per_tok: int = 0
    vocab_size: int = 1000
    fp8: Any = None


@dataclass(frozen=True)
class FakeStats:
    """Field for field what engine.EngineStats carries (so panels read either)."""

    device: str = "cpu"
    dtype: str = "float32"
    fp8_mode: str = "none"
    max_seq_len: int = 4096
    kv_cache_bytes: int = 8 * 2**20
    kv_cache_dtype: str = "float32"
    kv_layout: str = "BSND"
    kv_alignment_bytes: int = 4096
    kv_tokens_used: int = 0
    weight_bytes: int = 64 * 2**20
    fused_ops: tuple[str, ...] = ()
    ttft_s: float | None = None
    prefill_tokens: int = 0
    prefill_tokens_per_s: float | None = None
    decode_tokens: int = 0
    decode_tokens_per_s: float | None = None
    finish_reason: str | None = None
    fp8_decode: str = ""
    kernel_layers: str = ""

    @property
    def kv_occupancy(self) -> float:
        return self.kv_tokens_used / self.max_seq_len if self.max_seq_len else 0.0


@dataclass
class FakeEngine:
    """Scripted replies: each word of `reply` is one token, `token_delay_s` apart.

    `endless=True` keeps yielding until cancel() (to test Esc); `fail_with` raises mid-stream."""

    reply: str = "Hello from the **fake** engine. It streams one word at a time."
    first_token_delay_s: float = 0.0
    token_delay_s: float = 0.0
    endless: bool = False
    fail_with: str = ""
    pinned_stats: FakeStats | None = None  # fixed numbers (snapshot tests)
    config: FakeModelConfig = field(default_factory=FakeModelConfig)
    calls: list[list[dict[str, Any]]] = field(default_factory=list)
    _cancel: threading.Event = field(default_factory=threading.Event, repr=False)
    _stats: FakeStats = field(default_factory=FakeStats, repr=False)

    def chat(self, messages: Sequence[Mapping[str, Any]], config: Any = None) -> Iterator[Any]:
        self.calls.append([dict(m) for m in messages])
        self._cancel.clear()
        limit = int(getattr(config, "max_new_tokens", 0) or 0)
        return self._run(limit)

    def _run(self, limit: int) -> Iterator[FakeEvent]:
        words = [w + " " for w in self.reply.split()]
        start = time.perf_counter()
        if self.first_token_delay_s:
            time.sleep(self.first_token_delay_s)
        ttft = time.perf_counter() - start
        index = 0
        while True:
            if self.fail_with and index == 2:
                raise RuntimeError(self.fail_with)
            text = words[index % len(words)] if words else "… "
            last = not self.endless and (index + 1 >= len(words) or index + 1 == limit)
            reason = ("length" if limit and index + 1 >= limit else "stop") if last else None
            yield FakeEvent(index + 1, text, index, reason)
            index += 1
            self._stats = FakeStats(ttft_s=ttft, decode_tokens=index, kv_tokens_used=index + 8,
                                    decode_tokens_per_s=_rate(index, start + ttft,
                                                              time.perf_counter()))
            if last or self._cancel.is_set():
                return
            if self.token_delay_s:
                self._cancel.wait(self.token_delay_s)

    def cancel(self) -> None:
        self._cancel.set()

    @property
    def stats(self) -> FakeStats:
        return self.pinned_stats or self._stats


def fake_backend(engine: FakeEngine | None = None, name: str = "fake engine") -> LocalBackend:
    """A ready LocalBackend over a FakeEngine; settings pass through as the config."""
    return LocalBackend(engine=engine or FakeEngine(), name=name,
                        config_of=lambda settings: settings)


class SlowBackend(LocalBackend):
    """A FakeEngine that takes until `loaded.set()` to get ready (a model still loading)."""

    def __init__(self, engine: FakeEngine | None = None) -> None:
        super().__init__(engine=engine or FakeEngine(), name="slow fake",
                         config_of=lambda settings: settings)
        self.loaded = threading.Event()

    def prepare(self, progress: Any) -> str:
        progress("reading the weights")
        if not self.loaded.wait(30):
            raise RuntimeError("the test never let the model load")
        return "ready (loaded in a test)"
