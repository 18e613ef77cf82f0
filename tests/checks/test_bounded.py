"""The worst inputs of issue #16, each run in a subprocess as a user would run it: documented
exit code, at most one line on stderr, no traceback, peak memory under a fixed bound, and an
end (the subprocess timeout is a hang detector, generous on a loaded 2-core machine; it is not
a speed measurement)."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import sqlite3
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import FakeRoot
from machines import build_a2
from tar_builder import END, header, manifest_member, member, pad, pax, pax_record
from tar_builder import gz as gzipped

ROOT = Path(__file__).resolve().parents[2]
PEAK_RSS_MB = 300  # the bound issue #16 names
HANG_S = 240
MIB = 1024 * 1024

CHILD = """
import os, resource, sys
code = 99
try:
    if sys.argv[1] == "console":
        from console.ui.cli import main as console_main
        from console.recording import Player, RecordingError
        try:
            player = Player(sys.argv[2], speed=0)
            shown = sum(1 for _ in player)
            print(f"shown {shown} skipped {player.skipped_rows}")
            code = 0
        except RecordingError as exc:
            print(f"refused: {exc}", file=sys.stderr)
            code = 3
    else:
        from checks.cli import main
        code = main(sys.argv[1:])
finally:
    # VmHWM is this process's own peak; ru_maxrss would start at the parent's size (Linux
    # carries the forked image's peak across exec)
    try:
        with open("/proc/self/status") as status:
            peak_kb = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with open(os.environ["PEAK_RSS_FILE"], "w") as fh:
        fh.write(str(peak_kb))
sys.exit(code)
"""


@dataclass(frozen=True)
class Outcome:
    code: int
    stdout: str
    stderr: str
    peak_rss_mb: float


def run_bounded(argv: list[str], tmp_path: Path, env: dict[str, str] | None = None) -> Outcome:
    peak_file = tmp_path / "peak-rss"
    child_env = dict(os.environ) | (env or {}) | {"PYTHONPATH": str(ROOT),
                                                  "PEAK_RSS_FILE": str(peak_file)}
    proc = subprocess.run([sys.executable, "-c", CHILD, *argv], capture_output=True, text=True,
                          timeout=HANG_S, env=child_env, cwd=tmp_path)
    peak_kb = int(peak_file.read_text())
    return Outcome(proc.returncode, proc.stdout, proc.stderr, peak_kb / 1024)


def assert_bounded(outcome: Outcome, codes: tuple[int, ...]) -> None:
    assert outcome.code in codes, (outcome.code, outcome.stderr[-2000:])
    assert "Traceback" not in outcome.stderr
    assert len(outcome.stderr.strip().splitlines()) <= 1, outcome.stderr[-2000:]
    assert outcome.peak_rss_mb < PEAK_RSS_MB, f"peak RSS {outcome.peak_rss_mb:.0f} MB"


# -- bundles -------------------------------------------------------------------------------------


def _reused_blob(tmp_path: Path) -> bytes:
    """A valid bundle whose 40 paths all answer with one 64 MiB blob (tarfile-compressed to
    64 KiB): loaded once, not 40 times."""
    blob = bytes(64 * MIB - 1)
    digest = hashlib.sha256(blob).hexdigest()
    files = {f"/srv/x{i}": {"text": {"blob": digest, "size": len(blob)}} for i in range(40)}
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in (("snap/manifest.json", json.dumps({
                "schema": "ascend-snapshot/1.2", "created_at": "2025-06-01T12:00:00Z",
                "hostname": "h", "root": "/", "tool_version": "t"}).encode()),
                           ("snap/files.json", json.dumps(files).encode()),
                           (f"snap/blobs/{digest}", blob)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _json_flood(item: bytes, size: int) -> bytes:
    """A valid bundle whose files.json holds one listing of `size` bytes of `item`s (a few
    hundred KiB compressed). 64 MiB of two-letter names is ~13 million str objects, about 1 GB
    if parsed; 6 MiB of empty lists (inside the JSON byte limit) ~2 million lists, 150 MB."""
    items = item * ((size - 64) // len(item))
    files = b'{"/srv": {"listing": {"value": [' + items[:-1] + b"]}}}"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in (("snap/manifest.json", json.dumps({
                "schema": "ascend-snapshot/1.2", "created_at": "2025-06-01T12:00:00Z",
                "hostname": "h", "root": "/", "tool_version": "t"}).encode()),
                           ("snap/files.json", files)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


BUNDLES = {
    "cve-2024-6232": lambda tmp: gzipped(pax(b"1" * 7000 + b" hdrcharset"), manifest_member(),
                                         END),
    "200k pax records": lambda tmp: gzipped(pax(pax_record("uid", "0") * 200_000),
                                            manifest_member(), END),
    "4 GiB pax header": lambda tmp: gzipped(header(b"x", 4 * 1024**3, b"x"), bytes(65536)),
    "5000 chained long names": lambda tmp: gzipped(
        manifest_member(), (header(b"././@LongLink", 7, b"L") + pad(b"snap/a\x00")) * 5000,
        member("snap/a", b""), END),
    "negative size": lambda tmp: gzipped(
        manifest_member(), header(b"snap/blobs/x", size_field=b"\xff" + b"\xc0" + bytes(10)),
        END),
    "corrupt header after the manifest": lambda tmp: gzipped(
        manifest_member(), header(b"snap/env.json", 2, checksum=False), pad(b"{}"), END),
    "reused 64 MiB blob": _reused_blob,
    "64 MiB of tiny JSON strings": lambda tmp: _json_flood(b'"ab",', 64 * MIB),
    "6 MiB of empty JSON lists": lambda tmp: _json_flood(b"[],", 6 * MIB),
}


@pytest.mark.parametrize("case", sorted(BUNDLES))
def test_hostile_bundles_are_bounded(case: str, tmp_path: Path) -> None:
    path = tmp_path / "hostile.tar.gz"
    path.write_bytes(BUNDLES[case](tmp_path))
    outcome = run_bounded(["--from", str(path), "--json"], tmp_path)
    if case == "reused 64 MiB blob":
        assert_bounded(outcome, (0, 1, 2))  # a valid bundle: a report
        assert json.loads(outcome.stdout)["schema"] == "ascend-doctor/1"
    elif "JSON" in case:
        assert_bounded(outcome, (3,))
        assert "files.json" in outcome.stderr
        why = "bytes of JSON" if "strings" in case else "JSON values"
        assert why in outcome.stderr, outcome.stderr
    else:
        assert_bounded(outcome, (3,))
        assert "not a readable .tar.gz bundle" in outcome.stderr


# -- policy files --------------------------------------------------------------------------------


def test_policy_bombs_are_bounded(tmp_path: Path) -> None:
    from test_user_yaml import ALIAS_BOMB

    for name, data in (("bomb.yaml", ALIAS_BOMB.encode()),
                       ("deep.yaml", b"runner: " + b"[" * 200_000 + b"\n")):
        (tmp_path / name).write_bytes(data)
        outcome = run_bounded(["--policy", name, "--only", "logging.level", "--json"],
                              tmp_path)
        assert_bounded(outcome, (3,))
        assert name in outcome.stderr


# -- programs that print without end -------------------------------------------------------------


def endless_npu_smi(root: FakeRoot) -> dict[str, str]:
    host = build_a2(root)
    root.script("/usr/local/bin/npu-smi", "exec yes '| 0 910B4 | OK | 93.2 | 39 | padding "
                "padding padding padding padding |'\n")
    return dict(host.env)


def test_an_endless_npu_smi_is_stopped_at_the_output_cap(fake_root: FakeRoot,
                                                         tmp_path: Path) -> None:
    env = endless_npu_smi(fake_root)
    root = str(fake_root.path)
    outcome = run_bounded(["--root", root, "--python", "/usr/bin/python3", "--json"],
                          tmp_path, env)
    assert_bounded(outcome, (1, 2))
    report = json.dumps(json.loads(outcome.stdout))
    assert "output over 4 MiB" in report
    outcome = run_bounded(["npu", "--root", root], tmp_path, env)
    assert_bounded(outcome, (2,))
    assert "output over 4 MiB" in outcome.stdout


def test_a_bundle_of_an_endless_npu_smi_is_bounded(fake_root: FakeRoot, tmp_path: Path) -> None:
    env = endless_npu_smi(fake_root)
    out = tmp_path / "endless.tar.gz"
    outcome = run_bounded(["bundle", "--root", str(fake_root.path), "--python",
                           "/usr/bin/python3", "--no-logs", "-o", str(out)], tmp_path, env)
    assert outcome.code == 0 and "Traceback" not in outcome.stderr
    assert outcome.peak_rss_mb < PEAK_RSS_MB, f"peak RSS {outcome.peak_rss_mb:.0f} MB"
    commands = json.loads(_member(out, "commands.json"))
    assert all(c["outcome"] in ("output_limit", "exited") for c in commands)
    assert any(c["outcome"] == "output_limit" for c in commands)


def _member(archive: Path, name: str) -> bytes:
    with tarfile.open(archive) as tar:
        found = next(m for m in tar.getmembers() if m.name.endswith("/" + name))
        data = tar.extractfile(found)
        assert data is not None
        return data.read()


# -- console recordings --------------------------------------------------------------------------


def test_hostile_recordings_are_bounded(tmp_path: Path) -> None:
    path = tmp_path / "hostile.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute("INSERT INTO meta VALUES ('schema', 'ascend-console-recording/1')")
        conn.execute("CREATE TABLE samples (id INTEGER PRIMARY KEY AUTOINCREMENT, t, kind, "
                     "payload)")
        rows = [(1.7e9, "host", "[" * 200_000), (1.7e9, "host", "x" * (8 * MIB)),
                (float("inf"), "host", "{}"), ("text", "npu", "{}")]
        conn.executemany("INSERT INTO samples (t, kind, payload) VALUES (?, ?, ?)", rows * 5)
    conn.close()
    outcome = run_bounded(["console", str(path)], tmp_path)
    assert_bounded(outcome, (0,))
    assert "shown 0 skipped 20" in outcome.stdout
    view = tmp_path / "view.sqlite"
    with sqlite3.connect(view) as conn:
        conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute("INSERT INTO meta VALUES ('schema', 'ascend-console-recording/1')")
        conn.execute("CREATE VIEW samples AS WITH RECURSIVE n(id, t, kind, payload) AS "
                     "(SELECT 1, 1.0, 'host', '{}' UNION ALL SELECT id + 1, t, kind, payload "
                     "FROM n) SELECT * FROM n")
    conn.close()
    outcome = run_bounded(["console", str(view)], tmp_path)
    assert_bounded(outcome, (3,))
    assert "'samples' is view" in outcome.stderr


def test_the_gzip_bomb_stays_small_on_disk(tmp_path: Path) -> None:
    # the 4 GiB header case above is refused before a byte of it is written anywhere
    data = BUNDLES["4 GiB pax header"](tmp_path)
    assert len(data) < 8 * 1024 and len(gzip.decompress(data)) < 100 * 1024
