from __future__ import annotations

import dataclasses
import io
import json
import re
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import FakeRoot

from probes.errors import NotRecorded, PathMissing, PathUnreadable
from probes.host import DiskUsage, Host
from probes.live import LiveHost
from probes.recording.model import SCHEMA, BundleLimits, Recording, SnapshotError
from probes.recording.recorder import RecordingHost
from probes.recording.snapshot import SnapshotHost

DEVICE_DIR = "/sys/devices/pci0000:c0/0000:c0:00.0/0000:c1:00.0"
LINK = "/sys/bus/pci/devices/0000:c1:00.0"
MODEL = "/models/qwen3/model-00001-of-00002.safetensors"
MODEL_BYTES = b"\x10\x00\x00\x00\x00\x00\x00\x00" + b'{"__metadata__":{}}' + bytes(range(200))


@pytest.fixture
def machine(fake_root: FakeRoot, corpus_dir: Path, tmp_path: Path) -> LiveHost:
    fake_root.file(f"{DEVICE_DIR}/vendor", "0x19e5\n")
    fake_root.file(f"{DEVICE_DIR}/device", "0xd802\n")
    fake_root.link(LINK, "../../../devices/pci0000:c0/0000:c0:00.0/0000:c1:00.0")
    fake_root.link("/loop", "/loop")
    fake_root.file("/etc/hostname", "atlas-800-a2\n")
    fake_root.file(MODEL, MODEL_BYTES)
    corpus = corpus_dir / "014-info-25.0.rc1.1-910B4-8cards-noproc.txt"
    fake_root.script(
        "/usr/local/bin/npu-smi",
        f'if [ "$2" = "-t" ]; then echo "args: $*"; exit 0; fi\ncat "{corpus}"\n',
    )
    fake_root.script("/usr/bin/fails", "echo 'dcmi module initialize failed' >&2; exit 3\n")
    fake_root.script("/usr/bin/slow", "exec sleep 10\n")
    counter = tmp_path / "counter"
    fake_root.script("/usr/bin/count", f"echo x >> {counter}; wc -l < {counter}\n")
    env = {"PATH": "/usr/local/bin:/usr/bin", "ASCEND_RT_VISIBLE_DEVICES": "0"}
    return LiveHost(root=str(fake_root.path), env=env)


def outcome_of(ask: Callable[[], object]) -> object:
    """An answer or the error it raised, comparable across hosts."""
    try:
        return ask()
    except (PathMissing, PathUnreadable, NotRecorded) as exc:
        return (type(exc).__name__, str(exc))


def questions(host: Host) -> list[Callable[[], object]]:
    return [
        lambda: host.run(["npu-smi", "info"]),
        lambda: host.run(["npu-smi", "info", "-t", "board", "-i", "0"]),
        lambda: host.run(["no-such-tool"]),
        lambda: host.run(["fails"]),
        lambda: host.run(["slow"], 0.2),
        lambda: host.read_text(f"{LINK}/vendor"),
        lambda: host.read_text("/dev/davinci0"),
        lambda: host.read_text("/sys"),
        lambda: host.read_text("/loop"),
        lambda: host.read_bytes(MODEL, 0, 8),
        lambda: host.read_bytes(MODEL, 8, 19),
        lambda: host.read_bytes(MODEL, 100),
        lambda: host.read_bytes("/models/missing.safetensors", 0, 8),
        lambda: host.list_dir("/sys/bus/pci/devices"),
        lambda: host.list_dir(LINK),
        lambda: host.list_dir("/nope"),
        lambda: host.exists("/dev/davinci0"),
        lambda: host.exists(MODEL),
        lambda: host.kind(LINK),
        lambda: host.kind("/dev/davinci_manager"),
        lambda: host.realpath(LINK),
        lambda: host.realpath("/loop"),
        lambda: host.file_size(MODEL),
        lambda: host.file_size(f"{LINK}/vendor"),
        lambda: host.file_size("/models/missing.safetensors"),
        lambda: host.file_size("/sys"),
        lambda: host.file_size("/loop"),
        lambda: host.disk_usage("/models"),
        lambda: host.disk_usage(MODEL),
        lambda: host.disk_usage("/nope"),
        lambda: dict(host.env),
        lambda: host.python_packages(),
    ]


def ask_all(host: Host) -> list[object]:
    return [outcome_of(q) for q in questions(host)]


@pytest.mark.parametrize("bundle_name", ["snap", "snap.tar.gz"])
def test_round_trip_answers_identically(
    machine: LiveHost, tmp_path: Path, bundle_name: str
) -> None:
    recorder = RecordingHost(machine)
    asked = ask_all(recorder)
    saved = recorder.save(tmp_path / bundle_name)
    replay = SnapshotHost(saved)
    assert ask_all(replay) == asked
    assert isinstance(replay, Host)


def test_recorded_answers_are_what_the_machine_said(machine: LiveHost, tmp_path: Path) -> None:
    recorder = RecordingHost(machine)
    answers = ask_all(recorder)
    info = answers[0]
    assert getattr(info, "ok", False)
    assert [getattr(a, "outcome", None) for a in answers[2:5]] == [
        "not_found",
        "exited",
        "timeout",
    ]
    assert answers[6] == ("PathMissing", "/dev/davinci0: no such file or directory")
    assert answers[8][0] == "PathUnreadable"  # type: ignore[index]
    assert answers[20] == DEVICE_DIR
    assert answers[22:26] == [
        len(MODEL_BYTES),
        len("0x19e5\n"),
        ("PathMissing", "/models/missing.safetensors: no such file or directory"),
        ("PathUnreadable", "/sys: Is a directory"),
    ]
    assert answers[26][0] == "PathUnreadable"  # type: ignore[index]
    usage = answers[27]
    assert isinstance(usage, DiskUsage) and usage.path == "/models"
    assert 0 <= usage.free_bytes <= usage.total_bytes and usage.total_bytes > 0
    assert answers[29] == ("PathMissing", "/nope: no such file or directory")
    assert "--python" in answers[-1].error  # type: ignore[attr-defined]


def test_manifest_and_description(machine: LiveHost, tmp_path: Path) -> None:
    recorder = RecordingHost(machine, tool_version="9.9.9")
    recorder.read_text(f"{LINK}/vendor")
    replay = SnapshotHost(recorder.save(tmp_path / "snap"))
    manifest = json.loads((tmp_path / "snap" / "manifest.json").read_text())
    assert manifest["schema"] == SCHEMA == "ascend-snapshot/1.2"
    assert manifest["created_at"].endswith("Z")
    assert replay.manifest.hostname == "atlas-800-a2"
    assert replay.manifest.root == machine.root
    assert replay.manifest.tool_version == "9.9.9"
    assert replay.manifest.source == f"live under {machine.root}"
    assert replay.description == f"recording of atlas-800-a2 taken {manifest['created_at']}"


def test_unrecorded_questions(machine: LiveHost, tmp_path: Path) -> None:
    recorder = RecordingHost(machine)
    recorder.read_bytes(MODEL, 0, 8)
    replay = SnapshotHost(recorder.save(tmp_path / "snap"))
    result = replay.run(["npu-smi", "info"])
    assert result.outcome == "not_recorded"
    assert "not recorded" in result.describe()
    for ask in (
        lambda: replay.read_text("/etc/hostname"),
        lambda: replay.list_dir("/sys"),
        lambda: replay.realpath(LINK),
        lambda: replay.kind(MODEL),
        lambda: replay.exists("/dev/davinci0"),
        lambda: replay.read_bytes(MODEL, 4, 8),
        lambda: replay.read_text(MODEL),
        lambda: replay.file_size(MODEL),  # the ranges say nothing about the size
        lambda: replay.file_size("/etc/hostname"),
        lambda: replay.disk_usage(MODEL),
        lambda: replay.disk_usage("/"),
        lambda: replay.env,
    ):
        with pytest.raises(NotRecorded):
            ask()
    assert replay.python_packages().error


def test_covered_ranges_are_answered(machine: LiveHost, tmp_path: Path) -> None:
    recorder = RecordingHost(machine)
    recorder.read_bytes(MODEL, 0, 64)
    recorder.read_bytes(MODEL, 200)  # to the end of the file
    replay = SnapshotHost(recorder.save(tmp_path / "snap"))
    assert replay.read_bytes(MODEL, 8, 19) == MODEL_BYTES[8:27]
    assert replay.read_bytes(MODEL, 210, 5) == MODEL_BYTES[210:215]
    assert replay.read_bytes(MODEL, 220, 1000) == MODEL_BYTES[220:]
    assert replay.read_bytes(MODEL, 5000, 8) == b""
    with pytest.raises(NotRecorded):
        replay.read_bytes(MODEL, 60, 8)  # straddles the end of the first range


def test_whole_file_range_answers_read_text(machine: LiveHost, tmp_path: Path) -> None:
    recorder = RecordingHost(machine)
    recorder.read_bytes(f"{LINK}/vendor")
    assert SnapshotHost(recorder.save(tmp_path / "s")).read_text(f"{LINK}/vendor") == "0x19e5\n"


def test_repeated_command_replays_in_order(machine: LiveHost, tmp_path: Path) -> None:
    recorder = RecordingHost(machine)
    live = [recorder.run(["count"]).stdout.strip() for _ in range(2)]
    replay = SnapshotHost(recorder.save(tmp_path / "snap"))
    replayed = [replay.run(["count"]).stdout.strip() for _ in range(3)]
    assert live == ["1", "2"]
    assert replayed == ["1", "2", "2"]


def test_recording_host_reraises_and_records(machine: LiveHost) -> None:
    recorder = RecordingHost(machine)
    with pytest.raises(PathMissing):
        recorder.read_text("/nope")
    with pytest.raises(PathUnreadable):
        recorder.read_bytes("/loop", 0, 4)
    snap = recorder.snapshot()
    assert isinstance(snap, Recording)
    assert snap.files["/nope"].text is not None
    assert snap.files["/loop"].ranges[0].error is not None
    with pytest.raises(PathMissing):
        recorder.file_size("/nope")
    with pytest.raises(PathMissing):
        recorder.disk_usage("/nope")
    with pytest.raises(PathUnreadable):
        recorder.file_size("/sys")
    snap = recorder.snapshot()
    assert snap.files["/nope"].file_size is not None
    assert snap.files["/nope"].disk_usage is not None
    assert snap.files["/sys"].file_size is not None
    with pytest.raises(dataclasses.FrozenInstanceError):
        snap.env = {}  # type: ignore[misc]


def test_python_packages_round_trip(tmp_path: Path) -> None:
    recorder = RecordingHost(LiveHost(python=sys.executable))
    found = recorder.python_packages()
    assert found.version_of("pyyaml")
    replay = SnapshotHost(recorder.save(tmp_path / "snap.tar.gz"))
    assert replay.python_packages() == found


def test_size_answers_in_files_json(machine: LiveHost, tmp_path: Path) -> None:
    recorder = RecordingHost(machine)
    usage = recorder.disk_usage("/models")
    recorder.file_size(MODEL)
    with pytest.raises(PathMissing):
        recorder.file_size("/nope")
    recorder.save(tmp_path / "snap")
    files = json.loads((tmp_path / "snap" / "files.json").read_text())
    assert files["/models"] == {
        "disk_usage": {
            "value": {"total_bytes": usage.total_bytes, "free_bytes": usage.free_bytes}
        }
    }
    assert files[MODEL] == {"file_size": {"value": len(MODEL_BYTES)}}
    assert files["/nope"]["file_size"]["error"]["type"] == "PathMissing"
    replay = SnapshotHost(tmp_path / "snap")
    assert replay.disk_usage("/models") == usage
    assert replay.file_size(MODEL) == len(MODEL_BYTES)
    with pytest.raises(PathMissing):
        replay.file_size("/nope")


def test_version_1_snapshot_is_still_read(snapshot_dir: Path) -> None:
    manifest = json.loads((snapshot_dir / "manifest.json").read_text())
    manifest["schema"] = "ascend-snapshot/1"
    (snapshot_dir / "manifest.json").write_text(json.dumps(manifest))
    replay = SnapshotHost(snapshot_dir)
    assert replay.read_text(f"{LINK}/vendor") == "0x19e5\n"
    with pytest.raises(NotRecorded):
        replay.file_size(f"{LINK}/vendor")


def test_save_refuses_a_non_empty_directory(machine: LiveHost, tmp_path: Path) -> None:
    (tmp_path / "snap").mkdir()
    (tmp_path / "snap" / "old").write_text("x")
    with pytest.raises(SnapshotError, match="not an empty directory"):
        RecordingHost(machine).save(tmp_path / "snap")


# -- hostile or broken snapshots ---------------------------------------------------------


@pytest.fixture
def snapshot_dir(machine: LiveHost, tmp_path: Path) -> Path:
    recorder = RecordingHost(machine)
    recorder.read_text(f"{LINK}/vendor")
    recorder.run(["npu-smi", "info"])
    return recorder.save(tmp_path / "snap")


def test_other_schema_major_is_refused(snapshot_dir: Path) -> None:
    manifest = json.loads((snapshot_dir / "manifest.json").read_text())
    manifest["schema"] = "ascend-snapshot/2"
    (snapshot_dir / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(SnapshotError, match="ascend-snapshot/2"):
        SnapshotHost(snapshot_dir)


def test_newer_minor_version_is_read(snapshot_dir: Path) -> None:
    manifest = json.loads((snapshot_dir / "manifest.json").read_text())
    manifest["schema"] = "ascend-snapshot/1.3"
    manifest["something_new"] = True
    (snapshot_dir / "manifest.json").write_text(json.dumps(manifest))
    assert SnapshotHost(snapshot_dir).manifest.schema == "ascend-snapshot/1.3"


@pytest.mark.parametrize(
    ("member", "content"),
    [
        ("commands.json", "[{not json"),
        ("commands.json", '[{"argv": "npu-smi", "outcome": "exited"}]'),
        ("files.json", '{"/x": {"text": {"blob": "../manifest.json"}}}'),
        ("files.json", '{"/x": {"kind": {"value": "socket"}}}'),
        ("files.json", '{"/x": {"file_size": {"value": -1}}}'),
        ("files.json", '{"/x": {"file_size": {"value": true}}}'),
        ("files.json", '{"/x": {"file_size": {"value": "12"}}}'),
        ("files.json", '{"/x": {"disk_usage": {"value": {"total_bytes": 10}}}}'),
        ("files.json", '{"/x": {"disk_usage": {"value": [10, 5]}}}'),
        ("files.json", '{"/x": {"disk_usage": {"value": {"total_bytes": 1, "free_bytes": -5}}}}'),
        ("env.json", '{"A": 1}'),
        ("manifest.json", "{}"),
    ],
)
def test_bad_members_are_refused_by_name(snapshot_dir: Path, member: str, content: str) -> None:
    (snapshot_dir / member).write_text(content)
    with pytest.raises(SnapshotError, match=re.escape(member)):
        SnapshotHost(snapshot_dir)


def test_tampered_blob_is_refused(snapshot_dir: Path) -> None:
    blob = next((snapshot_dir / "blobs").iterdir())
    blob.write_text("changed")
    with pytest.raises(SnapshotError, match=f"blobs/{blob.name}"):
        SnapshotHost(snapshot_dir)


def test_symlinked_member_is_refused(snapshot_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "elsewhere.json").write_text("{}")
    (snapshot_dir / "env.json").symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(SnapshotError, match=r"env\.json"):
        SnapshotHost(snapshot_dir)


def test_missing_snapshot(tmp_path: Path) -> None:
    with pytest.raises(SnapshotError):
        SnapshotHost(tmp_path / "nothing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(SnapshotError, match=r"manifest\.json"):
        SnapshotHost(tmp_path / "empty")


def write_tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes]]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for info, data in members:
            info.size = len(data) if info.isfile() else 0
            tar.addfile(info, io.BytesIO(data) if info.isfile() else None)
    return path


def member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = link
    return info


@pytest.mark.parametrize(
    ("hostile", "message"),
    [
        (member("/etc/manifest.json"), "absolute"),
        (member("snap/../../evil"), r"\.\."),
        (member("snap/env.json", tarfile.SYMTYPE, "/etc/passwd"), "links"),
        (member("snap/env.json", tarfile.LNKTYPE, "snap/manifest.json"), "links"),
        (member("snap/dev", tarfile.CHRTYPE), "device"),
        (member("snap/fifo", tarfile.FIFOTYPE), "device"),
    ],
)
def test_hostile_bundles_are_refused(
    snapshot_dir: Path, tmp_path: Path, hostile: tarfile.TarInfo, message: str
) -> None:
    good = member("snap/manifest.json")
    archive = write_tar(
        tmp_path / "bad.tar.gz",
        [(good, (snapshot_dir / "manifest.json").read_bytes()), (hostile, b"x")],
    )
    with pytest.raises(SnapshotError, match=message) as caught:
        SnapshotHost(archive)
    assert hostile.name in str(caught.value)
    assert "\n" not in str(caught.value)


def test_oversize_member_is_refused(tmp_path: Path) -> None:
    archive = write_tar(tmp_path / "big.tar.gz", [(member("snap/blobs/x"), b"x" * 2000)])
    with pytest.raises(SnapshotError, match="snap/blobs/x"):
        SnapshotHost(archive, BundleLimits(max_member_bytes=1000))


def test_oversize_total_is_refused(tmp_path: Path) -> None:
    parts = [(member(f"snap/blobs/{i}"), b"x" * 600) for i in range(3)]
    archive = write_tar(tmp_path / "big.tar.gz", parts)
    with pytest.raises(SnapshotError, match="in total"):
        SnapshotHost(archive, BundleLimits(max_total_bytes=1000))


def test_json_members_share_one_budget_of_bytes_and_values(snapshot_dir: Path) -> None:
    """Each JSON member is charged before it is parsed; the limits hold for all of them
    together, and the refusal names the member that went over."""
    from probes.recording.reader import json_values_bound

    assert json_values_bound(b'{"a": [1, 2], "b": "x,y"}') == 1 + 7  # , : [ { (strings too)
    members = sorted(snapshot_dir.glob("*.json"))  # files.json is the last one read
    sizes = {path.name: path.stat().st_size for path in members}
    values = {path.name: json_values_bound(path.read_bytes()) for path in members}
    SnapshotHost(snapshot_dir, BundleLimits(max_json_bytes=sum(sizes.values()),
                                            max_json_values=sum(values.values())))
    with pytest.raises(SnapshotError, match=r"^files\.json: .* bytes of JSON, over what is left"):
        SnapshotHost(snapshot_dir, BundleLimits(max_json_bytes=sum(sizes.values()) - 1))
    with pytest.raises(SnapshotError, match=r"^files\.json: up to .* JSON values, over"):
        SnapshotHost(snapshot_dir, BundleLimits(max_json_values=sum(values.values()) - 1))


def test_too_many_members_is_refused(tmp_path: Path) -> None:
    parts = [(member(f"snap/blobs/{i}"), b"") for i in range(30)]
    archive = write_tar(tmp_path / "many.tar.gz", parts)
    with pytest.raises(SnapshotError, match="more than 10 members"):
        SnapshotHost(archive, BundleLimits(max_members=10))


def test_not_a_bundle(tmp_path: Path) -> None:
    (tmp_path / "x.tar.gz").write_bytes(b"this is not gzip")
    with pytest.raises(SnapshotError, match="not a readable"):
        SnapshotHost(tmp_path / "x.tar.gz")
