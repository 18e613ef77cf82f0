"""`--record FILE` / `--replay FILE`: telemetry samples in one SQLite file (docs/recording.md).

A recording is bounded: rows older than `max_age_s` before the newest sample, and rows past
`max_rows`, are pruned while recording, so a console left running for days keeps a file of a
known size. Only the standard library's sqlite3 is used.

Recordings have one default place (`default_recordings_dir`): `ascend-console --record` without
a FILE and the `r` key write there, and `ascend-doctor bundle` includes the newest file from
there. This module imports no textual, so the doctor may import it.
"""

from __future__ import annotations

import dataclasses
import json
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeAlias

from console.snapshots import (
    Alert,
    ChipSample,
    EngineSnapshot,
    HostSnapshot,
    NpuSnapshot,
    ProcessSample,
    chip_key,
)
from probes.recordings import (  # noqa: F401 (console's names for the default place)
    default_recordings_dir,
    new_recording_path,
    newest_first_key,
)

SCHEMA = "ascend-console-recording/1"
DEFAULT_MAX_AGE_S = 24 * 3600.0
DEFAULT_MAX_ROWS = 200_000
PRUNE_EVERY = 256  # inserts between prunes: pruning is one indexed DELETE

Snapshot: TypeAlias = NpuSnapshot | HostSnapshot | EngineSnapshot | Alert

CHIP_COLUMNS = tuple(f.name for f in dataclasses.fields(ChipSample))
PROCESS_COLUMNS = tuple(f.name for f in dataclasses.fields(ProcessSample))

_KIND_OF: dict[type, str] = {
    NpuSnapshot: "npu",
    HostSnapshot: "host",
    EngineSnapshot: "engine",
    Alert: "alert",
}

_DDL = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS samples ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " t REAL NOT NULL,"
    " kind TEXT NOT NULL,"
    " payload TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS samples_t ON samples (t)",
)


class RecordingError(Exception):
    """A recording cannot be written or read; the message names the file."""


# ---------------------------------------------------------------------------------------------
# encoding (pure)


def encode(snapshot: Snapshot) -> tuple[str, float, str]:
    """(kind, t, JSON payload) of a snapshot; NPU chips and processes as rows (see meta)."""
    kind = _KIND_OF.get(type(snapshot))
    if kind is None:
        raise TypeError(f"cannot record a {type(snapshot).__name__}")
    if isinstance(snapshot, NpuSnapshot):
        doc: dict[str, Any] = {
            "taken_at": snapshot.taken_at,
            "chips": [_row(c, CHIP_COLUMNS) for c in snapshot.chips],
            "processes": [_row(p, PROCESS_COLUMNS) for p in snapshot.processes],
            "processes_known": snapshot.processes_known,
            "error": snapshot.error,
            "sample_duration_s": snapshot.sample_duration_s,
        }
    else:
        doc = dataclasses.asdict(snapshot)
    t = snapshot.raised_at if isinstance(snapshot, Alert) else snapshot.taken_at
    return kind, t, json.dumps(doc, separators=(",", ":"), ensure_ascii=False)


def _row(item: Any, columns: Sequence[str]) -> list[Any]:
    return [getattr(item, name) for name in columns]


def decode(kind: str, payload: str, columns: Mapping[str, Sequence[str]]) -> Snapshot:
    """The snapshot of one stored row; `columns` from the recording's meta table."""
    doc = json.loads(payload)
    if not isinstance(doc, dict):
        raise ValueError("payload is not a JSON object")
    if kind == "npu":
        return _decode_npu(doc, columns)
    if kind == "host":
        return HostSnapshot(**_known(HostSnapshot, doc))
    if kind == "engine":
        fields = _known(EngineSnapshot, doc)
        fields["fused_ops"] = tuple(fields.get("fused_ops") or ())
        return EngineSnapshot(**fields)
    if kind == "alert":
        return Alert(**_known(Alert, doc))
    raise ValueError(f"unknown sample kind {kind!r}")


def _decode_npu(doc: dict[str, Any], columns: Mapping[str, Sequence[str]]) -> NpuSnapshot:
    chip_cols = columns.get("chip", CHIP_COLUMNS)
    proc_cols = columns.get("process", PROCESS_COLUMNS)
    chips = tuple(_chip(dict(zip(chip_cols, row, strict=False))) for row in doc.get("chips", []))
    processes = tuple(
        ProcessSample(**_known(ProcessSample, dict(zip(proc_cols, row, strict=False))))
        for row in doc.get("processes", [])
    )
    return NpuSnapshot(
        taken_at=float(doc["taken_at"]),
        chips=chips,
        processes=processes,
        processes_known=bool(doc.get("processes_known", False)),
        error=doc.get("error"),
        sample_duration_s=float(doc.get("sample_duration_s", 0.0)),
    )


def _chip(values: dict[str, Any]) -> ChipSample:
    fields = _known(ChipSample, values)
    fields.setdefault("key", chip_key(int(fields["npu_id"]), fields.get("chip_id")))
    return ChipSample(**fields)


def _known(cls: type, values: Mapping[str, Any]) -> dict[str, Any]:
    """Fields of `cls` from `values`: unknown ones dropped, missing ones None (newer files)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name in values:
            out[f.name] = values[f.name]
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            out[f.name] = None
    return out


# ---------------------------------------------------------------------------------------------
# writing


class Recorder:
    """Appends snapshots to a recording; safe to call from any thread (one connection, a lock).

    An existing recording of this schema is appended to; any other file is refused.
    """

    def __init__(
        self,
        path: str | Path,
        max_age_s: float = DEFAULT_MAX_AGE_S,
        max_rows: int = DEFAULT_MAX_ROWS,
        clock: Callable[[], float] = time.time,
        commit_every_s: float = 1.0,
    ) -> None:
        self.path = Path(path)
        self.max_age_s = max_age_s
        self.max_rows = max_rows
        self.commit_every_s = commit_every_s
        self._lock = threading.Lock()
        self._since_prune = 0
        self._last_commit_s = float("-inf")  # the first sample commits at once
        self._conn = _open_for_writing(self.path, clock)

    def add(self, snapshot: Snapshot) -> None:
        kind, t, payload = encode(snapshot)
        with self._lock:
            self._execute("INSERT INTO samples (t, kind, payload) VALUES (?, ?, ?)",
                          (t, kind, payload))
            self._since_prune += 1
            if self._since_prune >= PRUNE_EVERY:
                self._prune_locked()
            # at the console's 2 s interval every sample commits at once; a burst (replaying
            # a backlog, a benchmark) shares one commit per `commit_every_s`
            if time.monotonic() - self._last_commit_s >= self.commit_every_s:
                self._commit()

    def flush(self) -> None:
        """Commit what was added; `close()` does it too."""
        with self._lock:
            self._commit()

    def add_many(self, snapshots: Sequence[Snapshot]) -> None:
        for snapshot in snapshots:
            self.add(snapshot)

    def prune(self) -> None:
        with self._lock:
            self._prune_locked()
            self._commit()

    def row_count(self) -> int:
        with self._lock:
            self._commit()
            return int(self._execute("SELECT COUNT(*) FROM samples").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            try:
                self._prune_locked()
                self._commit()
                self._conn.close()
            except sqlite3.Error as exc:
                raise RecordingError(f"{self.path}: cannot close the recording ({exc})") from None

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _prune_locked(self) -> None:
        self._since_prune = 0
        newest = self._execute("SELECT MAX(t) FROM samples").fetchone()[0]
        if newest is None:
            return
        self._execute("DELETE FROM samples WHERE t < ?", (newest - self.max_age_s,))
        self._execute(
            "DELETE FROM samples WHERE id <= (SELECT MAX(id) FROM samples) - ?", (self.max_rows,)
        )

    def _execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        try:
            return self._conn.execute(sql, params)
        except sqlite3.Error as exc:
            raise RecordingError(f"{self.path}: cannot write the recording ({exc})") from None

    def _commit(self) -> None:
        self._last_commit_s = time.monotonic()
        try:
            self._conn.commit()
        except sqlite3.Error as exc:
            raise RecordingError(f"{self.path}: cannot write the recording ({exc})") from None


def _open_for_writing(path: Path, clock: Callable[[], float]) -> sqlite3.Connection:
    existed = path.exists() and path.stat().st_size > 0
    try:
        conn = sqlite3.connect(path, check_same_thread=False)
    except sqlite3.Error as exc:
        raise RecordingError(f"{path}: cannot open a recording here ({exc})") from None
    try:
        if existed:
            _check_meta(conn, path)
        # one self-contained file (no -wal/-shm beside it) so a bundle can copy it as is;
        # a power cut may lose the last samples, never the file's consistency
        conn.execute("PRAGMA synchronous=NORMAL")
        for ddl in _DDL:
            conn.execute(ddl)
        if not existed:
            _write_meta(conn, clock())
        conn.commit()
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise _not_a_recording(path, exc) from None
    except RecordingError:
        conn.close()
        raise
    return conn


def _write_meta(conn: sqlite3.Connection, created_at: float) -> None:
    meta = {
        "schema": SCHEMA,
        "created_at": repr(created_at),
        "hostname": socket.gethostname(),
        "npu_chip_columns": json.dumps(CHIP_COLUMNS),
        "npu_process_columns": json.dumps(PROCESS_COLUMNS),
    }
    conn.executemany("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", meta.items())


# ---------------------------------------------------------------------------------------------
# reading


def _read_meta(conn: sqlite3.Connection, path: Path) -> dict[str, str]:
    try:
        rows = conn.execute("SELECT key, value FROM meta").fetchall()
    except sqlite3.DatabaseError as exc:
        raise _not_a_recording(path, exc) from None
    return {str(k): str(v) for k, v in rows}


def _check_meta(conn: sqlite3.Connection, path: Path) -> dict[str, str]:
    meta = _read_meta(conn, path)
    schema = meta.get("schema")
    if schema != SCHEMA:
        raise RecordingError(
            f"{path}: not an ascend-console recording (schema {schema!r}, expected {SCHEMA!r}); "
            "record with `ascend-console --record FILE`"
        )
    return meta


def _not_a_recording(path: Path, exc: Exception) -> RecordingError:
    return RecordingError(
        f"{path}: not an ascend-console recording ({exc}); "
        "record one with `ascend-console --record FILE`"
    )


Sleep = Callable[[float], None]


class Player:
    """Plays a recording back in time order; `speed` 1.0 = real time, 10 = ten times faster,
    0 = as fast as possible. `sleep` is injectable so tests never wait."""

    def __init__(self, path: str | Path, speed: float = 1.0, sleep: Sleep = time.sleep) -> None:
        self.path = Path(path)
        if speed < 0:
            raise ValueError("speed must be >= 0")
        self.speed = speed
        self._sleep = sleep
        if not self.path.is_file():
            raise RecordingError(f"{self.path}: no such recording file")
        conn = self._connect()
        try:
            self.meta = _check_meta(conn, self.path)
            first, last, count = conn.execute(
                "SELECT MIN(t), MAX(t), COUNT(*) FROM samples").fetchone()
        except sqlite3.DatabaseError as exc:
            raise _not_a_recording(self.path, exc) from None
        finally:
            conn.close()
        self.start_t: float | None = first
        self.end_t: float | None = last
        self.sample_count = int(count)
        self.columns = {
            "chip": _columns(self.meta, "npu_chip_columns", CHIP_COLUMNS),
            "process": _columns(self.meta, "npu_process_columns", PROCESS_COLUMNS),
        }

    @property
    def duration_s(self) -> float:
        return 0.0 if self.start_t is None or self.end_t is None else self.end_t - self.start_t

    def __len__(self) -> int:
        return self.sample_count

    def __iter__(self) -> Iterator[Snapshot]:
        return self.play()

    def play(self, kinds: Sequence[str] | None = None) -> Iterator[Snapshot]:
        """Snapshots in time order, sleeping the recorded gaps divided by `speed`."""
        previous_t: float | None = None
        for t, snapshot in self.samples(kinds):
            if previous_t is not None and self.speed > 0 and t > previous_t:
                self._sleep((t - previous_t) / self.speed)
            previous_t = t
            yield snapshot

    def samples(self, kinds: Sequence[str] | None = None) -> Iterator[tuple[float, Snapshot]]:
        """(t, snapshot) in time order, without any waiting."""
        conn = self._connect()
        try:
            sql = "SELECT t, kind, payload FROM samples"
            params: tuple[str, ...] = ()
            if kinds:
                sql += f" WHERE kind IN ({','.join('?' * len(kinds))})"
                params = tuple(kinds)
            cursor = conn.execute(sql + " ORDER BY t, id", params)
            for t, kind, payload in cursor:
                yield float(t), self._decode(kind, payload)
        except sqlite3.DatabaseError as exc:
            raise _not_a_recording(self.path, exc) from None
        finally:
            conn.close()

    def _decode(self, kind: str, payload: str) -> Snapshot:
        try:
            return decode(kind, payload, self.columns)
        except (ValueError, TypeError, KeyError) as exc:
            raise RecordingError(f"{self.path}: a {kind!r} sample cannot be read ({exc})") from None

    def _connect(self) -> sqlite3.Connection:
        try:
            return sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True)
        except sqlite3.Error as exc:
            raise RecordingError(f"{self.path}: cannot open the recording ({exc})") from None


def _columns(meta: Mapping[str, str], key: str, default: tuple[str, ...]) -> tuple[str, ...]:
    raw = meta.get(key)
    if raw is None:
        return default
    try:
        value = json.loads(raw)
    except ValueError:
        return default
    return tuple(str(v) for v in value) if isinstance(value, list) else default
