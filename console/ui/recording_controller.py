"""Recording (`--record`, the `r` key) and replay (`--replay`): one SQLite file per session."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from console.recording import Player, Recorder, RecordingError, new_recording_path
from console.snapshots import Alert
from console.ui import safe
from console.ui.messages import Replayed, ReplayEnded
from console.ui.wiring import Wiring
from probes.words import counted, verb


class RecordingController:
    def __init__(self, wiring: Wiring, set_subtitle: Callable[[], None],
                 show_recorded: Callable[[Any], None]) -> None:
        self.w, self.app = wiring, wiring.app
        self.set_subtitle = set_subtitle
        self.show_recorded = show_recorded
        self.recorder: Recorder | None = None

    @property
    def replaying(self) -> bool:
        return self.w.options.replay is not None

    def toggle(self) -> None:
        options = self.w.options
        if options.read_only:
            safe.notify(self.app, "read-only: recording is disabled", severity="warning")
            return
        if self.recorder is not None:
            path = self.recorder.path
            self.stop()
            safe.notify(self.app, f"recording stopped: {path}")
            return
        self.start(options.record or new_recording_path(options.recordings_dir))

    def start(self, path: Path) -> None:
        try:
            if path.parent == self.w.options.recordings_dir:  # the default place: make it
                path.parent.mkdir(parents=True, exist_ok=True)
            self.recorder = Recorder(path)
        except (RecordingError, OSError) as exc:
            safe.notify(self.app, exc, title="record", severity="error", timeout=15)
            return
        safe.notify(self.app, f"recording telemetry to {path}")
        self.set_subtitle()

    def stop(self) -> None:
        recorder, self.recorder = self.recorder, None
        if recorder is not None:
            try:
                recorder.close()
            except RecordingError as exc:
                safe.notify(self.app, exc, title="record", severity="error")
        self.set_subtitle()

    def record(self, snapshot: Any) -> None:
        if self.recorder is None or self.replaying:
            return
        try:
            self.recorder.add(snapshot)
        except RecordingError as exc:
            safe.notify(self.app, f"{exc}; recording stopped", title="record", severity="error")
            self.recorder = None
            self.set_subtitle()

    # --- replay --------------------------------------------------------------------------------

    def replay(self, path: Path, speed: float) -> None:
        self.app.run_worker(lambda: self._play(path, speed), thread=True, group="replay",
                            exclusive=True, exit_on_error=False)

    def _play(self, path: Path, speed: float) -> None:
        """In a worker thread: every recorded sample, posted in time order."""
        post = self.app.post_message
        player = Player(path, speed=speed)
        try:
            for snapshot in player.play():
                if isinstance(snapshot, Alert):
                    continue  # alerts are raised again from the replayed data
                post(Replayed(snapshot.taken_at, snapshot))
        except RecordingError as exc:
            post(ReplayEnded(str(exc)))
            return
        post(ReplayEnded(skipped_rows=player.skipped_rows))

    def replayed(self, message: Replayed) -> None:
        self.show_recorded(message.snapshot)
        self.set_subtitle()

    def ended(self, message: ReplayEnded) -> None:
        if message.error:
            safe.notify(self.app, message.error, title="replay", severity="error", timeout=30)
        elif message.skipped_rows:
            rows = message.skipped_rows
            safe.notify(self.app, f"end of the recording; {counted(rows, 'damaged row')} "
                        f"{verb(rows, 'was', 'were')} skipped", title="replay",
                        severity="warning")
        else:
            safe.notify(self.app, "end of the recording", title="replay")
