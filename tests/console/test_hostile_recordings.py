"""Damaged and hostile console recordings: bad rows skipped and counted, what is not a
recording refused in one line, every query and every pause bounded."""

from __future__ import annotations

import json
import math
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console import recording
from console.recording import Player, Recorder, RecordingError
from console.sample_check import problem
from console.snapshots import ChipSample, HostSnapshot, NpuSnapshot, ProcessSample, chip_key
from console.ui.cli import main

T0 = 1_700_000_000.0


def good(path: Path, count: int = 3) -> Path:
    with Recorder(path) as recorder:
        for i in range(count):
            recorder.add(HostSnapshot(T0 + 2 * i, 10.0, 1.0, 2.0, "/var/log", 1.0, 2.0))
            recorder.add(NpuSnapshot(T0 + 2 * i, (ChipSample(
                0, 0, "910B4", "OK", 40, 90.5, 3, 100, 65536, 5.0, chip_key(0, 0)),),
                (ProcessSample(0, 0, 42, "python", 100),), True, None, 0.2))
    return path


def with_rows(path: Path, rows: list[tuple[object, object, object]]) -> Path:
    """A good recording plus `rows`, in a samples table without types or constraints (as a
    hostile file may have it: text stays text, NULL is allowed)."""
    good(path)
    with sqlite3.connect(path) as conn:
        conn.execute("ALTER TABLE samples RENAME TO typed")
        conn.execute("CREATE TABLE samples (id INTEGER PRIMARY KEY AUTOINCREMENT, t, kind, "
                     "payload)")
        conn.execute("INSERT INTO samples SELECT * FROM typed")
        conn.execute("DROP TABLE typed")
        conn.executemany("INSERT INTO samples (t, kind, payload) VALUES (?, ?, ?)", rows)
    conn.close()
    return path


def host_payload(**change: object) -> str:
    doc: dict[str, object] = {"taken_at": T0 + 1, "cpu_percent": 1.0, "mem_used_mb": 1.0,
                              "mem_total_mb": 2.0, "log_dir": "/x", "log_disk_free_mb": 1.0,
                              "log_disk_total_mb": 2.0}
    return json.dumps(doc | change)


BAD_ROWS: dict[str, tuple[object, object, object]] = {
    "nan time in the payload": (T0 + 1, "host", host_payload().replace(
        f"{T0 + 1}", "NaN", 1)),
    "huge time in the payload": (T0 + 1, "host", host_payload(taken_at=1e300)),
    "huge time column": (1e300, "host", host_payload()),
    "text time column": ("yesterday", "host", host_payload()),
    "text where a number belongs": (T0 + 1, "host", host_payload(cpu_percent="high")),
    "infinite number": (T0 + 1, "host", host_payload().replace('"cpu_percent": 1.0',
                                                                 '"cpu_percent": Infinity')),
    "a list where a name belongs": (T0 + 1, "host", host_payload(log_dir=[[["deep"]]])),
    "deep json": (T0 + 1, "host", "[" * 200_000 + "]" * 200_000),
    "huge payload": (T0 + 1, "host", host_payload(log_dir="x" * (2 * 1024 * 1024))),
    "kind is a number": (T0 + 1, 7, host_payload()),
    "unknown kind": (T0 + 1, "gpu", host_payload()),
    "payload is a blob": (T0 + 1, "host", b"\x00\xff"),
    "chip with text temperature": (T0 + 1, "npu", json.dumps({
        "taken_at": T0 + 1, "chips": [[0, 0, "910B4", "OK", "hot", 1.0, 1, 1, 1, 1.0, "0/0"]],
        "processes": [], "processes_known": False, "error": None, "sample_duration_s": 0.1})),
    "process name that is a dict": (T0 + 1, "npu", json.dumps({
        "taken_at": T0 + 1, "chips": [], "processes": [[0, 0, 1, {"x": 1}, 5]],
        "processes_known": True, "error": None, "sample_duration_s": 0.1})),
    "alert level": (T0 + 1, "alert", json.dumps({"raised_at": T0 + 1, "key": "k",
                                                "level": "panic", "message": "m",
                                                "value": "v"})),
}


@pytest.mark.parametrize("case", sorted(BAD_ROWS))
def test_a_bad_row_is_skipped_and_counted(case: str, tmp_path: Path) -> None:
    path = with_rows(tmp_path / "r.sqlite", [BAD_ROWS[case]])
    player = Player(path, speed=0)
    shown = list(player)
    assert len(shown) == 6  # the good rows, all of them
    assert all(problem(s) is None for s in shown)
    assert player.skipped_rows == 1


def _view(conn: sqlite3.Connection) -> None:
    conn.execute("DROP TABLE samples")
    conn.execute("CREATE VIEW samples AS WITH RECURSIVE n(id, t, kind, payload) AS "
                 "(SELECT 1, 1.0, 'host', '{}' UNION ALL SELECT id + 1, t, kind, payload "
                 "FROM n) SELECT * FROM n")


def _meta_view(conn: sqlite3.Connection) -> None:
    conn.execute("ALTER TABLE meta RENAME TO meta_old")
    conn.execute("CREATE VIEW meta AS SELECT * FROM meta_old")


def _columns(value: str) -> Callable[[sqlite3.Connection], None]:
    def change(conn: sqlite3.Connection) -> None:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'npu_chip_columns'", (value,))
    return change


REFUSED: dict[str, tuple[Callable[[sqlite3.Connection], None], str]] = {
    "samples is an endless view": (_view, "'samples' is view"),
    "meta is a view": (_meta_view, "'meta' is view"),
    "columns not a list": (_columns('"npu_id"'), "npu_chip_columns"),
    "columns repeated": (_columns('["npu_id", "npu_id"]'), "npu_chip_columns"),
    "columns deep": (_columns("[" * 60_000), "npu_chip_columns"),
    "columns huge": (_columns("[" * 100_000), "npu_chip_columns"),
    "columns too many": (_columns(json.dumps([f"c{i}" for i in range(500)])),
                         "npu_chip_columns"),
    "schema huge": (lambda c: c.execute("UPDATE meta SET value = ? WHERE key = 'schema'",
                                        ("x" * 10_000_000,)), "not an ascend-console"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_what_is_not_a_recording_is_refused_in_one_line(case: str, tmp_path: Path) -> None:
    change, expected = REFUSED[case]
    path = good(tmp_path / "r.sqlite")
    with sqlite3.connect(path) as conn:
        change(conn)
    conn.close()
    with pytest.raises(RecordingError) as caught:
        Player(path, speed=0)
    message = str(caught.value)
    assert expected in message and "\n" not in message and len(message) < 400


def test_the_console_refuses_a_bad_replay_with_one_line(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    path = tmp_path / "evil\x1b]0;pwned\x07.sqlite"
    path.write_bytes(b"not sqlite at all" * 64)
    assert main(["--replay", str(path), "--no-model"]) == 3
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "\x1b" not in err and "\\x1b" in err


def test_long_pauses_replay_bounded(tmp_path: Path) -> None:
    path = with_rows(tmp_path / "r.sqlite", [(T0 + 10**8, "host",
                                              host_payload(taken_at=T0 + 10**8))])
    slept: list[float] = []
    assert len(list(Player(path, speed=1.0, sleep=slept.append))) == 7
    assert max(slept) == recording.MAX_SLEEP_S


def test_a_slow_query_is_interrupted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = good(tmp_path / "r.sqlite", count=2000)
    monkeypatch.setattr(recording, "QUERY_BUDGET_S", -1.0)  # every query is already too slow
    monkeypatch.setattr(recording, "_PROGRESS_STEPS", 1)
    with pytest.raises(RecordingError, match="a query took more than"):
        Player(path, speed=0)


def test_stop_ends_a_replay_from_another_thread(tmp_path: Path) -> None:
    path = good(tmp_path / "r.sqlite", count=50)
    player = Player(path, speed=1.0)  # real sleeps of 2 s between samples
    seen: list[object] = []
    worker = threading.Thread(target=lambda: seen.extend(player.play()))
    worker.start()
    time.sleep(0.2)
    player.stop()
    worker.join(timeout=5)
    assert not worker.is_alive() and 0 < len(seen) < 100


ROW = st.tuples(
    st.one_of(st.floats(allow_nan=True), st.integers(-2**62, 2**62), st.text(max_size=5),
              st.none()),
    st.one_of(st.sampled_from(["npu", "host", "engine", "alert"]), st.text(max_size=5),
              st.integers(-2**62, 2**62)),
    st.one_of(st.text(max_size=50), st.binary(max_size=20), st.integers(-2**62, 2**62),
              st.recursive(st.none() | st.booleans() | st.floats() | st.text(max_size=8)
                           | st.integers(),
                           lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.sampled_from(
                               ["taken_at", "chips", "processes", "cpu_percent", "error",
                                "raised_at", "level", "key", "log_dir"]), inner, max_size=6),
                           max_leaves=20).map(json.dumps)))


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(ROW, max_size=8))
def test_random_rows_never_reach_the_panels_unchecked(tmp_path: Path,
                                                      rows: list[tuple[object, object, object]]
                                                      ) -> None:
    path = tmp_path / "random.sqlite"
    path.unlink(missing_ok=True)
    with_rows(path, [(None if isinstance(t, float) and math.isnan(t) else t, k, p)
                     for t, k, p in rows])
    player = Player(path, speed=0)
    shown = list(player)
    assert all(problem(s) is None for s in shown)
    assert len(shown) + player.skipped_rows >= 6


def test_a_crash_inside_the_app_is_not_exit_0(monkeypatch: pytest.MonkeyPatch) -> None:
    class Crashed:
        """What Textual's App leaves after an unhandled exception: no result, return code 1."""

        return_code = 1

        def __init__(self, options: object, **observed: object) -> None:
            pass

        def run(self) -> None:
            return None

    monkeypatch.setattr("console.ui.app.ConsoleApp", Crashed)
    assert main(["--no-model"]) == 1


async def test_the_console_replays_a_damaged_recording_and_shows_the_count(
        tmp_path: Path) -> None:
    from console.options import ConsoleOptions
    from console.ui.app import ConsoleApp
    from probes.live import LiveHost
    from tests.console.fakes import FakeEngine, fake_backend

    path = with_rows(tmp_path / "damaged.sqlite", [BAD_ROWS["text where a number belongs"],
                                                   BAD_ROWS["deep json"]])
    (tmp_path / "root").mkdir()
    app = ConsoleApp(ConsoleOptions(interval_s=0.2, npu_timeout_s=2.0, log_dir=None,
                                    replay=path, replay_speed=0.0),
                     backend=fake_backend(FakeEngine()),
                     host=LiveHost(root=str(tmp_path / "root"), env={}))
    async with app.run_test(size=(160, 50)) as pilot:
        deadline = time.monotonic() + 10
        while not any("damaged row" in n.message for n in app._notifications):
            assert time.monotonic() < deadline, "no notice of the skipped rows"
            await pilot.pause(0.05)
        notice = next(n.message for n in app._notifications if "damaged row" in n.message)
        assert "2 damaged rows were skipped" in notice
        assert app.telemetry.replay_time == T0 + 4  # the good rows were all shown


def test_recording_onto_a_file_whose_t_column_is_text_closes(tmp_path: Path) -> None:
    path = good(tmp_path / "r.sqlite")
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE samples SET t = 'yesterday'")
        conn.execute("INSERT INTO samples (t, kind, payload) SELECT 'later', kind, payload "
                     "FROM samples")
    with Recorder(path) as recorder:  # appends, prunes and closes without a TypeError
        recorder.add(HostSnapshot(time.time(), 10.0, 1.0, 2.0, "/var/log", 1.0, 2.0))
        assert recorder.row_count() >= 1
