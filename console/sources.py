"""The console's telemetry sources, as one list (`SOURCES`); each row is a `console.source.Source`.

The list's order is the panels' order from the top (the pressure panel follows the NPU panels)
and the order the alert rules run in. A new panel is a source class here, a widget that shows
its snapshot, and a row in `SOURCES` (docs/contributing.md, "A new telemetry panel").
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from console import alerts, exporter, pressure, serving, telemetry
from console.snapshots import (
    ChipSample,
    EngineSnapshot,
    HostSnapshot,
    NpuSnapshot,
    ProcessSample,
    ServingSnapshot,
    chip_key,
)
from console.source import Columns, Judging, Setup, Shown, Source, as_dict, known_fields, texts

if TYPE_CHECKING:
    from console.history import History
    from console.snapshots import Alert

CHIP_COLUMNS = tuple(f.name for f in dataclasses.fields(ChipSample))
PROCESS_COLUMNS = tuple(f.name for f in dataclasses.fields(ProcessSample))
# the series the panels draw: "<kind>:<snapshot field>"
GENERATION_HISTORY_KEY = "serving:generation_tokens_per_s"
DECODE_HISTORY_KEY = "engine:decode_tokens_per_s"
PREFILL_HISTORY_KEY = "engine:prefill_tokens_per_s"


def chip_history_key(key: str, metric: str) -> str:
    """A chip's series: "0/1:temperature_c" (the chip key, see snapshots.chip_key)."""
    return f"{key}:{metric}"


def temperature_history_key(key: str) -> str:
    return chip_history_key(key, "temperature_c")


def hbm_history_key(key: str) -> str:
    return chip_history_key(key, "hbm_used_mb")


def http_timeout_s(interval_s: float) -> float:
    """The HTTP sources' time budget per scrape: project default, 2.5 intervals in 1..10 s."""
    return max(1.0, min(10.0, 2.5 * interval_s))


def _add_fields(history: History, keys: Sequence[str], snapshot: Any) -> None:
    """Keys "<kind>:<field>": the snapshot's field at its time."""
    for key in keys:
        history.add(key, snapshot.taken_at, getattr(snapshot, key.split(":", 1)[1]))


class _Feed:
    """The defaults: one feed, sampled by every timer tick, nothing read beside the snapshot,
    recorded field by field, its history_keys kept as history."""

    timed: ClassVar[bool] = True
    feed = ""

    def due(self, now: float) -> bool:
        return True

    def aside(self, snapshot: Any) -> Any:
        return None

    @staticmethod
    def feed_of(snapshot: Any) -> str:
        return ""

    @staticmethod
    def encode(snapshot: Any) -> dict[str, Any]:
        """A flat snapshot's fields as they are."""
        return as_dict(snapshot)

    @classmethod
    def add_history(cls, history: History, snapshot: Any) -> None:
        """The snapshot's fields named in history_keys."""
        _add_fields(history, getattr(cls, "history_keys", ()), snapshot)


# ---------------------------------------------------------------------------------------------
# NPU: this machine's npu-smi, or NPU-Exporters (one feed per host); one kind, one codec


class _Npu(_Feed):
    kind: ClassVar[str] = "npu"
    snapshot_type: ClassVar[type] = NpuSnapshot
    columns: ClassVar[Mapping[str, tuple[str, ...]]] = {"chip": CHIP_COLUMNS,
                                                        "process": PROCESS_COLUMNS}
    history_keys: ClassVar[tuple[str, ...]] = ("{chip}:temperature_c", "{chip}:hbm_used_mb")
    alert_keys: ClassVar[tuple[str, ...]] = ("temperature:", "hbm:", "health:", "stale:npu",
                                             "exporter:down:")
    panel: ClassVar[str] = "console.ui.widgets.npu:NpuPanel"

    @staticmethod
    def feed_of(snapshot: Any) -> str:
        return str(snapshot.source)

    @staticmethod
    def encode(snapshot: Any) -> dict[str, Any]:
        """Chips and processes as rows of values (column names once, in the recording's meta)."""
        return {
            "taken_at": snapshot.taken_at,
            "chips": [[getattr(c, n) for n in CHIP_COLUMNS] for c in snapshot.chips],
            "processes": [[getattr(p, n) for n in PROCESS_COLUMNS] for p in snapshot.processes],
            "processes_known": snapshot.processes_known,
            "error": snapshot.error,
            "sample_duration_s": snapshot.sample_duration_s,
            "source": snapshot.source,
        }

    @staticmethod
    def decode(doc: Mapping[str, Any], columns: Columns) -> NpuSnapshot:
        chip_cols = columns.get("chip", CHIP_COLUMNS)
        proc_cols = columns.get("process", PROCESS_COLUMNS)
        chips = tuple(_chip(dict(zip(chip_cols, row, strict=False)))
                      for row in doc.get("chips", []))
        processes = tuple(
            ProcessSample(**known_fields(ProcessSample, dict(zip(proc_cols, row, strict=False))))
            for row in doc.get("processes", []))
        return NpuSnapshot(
            taken_at=float(doc["taken_at"]),
            chips=chips,
            processes=processes,
            processes_known=bool(doc.get("processes_known", False)),
            error=doc.get("error"),
            sample_duration_s=float(doc.get("sample_duration_s", 0.0)),
            source=str(doc.get("source") or ""),
        )

    @staticmethod
    def add_history(history: History, snapshot: Any) -> None:
        for chip in snapshot.chips:
            history.add(temperature_history_key(chip.key), snapshot.taken_at, chip.temperature_c)
            history.add(hbm_history_key(chip.key), snapshot.taken_at, chip.hbm_used_mb)

    @staticmethod
    def alerts(shown: Sequence[Shown], judging: Judging) -> list[Alert]:
        """Each feed's chips and staleness (the last good snapshot on screen), and each
        exporter whose last scrape failed."""
        j = judging
        out: list[Alert] = []
        for feed in shown:
            if feed.last_good is not None:
                out += alerts.evaluate(feed.last_good, None, j.policy, j.now, j.stale_after_s,
                                       None)
        latest = [feed.latest for feed in shown if feed.latest is not None]
        return out + alerts.exporter_alerts(latest, j.now)


def _chip(values: dict[str, Any]) -> ChipSample:
    fields = known_fields(ChipSample, values)
    fields.setdefault("key", chip_key(int(fields["npu_id"]), fields.get("chip_id")))
    if isinstance(fields.get("fault_codes"), list):  # JSON has no tuples
        fields["fault_codes"] = tuple(fields["fault_codes"])
    return ChipSample(**fields)


class LocalNpu(_Npu):
    """This machine's npu-smi (when no --npu-exporter is given)."""

    name: ClassVar[str] = "npu-smi"

    def __init__(self, setup: Setup) -> None:
        self.setup = setup
        self.budget_s = setup.options.npu_timeout_s
        self._causes = pressure.CauseReader(setup.host)

    @classmethod
    def open(cls, setup: Setup) -> Sequence[Source]:
        return [] if setup.options.npu_exporters else [cls(setup)]

    def sample(self, deadline: float) -> NpuSnapshot:
        # to the hundredth: the budget as given shows in a timeout's message ("after 5 s")
        timeout_s = round(max(0.0, deadline - time.monotonic()), 2)
        return telemetry.sample_npu(self.setup.host, timeout_s, self.setup.clock)

    def aside(self, snapshot: Any) -> pressure.ZeroCauses:
        return self._causes.read(snapshot)


class NpuExporter(_Npu):
    """One Huawei NPU-Exporter per --npu-exporter URL; the feed is its host:port."""

    name: ClassVar[str] = "npu-exporter"

    def __init__(self, setup: Setup, url: str) -> None:
        self.setup = setup
        self.feed = exporter.host_label(url)
        self.url = exporter.metrics_url(url)
        self.budget_s = http_timeout_s(setup.options.interval_s)

    @classmethod
    def open(cls, setup: Setup) -> Sequence[Source]:
        return [cls(setup, url) for url in setup.options.npu_exporters]

    def sample(self, deadline: float) -> NpuSnapshot:
        return exporter.sample_exporter(self.setup.http(), self.url, self.setup.clock)


# ---------------------------------------------------------------------------------------------
# the serving endpoint's /metrics


class ServingEndpoint(_Feed):
    name: ClassVar[str] = "serving"
    kind: ClassVar[str] = "serving"
    snapshot_type: ClassVar[type] = ServingSnapshot
    columns: ClassVar[Mapping[str, tuple[str, ...]]] = {}
    history_keys: ClassVar[tuple[str, ...]] = (GENERATION_HISTORY_KEY, "serving:kv_cache_usage")
    alert_keys: ClassVar[tuple[str, ...]] = ("serving:",)
    panel: ClassVar[str] = "console.ui.widgets.serving:ServingPanel"

    def __init__(self, setup: Setup, url: str) -> None:
        self.setup = setup
        self.budget_s = http_timeout_s(setup.options.interval_s)
        self.tracker = serving.ServingTracker(url, max(10.0, 5 * setup.options.interval_s))

    @classmethod
    def open(cls, setup: Setup) -> Sequence[Source]:
        url = setup.options.serving_metrics_url
        return [cls(setup, url)] if url else []

    def due(self, now: float) -> bool:
        return self.tracker.due(now)

    def sample(self, deadline: float) -> ServingSnapshot:
        return serving.sample(self.setup.http(), self.tracker, self.setup.clock)

    @staticmethod
    def decode(doc: Mapping[str, Any], columns: Columns) -> ServingSnapshot:
        fields = known_fields(ServingSnapshot, doc)
        fields["not_exported"] = texts(fields.get("not_exported"))
        fields["read_from"] = tuple(tuple(p) for p in fields.get("read_from") or ())
        return ServingSnapshot(**fields)

    @staticmethod
    def alerts(shown: Sequence[Shown], judging: Judging) -> list[Alert]:
        """Down or restarted; queue and KV cache while it answers."""
        out: list[Alert] = []
        for snapshot in (feed.latest for feed in shown if feed.latest is not None):
            out += alerts.endpoint_alerts(snapshot, judging.now)
            if snapshot.ok:
                out += alerts.serving_alerts(snapshot, judging.policy, judging.now)
        return out


# ---------------------------------------------------------------------------------------------
# the in-process engine (sampled when a reply ends, not by the timer)


class Engine(_Feed):
    name: ClassVar[str] = "engine"
    kind: ClassVar[str] = "engine"
    snapshot_type: ClassVar[type] = EngineSnapshot
    columns: ClassVar[Mapping[str, tuple[str, ...]]] = {}
    history_keys: ClassVar[tuple[str, ...]] = (DECODE_HISTORY_KEY, PREFILL_HISTORY_KEY,
                                               "engine:ttft_s")
    alert_keys: ClassVar[tuple[str, ...]] = ("decode_drop",)
    panel: ClassVar[str] = "console.ui.widgets.engine_panel:EnginePanel"
    timed: ClassVar[bool] = False
    budget_s = 0.0  # read from memory on the UI thread

    def __init__(self, setup: Setup) -> None:
        self.setup = setup

    @classmethod
    def open(cls, setup: Setup) -> Sequence[Source]:
        return [cls(setup)]

    def due(self, now: float) -> bool:
        return False

    def sample(self, deadline: float) -> EngineSnapshot | None:
        """None: no engine in this process (no model, or one behind --endpoint)."""
        backend = self.setup.backend()
        return None if backend is None else backend.engine_snapshot(self.setup.clock())

    @staticmethod
    def decode(doc: Mapping[str, Any], columns: Columns) -> EngineSnapshot:
        fields = known_fields(EngineSnapshot, doc)
        fields["fused_ops"] = texts(fields.get("fused_ops"))
        return EngineSnapshot(**fields)

    @staticmethod
    def alerts(shown: Sequence[Shown], judging: Judging) -> list[Alert]:
        """Decode speed against the best seen this session."""
        j = judging
        return [a for feed in shown if feed.latest is not None
                for a in alerts.decode_alerts(feed.latest, j.policy, j.now,
                                              j.decode_baseline_tokens_per_s)]


# ---------------------------------------------------------------------------------------------
# this machine: CPU, memory, the log directory's disk (psutil)


class HostMachine(_Feed):
    name: ClassVar[str] = "host"
    kind: ClassVar[str] = "host"
    snapshot_type: ClassVar[type] = HostSnapshot
    columns: ClassVar[Mapping[str, tuple[str, ...]]] = {}
    history_keys: ClassVar[tuple[str, ...]] = ("host:cpu_percent", "host:mem_used_mb")
    alert_keys: ClassVar[tuple[str, ...]] = ()
    panel: ClassVar[str] = "console.ui.widgets.host:HostPanel"
    budget_s = 1.0  # psutil reads /proc: no wait

    def __init__(self, setup: Setup) -> None:
        self.setup = setup

    @classmethod
    def open(cls, setup: Setup) -> Sequence[Source]:
        return [cls(setup)]

    def sample(self, deadline: float) -> HostSnapshot:
        return telemetry.sample_host(self.setup.log_dir(), self.setup.clock)

    @staticmethod
    def decode(doc: Mapping[str, Any], columns: Columns) -> HostSnapshot:
        fields = known_fields(HostSnapshot, doc)
        cores = fields.get("cpu_cores_percent")
        fields["cpu_cores_percent"] = (tuple(float(c) for c in cores)
                                       if isinstance(cores, list) else ())
        return HostSnapshot(**fields)

    @staticmethod
    def alerts(shown: Sequence[Shown], judging: Judging) -> list[Alert]:
        return []


# the one list: panels top to bottom, alert rules in this order
SOURCES: tuple[type[Source], ...] = (ServingEndpoint, LocalNpu, NpuExporter, Engine, HostMachine)


def open_all(setup: Setup) -> list[Source]:
    """Every feed this session samples, in the list's order."""
    return [feed for source in SOURCES for feed in source.open(setup)]


def for_kind(kind: str) -> type[Source] | None:
    """The (first) source whose rows are recorded as `kind`."""
    return next((s for s in SOURCES if s.kind == kind), None)


def for_snapshot(snapshot: object) -> type[Source] | None:
    """The (first) source whose snapshots are of this type."""
    return next((s for s in SOURCES if type(snapshot) is s.snapshot_type), None)


def kinds() -> list[str]:
    """Each kind once, in the list's order."""
    return list(dict.fromkeys(s.kind for s in SOURCES))


def judge(shown: Mapping[str, Sequence[Shown]], judging: Judging) -> list[Alert]:
    """Every source's alert rules over its feeds (`shown`, by kind), in the list's order."""
    out: list[Alert] = []
    for kind in kinds():
        source = for_kind(kind)
        if source is not None:
            out += source.alerts(shown.get(kind, ()), judging)
    return out


def add_history(history: History, snapshot: object) -> None:
    """The snapshot's points, by the source it belongs to."""
    source = for_snapshot(snapshot)
    if source is not None:
        source.add_history(history, snapshot)
