"""Server-sent events, parsed line by line (HTML Living Standard, "Parsing an event stream").

Pure: feed it the lines of a `text/event-stream` body; it hands back each complete event.
`pending` tells whether the stream stopped in the middle of an event (data lines seen, no
blank line yet): a stream cut mid-event.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Event:
    """One dispatched event: its type ("message" unless an `event:` field said otherwise)."""

    data: str
    event: str = "message"


@dataclass
class EventParser:
    _data: list[str] = field(default_factory=list)
    _event: str = ""
    _seen_field: bool = False

    def feed(self, line: str) -> Event | None:
        """One line without its line ending; returns the event a blank line completes."""
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            return None  # a comment: keep-alive pings
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        self._seen_field = True
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        return None  # id, retry and unknown fields change nothing we show

    @property
    def pending(self) -> bool:
        """True when fields were read that no blank line has dispatched yet."""
        return self._seen_field

    def _dispatch(self) -> Event | None:
        data, event = self._data, self._event or "message"
        self._data, self._event, self._seen_field = [], "", False
        if not data:
            return None
        return Event("\n".join(data), event)
