"""The panels' controller: samples every feed of the sources in console/sources.py in worker
threads, keeps their state, history and alerts, records them, and redraws their panels. It names
no source: it loops over the list.

Workers return nothing to widgets: they post `Sampled` with an immutable snapshot, and the app
hands it to `take` here, on the UI thread.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from contextlib import suppress
from typing import TYPE_CHECKING, Any

from textual.css.query import NoMatches

from console import pressure, sources, telemetry
from console.alerts import AlertLog
from console.chat.backend import ChatBackend
from console.chat.reply import ReplyStats
from console.history import History
from console.snapshots import Alert, NpuSnapshot
from console.source import Judging, Setup, Shown, Source
from console.ui import safe
from console.ui.messages import Sampled
from console.ui.panels import panel_id
from console.ui.widgets.alerts import AlertsPanel
from console.ui.widgets.feed import FeedPanel, FeedView
from console.ui.widgets.pressure import PressurePanel
from console.ui.wiring import Wiring
from probes import http

if TYPE_CHECKING:
    import httpx

    from console.msprof import OpConflict
    from probes.host import Host

FeedKey = tuple[str, str]  # (kind, feed): a feed of the list, or one a recording holds


class TelemetryController:
    def __init__(self, wiring: Wiring, host: Host, conflicts: list[OpConflict] | None,
                 record: Callable[[Any], None],
                 backend: Callable[[], ChatBackend | None] = lambda: None) -> None:
        self.w, self.app = wiring, wiring.app
        self.conflicts, self.record = conflicts, record
        options, policy = wiring.options, wiring.policy
        # the disk the host panel watches: the target's log directory, once it is known
        self.log_dir = options.log_dir
        self.history = History()
        self.stale_after_intervals = float(policy.get("console", "stale_after_intervals"))
        self.stale_after_s = self.stale_after_intervals * options.interval_s
        self.alert_log = AlertLog()
        self.pressure_limits = pressure.pressure_limits(policy)
        self.best_decode_tokens_per_s: float | None = None
        self.replay_time: float | None = None
        self._http: httpx.Client | None = None
        setup = Setup(options, host, wiring.clock, self._client, lambda: self.log_dir, backend)
        self.feeds = sources.open_all(setup)
        self.states: dict[FeedKey, telemetry.Sampler] = {}
        self.asides: dict[FeedKey, Any] = {}  # per feed, from its last sample
        self.panel_ids: dict[FeedKey, str] = {}
        for feed in self.feeds:
            key = (feed.kind, feed.feed)
            self.panel_ids[key] = panel_id(feed.kind, sum(k == feed.kind for k, _ in self.states))
            self._state(key)

    def state(self, kind: str) -> telemetry.Sampler:
        """The first feed of `kind` (this machine's npu-smi, or the first exporter)."""
        return next(s for (k, _), s in self.states.items() if k == kind)

    def latest(self, kind: str) -> Any:
        return self.state(kind).latest

    def now(self) -> float:
        return self.replay_time if self.replay_time is not None else self.w.clock()

    def panel_feeds(self) -> list[tuple[Source, str]]:
        """(feed, widget id) of every feed, for the layout."""
        return [(feed, self.panel_ids[(feed.kind, feed.feed)]) for feed in self.feeds]

    def _state(self, key: FeedKey) -> telemetry.Sampler:
        state = self.states.get(key)
        if state is None:  # a recording made with other feeds: they are judged too
            state = self.states[key] = telemetry.Sampler(
                self.w.options.interval_s, self.stale_after_intervals, self.w.clock)
        return state

    # --- sampling (workers) --------------------------------------------------------------------

    def tick(self) -> None:
        """Every interval: sample each timed feed that is due; never two at once per feed. A
        feed still sampling is late: redraw its age, STALE and the alerts."""
        now = self.w.clock()
        late = [feed for feed in self.feeds
                if feed.timed and feed.due(now) and not self._run(feed)]
        if late:
            with suppress(NoMatches):
                for feed in late:
                    self._redraw((feed.kind, feed.feed))
                self.update_alerts()

    def _run(self, feed: Source) -> bool:
        """Sample `feed` in a thread unless its last sample still runs; True if started."""
        group = f"{feed.kind}:{feed.feed}" if feed.feed else feed.kind
        if any(w.group == group and not w.is_finished for w in self.app.workers):
            return False
        self.app.run_worker(lambda: self._sample(feed), thread=True, group=group,
                            exit_on_error=False)
        return True

    def _sample(self, feed: Source) -> None:
        snapshot = feed.sample(time.monotonic() + feed.budget_s)
        self.app.post_message(Sampled(feed, snapshot, feed.aside(snapshot)))

    def _client(self) -> httpx.Client:
        if self._http is None:
            self._http = http.client(sources.http_timeout_s(self.w.options.interval_s))
        return self._http

    def close(self) -> None:
        if self._http is not None:
            self._http.close()

    # --- taking snapshots (UI thread) ----------------------------------------------------------

    def take(self, snapshot: Any, aside: Any = None) -> None:
        """A snapshot of any source (a test's, a replay's): routed by its type."""
        source = sources.for_snapshot(snapshot)
        if source is not None:
            self._take(source, (source.kind, source.feed_of(snapshot)), snapshot, aside)

    def take_sampled(self, message: Sampled) -> None:
        feed = message.feed
        self._take(feed, (feed.kind, feed.feed), message.snapshot, message.aside)

    def _take(self, source: Source | type[Source], key: FeedKey, snapshot: Any,
              aside: Any = None) -> None:
        """Keep, feed the history, record, redraw; judge when the source has alert rules.
        `snapshot` None: the feed has nothing to show any more."""
        state = self._state(key)
        self.asides[key] = aside
        if snapshot is None:
            state.clear()
        else:
            state.update(snapshot)
            source.add_history(self.history, snapshot)
            self.record(snapshot)
        self._redraw(key)
        if source.alert_keys:
            self.update_alerts()

    def take_recorded(self, snapshot: Any) -> None:
        """One replayed sample: the recording's clock moves to it, then it is shown."""
        self.replay_time = snapshot.taken_at
        self.take(snapshot)

    def take_engine_from(self, backend: ChatBackend | None) -> None:
        """Feeds not sampled by the timer (the in-process engine) are sampled when the chat's
        backend changes or a reply ends; no backend: they have nothing to show."""
        for feed in self.feeds:
            if feed.timed:
                continue
            snapshot = None if backend is None else feed.sample(math.inf)
            if snapshot is not None or backend is None:
                self._take(feed, (feed.kind, feed.feed), snapshot)

    def reply_finished(self, backend: ChatBackend | None, stats: ReplyStats) -> None:
        self.take_engine_from(backend)
        engine = self.latest("engine")
        rate = engine.decode_tokens_per_s if engine is not None else None
        if rate is not None and stats.finish_reason != "cancelled":
            self.best_decode_tokens_per_s = max(rate, self.best_decode_tokens_per_s or 0.0)
        self.update_alerts()

    # --- drawing -------------------------------------------------------------------------------

    def _redraw(self, key: FeedKey) -> None:
        state, now = self.states[key], self.now()
        panel_id_ = self.panel_ids.get(key)
        if panel_id_ is not None:
            panel: FeedPanel = self.w.screen().query_one(f"#{panel_id_}")  # type: ignore[assignment]
            panel.show_feed(FeedView(state.latest, state.last_good, self.history, now,
                                     state.is_stale(now)))
        if isinstance(state.latest, NpuSnapshot):
            self.redraw_pressure()

    def _npu_feeds(self) -> list[tuple[NpuSnapshot, Any]]:
        """Per NPU feed: the last good snapshot (or the latest failure when none was good), and
        what its machine showed beside it."""
        out = []
        for key, state in self.states.items():
            shown = state.last_good or state.latest
            if isinstance(shown, NpuSnapshot):
                out.append((shown, self.asides.get(key)))
        return out

    def redraw_pressure(self) -> None:
        """The pressure panel: a reading over every NPU feed on screen."""
        shown = self._npu_feeds()
        good = [(s, aside or pressure.UNKNOWN_CAUSES) for s, aside in shown if s.ok]
        rows = pressure.pressure_rows(good, self.pressure_limits)
        if rows:
            note = pressure.causes_note([causes for _, causes in good])
        elif not shown:
            note = "waiting for the first NPU sample…"
        else:
            errors = [s.error for s, _ in shown if s.error]
            note = "no NPU data" + (f": {errors[0]}" if errors else "")
        self.w.widget(PressurePanel).show(rows, note, self.conflicts)

    def update_alerts(self) -> None:
        """Every source's alert rules over its feeds; a new alert is toasted and recorded."""
        judging = Judging(self.w.policy, self.now(), self.stale_after_s,
                          self.best_decode_tokens_per_s)
        shown: dict[str, list[Shown]] = {}
        for (kind, _), state in self.states.items():
            shown.setdefault(kind, []).append(Shown(state.latest, state.last_good))
        raised = self.alert_log.update(sources.judge(shown, judging))
        self.w.widget(AlertsPanel).show(list(self.alert_log.entries))
        for alert in raised:  # a toast reaches whatever screen is on top
            self._notify(alert)
            self.record(alert)

    def _notify(self, alert: Alert) -> None:
        safe.notify(self.app, f"{alert.message}: {alert.value}", title="alert",
                    severity="error" if alert.level == "fail" else "warning")
