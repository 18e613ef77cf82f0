"""What the chat pane talks to: one interface over the in-process engine and an HTTP endpoint.

A backend is prepared once (the engine loads, the endpoint lists its models) and then streams
replies. Every call but `cancel()` blocks and runs in a worker thread; `cancel()` is called from
the UI thread and makes the running `stream()` end soon. Nothing here imports textual or torch.

    BackendUnavailable   prepare() could not make the backend ready (reason + what to do)
    BackendError         one reply failed (HTTP error, malformed stream, engine error)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from console.snapshots import EngineSnapshot

Progress = Callable[[str], None]  # "reading the weights", shown with the elapsed time


class BackendUnavailable(Exception):
    """The backend cannot chat: `reason` says what is wrong, `remedy` what to type to fix it."""

    def __init__(self, reason: str, remedy: str = "", transient: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.remedy = remedy
        self.transient = transient  # True: the same call may work later (a server coming up)


class BackendError(Exception):
    """One reply failed; the message is one line for the chat."""


@dataclass(frozen=True, slots=True)
class ReplyChunk:
    """Newly completed reply text; `tokens` it stands for; `finish_reason` on the last one.

    `reported_tokens` is the server's own count of the reply's tokens (OpenAI `usage`), when
    it sent one."""

    text: str
    tokens: int = 1
    finish_reason: str | None = None
    reported_tokens: int | None = None


@dataclass(frozen=True)
class ChatSettings:
    """What the settings form edits; each backend turns it into its own request."""

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


class ChatBackend(Protocol):
    """The in-process engine (`console.chat.local`) or an OpenAI-compatible endpoint
    (`console.chat.openai`)."""

    @property
    def label(self) -> str:
        """What the console calls it: the model, and where it runs."""
        ...

    def prepare(self, progress: Progress) -> str:
        """Make the backend ready (blocking); returns one line for the status (e.g. "loaded in
        3.1 s"); raises BackendUnavailable."""
        ...

    def stream(self, messages: Sequence[Mapping[str, str]],
               settings: ChatSettings) -> Iterator[ReplyChunk]:
        """The reply to `messages`, chunk by chunk (blocking); raises BackendError."""
        ...

    def cancel(self) -> None:
        """Stop the running stream soon (thread-safe)."""
        ...

    def engine_snapshot(self, taken_at: float) -> EngineSnapshot | None:
        """The engine panel's numbers, where the backend has an engine in this process."""
        ...
