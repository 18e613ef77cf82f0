"""What a telemetry source is: one kind of sample the console reads, records, keeps a history
of and judges. `console/sources.py` holds the one list of them; the telemetry controller, the
recorder and the panels' layout loop over that list and name no source.

A source class describes its kind (codec, history keys, alert rules, panel); its instances are
the feeds one session samples (`open`): none, one, or one per NPU-Exporter. Nothing here
imports textual: the panel is named by a "module:Class" string that only the UI resolves.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

if TYPE_CHECKING:
    import httpx

    from checks.policy import Policy
    from console.chat.backend import ChatBackend
    from console.history import History
    from console.options import ConsoleOptions
    from console.snapshots import Alert
    from probes.host import Host

# a recording's column names per row table of a kind ("chip" -> ChipSample's fields), so an
# older file with fewer columns still replays
Columns = Mapping[str, Sequence[str]]


@dataclass(frozen=True)
class Setup:
    """What one console session gives its sources to sample with."""

    options: ConsoleOptions
    host: Host
    clock: Callable[[], float]
    http: Callable[[], httpx.Client]  # the session's one HTTP client, made on first use
    log_dir: Callable[[], str | None]  # the disk the host source measures (moves to the target's)
    backend: Callable[[], ChatBackend | None]  # the chat backend (the engine source's numbers)


@dataclass(frozen=True)
class Shown:
    """One feed as the console holds it: the latest snapshot, and the last one that read."""

    latest: Any
    last_good: Any


@dataclass(frozen=True)
class Judging:
    """What the alert rules need beside the snapshots."""

    policy: Policy
    now: float
    stale_after_s: float
    decode_baseline_tokens_per_s: float | None


class Source(Protocol):
    """One telemetry source. Class attributes describe the kind; an instance is one feed."""

    name: ClassVar[str]  # unique in the list: "npu-smi", "npu-exporter", "host", ...
    kind: ClassVar[str]  # the recording's row kind; sources of one kind share codec and rules
    snapshot_type: ClassVar[type]
    columns: ClassVar[Mapping[str, tuple[str, ...]]]  # row tables the codec writes as lists
    history_keys: ClassVar[tuple[str, ...]]  # the series it feeds ("{chip}" = a chip's key)
    alert_keys: ClassVar[tuple[str, ...]]  # the alert keys it raises and clears (prefixes)
    panel: ClassVar[str]  # "module:Class" of the widget that shows a feed
    timed: ClassVar[bool]  # sampled by the console's timer (else on an event: a reply's end)

    feed: str  # which feed of the source: "" for the only one, an exporter's host:port
    budget_s: float  # the time one sample may take (the deadline the controller gives)

    @classmethod
    def open(cls, setup: Setup) -> Sequence[Source]:
        """The feeds this session samples (none when its option is not given)."""
        ...

    def due(self, now: float) -> bool:
        """Whether a timer tick at `now` should sample this feed."""
        ...

    def sample(self, deadline: float) -> Any:
        """A frozen snapshot, by `deadline` (time.monotonic()); a failure is in the snapshot.
        Runs in a worker thread for a timed source."""
        ...

    def aside(self, snapshot: Any) -> Any:
        """What the sampled machine shows beside the snapshot (the pressure panel's causes of
        zero readings), read in the same worker; None where not knowable."""
        ...

    @staticmethod
    def feed_of(snapshot: Any) -> str:
        """The feed a snapshot came from (a replayed one included)."""
        ...

    @staticmethod
    def encode(snapshot: Any) -> dict[str, Any]:
        """A JSON-able dict of the snapshot (the recorder's payload)."""
        ...

    @staticmethod
    def decode(doc: Mapping[str, Any], columns: Columns) -> Any:
        """The snapshot of a recorded payload; raises ValueError/TypeError/KeyError on a bad one."""
        ...

    @staticmethod
    def add_history(history: History, snapshot: Any) -> None:
        """Append the snapshot's points to the series in `history_keys`."""
        ...

    @staticmethod
    def alerts(shown: Sequence[Shown], judging: Judging) -> list[Alert]:
        """Every condition of this kind that holds now, over all its feeds on screen."""
        ...


def known_fields(cls: type, values: Mapping[str, Any]) -> dict[str, Any]:
    """Fields of `cls` from `values`: unknown ones dropped, missing ones None (newer files)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name in values:
            out[f.name] = values[f.name]
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            out[f.name] = None
    return out


def as_dict(snapshot: Any) -> dict[str, Any]:
    """A flat snapshot's fields as JSON-able values (tuples become lists in JSON)."""
    return dataclasses.asdict(snapshot)


def texts(value: Any) -> tuple[str, ...]:
    """A recorded list of texts as the tuple the snapshot holds."""
    return tuple(value or ())
