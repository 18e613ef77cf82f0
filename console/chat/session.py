"""One chat session without a screen: the conversation, the reply in flight, and what was
typed before the backend was ready (queued, sent in order once it is).

Pure state, driven from the UI thread; the UI renders what it says.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from console.chat.backend import ChatSettings
from console.chat.reply import ReplyStats

State = Literal["preparing", "ready", "unavailable"]
QUEUED_NOTE = "model still loading — sent when ready"
TRANSCRIPT_FORMAT = "ascend-console-transcript/1"


@dataclass(frozen=True, slots=True)
class Prompt:
    """A user message waiting for (or getting) its reply; `turn_id` names its place on screen."""

    turn_id: int
    text: str
    settings: ChatSettings


@dataclass
class ChatSession:
    """The conversation as sent to the backend, and the prompts not answered yet."""

    state: State = "preparing"
    history: list[dict[str, str]] = field(default_factory=list)
    replies: list[dict[str, Any]] = field(default_factory=list)  # footers, for the transcript
    queue: deque[Prompt] = field(default_factory=deque)
    in_flight: Prompt | None = None
    _next_id: int = 1

    def submit(self, text: str, settings: ChatSettings) -> tuple[str, Prompt | None]:
        """What to do with a prompt the user sent: ("send", p), ("queued", p), ("busy", None)
        or ("unavailable", None)."""
        if self.state == "unavailable":
            return "unavailable", None
        if self.in_flight is not None:
            return "busy", None
        prompt = Prompt(self._new_id(), text, settings)
        if self.state == "preparing" or self.queue:
            self.queue.append(prompt)
            return "queued", prompt
        return "send", prompt

    def start(self, prompt: Prompt) -> list[dict[str, str]]:
        """Mark `prompt` in flight; returns the messages to send (system, history, it)."""
        self.in_flight = prompt
        return prompt.settings.messages([*self.history, {"role": "user", "content": prompt.text}])

    def next_queued(self) -> Prompt | None:
        """The next queued prompt to send, once ready and idle."""
        if self.state != "ready" or self.in_flight is not None or not self.queue:
            return None
        return self.queue.popleft()

    def finish(self, reply_text: str, stats: ReplyStats, error: str = "") -> Prompt | None:
        """Record the in-flight reply; returns its prompt (None when nothing was in flight).
        A failed reply is not history: its prompt can be sent again."""
        prompt, self.in_flight = self.in_flight, None
        if prompt is None or error:
            return prompt
        self.history += [{"role": "user", "content": prompt.text},
                         {"role": "assistant", "content": reply_text}]
        self.replies.append({"reply_id": prompt.turn_id, **asdict(stats)})
        return prompt

    def last_reply(self) -> str | None:
        return next((m["content"] for m in reversed(self.history)
                     if m["role"] == "assistant"), None)

    def _new_id(self) -> int:
        self._next_id += 1
        return self._next_id - 1

    # --- transcript ---------------------------------------------------------------------------

    def transcript_markdown(self, model: str, settings: ChatSettings | None) -> str:
        lines = ["# ascend-console transcript", "", f"- model: {model}",
                 f"- saved: {dt.datetime.now().astimezone().isoformat(timespec='seconds')}", ""]
        if settings is not None and settings.system_prompt:
            lines += ["## system", "", settings.system_prompt, ""]
        footers = iter(self.replies)
        for message in self.history:
            lines += [f"## {message['role']}", "", message["content"].rstrip(), ""]
            if message["role"] == "assistant":
                footer = next(footers, None)
                if footer is not None:
                    stats = ReplyStats(**{k: v for k, v in footer.items() if k != "reply_id"})
                    lines += [f"*{stats.footer()}*", ""]
        return "\n".join(lines)

    def save_transcript(self, directory: Path, model: str,
                        settings: ChatSettings | None) -> tuple[Path, Path]:
        """Write <stamp>.md (for people) and <stamp>.json (for programs); returns both paths."""
        directory.mkdir(parents=True, exist_ok=True)
        stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        md_path = directory / f"ascend-console-{stamp}.md"
        json_path = md_path.with_suffix(".json")
        document = {"format": TRANSCRIPT_FORMAT, "model": model,
                    "settings": asdict(settings) if settings is not None else None,
                    "messages": self.history, "replies": self.replies}
        md_path.write_text(self.transcript_markdown(model, settings), encoding="utf-8")
        json_path.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n",
                             encoding="utf-8")
        return md_path, json_path
