"""The chat engine seen from the console: load and stream in thread workers, never on the UI.

`load_engine` and `stream_reply` are plain functions meant to run inside Textual thread workers
(`@work(thread=True)`); they talk to the app only through `post_message`, which is thread-safe.
Any object with the small `ChatEngine` protocol works: the in-process `engine.Engine`, or
`FakeEngine` (scripted tokens, for tests and demos without weights).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from textual.message import Message

from console.messages import ModelLoaded, ModelUnavailable, ReplyDelta, ReplyFinished
from demo_models import DEFAULT_KIND, KIND_NAMES

DEMO_KIND = DEFAULT_KIND
DEMO_KINDS = (DEFAULT_KIND, *(kind for kind in KIND_NAMES if kind != DEFAULT_KIND))
DEMO_DIR_ENV = "ASCEND_CONSOLE_DEMO_DIR"
REPO_ROOT = Path(__file__).resolve().parent.parent
DELTA_BATCH_S = 0.04  # at most ~25 UI updates a second; Markdown falls behind near 20 appends/s

PostMessage = Callable[[Message], Any]


class TokenEvent(Protocol):
    token_id: int
    text: str


class ChatEngine(Protocol):
    """What the console needs from an engine (engine.Engine has exactly this)."""

    def chat(self, messages: Sequence[Mapping[str, Any]], config: Any) -> Iterator[Any]: ...

    def cancel(self) -> None: ...

    @property
    def stats(self) -> Any: ...

    @property
    def config(self) -> Any: ...


@dataclass(frozen=True)
class ChatSettings:
    """What the settings form edits; converted to the engine's GenerationConfig per reply."""

    system_prompt: str = "You are a helpful assistant. Answer briefly."
    temperature: float = 0.0
    top_p: float = 1.0
    max_new_tokens: int = 256
    seed: int | None = 0

    def problems(self) -> list[str]:
        out = []
        if self.temperature < 0:
            out.append("temperature must be >= 0")
        if not 0 < self.top_p <= 1:
            out.append("top_p must be in (0, 1]")
        if not 1 <= self.max_new_tokens <= 32768:
            out.append("max new tokens must be between 1 and 32768")
        return out

    def messages(self, history: Sequence[Mapping[str, str]]) -> list[dict[str, str]]:
        system = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        return system + [dict(m) for m in history]


@dataclass(frozen=True)
class ReplyStats:
    """Per-reply numbers as the user experienced them (measured around the engine call)."""

    tokens: int = 0
    ttft_s: float | None = None
    tokens_per_s: float | None = None
    elapsed_s: float = 0.0
    finish_reason: str = ""  # "stop" | "length" | "cancelled" | "error"

    def footer(self) -> str:
        parts = [f"TTFT {self.ttft_s * 1000:.0f} ms" if self.ttft_s is not None else "TTFT —",
                 f"{self.tokens_per_s:.1f} tok/s" if self.tokens_per_s is not None else "— tok/s",
                 f"{self.tokens} tokens"]
        if self.finish_reason and self.finish_reason != "stop":
            parts.append(self.finish_reason)
        return " · ".join(parts)


# --- which model ------------------------------------------------------------------------------


def demo_dir(kind: str = DEMO_KIND, env: Mapping[str, str] | None = None) -> Path:
    """Where `make demo` builds the demo model: $ASCEND_CONSOLE_DEMO_DIR or demo-assets/KIND."""
    env = os.environ if env is None else env
    base = env.get(DEMO_DIR_ENV)
    if base:
        path = Path(base)
        # the variable may name the model directory itself or the folder holding the kinds
        return path if (path / "config.json").exists() or path.name == kind else path / kind
    return REPO_ROOT / "demo-assets" / kind


def build_hint(kind: str, path: Path) -> str:
    command = f"python -m demo_models build --out {_shown(path)} --kind {kind}"
    if kind == DEMO_KIND:
        return f"build it with `make demo` or `{command}`"
    return f"build it with `{command}`"


def _shown(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


@dataclass(frozen=True)
class ModelSpec:
    """What to load: a path, and (for demo builds) the kind that would build it."""

    path: Path
    demo_kind: str | None = None
    device: str = "auto"
    dtype: str = "bfloat16"
    max_seq_len: int = 4096
    fp8: str = "dequantize"

    def missing(self) -> ModelUnavailable | None:
        problem = model_problem(self.path)
        if problem is None:
            return None
        if self.demo_kind:
            return ModelUnavailable(f"the {self.demo_kind} demo model is not built "
                                    f"({_shown(self.path)} is missing)",
                                    build_hint(self.demo_kind, self.path))
        return ModelUnavailable(problem,
                                "pass --model DIR (a Hugging Face directory) or "
                                "--demo-model KIND")


def model_problem(path: Path) -> str | None:
    """Why `path` is no model to load, decided as the engine decides it (one Host question)."""
    from probes.checkpoint import locate_model
    from probes.live import LiveHost

    return locate_model(LiveHost(root="/", env={}), str(path.absolute())).problem


def load_engine(spec: ModelSpec, post: PostMessage) -> None:
    """Engine.load in this (worker) thread; posts ModelLoaded or ModelUnavailable."""
    problem = spec.missing()
    if problem is not None:
        post(problem)
        return
    start = time.perf_counter()
    try:
        from engine import Engine

        eng = Engine.load(spec.path, device=spec.device, dtype=spec.dtype,
                          max_seq_len=spec.max_seq_len, fp8=spec.fp8)
    except Exception as exc:  # any load failure is shown in the chat pane, never a crash
        post(ModelUnavailable(f"{spec.path}: the model failed to load "
                              f"({type(exc).__name__}: {exc})",
                              "run `ascend-doctor --model " + str(spec.path) + "` to see why"))
        return
    post(ModelLoaded(eng, str(spec.path), time.perf_counter() - start))


def generation_config(settings: ChatSettings) -> Any:
    from engine import GenerationConfig

    return GenerationConfig(max_new_tokens=settings.max_new_tokens,
                            temperature=settings.temperature, top_p=settings.top_p,
                            seed=settings.seed)


# --- one reply --------------------------------------------------------------------------------


class Stopper:
    """Cancel flag for one reply: set from the UI, read by the worker between tokens."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def set(self) -> None:
        self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()


def stream_reply(engine: ChatEngine, messages: Sequence[Mapping[str, str]], config: Any,
                 reply_id: int, post: PostMessage, stopper: Stopper,
                 clock: Callable[[], float] = time.perf_counter) -> ReplyStats:
    """Iterate engine.chat in this (worker) thread, posting batched ReplyDelta messages.

    Ends with exactly one ReplyFinished. Stopping: `stopper` is checked between tokens (so a
    cancel that arrives before the engine started its loop is not lost) and the caller also
    calls engine.cancel() to stop a long decode step sooner."""
    start = clock()
    tokens, first_at, last_at, pending, posted_at = 0, None, start, [], 0.0
    finish, error = "stop", ""
    try:
        events: Iterable[Any] = engine.chat(messages, config)
        for event in events:
            now = clock()
            tokens += 1
            first_at = now if first_at is None else first_at
            last_at = now
            if event.text:
                pending.append(event.text)
            if pending and (tokens == 1 or now - posted_at >= DELTA_BATCH_S):
                post(ReplyDelta(reply_id, "".join(pending), tokens))
                pending, posted_at = [], now
            reason = getattr(event, "finish_reason", None)
            if reason:
                finish = str(reason)
            if stopper.is_set():
                finish = "cancelled"
                break
        else:
            if stopper.is_set():
                finish = "cancelled"
    except Exception as exc:  # the engine's error is shown on the reply; the app keeps running
        finish, error = "error", f"{type(exc).__name__}: {exc}"
    if pending:
        post(ReplyDelta(reply_id, "".join(pending), tokens))
    stats = ReplyStats(tokens=tokens, ttft_s=None if first_at is None else first_at - start,
                       tokens_per_s=_rate(tokens, first_at, last_at),
                       elapsed_s=clock() - start, finish_reason=finish)
    post(ReplyFinished(reply_id, stats, error))
    return stats


def _rate(tokens: int, first_at: float | None, last_at: float) -> float | None:
    """Decode speed: tokens after the first over the time after the first."""
    if first_at is None or tokens < 2 or last_at <= first_at:
        return None
    return (tokens - 1) / (last_at - first_at)


# --- the fake engine --------------------------------------------------------------------------


@dataclass(frozen=True)
class FakeEvent:
    token_id: int
    text: str
    index: int
    finish_reason: str | None = None


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
