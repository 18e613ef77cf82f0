"""`--record FILE` / `--replay FILE`: telemetry samples in one SQLite file (docs/recording.md).

A recording is bounded: rows older than `max_age_s` before the newest sample, and rows past
`max_rows`, are pruned while recording, so a console left running for days keeps a file of a
known size. Only the standard library's sqlite3 is used. Each row is encoded and decoded by
its source in the one list (console/sources.py); alerts, raised rather than sampled, here.

Recordings have one default place (`default_recordings_dir`): `ascend-console --record` without
a FILE and the `r` key write there, and `ascend-doctor bundle` includes the newest file from
there. This module imports no textual, so the doctor may import it.
"""

from __future__ import annotations

import json
import math
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeAlias

from console import sources
from console.sample_check import MAX_TIME_S, MIN_TIME_S, problem
from console.snapshots import Alert
from console.source import Columns, as_dict, known_fields
from probes import json_limits
from probes.recordings import (  # noqa: F401 (console's names for the default place)
    default_recordings_dir,
    new_recording_path,
    newest_first_key,
)

SCHEMA = "ascend-console-recording/1"
DEFAULT_MAX_AGE_S = 24 * 3600.0
DEFAULT_MAX_ROWS = 200_000
PRUNE_EVERY = 256  # inserts between prunes: pruning is one indexed DELETE

# a frozen snapshot of a source in console/sources.py, or an Alert
Snapshot: TypeAlias = Any
ALERT_KIND = "alert"  # alerts are recorded beside the sources' rows (raised, not sampled)

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
    """(kind, t, JSON payload) of a snapshot, by the source it belongs to (console/sources.py)."""
    if isinstance(snapshot, Alert):
        kind, t, doc = ALERT_KIND, snapshot.raised_at, as_dict(snapshot)
    else:
        source = sources.for_snapshot(snapshot)
        if source is None:
            raise TypeError(f"cannot record a {type(snapshot).__name__}")
        kind, t, doc = source.kind, snapshot.taken_at, source.encode(snapshot)
    return kind, t, json.dumps(doc, separators=(",", ":"), ensure_ascii=False)


def decode(kind: str, payload: str, columns: Mapping[str, Columns]) -> Snapshot:
    """The snapshot of one stored row; `columns` (per kind) from the recording's meta table."""
    doc = json_limits.loads(payload, "a recorded row")
    if not isinstance(doc, dict):
        raise ValueError("payload is not a JSON object")
    if kind == ALERT_KIND:
        return Alert(**known_fields(Alert, doc))
    source = sources.for_kind(kind)
    if source is None:
        raise ValueError(f"unknown sample kind {kind!r}")
    return source.decode(doc, columns.get(kind, {}))


def column_meta_key(kind: str, table: str) -> str:
    """The meta key naming a kind's row table columns ("npu_chip_columns")."""
    return f"{kind}_{table}_columns"


def _column_meta() -> dict[str, str]:
    return {column_meta_key(source.kind, table): json.dumps(names)
            for source in sources.SOURCES for table, names in source.columns.items()}


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
        # a file recorded by someone else may hold text or infinities in `t`: only numbers
        # date the rows (SQLite sorts text above every number, so MAX would be text)
        newest = self._execute("SELECT MAX(t) FROM samples "
                               "WHERE typeof(t) IN ('real', 'integer')").fetchone()[0]
        if newest is None or not math.isfinite(newest):
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
        **_column_meta(),
    }
    conn.executemany("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", meta.items())


# ---------------------------------------------------------------------------------------------
# reading
#
# A recording to replay may come from anywhere (a bundle, a colleague, a damaged disk): it is
# opened read-only, must be two ordinary tables (a view could run a query without end), every
# query has a time budget, and every row is checked before it is shown; a bad row is skipped
# and counted (`Player.skipped_rows`), never handed to the panels.

# project defaults, far beyond a real recording: an NPU sample of 16 chips and a full process
# table is about 10 KB; the meta table holds five short values
MAX_PAYLOAD_CHARS = 1024 * 1024
MAX_META_ROWS = 64
MAX_META_CHARS = 64 * 1024
MAX_COLUMNS = 64
QUERY_BUDGET_S = 10.0  # one step of one query; more is a hostile or broken file
MAX_SLEEP_S = 10.0  # a pause in the recording longer than this replays as this
_PROGRESS_STEPS = 10_000  # SQLite virtual-machine steps between budget checks
_TIME_OK = "(typeof(t) IN ('real', 'integer') AND t BETWEEN ? AND ?)"


def _read_meta(conn: sqlite3.Connection, path: Path) -> dict[str, str]:
    try:
        rows = conn.execute(
            "SELECT substr(key, 1, 64), CASE WHEN length(value) <= ? THEN value END FROM meta "
            "LIMIT ?", (MAX_META_CHARS, MAX_META_ROWS + 1)).fetchall()
    except sqlite3.DatabaseError as exc:
        raise _not_a_recording(path, exc) from None
    too_long = next((str(k) for k, v in rows if v is None), None)
    if too_long is not None or len(rows) > MAX_META_ROWS:
        what = (f"meta {too_long!r} is over {MAX_META_CHARS} characters" if too_long is not None
                else f"meta has more than {MAX_META_ROWS} rows")
        raise RecordingError(f"{path}: not an ascend-console recording ({what})")
    return {str(k): str(v) for k, v in rows}


def _check_meta(conn: sqlite3.Connection, path: Path) -> dict[str, str]:
    meta = _read_meta(conn, path)
    schema = meta.get("schema")
    if schema != SCHEMA:
        raise RecordingError(
            f"{path}: not an ascend-console recording (schema {_short(schema)}, expected "
            f"{SCHEMA!r}); record with `ascend-console --record FILE`"
        )
    return meta


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _not_a_recording(path: Path, exc: Exception) -> RecordingError:
    return RecordingError(
        f"{path}: not an ascend-console recording ({' '.join(str(exc).split())[:200]}); "
        "record one with `ascend-console --record FILE`"
    )


def _check_tables(conn: sqlite3.Connection, path: Path, names: Sequence[str]) -> None:
    """`names` are ordinary tables (not views, not virtual tables)."""
    try:
        found = dict(conn.execute(
            "SELECT name, type || ':' || coalesce(substr(sql, 1, 32), '') FROM sqlite_master "
            "WHERE name IN ('meta', 'samples')").fetchall())
    except sqlite3.DatabaseError as exc:
        raise _not_a_recording(path, exc) from None
    for name in names:
        kind = str(found.get(name, "missing"))
        if not kind.startswith("table:") or "VIRTUAL" in kind.upper():
            raise RecordingError(f"{path}: not an ascend-console recording ('{name}' is "
                                 f"{kind.split(':', 1)[0]}, not a table)")


Sleep = Callable[[float], None]


class Player:
    """Plays a recording back in time order; `speed` 1.0 = real time, 10 = ten times faster,
    0 = as fast as possible. `sleep` is injectable so tests never wait. Rows that cannot be
    shown are skipped and counted in `skipped_rows`; `stop()` ends a replay at once."""

    def __init__(self, path: str | Path, speed: float = 1.0, sleep: Sleep | None = None) -> None:
        self.path = Path(path)
        if speed < 0 or not math.isfinite(speed):
            raise ValueError("speed must be a finite number >= 0")
        self.speed = speed
        self._stopped = threading.Event()
        self._sleep = sleep or self._stopped.wait
        self._deadline_s = float("inf")
        self.skipped_rows = 0
        if not self.path.is_file():
            raise RecordingError(f"{self.path}: no such recording file")
        conn = self._connect()
        try:
            _check_tables(conn, self.path, ["meta"])
            self.meta = _check_meta(conn, self.path)
            _check_tables(conn, self.path, ["samples"])
            self.columns = _column_names(self.meta, self.path)
            first, last, count, total = self._query(conn, (
                "SELECT MIN(CASE WHEN ok THEN t END), MAX(CASE WHEN ok THEN t END), "
                f"coalesce(SUM(ok), 0), COUNT(*) FROM (SELECT t, {_TIME_OK} AS ok FROM samples)"),
                (MIN_TIME_S, MAX_TIME_S)).fetchone()
        except sqlite3.DatabaseError as exc:
            raise self._failed(exc) from None
        finally:
            conn.close()
        self.start_t: float | None = None if first is None else float(first)
        self.end_t: float | None = None if last is None else float(last)
        self.sample_count = int(count)
        self._timeless_rows = int(total) - int(count)

    @property
    def duration_s(self) -> float:
        return 0.0 if self.start_t is None or self.end_t is None else self.end_t - self.start_t

    def __len__(self) -> int:
        return self.sample_count

    def __iter__(self) -> Iterator[Snapshot]:
        return self.play()

    def stop(self) -> None:
        """End a replay from another thread: a sleep or a query running now returns."""
        self._stopped.set()

    def play(self, kinds: Sequence[str] | None = None) -> Iterator[Snapshot]:
        """Snapshots in time order, sleeping the recorded gaps divided by `speed` (at most
        MAX_SLEEP_S each)."""
        previous_t: float | None = None
        for t, snapshot in self.samples(kinds):
            if previous_t is not None and self.speed > 0 and t > previous_t:
                self._sleep(min(MAX_SLEEP_S, (t - previous_t) / self.speed))
            if self._stopped.is_set():
                return
            previous_t = t
            yield snapshot

    def samples(self, kinds: Sequence[str] | None = None) -> Iterator[tuple[float, Snapshot]]:
        """(t, snapshot) in time order, without any waiting; bad rows are skipped."""
        sql = ("SELECT t, kind, CASE WHEN length(payload) <= ? THEN payload END FROM samples "
               f"WHERE {_TIME_OK}")
        params: tuple[Any, ...] = (MAX_PAYLOAD_CHARS, MIN_TIME_S, MAX_TIME_S)
        if kinds:
            sql += f" AND kind IN ({','.join('?' * len(kinds))})"
            params += tuple(kinds)
        conn = self._connect()
        try:
            self.skipped_rows = self._rows_without_time(conn, kinds)
            cursor = self._query(conn, sql + " ORDER BY t, id", params)
            while rows := self._fetch(cursor):
                for t, kind, payload in rows:
                    snapshot = self._decode(kind, payload)
                    if snapshot is None:
                        self.skipped_rows += 1
                        continue
                    yield float(t), snapshot
        except sqlite3.DatabaseError as exc:
            raise self._failed(exc) from None
        finally:
            conn.close()

    def _rows_without_time(self, conn: sqlite3.Connection, kinds: Sequence[str] | None) -> int:
        """Rows (of `kinds`) whose time is not a number in range: skipped, never read."""
        if not kinds:
            return self._timeless_rows
        return int(self._query(conn, (
            f"SELECT COUNT(*) FROM samples WHERE NOT {_TIME_OK} AND kind IN "
            f"({','.join('?' * len(kinds))})"), (MIN_TIME_S, MAX_TIME_S, *kinds)).fetchone()[0])

    def _decode(self, kind: object, payload: object) -> Snapshot | None:
        if not isinstance(kind, str) or not isinstance(payload, str):
            return None
        try:
            snapshot = decode(kind, payload, self.columns)
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
            return None
        return None if problem(snapshot) is not None else snapshot

    def _query(self, conn: sqlite3.Connection, sql: str, params: Sequence[Any] = ()
               ) -> sqlite3.Cursor:
        self._deadline_s = time.monotonic() + QUERY_BUDGET_S
        return conn.execute(sql, params)

    def _fetch(self, cursor: sqlite3.Cursor) -> list[Any]:
        if self._stopped.is_set():
            return []
        self._deadline_s = time.monotonic() + QUERY_BUDGET_S
        return cursor.fetchmany(256)

    def _over_budget(self) -> bool:
        return self._stopped.is_set() or time.monotonic() > self._deadline_s

    def _failed(self, exc: sqlite3.Error) -> RecordingError:
        if self._stopped.is_set():
            return RecordingError(f"{self.path}: replay stopped")
        if "interrupted" in str(exc):
            return RecordingError(f"{self.path}: a query took more than {QUERY_BUDGET_S:g} s; "
                                  "not a recording this console wrote")
        return _not_a_recording(self.path, exc)

    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True,
                                   check_same_thread=False)
            # the file is not trusted: no functions from its schema, a bounded page cache,
            # and a budget on every query (the handler's True interrupts it)
            conn.execute("PRAGMA trusted_schema=OFF")
            conn.execute("PRAGMA cache_size=-8192")
            conn.set_progress_handler(self._over_budget, _PROGRESS_STEPS)
        except sqlite3.DatabaseError as exc:
            raise _not_a_recording(self.path, exc) from None
        except sqlite3.Error as exc:
            raise RecordingError(f"{self.path}: cannot open the recording ({exc})") from None
        return conn


def _column_names(meta: Mapping[str, str], path: Path) -> Mapping[str, Columns]:
    """Per kind, per row table: the column names the recording's rows use."""
    out: dict[str, dict[str, tuple[str, ...]]] = {}
    for source in sources.SOURCES:
        tables = out.setdefault(source.kind, {})
        for table, names in source.columns.items():
            tables[table] = _columns(meta, column_meta_key(source.kind, table), names, path)
    return out


def _columns(meta: Mapping[str, str], key: str, default: tuple[str, ...],
             path: Path | None = None) -> tuple[str, ...]:
    """The column names a recording's NPU rows use; odd ones refuse the recording."""
    raw = meta.get(key)
    if raw is None:
        return default
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        value = None
    ok = (isinstance(value, list) and 0 < len(value) <= MAX_COLUMNS
          and all(isinstance(v, str) and 0 < len(v) <= 64 for v in value)
          and len(set(value)) == len(value))
    if not ok:
        raise RecordingError(f"{path}: not a recording this console can replay (meta "
                             f"'{key}' is not a list of distinct column names)")
    return tuple(value)
