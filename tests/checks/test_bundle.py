"""`ascend-doctor bundle` and `--from BUNDLE`: round trip, redaction, hostile archives."""

from __future__ import annotations

import gzip
import io
import json
import os
import tarfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import FakeRoot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from machines import A2, build_a2

from checks.cli import main
from probes.live import LiveHost
from probes.recording.model import SnapshotError
from probes.recording.recorder import RecordingHost
from probes.recording.snapshot import SnapshotHost

PLOG = "/root/ascend/log/debug/plog"
VOLATILE = ("generated_at", "duration_ms")


# -- helpers -------------------------------------------------------------------------------------


def run_cli(host: LiveHost, argv: list[str]) -> int:
    """The CLI with the fixture machine's environment as the observed process environment."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("checks.cli.os.environ", dict(host.env))
        return main(argv)


def bundle(root: FakeRoot, host: LiveHost, out: Path, *extra: str) -> int:
    return run_cli(host, ["bundle", "--root", str(root.path), "--python", "/usr/bin/python3",
                          "-o", str(out), *extra])


def members(path: Path) -> dict[str, bytes]:
    """Every regular member of a bundle, by its name below the top folder."""
    out = {}
    with tarfile.open(path, "r:gz") as tar:
        for member in tar.getmembers():
            if member.isfile():
                data = tar.extractfile(member)
                assert data is not None
                out[member.name.split("/", 1)[1]] = data.read()
    return out


def comparable(report: dict[str, Any]) -> dict[str, Any]:
    """A report without what legitimately differs between runs: times and the host line."""
    doc = {k: v for k, v in report.items() if k not in VOLATILE}
    doc["host"] = {k: v for k, v in report["host"].items() if k != "description"}
    doc["results"] = [{k: v for k, v in r.items() if k not in VOLATILE}
                      for r in report["results"]]
    return doc


def sqlite_bytes(tmp: Path, *texts: str) -> bytes:
    """A small SQLite file (the shape of a console recording) holding `texts` as values."""
    import sqlite3

    path = tmp / f"made-{len(list(tmp.glob('made-*')))}.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute("CREATE TABLE samples (id INTEGER PRIMARY KEY AUTOINCREMENT, t REAL, "
                     "kind TEXT, payload TEXT)")
        conn.execute("INSERT INTO meta VALUES ('schema', 'ascend-console-recording/1')")
        conn.executemany("INSERT INTO samples (t, kind, payload) VALUES (1.0, 'host', ?)",
                         [(t,) for t in texts])
    conn.close()
    return path.read_bytes()


def sqlite_texts(data: bytes, tmp: Path) -> list[str]:
    import sqlite3

    path = tmp / "read-back.sqlite"
    path.write_bytes(data)
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT value FROM meta UNION ALL SELECT payload FROM samples")
        out = [str(v) for (v,) in rows]
    conn.close()
    path.unlink()
    return out


def plant_plogs(root: FakeRoot, count: int, size: int) -> list[str]:
    names = []
    for i in range(count):
        name = f"plog-{1000 + i}_20250101120{i:03d}000.log"
        body = (f"[INFO] line of {name}\n" * (size // 30 + 1)).encode()[:size]
        root.file(f"{PLOG}/{name}", body)
        names.append(name)
    return names


# -- round trip ------------------------------------------------------------------------------------


def test_round_trip_gives_the_same_report(fake_root: FakeRoot, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    host = build_a2(fake_root, A2(env={"ASCEND_GLOBAL_LOG_LEVEL": "1"}))
    plant_plogs(fake_root, 3, 1000)
    out = tmp_path / "a2.tar.gz"
    assert bundle(fake_root, host, out) == 0
    summary = capsys.readouterr().out
    assert f"wrote {out}" in summary and "replay anywhere" in summary
    recorded = json.loads(members(out)["report.json"])

    code = main(["--from", str(out), "--json"])
    replayed = json.loads(capsys.readouterr().out)

    assert comparable(replayed) == comparable(recorded)
    assert code == recorded["exit_code"] == 1  # the planted INFO log level warns
    assert recorded["host"]["description"].startswith("live under")
    assert replayed["host"]["description"].startswith("recording of unknown taken ")
    assert {r["id"]: r["status"] for r in replayed["results"]}["npu.health"] == "pass"


def test_npu_inventory_from_a_bundle(fake_root: FakeRoot, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    host = build_a2(fake_root)
    out = tmp_path / "a2.tar.gz"
    assert bundle(fake_root, host, out, "--no-logs") == 0
    capsys.readouterr()
    assert main(["npu", "--from", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["kind"] == "info" and len(doc["chips"]) == 8
    commands = json.loads(members(out)["commands.json"])
    assert ["npu-smi", "info", "-m"] in [c["argv"] for c in commands]


def test_plog_tails_are_the_newest_and_bounded(fake_root: FakeRoot, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    host = build_a2(fake_root)
    names = plant_plogs(fake_root, 25, 300 * 1024)
    out = tmp_path / "a2.tar.gz"
    assert bundle(fake_root, host, out) == 0
    found = members(out)
    tails = {name: data for name, data in found.items() if name.startswith("plog/")}
    assert sorted(tails) == sorted(f"plog/debug/plog/{n}" for n in names[-20:])  # newest 20
    # whole lines only: a line is cut at neither end
    assert all(256 * 1024 - 100 < len(data) <= 256 * 1024 for data in tails.values())
    assert all(data.startswith(b"[INFO] ") and data.endswith(b"\n") for data in tails.values())
    index = json.loads(found["bundle.json"])
    assert index["schema"] == "ascend-bundle/1" and index["plog_found"] == 25
    original = (fake_root.path / PLOG.lstrip("/") / names[-1]).read_bytes()
    entry = next(e for e in index["plog"] if e["member"] == f"plog/debug/plog/{names[-1]}")
    kept = original[entry["offset"]:entry["offset"] + entry["length"]]
    assert tails[f"plog/debug/plog/{names[-1]}"] == kept
    assert original[entry["offset"] - 1:entry["offset"]] == b"\n"
    assert "20 newest of 25 files" in capsys.readouterr().out


def test_a_question_never_recorded_is_skip_not_pass(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty-root"
    empty.mkdir()
    RecordingHost(LiveHost(root=str(empty), env={})).save(tmp_path / "nothing")
    code = main(["--from", str(tmp_path / "nothing"), "--json"])
    report = json.loads(capsys.readouterr().out)
    statuses = {r["id"]: r for r in report["results"]}
    assert {r["status"] for r in statuses.values()} <= {"skip", "warn", "error"} - {"error"}
    assert "not recorded" in statuses["npu.health"]["summary"]
    assert code in (0, 1)


def test_bundle_of_this_machine_is_small(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "here.tar.gz"
    assert main(["bundle", "--no-logs", "-o", str(out)]) == 0
    assert out.stat().st_size < 2 * 1024 * 1024
    assert [p.name for p in tmp_path.iterdir()] == ["here.tar.gz"]  # no partial file left
    assert SnapshotHost(out).description.startswith("recording of ")


def test_bundle_into_a_missing_directory_is_exit_3(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bundle", "-o", str(tmp_path / "nope" / "b.tar.gz")]) == 3
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "nope" in err


# -- redaction -------------------------------------------------------------------------------------

SECRETS = {
    "env": "tok-ENV-5ecret-a1a1",
    "env_password": "pw-ENV-5ecret-b2b2",
    "env_ascend": "ascend-5ecret-k9k9",
    "env_url": "url-ENV-5ecret-c3c3",
    "stderr_bearer": "bearer-CMD-5ecret-d4d4",
    "stdout_flag": "flag-CMD-5ecret-e5e5",
    "file_assignment": "file-5ecret-f6f6",
    "file_url": "file-URL-5ecret-g7g7",
    "plog_bearer": "plog-BEARER-5ecret-h8h8",
    "plog_url": "plog-URL-5ecret-i9i9",
    "metrics": "metrics-5ecret-j0j0",
}


def plant_secrets(root: FakeRoot, host: LiveHost) -> tuple[LiveHost, Path]:
    s = SECRETS
    env = dict(host.env) | {
        "HF_TOKEN": s["env"],
        "DB_PASSWORD": s["env_password"],
        "ASCEND_API_KEY": s["env_ascend"],
        "PIP_INDEX_URL": f"https://alice:{s['env_url']}@pypi.corp.example/simple",
    }
    corpus = (root.path / "usr/local/bin/npu-smi").read_text()
    # npu-smi that also echoes credentials on stderr and stdout, as a wrapper script might
    root.script("/usr/local/bin/npu-smi", corpus.removeprefix("#!/bin/sh\n").replace(
        "case", f'echo "Authorization: Bearer {s["stderr_bearer"]}" >&2\n'
                f'echo "wrapper --token={s["stdout_flag"]}"\ncase', 1))
    driver = root.path / "usr/local/Ascend/driver/version.info"
    driver.write_text(driver.read_text() + f"repo_password={s['file_assignment']}\n"
                      f"mirror=https://bob:{s['file_url']}@repo.example.com/x\n")
    plog = (f"[ERROR] request failed, Authorization: Bearer {s['plog_bearer']}\n"
            f"[INFO] fetch https://carol:{s['plog_url']}@hub.example.com/model\n"
            f"[INFO] env echo {s['env']} and {s['env_password']}\n")
    root.file(f"{PLOG}/plog-1_20250101120000000.log", plog)
    metrics = root.path.parent / "metrics.sqlite"
    metrics.write_bytes(sqlite_bytes(root.path.parent, f"hf={s['env']};",
                                     "x" * 5000 + f" token: {s['metrics']} " + "y" * 5000))
    return LiveHost(root=host.root, env=env, python=host.python), metrics


def test_no_planted_secret_reaches_the_bundle(fake_root: FakeRoot, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    host, metrics = plant_secrets(fake_root, build_a2(fake_root))
    out = tmp_path / "secrets.tar.gz"
    assert bundle(fake_root, host, out, "--metrics", str(metrics)) == 0
    summary = capsys.readouterr().out

    raw = gzip.decompress(out.read_bytes())
    found = members(out)
    for name, secret in SECRETS.items():
        assert secret.encode() not in raw, name
        for member, data in found.items():
            assert secret.encode() not in data, (name, member)
    # the places were captured, only the values are gone
    assert "plog/debug/plog/plog-1_20250101120000000.log" in found
    texts = sqlite_texts(found["metrics/metrics.sqlite"], tmp_path)  # rewritten, readable
    assert "hf=<redacted>;" in texts and any("token: <redacted>" in t for t in texts)
    env = json.loads(found["env.json"])
    assert env["HF_TOKEN"] == env["DB_PASSWORD"] == env["ASCEND_API_KEY"] == "<redacted>"
    assert env["PIP_INDEX_URL"] == "<withheld>"  # not on the allow-list: the name only
    index = json.loads(found["bundle.json"])
    kinds = {r["kind"] for r in index["redactions"]}
    assert {"secret-env", "withheld-env", "url-credentials", "authorization",
            "secret-argument", "secret-assignment", "known-secret"} <= kinds
    assert "HF_TOKEN" in summary and "PIP_INDEX_URL" in summary and "withheld" in summary


def test_redact_hostnames_replaces_names_and_addresses(fake_root: FakeRoot, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    host = build_a2(fake_root)
    fake_root.file("/etc/hostname", "atlas-prod-07\n")
    fake_root.file(f"{PLOG}/plog-1_20250101120000000.log",
                   "[INFO] atlas-prod-07 rank 0 at 10.20.30.40:29500, peer 10.20.30.41\n")
    fake_root.file(f"{RECORDINGS}/atlas-prod-07-20250101T120000Z.sqlite",
                   sqlite_bytes(tmp_path, "host atlas-prod-07 at 10.20.30.40"))
    host = LiveHost(root=host.root, env=dict(host.env) | {"HCCL_IF_IP": "10.20.30.40"},
                    python=host.python)
    out = tmp_path / "h.tar.gz"
    assert bundle(fake_root, host, out, "--redact-hostnames") == 0
    raw = gzip.decompress(out.read_bytes())
    for value in (b"atlas-prod-07", b"10.20.30.40", b"10.20.30.41"):
        assert value not in raw
    found = members(out)
    assert json.loads(found["manifest.json"])["hostname"] == "host-1"
    assert json.loads(found["env.json"])["HCCL_IF_IP"] == "ip-1"  # allowed, and pseudonymised
    assert [m for m in found if m.startswith("metrics/")] == [
        "metrics/host-1-20250101T120000Z.sqlite"]
    tail = found["plog/debug/plog/plog-1_20250101120000000.log"].decode()
    assert "rank 0 at ip-1" in tail  # same address, same name


# -- hostile archives ----------------------------------------------------------------------------

MANIFEST = {"schema": "ascend-snapshot/1.1", "created_at": "2025-06-01T12:00:00Z",
            "hostname": "h", "root": "/", "tool_version": "t"}


def _tar(path: Path, add: Callable[[tarfile.TarFile], None]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        add(tar)
    return path


def _file(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def _special(kind: bytes, name: str, target: str = "") -> Callable[[tarfile.TarFile], None]:
    def add(tar: tarfile.TarFile) -> None:
        _file(tar, "snap/manifest.json", json.dumps(MANIFEST).encode())
        info = tarfile.TarInfo(name)
        info.type = kind
        info.linkname = target
        tar.addfile(info)
    return add


def _oversize(path: Path) -> Path:
    # a header that declares 65 MiB: the reader must refuse before reading any of it
    info = tarfile.TarInfo("snap/blobs/huge")
    info.size = 65 * 1024 * 1024
    path.write_bytes(gzip.compress(info.tobuf(format=tarfile.PAX_FORMAT)))
    return path


def _many(tar: tarfile.TarFile) -> None:
    for i in range(20001):
        _file(tar, f"snap/f{i}", b"")


HOSTILE: dict[str, tuple[Callable[[Path], Path], str]] = {
    "absolute": (lambda p: _tar(p, lambda t: _file(t, "/tmp/ascend-evil", b"x")),
                 "/tmp/ascend-evil"),
    "dotdot": (lambda p: _tar(p, lambda t: _file(t, "snap/../../escape", b"x")),
               "snap/../../escape"),
    "symlink": (lambda p: _tar(p, _special(tarfile.SYMTYPE, "snap/env.json", "/etc/passwd")),
                "snap/env.json"),
    "hardlink": (lambda p: _tar(p, _special(tarfile.LNKTYPE, "snap/env.json",
                                            "snap/manifest.json")), "snap/env.json"),
    "device": (lambda p: _tar(p, _special(tarfile.CHRTYPE, "snap/blobs/dev")),
               "snap/blobs/dev"),
    "oversize": (_oversize, "snap/blobs/huge"),
    "too_many": (lambda p: _tar(p, _many), "snap/f20000"),
    "bad_json": (lambda p: _tar(p, lambda t: _file(t, "snap/manifest.json", b"{not json")),
                 "manifest.json"),
    "wrong_version": (lambda p: _tar(p, lambda t: _file(t, "snap/manifest.json", json.dumps(
        MANIFEST | {"schema": "ascend-snapshot/2"}).encode())), "manifest.json"),
}


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A working directory and TMPDIR inside tmp_path, to see anything written around them."""
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("TMPDIR", str(scratch))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    yield work


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_bundle_is_refused_with_one_line(case: str, sandbox: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    make, member = HOSTILE[case]
    archive = make(sandbox / f"{case}.tar.gz")
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    code = main(["--from", str(archive), "--json"])
    captured = capsys.readouterr()
    assert code == 3
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and member in lines[0], captured.err
    assert "Traceback" not in captured.err
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before  # temp dirs were removed
    assert not Path("/tmp/ascend-evil").exists()


def _valid_bundle(tmp: Path) -> bytes:
    empty = tmp / "r"
    empty.mkdir(exist_ok=True)
    out = tmp / "valid.tar.gz"
    if not out.exists():
        recorder = RecordingHost(LiveHost(root=str(empty), env={"A": "1"}))
        _ = recorder.env
        recorder.run(["true"])
        recorder.save(out)
    return out.read_bytes()


def _opens_cleanly(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Through the CLI: a report, or exit 3 with one line on stderr; never a traceback."""
    code = main(["--from", str(path), "--json"])
    captured = capsys.readouterr()
    if code == 3:
        assert captured.out == "" and len(captured.err.strip().splitlines()) == 1
    else:
        assert json.loads(captured.out)["schema"] == "ascend-doctor/1"


PROPERTY = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


@PROPERTY
@given(data=st.binary(max_size=2048))
def test_random_bytes_end_in_a_clean_error(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "random.tar.gz"
    path.write_bytes(data)
    with pytest.raises(SnapshotError):
        SnapshotHost(path)


def test_nul_in_a_member_name_is_a_snapshot_error(tmp_path: Path) -> None:
    path = tmp_path / "nul.tar.gz"
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        _file(tar, "\x00é", b"")
    with pytest.raises(SnapshotError):
        SnapshotHost(path)


@PROPERTY
@given(cut=st.floats(min_value=0.0, max_value=0.999))
def test_truncated_bundles_end_in_a_clean_error(tmp_path: Path, cut: float) -> None:
    whole = _valid_bundle(tmp_path)
    path = tmp_path / "cut.tar.gz"
    path.write_bytes(whole[: int(len(whole) * cut)])
    # every cut is refused, even one inside the gzip trailer or the tar's end padding: the
    # end of the gzip stream and the end-of-archive marker are required
    with pytest.raises(SnapshotError) as caught:
        SnapshotHost(path)
    assert "\n" not in str(caught.value)


NAME = st.text(alphabet=st.sampled_from("ab./_-\\~:\x00 é"), min_size=0, max_size=30)


@PROPERTY
@given(names=st.lists(st.tuples(NAME, st.binary(max_size=64)), max_size=8),
       with_manifest=st.booleans())
def test_random_member_names_end_in_a_clean_error(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str],
                                                  names: list[tuple[str, bytes]],
                                                  with_manifest: bool) -> None:
    path = tmp_path / "names.tar.gz"
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        if with_manifest:
            _file(tar, "snap/manifest.json", json.dumps(MANIFEST).encode())
        for name, data in names:
            try:
                _file(tar, name, data)
            except (ValueError, UnicodeEncodeError):
                continue  # tarfile itself refuses to write this name
    _opens_cleanly(path, capsys)
    for leftover in tmp_path.iterdir():
        assert leftover.name == "names.tar.gz"
    os.remove(path)


# -- the console's metric recording from its default place ----------------------------------------

RECORDINGS = "/root/.local/state/ascend-console/recordings"  # HOME=/root on the fixture machine


def test_the_newest_default_recording_is_included_and_named(
        fake_root: FakeRoot, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    host = build_a2(fake_root)
    fake_root.file(f"{RECORDINGS}/box-20250101T120000Z.sqlite", sqlite_bytes(tmp_path, "old"))
    fake_root.file(f"{RECORDINGS}/box-20250302T080000Z.sqlite", sqlite_bytes(tmp_path, "new"))
    fake_root.file(f"{RECORDINGS}/notes.txt", "not a recording")
    out = tmp_path / "a2.tar.gz"
    assert bundle(fake_root, host, out, "--no-logs") == 0
    summary = capsys.readouterr().out
    found = members(out)
    assert [m for m in found if m.startswith("metrics/")] == [
        "metrics/box-20250302T080000Z.sqlite"]
    assert "new" in sqlite_texts(found["metrics/box-20250302T080000Z.sqlite"], tmp_path)
    index = json.loads(found["bundle.json"])
    assert index["metrics"] == "metrics/box-20250302T080000Z.sqlite"
    assert index["metrics_source"] == f"{RECORDINGS}/box-20250302T080000Z.sqlite"
    assert index["metrics_found"] == 2 and index["metrics_dir"] == RECORDINGS
    line = next(x for x in summary.splitlines() if x.strip().startswith("metrics:"))
    assert "box-20250302T080000Z.sqlite" in line and "newest of 2" in line
    # read beside the recording, not into it: its name holds the host name (see below)
    assert RECORDINGS not in json.loads(found["files.json"])


def test_no_default_recording_says_none(fake_root: FakeRoot, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    host = build_a2(fake_root)
    out = tmp_path / "a2.tar.gz"
    assert bundle(fake_root, host, out, "--no-logs") == 0
    line = next(x for x in capsys.readouterr().out.splitlines()
                if x.strip().startswith("metrics:"))
    assert "none" in line and RECORDINGS in line
    index = json.loads(members(out)["bundle.json"])
    assert index["metrics"] is None and index["metrics_found"] == 0


def test_the_default_place_follows_the_observed_environment(fake_root: FakeRoot) -> None:
    from checks.bundle.collect import find_metrics

    host = build_a2(fake_root)
    fake_root.file("/srv/recs/a-20250101T000000Z.sqlite", b"x" * 100)
    env = dict(host.env) | {"ASCEND_CONSOLE_RECORDINGS": "/srv/recs"}
    moved = LiveHost(root=host.root, env=env, python=host.python)
    found = find_metrics(moved)
    assert found.source == "/srv/recs/a-20250101T000000Z.sqlite" and len(found.data) == 100
    too_big = find_metrics(moved, limit=64)
    assert too_big.source is None and too_big.found == 1
    assert too_big.newest == "/srv/recs/a-20250101T000000Z.sqlite"
    assert "over the 64 bytes limit" in too_big.note and "left out" in too_big.note
    no_home = LiveHost(root=host.root, env={}, python=host.python)
    assert "not an absolute path" in find_metrics(no_home).note


def test_command_outputs_are_cut_to_fit_a_member() -> None:
    from checks.bundle.collect import fit_commands
    from probes.host import CommandResult
    from probes.recording.model import CommandRecord, Manifest, Recording

    junk = "\x01" * 256 * 1024  # escapes to six bytes a character in JSON
    commands = tuple(CommandRecord(CommandResult(("npu-smi", "info", str(i)), "output_limit",
                                                 stdout=junk, stderr=junk,
                                                 error="output over 4 MiB; stopped"), None)
                     for i in range(10))
    recording = Recording(Manifest("ascend-snapshot/1.2", "t", "h", "/", "v"),
                          commands=commands)
    fitted = fit_commands(recording, budget_bytes=1024 * 1024)
    assert sum(len(json.dumps([c.result.stdout, c.result.stderr]))
               for c in fitted.commands) <= 1024 * 1024
    assert all("trimmed" in c.result.error and "output over" in c.result.error
               for c in fitted.commands)
    assert fit_commands(fitted, budget_bytes=1024 * 1024) == fitted  # within the budget: kept


def test_command_outputs_full_of_json_marks_still_read_back(tmp_path: Path) -> None:
    """Commas and brackets in outputs count toward the reader's bound of JSON values
    (probes.recording.BundleLimits.max_json_values): the writer cuts them to fit it too."""
    from checks.bundle.collect import COMMANDS_JSON_VALUES, fit_commands
    from probes.host import CommandResult
    from probes.recording.model import BundleLimits, CommandRecord, Manifest, Recording
    from probes.recording.reader import json_values_bound, read_directory
    from probes.recording.writer import write_directory

    marks = "[{,:" * 200_000  # 800,000 marks, 0.8 MB: within the byte budget
    commands = tuple(CommandRecord(CommandResult(("lspci", str(i)), "output_limit", stdout=marks,
                                                 error="output over 4 MiB; stopped"), None)
                     for i in range(3))
    recording = Recording(Manifest("ascend-snapshot/1.2", "t", "h", "/", "v"),
                          commands=commands)
    write_directory(recording, tmp_path / "raw")
    with pytest.raises(SnapshotError, match=r"commands\.json: up to .* JSON values"):
        read_directory(tmp_path / "raw", BundleLimits())
    fitted = fit_commands(recording)
    assert sum(json_values_bound(c.result.stdout) for c in fitted.commands) \
        <= COMMANDS_JSON_VALUES
    assert all("trimmed" in c.result.error for c in fitted.commands)
    write_directory(fitted, tmp_path / "fitted")
    assert len(read_directory(tmp_path / "fitted", BundleLimits()).commands) == 3


# -- a checkpoint: structural files are data, the replay judges the recorded model -------------


def test_a_checkpoint_bundle_replays_the_live_verdicts(fake_root: FakeRoot, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    from fp8_fixtures import fp8_model_tensors, model_config, write_model

    host = build_a2(fake_root, A2())
    tensors = fp8_model_tensors()
    assert "model.embed_tokens.weight" in tensors  # the name that looked like a secret
    write_model(fake_root.path / "models" / "m", tensors, model_config(), shards=2)
    live_argv = ["--root", str(fake_root.path), "--python", "/usr/bin/python3",
                 "--model", "/models/m", "--json"]
    run_cli(host, live_argv)
    live = json.loads(capsys.readouterr().out)
    out = tmp_path / "m.tar.gz"
    assert bundle(fake_root, host, out, "--model", "/models/m") == 0
    capsys.readouterr()
    recording = SnapshotHost(out)
    index = recording.read_text("/models/m/model.safetensors.index.json")
    assert json.loads(index)["weight_map"]["model.embed_tokens.weight"] == \
        "model-00001-of-00002.safetensors"  # never rewritten as a "secret assignment"
    assert index == (fake_root.path / "models/m/model.safetensors.index.json").read_text()
    main(["--from", str(out), "--json"])  # no --model: the recorded one is judged
    replayed = json.loads(capsys.readouterr().out)
    assert replayed["host"]["model"] == "/models/m (the model the recorded run judged)"
    statuses = {r["id"]: r["status"] for r in live["results"]}
    assert {r["id"]: r["status"] for r in replayed["results"]} == statuses
    assert [s for s in statuses.values() if s == "fail"]  # FP8 on an A2: live FAILs kept


def test_a_replay_lists_the_verdicts_it_could_not_reproduce(
        fake_root: FakeRoot, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A tokenizer.json over the host's read cap is opened where it lies, so the bundle does
    not hold it and the replay cannot build the tokenizer: that verdict is listed."""
    pytest.importorskip("tokenizers")
    from checks.builtin import tokenizer_load

    monkeypatch.setattr(tokenizer_load, "_tokenizer_json", lambda *_: None)
    import shutil

    from fp8_fixtures import bf16_model_tensors, model_config, write_model
    from tokenizer_fixtures import write_qwen3_model_dir

    host = build_a2(fake_root, A2())
    config = model_config(fp8=False, model_type="qwen3", architecture="Qwen3ForCausalLM")
    model = write_model(fake_root.path / "models" / "m", bf16_model_tensors(), config,
                        shards=1)
    tokenizer = write_qwen3_model_dir(tmp_path / "tok")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tokenizer / name, model / name)
    out = tmp_path / "t.tar.gz"
    assert bundle(fake_root, host, out, "--model", "/models/m") == 0
    capsys.readouterr()
    recorded = {r["id"]: r["status"]
                for r in json.loads(members(out)["report.json"])["results"]}
    assert recorded["tokenizer.token-ids"] != "skip"  # loaded live
    main(["--from", str(out), "--json", "--only", "tokenizer.token-ids,npu.health"])
    replayed = json.loads(capsys.readouterr().out)
    assert {r["id"]: r["status"] for r in replayed["results"]}["tokenizer.token-ids"] == "skip"
    assert replayed["target"]["problems"] == [
        f"replay: tokenizer.token-ids was {recorded['tokenizer.token-ids']} in the recorded "
        "run, skip here"]  # npu.health was reproduced: not listed


def test_a_local_model_is_planned_against_a_recorded_machine(
        fake_root: FakeRoot, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from fp8_fixtures import bf16_model_tensors, model_config, write_model

    host = build_a2(fake_root, A2())
    out = tmp_path / "machine.tar.gz"
    assert bundle(fake_root, host, out) == 0  # no model on the recorded machine
    capsys.readouterr()
    model = write_model(tmp_path / "here" / "m", bf16_model_tensors(),
                        model_config(fp8=False), shards=1)  # only on this machine
    main(["--from", str(out), "--model", str(model), "--tp", "2", "--json",
          "--only", "npu.hbm-fit,checkpoint.format"])
    doc = json.loads(capsys.readouterr().out)
    results = {r["id"]: r for r in doc["results"]}
    assert "not recorded" not in results["npu.hbm-fit"]["summary"]
    assert results["npu.hbm-fit"]["status"] != "skip", results["npu.hbm-fit"]["summary"]
    assert doc["host"]["description"].endswith(f"; the model {model} read from this machine")
    assert str(model) in results["checkpoint.format"]["summary"] + " ".join(
        results["checkpoint.format"]["evidence"])
