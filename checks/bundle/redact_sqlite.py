"""A console recording (SQLite) redacted for a bundle: its text read whole, then rewritten.

Masking the file's bytes in place cannot work: SQLite stores a long value across overflow
pages, so a secret may be split by page headers, and freed pages keep old values. So the
recording is opened read-only, every ordinary table is copied into a fresh database value by
value, each text (and each blob, byte for byte) passing the bundle's redactor whole, and the
fresh file is what the bundle holds: no free pages, no old values, no views or triggers.
A file that cannot be read this way is left out of the bundle, never copied raw.
"""

from __future__ import annotations

import sqlite3
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

QUERY_BUDGET_S = 30.0  # the whole copy: far more than a 64 MiB recording needs
_PROGRESS_STEPS = 10_000


class NotRedactable(Exception):
    """The recording could not be read as SQLite; the message is one line."""


def rewrite(data: bytes, text: Callable[[str], str], blob: Callable[[bytes], bytes],
            name: Callable[[str], str]) -> bytes:
    """The recording in `data` with every text value passed through `text`, every blob through
    `blob` and every table and column name through `name`. Raises NotRedactable."""
    with tempfile.TemporaryDirectory(prefix="ascend-bundle-sqlite-") as tmp:
        source, target = Path(tmp) / "in.sqlite", Path(tmp) / "out.sqlite"
        source.write_bytes(data)
        deadline_s = time.monotonic() + QUERY_BUDGET_S
        try:
            src = _open_read_only(source, deadline_s)
            dst = sqlite3.connect(target)
            try:
                for table, sql in _tables(src):
                    _copy_table(src, dst, table, sql, text, blob, name)
                dst.commit()
            finally:
                src.close()
                dst.close()
        except sqlite3.Error as exc:
            raise NotRedactable(f"not a readable SQLite recording ({_one_line(exc)})") from None
        return target.read_bytes()


def _open_read_only(path: Path, deadline_s: float) -> sqlite3.Connection:
    conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    conn.execute("PRAGMA trusted_schema=OFF")
    conn.execute("PRAGMA cache_size=-8192")
    conn.set_progress_handler(lambda: time.monotonic() > deadline_s, _PROGRESS_STEPS)
    return conn


def _tables(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    rows = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table' AND "
                        "name NOT LIKE 'sqlite_%' AND sql NOT LIKE 'CREATE VIRTUAL%'").fetchall()
    return [(str(name), str(sql)) for name, sql in rows]


def _copy_table(src: sqlite3.Connection, dst: sqlite3.Connection, table: str, sql: str,
                text: Callable[[str], str], blob: Callable[[bytes], bytes],
                name: Callable[[str], str]) -> None:
    columns = [str(row[1]) for row in src.execute(f"PRAGMA table_info({_quote(table)})")]
    new_table, new_columns = name(table), [name(c) for c in columns]
    if new_table == table and new_columns == columns:
        dst.execute(sql)  # the same definition: types, keys and AUTOINCREMENT kept
    else:
        dst.execute(f"CREATE TABLE {_quote(new_table)} "
                    f"({', '.join(_quote(c) for c in new_columns)})")
    insert = (f"INSERT INTO {_quote(new_table)} ({', '.join(_quote(c) for c in new_columns)}) "
              f"VALUES ({', '.join('?' * len(columns))})")
    cursor = src.execute(f"SELECT {', '.join(_quote(c) for c in columns)} FROM {_quote(table)}")
    while rows := cursor.fetchmany(256):
        dst.executemany(insert, [tuple(_value(v, text, blob) for v in row) for row in rows])


def _value(value: Any, text: Callable[[str], str], blob: Callable[[bytes], bytes]) -> Any:
    if isinstance(value, str):
        return text(value)
    if isinstance(value, bytes):
        return blob(value)
    return value


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200]
