"""probes.target.find: the target's front door. Each way a target cannot be found is one
TargetError naming the option; a real process, a real recording and a real directory are
found as what they are."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from probes.errors import ProbeError
from probes.live import LiveHost
from probes.recording.recorder import RecordingHost
from probes.recording.snapshot import SnapshotHost
from probes.target.find import (
    Observed,
    TargetError,
    TargetSpec,
    find,
    make_host,
    recorded_model,
    recorded_target,
    still_there,
)
from probes.target.model import shell_target, to_json


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A real process with a secret-looking flag on its command line."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)",
                              "--api-key", "hunter2"])
    try:
        yield child
    finally:
        child.kill()
        child.wait(timeout=10)


@pytest.mark.parametrize(("spec", "message"), [
    (TargetSpec(pid=4242, env_file="svc.env"), "--pid and --env-file exclude each other"),
    (TargetSpec(recording="b.tar.gz", pid=4242), "--from replays the target it recorded"),
    (TargetSpec(root="/srv", pid=4242), "--pid reads the process's files through"),
    (TargetSpec(pid=0), "--pid 0: not a process id"),
    (TargetSpec(recording="b.tar.gz", root="/srv"), "--from and --root exclude each other"),
])
def test_contradicting_options_are_one_target_error(spec: TargetSpec, message: str) -> None:
    with pytest.raises(TargetError, match=message) as caught:
        find(spec)
    assert isinstance(caught.value, ProbeError) and "\n" not in str(caught.value)


def test_a_root_that_is_not_a_directory_is_named(tmp_path: Path) -> None:
    with pytest.raises(TargetError, match=f"--root {tmp_path / 'nope'}: not a directory"):
        find(TargetSpec(root=str(tmp_path / "nope")))


def test_a_root_alone_is_this_shell_over_that_tree(tmp_path: Path) -> None:
    observed = find(TargetSpec(root=str(tmp_path)))
    assert isinstance(observed.host, LiveHost) and observed.host.root == str(tmp_path)
    assert observed.target.kind == "shell" and observed.npu is None


def test_a_process_is_found_its_secrets_masked(sleeper: subprocess.Popen[bytes]) -> None:
    observed = find(TargetSpec(pid=sleeper.pid, npu_smi=False),
                    is_secret=lambda name: name == "api-key")
    process = observed.target.process
    assert process is not None and process.pid == sleeper.pid
    assert "hunter2" not in process.cmdline and process.cmdline[-2] == "--api-key"
    assert observed.npu is None  # npu_smi=False: npu-smi's table is not read


def test_a_process_that_exits_is_said_after_the_run(sleeper: subprocess.Popen[bytes]) -> None:
    observed = find(TargetSpec(pid=sleeper.pid, npu_smi=False))
    assert still_there(observed) == observed.target
    sleeper.kill()
    sleeper.wait(timeout=10)
    target = still_there(observed)
    assert target.problems[-1].startswith(f"process {sleeper.pid} exited during the run")


def test_a_process_that_is_not_there_is_one_line(sleeper: subprocess.Popen[bytes]) -> None:
    sleeper.kill()
    sleeper.wait(timeout=10)
    with pytest.raises(TargetError, match=f"--pid {sleeper.pid}: "):
        find(TargetSpec(pid=sleeper.pid, npu_smi=False))


def test_a_recording_replays_the_target_it_recorded(tmp_path: Path,
                                                    sleeper: subprocess.Popen[bytes]) -> None:
    recorder = RecordingHost(LiveHost(root=str(tmp_path)))
    path = recorder.save(tmp_path / "rec")
    target = find(TargetSpec(pid=sleeper.pid, npu_smi=False)).target
    doc = {**to_json(target), "run_model": "/models/qwen"}
    (path / "target.json").write_text(json.dumps(doc))
    observed = find(TargetSpec(recording=str(path)))
    assert isinstance(observed.host, SnapshotHost)
    assert observed.target.pid == sleeper.pid
    assert recorded_model(observed.host) == "/models/qwen"


def test_a_recording_without_a_target_is_its_shell(tmp_path: Path) -> None:
    path = RecordingHost(LiveHost(root=str(tmp_path))).save(tmp_path / "rec")
    host = make_host(TargetSpec(recording=str(path)))
    assert recorded_target(host).kind == "shell" and recorded_model(host) is None


def test_a_broken_target_json_is_one_line(tmp_path: Path) -> None:
    path = RecordingHost(LiveHost(root=str(tmp_path))).save(tmp_path / "rec")
    (path / "target.json").write_text('{"kind": "martian"}')
    with pytest.raises(TargetError, match=r"^--from .*rec: target\.json: target\.kind: 'martian'"):
        find(TargetSpec(recording=str(path)))


def test_a_shell_target_of_a_live_host_is_always_there(tmp_path: Path) -> None:
    observed = Observed(LiveHost(root=str(tmp_path)), shell_target("test"))
    assert still_there(observed) is observed.target
