"""versions.parity on a container target: the driver files it sees against the host's.

A fake /proc holds process PID in another mount namespace whose root is one fixture machine's
tree; the host is a second tree (the machine's own files, where npu-smi runs). Both are real
files read through the doctor's CLI.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import FakeRoot
from machines import A2, DRIVER_INFO, base_env, build_a2, fixture_policy
from target_fixtures import container_root, plant_process

from checks.cli import main
from probes.live import LiveHost

PID = 4343
DRIVER_FILE = "/usr/local/Ascend/driver/version.info"


def container(tmp_path: Path) -> FakeRoot:
    """Process PID in another mount namespace, running vllm from the tree under its root."""
    proc = tmp_path / "proc" / str(PID)
    tree = container_root(proc)
    env = base_env()
    argv = ["/usr/bin/python3.10", "/usr/local/bin/vllm", "serve", "/models/qwen"]
    plant_process(proc, argv, env)
    return tree


def run(tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """versions.parity of --pid PID, the host machine's files under tmp_path/host/root."""
    host = FakeRoot(tmp_path / "host" / "root")
    host.path.mkdir(parents=True)
    build_a2(host, A2())  # the host: its own driver files and its npu-smi (driver 25.0.rc1.1)
    monkeypatch.setattr("probes.target.proc.PROC", str(tmp_path / "proc"))
    monkeypatch.setattr("probes.target.host.LiveHost",
                        functools.partial(LiveHost, root=str(host.path)))
    monkeypatch.setattr("checks.cli.os.environ", {"PATH": "/usr/local/bin:/usr/bin:/bin",
                                                  "HOME": str(tmp_path)})
    policy = str(fixture_policy(host))
    main(["--pid", str(PID), "--json", "--only", "versions.parity", "--policy", policy])
    result: dict[str, Any] = json.loads(capsys.readouterr().out)["results"][0]
    return result


def test_the_hosts_driver_mounted_in_the_container_passes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    container(tmp_path)
    result = run(tmp_path, capsys, monkeypatch)
    assert "container-driver-mount" not in result["rules"]
    assert "ok: the container's driver version.info is the host's (25.0.rc1.1)" in \
        result["evidence"]


def test_a_container_with_its_own_driver_files_warns(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    tree = container(tmp_path)
    tree.file(DRIVER_FILE, DRIVER_INFO.replace("25.0.rc1.1", "24.1.rc2"))
    result = run(tmp_path, capsys, monkeypatch)
    assert result["status"] == "warn"
    assert "container-driver-mount" in result["rules"]
    assert ("the container's driver version.info says 24.1.rc2 but the host's "
            f"{DRIVER_FILE} says 25.0.rc1.1") in result["summary"]
    assert "-v /usr/local/Ascend/driver/version.info" in result["remedy"]


def test_a_container_that_sees_no_driver_warns(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    tree = container(tmp_path)
    (tree.path / DRIVER_FILE.lstrip("/")).unlink()
    result = run(tmp_path, capsys, monkeypatch)
    assert "container-driver-mount" in result["rules"]
    assert "the container sees no driver version.info" in result["summary"]


def test_pip_check_reads_the_containers_packages_statically(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    tree = container(tmp_path)
    version = A2().packages["vllm_ascend"]
    tree.file(f"/usr/local/lib/python3.10/dist-packages/vllm_ascend-{version}.dist-info/"
              "METADATA", f"Name: vllm_ascend\nVersion: {version}\n"
              "Requires-Dist: torch-npu==9.9.9\nRequires-Dist: numpy\n")
    result = run(tmp_path, capsys, monkeypatch)
    assert "pip-check" in result["rules"]
    assert f"vllm-ascend {version} requires torch-npu==9.9.9, found " in result["summary"]
