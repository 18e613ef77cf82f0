"""The bounded reader on the files a hostile target can name: FIFOs, devices, sparse giants,
files its owner may not read; each ends in a one-line error, at once, in bounded memory."""

from __future__ import annotations

import os
import stat
import threading
import tracemalloc
from pathlib import Path

import pytest

from probes.bounded import Owner, read_regular
from probes.errors import HostError, PathMissing, PathUnreadable
from probes.live import LiveHost
from probes.target.envfile import EnvFileError, read_env_file
from probes.target.parts import Sourced
from probes.target.serving import mindie_args, model_dir

ME = Owner(os.getuid(), frozenset(os.getgroups()) | {os.getgid()})
STRANGER = Owner(os.getuid() + 4242, frozenset({os.getgid() + 4242}))


def _fifo(tmp_path: Path) -> Path:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    return fifo


def _finishes(call: object, limit_s: float = 30.0) -> object:
    """Run `call` in a thread; fail (not hang) when it does not return in time."""
    box: list[object] = []
    worker = threading.Thread(target=lambda: box.append(_capture(call)), daemon=True)
    worker.start()
    worker.join(limit_s)
    assert box, "the read did not return: it would hang the doctor"
    return box[0]


def _capture(call: object) -> object:
    try:
        return call()  # type: ignore[operator]
    except Exception as exc:  # the test looks at which one
        return exc


def test_a_fifo_is_refused_by_type_without_blocking(tmp_path: Path) -> None:
    found = _finishes(lambda: read_regular(str(_fifo(tmp_path))))
    assert isinstance(found, PathUnreadable)
    assert "a FIFO, not a regular file" in str(found)
    assert "\n" not in str(found)


def test_dev_zero_is_refused_by_type() -> None:
    found = _finishes(lambda: LiveHost().read_text("/dev/zero"))
    assert isinstance(found, PathUnreadable)
    assert "character device" in str(found)


def test_a_sparse_3_gb_file_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    sparse = tmp_path / "sparse.json"
    with open(sparse, "wb") as handle:
        handle.truncate(3 * 1024**3)
    tracemalloc.start()
    try:
        with pytest.raises(PathUnreadable, match="larger than"):
            read_regular(str(sparse), max_bytes=4 * 1024 * 1024)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 32 * 1024 * 1024


def test_the_cap_counts_bytes_read_not_the_size_the_file_claims(tmp_path: Path) -> None:
    # /proc files say 0 bytes and still have content: the read counts what comes
    status = read_regular("/proc/self/status", max_bytes=1 << 20)
    assert b"Pid:" in status
    with pytest.raises(PathUnreadable, match="larger than 16 bytes"):
        read_regular("/proc/self/status", max_bytes=16)


def test_an_explicit_range_is_read_exactly(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"0123456789")
    assert read_regular(str(path), 2, 3) == b"234"
    assert read_regular(str(path), 8) == b"89"
    with pytest.raises(PathUnreadable, match="asks for"):
        read_regular(str(path), 0, 10**12)


def test_a_deadline_ends_a_read(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * (3 * 1024 * 1024))
    with pytest.raises(PathUnreadable, match="deadline"):
        read_regular(str(path), deadline_s=-1.0)


def test_missing_and_directory(tmp_path: Path) -> None:
    with pytest.raises(PathMissing):
        read_regular(str(tmp_path / "none"))
    with pytest.raises(PathUnreadable, match="a directory"):
        read_regular(str(tmp_path))


def test_a_file_the_owner_may_not_read_is_withheld(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("password=hunter2")
    secret.chmod(0o600)
    under = str(tmp_path)  # the rights above the test's directory are not the point
    assert read_regular(str(secret), owner=ME, root=under) == b"password=hunter2"
    with pytest.raises(PathUnreadable, match="owner's rights") as caught:
        read_regular(str(secret), owner=STRANGER, root=under)
    assert "hunter2" not in str(caught.value)
    secret.chmod(0o604)
    assert read_regular(str(secret), owner=STRANGER, root=under) == b"password=hunter2"


def test_a_directory_the_owner_may_not_enter_withholds_its_files(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "config.json").write_text("{}")
    (locked / "config.json").chmod(0o644)
    locked.chmod(stat.S_IRWXU)
    try:
        host = LiveHost(root=str(tmp_path), owner=STRANGER)
        with pytest.raises(PathUnreadable, match="may not enter /locked"):
            host.read_text("/locked/config.json")
        assert LiveHost(root=str(tmp_path), owner=ME).read_text("/locked/config.json") == "{}"
    finally:
        locked.chmod(stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP)


def test_root_may_read_everything_by_mode_bits() -> None:
    info = os.stat("/proc/self/status")
    assert Owner(0, frozenset()).may(os.stat_result((0, *tuple(info)[1:])), 4)


def test_a_target_naming_a_fifo_as_its_mindie_config_is_a_note(tmp_path: Path) -> None:
    fifo = _fifo(tmp_path)
    env = {"MIES_CONFIG_JSON_PATH": str(fifo)}
    found = _finishes(lambda: mindie_args(LiveHost(env=env), env, None))
    assert not isinstance(found, Exception)
    assert "FIFO" in found.notes[0]  # type: ignore[attr-defined]
    env = {"MIES_CONFIG_JSON_PATH": "/dev/zero"}
    assert "device" in mindie_args(LiveHost(env=env), env, None).notes[0]


def test_a_hub_ref_that_is_a_fifo_is_skipped(tmp_path: Path) -> None:
    repo = tmp_path / "models--org--m"
    (repo / "refs").mkdir(parents=True)
    os.mkfifo(repo / "refs" / "main")
    env = {"HF_HUB_CACHE": str(tmp_path)}
    found = _finishes(lambda: model_dir(LiveHost(env=env), Sourced("org/m", "cmd"), env, None))
    assert found == (None, "model org/m: not a directory, and not in the Hugging Face cache "
                           "of its environment")


def test_env_file_fifo_and_device_end_in_one_line(tmp_path: Path) -> None:
    for path in (str(_fifo(tmp_path)), "/dev/zero"):
        found = _finishes(lambda p=path: read_env_file(p))
        assert isinstance(found, EnvFileError), found
        assert path in str(found) and "\n" not in str(found)


def test_host_errors_are_host_errors(tmp_path: Path) -> None:
    assert issubclass(PathUnreadable, HostError)


def test_a_process_owner_is_read_from_its_status() -> None:
    from probes.target.parts import ProcessInfo
    from probes.target.proc import parse_status

    status = parse_status("Name:\tvllm\nUid:\t1001\t1001\t1001\t1001\n"
                          "Gid:\t1002\t1002\t1002\t1002\nGroups:\t27 1002 ²\n")
    assert status.uid == 1001 and status.gids == (1002, 27, 1002)
    owner = ProcessInfo(pid=5, cmdline=(), uid=status.uid, gids=status.gids).owner()
    assert owner == Owner(1001, frozenset({1002, 27}))
    assert ProcessInfo(pid=5, cmdline=()).owner() is None


def test_a_target_host_reads_with_its_process_owner(tmp_path: Path) -> None:
    from probes.target.host import TargetHost
    from probes.target.model import Target
    from probes.target.parts import ProcessInfo

    secret = tmp_path / "root-only.json"
    secret.write_text('{"password": "x"}')
    secret.chmod(0o600)
    proc = ProcessInfo(pid=5, cmdline=("vllm", "serve"), uid=STRANGER.uid,
                       gids=tuple(STRANGER.gids), files_root=str(tmp_path))
    target = Target(kind="process", label="p", chosen="--pid 5", environment="e", process=proc)
    host = TargetHost(target, {}, root=str(tmp_path))
    with pytest.raises(PathUnreadable, match="owner's rights"):
        host.read_text("/root-only.json")


def test_a_directory_the_owner_may_not_read_lists_nothing(tmp_path: Path) -> None:
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / "name-that-says-too-much").write_text("")
    hidden.chmod(stat.S_IRWXU)
    try:
        with pytest.raises(PathUnreadable, match="owner's rights"):
            LiveHost(root=str(tmp_path), owner=STRANGER).list_dir("/hidden")
        assert LiveHost(root=str(tmp_path), owner=ME).list_dir("/hidden") == [
            "name-that-says-too-much"]
    finally:
        hidden.chmod(stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP)
