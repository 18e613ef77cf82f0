from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest
from conftest import FakeRoot

from probes.errors import PathMissing, PathUnreadable
from probes.host import Host
from probes.live import LiveHost, resolve_inside

PCI_ADDR = "0000:c1:00.0"
PCI_DEVICE_DIR = "/sys/devices/pci0000:c0/0000:c0:00.0/0000:c1:00.0"
CORPUS_014 = "014-info-25.0.rc1.1-910B4-8cards-noproc.txt"


@pytest.fixture
def sysfs_root(fake_root: FakeRoot) -> FakeRoot:
    fake_root.file(f"{PCI_DEVICE_DIR}/vendor", "0x19e5\n")
    fake_root.file(f"{PCI_DEVICE_DIR}/device", "0xd802\n")
    fake_root.file(f"{PCI_DEVICE_DIR}/class", "0x120000\n")
    fake_root.link(
        f"/sys/bus/pci/devices/{PCI_ADDR}", f"../../../devices/pci0000:c0/0000:c0:00.0/{PCI_ADDR}"
    )
    fake_root.file("/usr/local/Ascend/driver/version.info", "Version=25.0.rc1.1\n")
    fake_root.link("/etc/ascend_install.info", "/usr/local/Ascend/driver/version.info")
    fake_root.link("/opt/escape", "../../../../../../../../../usr/local/Ascend/driver")
    fake_root.link("/loop/a", "b")
    fake_root.link("/loop/b", "/loop/a")
    return fake_root


@pytest.fixture
def host(sysfs_root: FakeRoot) -> LiveHost:
    return LiveHost(root=str(sysfs_root.path), env={"PATH": "/usr/local/bin:/usr/bin"})


def test_live_host_is_a_host(host: LiveHost) -> None:
    assert isinstance(host, Host)
    assert host.description == f"live under {host.root}"
    assert LiveHost().description == "live"


def test_sysfs_relative_link_resolved_inside_root(host: LiveHost) -> None:
    link = f"/sys/bus/pci/devices/{PCI_ADDR}"
    assert host.realpath(link) == PCI_DEVICE_DIR
    assert host.read_text(f"{link}/vendor") == "0x19e5\n"
    assert host.read_text(f"{link}/device").strip() == "0xd802"
    assert host.list_dir(link) == ["class", "device", "vendor"]
    assert host.kind(link) == "dir"
    assert host.list_dir("/sys/bus/pci/devices") == [PCI_ADDR]


def test_parent_of_resolved_link_is_the_bridge(host: LiveHost) -> None:
    bridge = "/sys/devices/pci0000:c0/0000:c0:00.0"
    assert host.realpath(f"/sys/bus/pci/devices/{PCI_ADDR}/..") == bridge


def test_absolute_link_is_rerooted(host: LiveHost) -> None:
    assert host.realpath("/etc/ascend_install.info") == "/usr/local/Ascend/driver/version.info"
    assert host.read_text("/etc/ascend_install.info") == "Version=25.0.rc1.1\n"


def test_dotdot_never_escapes_root(host: LiveHost) -> None:
    assert host.realpath("/opt/escape") == "/usr/local/Ascend/driver"
    assert host.list_dir("/opt/escape") == ["version.info"]
    assert host.realpath("/../../..") == "/"
    assert resolve_inside(host.root, "/a/../../b") == "/b"


def test_at_the_real_root_the_kernel_follows_links(tmp_path: Path) -> None:
    """At / nothing can lead out of the root: the path is opened as given, and a loop or a
    relative path is still refused in one line."""
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "version.info").write_text("Version=1\n")
    (tmp_path / "link").symlink_to("real")
    (tmp_path / "loop").symlink_to("loop")
    host = LiveHost()
    link = str(tmp_path / "link" / "version.info")
    assert host.host_path(link) == link
    assert host.read_text(link) == "Version=1\n"
    assert host.realpath(link) == str((tmp_path / "real" / "version.info").resolve())
    with pytest.raises(PathUnreadable, match="symbolic links"):
        host.read_text(str(tmp_path / "loop"))
    assert host.exists(str(tmp_path / "loop")) is False
    with pytest.raises(PathUnreadable, match="not an absolute path"):
        host.read_text("relative/version.info")


def test_loop_is_unreadable(host: LiveHost) -> None:
    with pytest.raises(PathUnreadable, match="symbolic links"):
        host.read_text("/loop/a")
    with pytest.raises(PathUnreadable):
        host.realpath("/loop/b")
    assert host.exists("/loop/a") is False


def test_missing_and_kinds(host: LiveHost) -> None:
    with pytest.raises(PathMissing):
        host.read_text("/dev/davinci0")
    with pytest.raises(PathMissing):
        host.list_dir("/nope")
    assert host.kind("/dev/davinci0") == "missing"
    assert host.exists("/dev/davinci0") is False
    assert host.kind("/usr/local/Ascend/driver/version.info") == "file"
    assert host.realpath("/no/such/thing") == "/no/such/thing"


def test_directory_read_is_unreadable(host: LiveHost) -> None:
    with pytest.raises(PathUnreadable):
        host.read_text("/sys")
    with pytest.raises(PathUnreadable):
        host.list_dir("/usr/local/Ascend/driver/version.info")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads everything")
def test_permission_denied_is_unreadable(fake_root: FakeRoot) -> None:
    fake_root.file("/secret", "x", mode=0o000)
    with pytest.raises(PathUnreadable):
        LiveHost(root=str(fake_root.path)).read_text("/secret")


def test_relative_path_is_refused(host: LiveHost) -> None:
    with pytest.raises(PathUnreadable):
        host.read_text("etc/hostname")


def test_char_device_kind_on_live_machine() -> None:
    assert LiveHost().kind("/dev/null") == "char_device"
    assert LiveHost().exists("/dev/null")


def test_read_bytes_ranges(fake_root: FakeRoot) -> None:
    fake_root.file("/model/w.safetensors", bytes(range(256)) * 4)
    host = LiveHost(root=str(fake_root.path))
    assert host.read_bytes("/model/w.safetensors", 0, 8) == bytes(range(8))
    wrapped = bytes(range(250, 256)) + bytes(range(4))
    assert host.read_bytes("/model/w.safetensors", 250, 10) == wrapped
    assert host.read_bytes("/model/w.safetensors", 1020) == bytes(range(252, 256))
    assert host.read_bytes("/model/w.safetensors", 5000, 8) == b""
    with pytest.raises(ValueError):
        host.read_bytes("/model/w.safetensors", -1, 8)


def test_read_text_replaces_undecodable_bytes(fake_root: FakeRoot) -> None:
    fake_root.file("/f", b"ok \xff\xfe end")
    assert LiveHost(root=str(fake_root.path)).read_text("/f") == "ok \ufffd\ufffd end"


# -- commands ------------------------------------------------------------------------------


def test_fake_npu_smi_under_root(fake_root: FakeRoot, corpus_dir: Path) -> None:
    corpus = corpus_dir / CORPUS_014
    fake_root.script("/usr/local/bin/npu-smi", f'cat "{corpus}"\n')
    host = LiveHost(root=str(fake_root.path), env={"PATH": "/usr/local/bin:/usr/bin:/bin"})
    result = host.run(["npu-smi", "info"])
    assert result.ok, result
    assert result.stdout == corpus.read_text()
    assert result.argv == ("npu-smi", "info")
    assert host.run(["/usr/local/bin/npu-smi", "info"]).stdout == result.stdout


def test_live_programs_are_not_used_under_root(fake_root: FakeRoot) -> None:
    host = LiveHost(root=str(fake_root.path), env={"PATH": "/usr/bin:/bin"})
    assert host.run(["sh", "-c", "true"]).outcome == "not_found"
    assert host.run(["/bin/sh", "-c", "true"]).outcome == "not_found"
    assert host.run(["./sh"]).outcome == "error"


def test_program_found_through_symlinked_path_entry(fake_root: FakeRoot) -> None:
    fake_root.script("/usr/local/Ascend/driver/tools/npu-smi", "echo linked\n")
    fake_root.link("/usr/local/bin/npu-smi", "../Ascend/driver/tools/npu-smi")
    host = LiveHost(root=str(fake_root.path), env={"PATH": "/usr/local/bin"})
    assert host.run(["npu-smi"]).stdout == "linked\n"


def test_missing_program_is_an_answer() -> None:
    result = LiveHost().run(["ascend-doctor-no-such-program", "info"])
    assert result.outcome == "not_found"
    assert result.exit_code is None
    assert "not found" in result.describe()


def test_nonzero_exit_is_an_ordinary_answer() -> None:
    result = LiveHost().run([sys.executable, "-c", "import sys; print('x'); sys.exit(3)"])
    assert (result.outcome, result.exit_code, result.stdout) == ("exited", 3, "x\n")
    assert not result.ok


def test_env_is_the_child_env() -> None:
    env = {"PATH": os.environ["PATH"], "ASCEND_RT_VISIBLE_DEVICES": "0,1"}
    result = LiveHost(env=env).run(["sh", "-c", "echo $ASCEND_RT_VISIBLE_DEVICES"])
    assert result.stdout == "0,1\n"
    assert LiveHost(env=env).env == env
    assert LiveHost().env == dict(os.environ)


def test_path_comes_from_env() -> None:
    assert LiveHost(env={"PATH": "/nonexistent"}).run(["sh", "-c", "true"]).outcome == "not_found"


def test_timeout_kills_process_group(tmp_path: Path) -> None:
    # The child starts a grandchild that inherits the pipes, then both sleep.
    code = (
        "import subprocess, time; subprocess.Popen(['sleep', '30']);"
        "print('started', flush=True); time.sleep(30)"
    )
    timeout_s = 0.5
    started = time.monotonic()
    result = LiveHost().run([sys.executable, "-c", code], timeout_s=timeout_s)
    elapsed_s = time.monotonic() - started
    assert result.outcome == "timeout"
    assert elapsed_s < 10  # well short of the 30 s sleep: a loaded machine is slow, not hung
    assert result.stdout == "started\n"
    assert "timed out" in result.describe()


def test_timeout_with_escaped_grandchild_still_returns() -> None:
    # setsid puts the grandchild outside the group: it keeps the pipes open after the kill.
    code = (
        "import subprocess, time;"
        "subprocess.Popen(['sleep', '20'], start_new_session=True); time.sleep(30)"
    )
    timeout_s = 0.3
    started = time.monotonic()
    result = LiveHost().run([sys.executable, "-c", code], timeout_s=timeout_s)
    assert result.outcome == "timeout"
    assert time.monotonic() - started < 10  # well short of the escaped sleep's 20 s


def test_exec_format_error_is_error(fake_root: FakeRoot) -> None:
    fake_root.file("/usr/bin/broken", b"\x00\x01not a program", mode=0o755)
    result = LiveHost(root=str(fake_root.path), env={"PATH": "/usr/bin"}).run(["broken"])
    assert result.outcome == "error"
    assert result.error


def test_empty_argv_is_error() -> None:
    assert LiveHost().run([]).outcome == "error"


# -- python --------------------------------------------------------------------------------


def test_python_packages_of_current_interpreter() -> None:
    found = LiveHost().python_packages()
    assert found.error == ""
    assert found.interpreter == sys.executable
    assert found.python_version == sys.version.split()[0]
    assert found.version_of("PyYAML") is not None


def test_python_under_root_needs_explicit_interpreter(fake_root: FakeRoot) -> None:
    found = LiveHost(root=str(fake_root.path)).python_packages()
    assert found.interpreter == ""
    assert "--python" in found.error


def test_python_under_root_is_resolved_under_root(fake_root: FakeRoot) -> None:
    found = LiveHost(root=str(fake_root.path), python=sys.executable).python_packages()
    assert "not found" in found.error


# -- sizes and file systems --------------------------------------------------------------


def test_file_size_follows_links_inside_root(host: LiveHost) -> None:
    assert host.file_size("/usr/local/Ascend/driver/version.info") == len("Version=25.0.rc1.1\n")
    assert host.file_size("/etc/ascend_install.info") == len("Version=25.0.rc1.1\n")
    assert host.file_size(f"/sys/bus/pci/devices/{PCI_ADDR}/vendor") == len("0x19e5\n")
    assert host.file_size("/opt/escape/version.info") == len("Version=25.0.rc1.1\n")


def test_file_size_errors_are_like_read_text(host: LiveHost) -> None:
    with pytest.raises(PathMissing):
        host.file_size("/dev/davinci0")
    with pytest.raises(PathMissing):
        host.file_size("/usr/local/Ascend/driver/version.info/below")
    with pytest.raises(PathUnreadable, match="directory"):
        host.file_size("/sys")
    with pytest.raises(PathUnreadable, match="symbolic links"):
        host.file_size("/loop/a")
    with pytest.raises(PathUnreadable):
        host.file_size("etc/hostname")


def test_file_size_of_empty_and_large_sparse_files(fake_root: FakeRoot) -> None:
    fake_root.file("/empty")
    big = fake_root.file("/big")
    with big.open("wb") as fh:
        fh.truncate(5 * 1024**3)  # sparse: 5 GiB without the disk space
    host = LiveHost(root=str(fake_root.path))
    assert host.file_size("/empty") == 0
    assert host.file_size("/big") == 5 * 1024**3


def test_disk_usage_is_the_file_system_under_root(host: LiveHost) -> None:
    usage = host.disk_usage("/usr/local/Ascend")
    fs = os.statvfs(host.root)
    assert usage.path == "/usr/local/Ascend"
    assert usage.total_bytes == fs.f_blocks * fs.f_frsize
    assert 0 <= usage.free_bytes <= usage.total_bytes
    assert host.disk_usage("/etc/ascend_install.info").total_bytes == usage.total_bytes


def test_disk_usage_of_missing_path(host: LiveHost) -> None:
    with pytest.raises(PathMissing):
        host.disk_usage("/var/log/ascend")
    with pytest.raises(PathUnreadable):
        host.disk_usage("/loop/b")
