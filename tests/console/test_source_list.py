"""The console's telemetry sources as one list (console/sources.py): every source's snapshot
survives the recorder, a recording covers every source, and one more row in the list is all a
new source needs to be sampled, recorded, replayed, kept in the history, judged and drawn."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest
from textual.widgets import Static

from console import recording, sources
from console.history import History
from console.options import ConsoleOptions
from console.recording import Player, Recorder
from console.snapshots import (
    Alert,
    ChipSample,
    EngineSnapshot,
    HostSnapshot,
    NpuSnapshot,
    ProcessSample,
    ServingSnapshot,
    chip_key,
)
from console.source import Columns, Judging, Setup, Shown, Source, as_dict, known_fields
from console.ui.app import ConsoleApp
from console.ui.widgets.feed import FeedView, PanelSetup
from tests.conftest import FakeRoot
from tests.console.fakes import fake_backend
from tests.console.test_app import no_npu_host, wait_for

T0 = 1_700_000_000.0


def _chip(npu_id: int, source: str = "", codes: tuple[str, ...] | None = None) -> ChipSample:
    return ChipSample(npu_id, None if source else 0, "910B4", "OK" if codes is None else "Alarm",
                      44 + npu_id, 92.5, 30, 20_000, 32_768, 12.5,
                      chip_key(npu_id, None if source else 0, source),
                      fault_codes=codes, codes_unread=None)


# a snapshot per kind of source, as each sampler writes it (optional fields set and not)
EXAMPLES: Mapping[type, Sequence[Any]] = {
    NpuSnapshot: (
        NpuSnapshot(T0 + 1, (_chip(0), _chip(1, codes=("0x80E01801",))),
                    (ProcessSample(0, 0, 4242, "python3", 18_000),), True, None, 0.4),
        NpuSnapshot(T0 + 2, (), (), False, "`npu-smi info` timed out after 5 s", 5.0),
        NpuSnapshot(T0 + 3, (_chip(3, "node-2:8082"),), (), False, None, 0.1, "node-2:8082"),
    ),
    HostSnapshot: (
        HostSnapshot(T0 + 4, None, 6144.0, 24576.0, None, None, None),
        HostSnapshot(T0 + 5, 7.5, 6144.0, 24576.0, "/var/log/npu", 51200.0, 102400.0,
                     (3.0, 12.0)),
    ),
    EngineSnapshot: (
        EngineSnapshot(T0 + 6, "cpu", "bfloat16", "qwen3_moe", "off", ("rms_norm",), 0.085,
                       310.0, 42.0, 1 << 20, 41, 256, "paged", 512, "dequant", "2/4"),
    ),
    ServingSnapshot: (
        ServingSnapshot(T0 + 7, "http://127.0.0.1:8000/metrics", "vLLM", None, 0.02,
                        running=2.0, waiting=0.0, kv_cache_usage=0.4, ttft_p50_s=0.1,
                        window_s=30.0, not_exported=("preemptions",),
                        read_from=(("running", "vllm:num_requests_running"),)),
        ServingSnapshot(T0 + 8, "http://127.0.0.1:8000/metrics", "unknown",
                        "connection refused", 0.01, answered=False),
    ),
}


def test_every_source_in_the_list_has_an_example_here() -> None:
    missing = [s.name for s in sources.SOURCES if s.snapshot_type not in EXAMPLES]
    assert missing == [], "add an example snapshot of each new source to EXAMPLES"


@pytest.mark.parametrize("source", sources.SOURCES, ids=lambda s: s.name)
def test_every_source_round_trips_its_snapshot(source: type[Source]) -> None:
    for snapshot in EXAMPLES[source.snapshot_type]:
        doc = json.loads(json.dumps(source.encode(snapshot)))  # what the recorder stores
        assert source.decode(doc, source.columns) == snapshot
        kind, t, payload = recording.encode(snapshot)
        assert (kind, t) == (source.kind, snapshot.taken_at)
        assert recording.decode(kind, payload, {kind: source.columns}) == snapshot


def test_a_recording_written_and_replayed_covers_every_source(tmp_path: Path) -> None:
    types = dict.fromkeys(source.snapshot_type for source in sources.SOURCES)  # NPU: two sources
    written = [s for kind in types for s in EXAMPLES[kind]]
    path = tmp_path / "all.sqlite"
    with Recorder(path, clock=lambda: T0) as recorder:
        recorder.add_many(written)
    player = Player(path, speed=0)
    replayed = list(player.play())
    assert player.skipped_rows == 0
    assert replayed == sorted(written, key=lambda s: s.taken_at)
    assert {sources.for_snapshot(s).kind for s in replayed} == set(sources.kinds())  # type: ignore[union-attr]


# --- one more row -------------------------------------------------------------------------------
# A source written only here: nothing else in the console names it.


@dataclass(frozen=True, slots=True)
class GaugeSnapshot:
    taken_at: float
    level: float | None
    error: str | None = None


class Gauge:
    name: ClassVar[str] = "gauge"
    kind: ClassVar[str] = "gauge"
    snapshot_type: ClassVar[type] = GaugeSnapshot
    columns: ClassVar[Mapping[str, tuple[str, ...]]] = {}
    history_keys: ClassVar[tuple[str, ...]] = ("gauge:level",)
    alert_keys: ClassVar[tuple[str, ...]] = ("gauge:high",)
    panel: ClassVar[str] = f"{__name__}:GaugePanel"
    timed: ClassVar[bool] = True
    feed = ""
    budget_s = 1.0

    def __init__(self, setup: Setup) -> None:
        self.clock = setup.clock

    @classmethod
    def open(cls, setup: Setup) -> Sequence[Source]:
        return [cls(setup)]

    def due(self, now: float) -> bool:
        return True

    def sample(self, deadline: float) -> GaugeSnapshot:
        return GaugeSnapshot(self.clock(), 97.0)

    def aside(self, snapshot: Any) -> Any:
        return None

    @staticmethod
    def feed_of(snapshot: Any) -> str:
        return ""

    @staticmethod
    def encode(snapshot: Any) -> dict[str, Any]:
        return as_dict(snapshot)

    @staticmethod
    def decode(doc: Mapping[str, Any], columns: Columns) -> GaugeSnapshot:
        return GaugeSnapshot(**known_fields(GaugeSnapshot, doc))

    @staticmethod
    def add_history(history: History, snapshot: Any) -> None:
        history.add("gauge:level", snapshot.taken_at, snapshot.level)

    @staticmethod
    def alerts(shown: Sequence[Shown], judging: Judging) -> list[Alert]:
        return [Alert(judging.now, "gauge:high", "warn", "gauge above 90", f"{s.latest.level:g}")
                for s in shown if s.latest is not None and (s.latest.level or 0) > 90]


class GaugePanel(Static):
    @classmethod
    def for_feed(cls, feed: Source, panel_id: str, setup: PanelSetup) -> GaugePanel:
        return cls("waiting for the gauge", id=panel_id)

    def show_feed(self, view: FeedView) -> None:
        if view.latest is not None:
            self.update(f"gauge {view.latest.level:g}")


@pytest.fixture
def with_gauge(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sources, "SOURCES", (*sources.SOURCES, Gauge))


@pytest.mark.usefixtures("with_gauge")
def test_a_new_row_is_recorded_replayed_and_kept_in_the_history(tmp_path: Path) -> None:
    path = tmp_path / "gauge.sqlite"
    with Recorder(path, clock=lambda: T0) as recorder:
        recorder.add(GaugeSnapshot(T0, 42.0))
        recorder.add(GaugeSnapshot(T0 + 1, None, "sensor unplugged"))
    assert list(Player(path, speed=0).play()) == [GaugeSnapshot(T0, 42.0),
                                                  GaugeSnapshot(T0 + 1, None, "sensor unplugged")]
    history = History()
    sources.add_history(history, GaugeSnapshot(T0, 42.0))
    assert history.values("gauge:level") == [42.0]


def test_without_the_row_the_recorder_refuses_the_snapshot() -> None:
    """The test above can fail: the recorder knows a source only through the list."""
    with pytest.raises(TypeError, match="cannot record a GaugeSnapshot"):
        recording.encode(GaugeSnapshot(T0, 1.0))


@pytest.mark.usefixtures("with_gauge")
async def test_a_new_row_is_sampled_drawn_judged_and_recorded_by_the_app(
        fake_root: FakeRoot, tmp_path: Path) -> None:
    path = tmp_path / "live.sqlite"
    options = ConsoleOptions(interval_s=0.2, npu_timeout_s=2.0, log_dir=None, record=path)
    app = ConsoleApp(options, backend=fake_backend(), host=no_npu_host(fake_root))
    async with app.run_test(size=(160, 50)) as pilot:
        await wait_for(pilot, lambda: "gauge:high" in app.telemetry.alert_log.active,
                       what="the gauge's alert")
        assert str(app.query_one("#gauge", GaugePanel).render()) == "gauge 97"
        assert app.telemetry.history.values("gauge:level")
        await app.action_quit()
    kinds = {type(s) for s in Player(path, speed=0).play()}
    assert GaugeSnapshot in kinds and Alert in kinds
