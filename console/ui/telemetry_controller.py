"""The panels' controller: starts the samplers (local npu-smi or NPU-Exporters, psutil, the
serving endpoint's /metrics) in worker threads, keeps their history and alerts, and redraws.

Workers return nothing to widgets: they post `NpuSampled`/`HostSampled`/`ServingSampled` with
immutable snapshots, and the app hands them to `take_*` here, on the UI thread.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import suppress
from functools import partial
from typing import TYPE_CHECKING, Any

from textual.css.query import NoMatches

from console import exporter, pressure, serving, telemetry
from console.alerts import AlertLog, evaluate_all, exporter_alerts
from console.chat.backend import ChatBackend
from console.chat.reply import ReplyStats
from console.history import History
from console.snapshots import (
    Alert,
    EngineSnapshot,
    HostSnapshot,
    NpuSnapshot,
    ServingSnapshot,
)
from console.ui import safe
from console.ui.messages import HostSampled, NpuSampled, ServingSampled
from console.ui.widgets.alerts import AlertsPanel
from console.ui.widgets.engine_panel import EnginePanel
from console.ui.widgets.host import HostPanel
from console.ui.widgets.npu import NpuPanel, hbm_history_key, temperature_history_key
from console.ui.widgets.pressure import PressurePanel
from console.ui.widgets.serving import ServingPanel
from console.ui.wiring import Wiring
from probes import http

if TYPE_CHECKING:
    import httpx

    from console.msprof import OpConflict
    from probes.host import Host

LOCAL = ""  # the source name of this machine's npu-smi


class TelemetryController:
    def __init__(self, wiring: Wiring, host: Host, conflicts: list[OpConflict] | None,
                 record: Callable[[Any], None]) -> None:
        self.w, self.app = wiring, wiring.app
        self.host, self.conflicts, self.record = host, conflicts, record
        options, policy = wiring.options, wiring.policy
        # the disk the host panel watches: the target's log directory, once it is known
        self.log_dir = options.log_dir
        self.history = History()
        stale = float(policy.get("console", "stale_after_intervals"))
        self.sources = [exporter.host_label(u) for u in options.npu_exporters] or [LOCAL]
        self.samplers = {s: telemetry.Sampler(options.interval_s, stale, wiring.clock)
                         for s in self.sources}
        self.alert_log = AlertLog()
        self.pressure_limits = pressure.pressure_limits(policy)
        self.causes: dict[str, pressure.ZeroCauses] = {}  # per source, from its last sample
        self._causes = pressure.CauseReader(host)  # used by the NPU worker only
        self.host_snapshot: HostSnapshot | None = None
        self.engine_snapshot: EngineSnapshot | None = None
        self.serving_snapshot: ServingSnapshot | None = None
        self.best_decode_tokens_per_s: float | None = None
        self.replay_time: float | None = None
        self._http: httpx.Client | None = None
        self._tracker = (serving.ServingTracker(options.serving_metrics_url,
                                                max(10.0, 5 * options.interval_s))
                         if options.serving_metrics_url else None)

    @property
    def sampler(self) -> telemetry.Sampler:
        """The first source's sampler (this machine's, without --npu-exporter)."""
        return self.samplers[self.sources[0]]

    def now(self) -> float:
        return self.replay_time if self.replay_time is not None else self.w.clock()

    # --- sampling (workers) --------------------------------------------------------------------

    def tick(self) -> None:
        """Every interval: start the samplers; never two at once per source. A source still
        sampling is late: redraw its age, STALE and the stale alert."""
        self._run("host", self._sample_host)
        late = False
        if self.w.options.npu_exporters:
            for url in self.w.options.npu_exporters:
                late |= not self._run(f"npu:{url}",
                                      partial(self._sample_exporter, exporter.metrics_url(url)))
        else:
            late = not self._run("npu", self._sample_npu)
        if self._tracker is not None and self._tracker.due(self.w.clock()):
            self._run("serving", self._sample_serving)
        if late:
            with suppress(NoMatches):
                self.redraw_npu()
                self.update_alerts()

    def _run(self, group: str, work: Callable[[], None]) -> bool:
        """Start `work` in a thread unless the group's last one still runs; True if started."""
        if any(w.group == group and not w.is_finished for w in self.app.workers):
            return False
        self.app.run_worker(work, thread=True, group=group, exit_on_error=False)
        return True

    def _client(self) -> httpx.Client:
        if self._http is None:

            self._http = http.client(max(1.0, min(10.0, 2.5 * self.w.options.interval_s)))
        return self._http

    def _sample_npu(self) -> None:
        snapshot = telemetry.sample_npu(self.host, self.w.options.npu_timeout_s, self.w.clock)
        self.app.post_message(NpuSampled(snapshot, self._causes.read(snapshot)))

    def _sample_exporter(self, url: str) -> None:
        self.app.post_message(NpuSampled(
            exporter.sample_exporter(self._client(), url, self.w.clock)))

    def _sample_host(self) -> None:
        self.app.post_message(HostSampled(
            telemetry.sample_host(self.log_dir, self.w.clock)))

    def _sample_serving(self) -> None:
        assert self._tracker is not None
        self.app.post_message(ServingSampled(
            serving.sample(self._client(), self._tracker, self.w.clock)))

    def close(self) -> None:
        if self._http is not None:
            self._http.close()

    # --- taking snapshots (UI thread) ----------------------------------------------------------

    def take_npu(self, snapshot: NpuSnapshot, causes: pressure.ZeroCauses | None = None) -> None:
        """`causes`: None for a source whose machine cannot be asked (an exporter, a replay)."""
        self.causes[snapshot.source] = causes or pressure.UNKNOWN_CAUSES
        sampler = self.samplers.get(snapshot.source)
        if sampler is None:  # a recording made with other sources: show them too
            sampler = self.samplers[snapshot.source] = telemetry.Sampler(
                self.sampler.interval_s, self.sampler.stale_after_s / self.sampler.interval_s,
                self.w.clock)
        sampler.update(snapshot)
        for chip in snapshot.chips:
            self.history.add(temperature_history_key(chip.key), snapshot.taken_at,
                             chip.temperature_c)
            self.history.add(hbm_history_key(chip.key), snapshot.taken_at, chip.hbm_used_mb)
        self.record(snapshot)
        self.redraw_npu()
        self.update_alerts()

    def take_host(self, snapshot: HostSnapshot) -> None:
        self.host_snapshot = snapshot
        self.record(snapshot)
        self.w.widget(HostPanel).show(snapshot)

    def take_serving(self, snapshot: ServingSnapshot) -> None:
        self.serving_snapshot = snapshot
        t = snapshot.taken_at
        self.history.add("serving:generation_tokens_per_s", t, snapshot.generation_tokens_per_s)
        self.history.add("serving:kv_cache_usage", t, snapshot.kv_cache_usage)
        self.record(snapshot)
        self.w.widget(ServingPanel).show(snapshot, self.history, self.now())
        self.update_alerts()

    def take_engine(self, snapshot: EngineSnapshot | None) -> None:
        self.engine_snapshot = snapshot
        if snapshot is not None:
            t = snapshot.taken_at
            self.history.add("engine:decode_tokens_per_s", t, snapshot.decode_tokens_per_s)
            self.history.add("engine:prefill_tokens_per_s", t, snapshot.prefill_tokens_per_s)
            self.history.add("engine:ttft_s", t, snapshot.ttft_s)
            self.record(snapshot)
        self.w.widget(EnginePanel).show(snapshot, self.history)

    def take_recorded(self, snapshot: Any) -> None:
        """One replayed sample: the recording's clock moves to it, then it is shown."""
        self.replay_time = snapshot.taken_at
        if isinstance(snapshot, NpuSnapshot):
            self.take_npu(snapshot)
        elif isinstance(snapshot, HostSnapshot):
            self.take_host(snapshot)
        elif isinstance(snapshot, EngineSnapshot):
            self.take_engine(snapshot)
        elif isinstance(snapshot, ServingSnapshot):
            self.take_serving(snapshot)

    def take_engine_from(self, backend: ChatBackend | None) -> None:
        snapshot = None if backend is None else backend.engine_snapshot(self.w.clock())
        if snapshot is not None or backend is None:
            self.take_engine(snapshot)

    def reply_finished(self, backend: ChatBackend | None, stats: ReplyStats) -> None:
        self.take_engine_from(backend)
        rate = self.engine_snapshot.decode_tokens_per_s if self.engine_snapshot else None
        if rate is not None and stats.finish_reason != "cancelled":
            self.best_decode_tokens_per_s = max(rate, self.best_decode_tokens_per_s or 0.0)
        self.update_alerts()

    # --- drawing -------------------------------------------------------------------------------

    def shown_npus(self) -> list[NpuSnapshot]:
        """Per source: the last good snapshot (or the latest failure when none was good)."""
        shown = [s.last_good or s.latest for s in self.samplers.values()]
        return [s for s in shown if s is not None]

    def redraw_npu(self) -> None:
        now = self.now()
        panels = {p.source: p for p in self.w.screen().query(NpuPanel)}
        for source, sampler in self.samplers.items():
            shown = sampler.last_good or sampler.latest
            panel = panels.get(source)
            if shown is not None and panel is not None:
                panel.show(shown, self.history, now, sampler.is_stale(now))
        self.redraw_pressure()

    def redraw_pressure(self) -> None:
        shown = self.shown_npus()
        good = [(s, self.causes.get(s.source, pressure.UNKNOWN_CAUSES)) for s in shown if s.ok]
        rows = pressure.pressure_rows(good, self.pressure_limits)
        if rows:
            note = pressure.causes_note([causes for _, causes in good])
        elif not shown:
            note = "waiting for the first NPU sample…"
        else:
            errors = [s.error for s in shown if s.error]
            note = "no NPU data" + (f": {errors[0]}" if errors else "")
        self.w.widget(PressurePanel).show(rows, note, self.conflicts)

    def update_alerts(self) -> None:
        now = self.now()
        good = [s.last_good for s in self.samplers.values() if s.last_good is not None]
        alerts = evaluate_all(good, self.engine_snapshot, self.serving_snapshot, self.w.policy,
                              now, self.sampler.stale_after_s, self.best_decode_tokens_per_s)
        latest = [s.latest for s in self.samplers.values() if s.latest is not None]
        alerts += exporter_alerts(latest, now)
        raised = self.alert_log.update(alerts)
        self.w.widget(AlertsPanel).show(list(self.alert_log.entries))
        for alert in raised:  # a toast reaches whatever screen is on top
            self._notify(alert)
            self.record(alert)

    def _notify(self, alert: Alert) -> None:
        safe.notify(self.app, f"{alert.message}: {alert.value}", title="alert",
                    severity="error" if alert.level == "fail" else "warning")
