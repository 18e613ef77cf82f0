"""The in-process engine as a chat backend: which model, loading it, streaming from it.

torch is imported only inside `prepare()` (in the worker thread), so the console starts, and
its headless layer imports, without it.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from console.chat.backend import BackendUnavailable, ChatSettings, Progress, ReplyChunk
from console.snapshots import EngineSnapshot
from demo_models import COMMAND, DEFAULT_KIND, KIND_NAMES

DEMO_KIND = DEFAULT_KIND
DEMO_KINDS = (DEFAULT_KIND, *(kind for kind in KIND_NAMES if kind != DEFAULT_KIND))
DEMO_DIR_ENV = "ASCEND_CONSOLE_DEMO_DIR"
REPO_ROOT = Path(__file__).resolve().parents[2]


class ChatEngine(Protocol):
    """What the console needs from an engine (`engine.Engine` has exactly this)."""

    def chat(self, messages: Sequence[Mapping[str, Any]], config: Any) -> Iterator[Any]: ...

    def cancel(self) -> None: ...

    @property
    def stats(self) -> Any: ...

    @property
    def config(self) -> Any: ...


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
    command = f"{COMMAND} build --out {_shown(path)} --kind {kind}"
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

    @property
    def name(self) -> str:
        return self.demo_kind or self.path.name

    def missing(self) -> BackendUnavailable | None:
        problem = model_problem(self.path)
        if problem is None:
            return None
        if self.demo_kind:
            return BackendUnavailable(f"the {self.demo_kind} demo model is not built "
                                      f"({_shown(self.path)} is missing)",
                                      build_hint(self.demo_kind, self.path))
        return BackendUnavailable(problem, "pass --model DIR (a Hugging Face directory) or "
                                  "--demo-model KIND")


def model_problem(path: Path) -> str | None:
    """Why `path` is no model to load, decided as the engine decides it (one Host question)."""
    from probes.live import local_files
    from probes.model.reader import locate_model

    return locate_model(local_files(), str(path.absolute())).problem


def load_engine(spec: ModelSpec, progress: Progress) -> ChatEngine:
    """Engine.load in this (worker) thread; raises BackendUnavailable with what to do."""
    problem = spec.missing()
    if problem is not None:
        raise problem
    try:
        progress("importing torch")
        from engine import Engine

        progress("reading the weights")
        engine: ChatEngine = Engine.load(spec.path, device=spec.device, dtype=spec.dtype,
                                         max_seq_len=spec.max_seq_len, fp8=spec.fp8)
    except Exception as exc:  # any load failure is shown in the chat pane, never a crash
        raise BackendUnavailable(f"{spec.path}: the model failed to load "
                                 f"({type(exc).__name__}: {exc})",
                                 f"run `ascend-doctor --model {spec.path}` to see why") from None
    return engine


def generation_config(settings: ChatSettings) -> Any:
    from engine import GenerationConfig

    return GenerationConfig(max_new_tokens=settings.max_new_tokens,
                            temperature=settings.temperature, top_p=settings.top_p,
                            seed=settings.seed)


class LocalBackend:
    """A model in this process: loaded from `spec` by prepare(), or an engine handed in."""

    def __init__(self, spec: ModelSpec | None = None, *, engine: ChatEngine | None = None,
                 name: str | None = None,
                 config_of: Callable[[ChatSettings], Any] = generation_config,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        if spec is None and engine is None:
            raise ValueError("LocalBackend needs a ModelSpec or an engine")
        self.spec = spec
        self.engine = engine
        self._name = name or (spec.name if spec is not None else "engine")
        self._config_of = config_of
        self._clock = clock
        self._lock = threading.Lock()

    @property
    def label(self) -> str:
        return self._name

    def prepare(self, progress: Progress) -> str:
        if self.engine is not None:
            return "ready"
        assert self.spec is not None
        started = self._clock()
        engine = load_engine(self.spec, progress)
        with self._lock:
            self.engine = engine
        return f"ready (loaded in {self._clock() - started:.1f} s)"

    def stream(self, messages: Sequence[Mapping[str, str]],
               settings: ChatSettings) -> Iterator[ReplyChunk]:
        engine = self._ready()
        config = self._config_of(settings)
        for event in engine.chat(messages, config):
            yield ReplyChunk(event.text, 1, getattr(event, "finish_reason", None) or None)

    def cancel(self) -> None:
        with self._lock:
            engine = self.engine
        if engine is not None:
            engine.cancel()

    def engine_snapshot(self, taken_at: float) -> EngineSnapshot | None:
        with self._lock:
            engine = self.engine
        if engine is None:
            return None
        try:
            return EngineSnapshot.from_stats(engine.stats, engine.config, taken_at)
        except Exception:  # an engine without stats still chats; the panel says so
            return None

    def _ready(self) -> ChatEngine:
        with self._lock:
            engine = self.engine
        if engine is None:
            raise RuntimeError("the model is not loaded yet")
        return engine
