"""`ascend-doctor --pid`, discovery, --env-file and containers, as a user meets them: real
processes started here with their own command line, environment and packages, while the
test's own shell differs in each.

Other runs on this machine may have servers of their own: discovery assertions look for our
pid among the candidates, and judge it only when it is the one chosen.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import FakeRoot
from machines import base_env, fixture_policy
from target_fixtures import container_root, fake_vllm, plant_process, running, write_script

from checks.cli import main
from checks.errors import UsageError
from checks.inputs import observe, still_there
from checks.options import HostOptions
from probes.target.proc import ProcReader

ROOT = Path(__file__).resolve().parents[2]
TOOLKIT = "/usr/local/Ascend/ascend-toolkit/latest"
SET_ENV = {"ASCEND_HOME_PATH": TOOLKIT, "ASCEND_TOOLKIT_HOME": TOOLKIT,
           "ASCEND_OPP_PATH": f"{TOOLKIT}/opp"}


def run(shell: dict[str, str], argv: list[str], capsys: pytest.CaptureFixture[str]
        ) -> tuple[int, dict[str, Any]]:
    """The CLI in this process, with `shell` as the environment it was typed in."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("checks.cli.os.environ", dict(shell))
        code = main(argv)
    out = capsys.readouterr().out
    return code, json.loads(out) if "--json" in argv else {"text": out}


def by_id(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in doc["results"]}


def pairs(doc: dict[str, Any]) -> list[tuple[str, str]]:
    return [(r["id"], r["status"]) for r in doc["results"]]


# -- a process on this machine --------------------------------------------------------------------


def test_pid_judges_the_process_not_this_shell(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    shell = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "ASCEND_GLOBAL_LOG_LEVEL": "3"}
    process = {"HOME": str(tmp_path), "ASCEND_GLOBAL_LOG_LEVEL": "1", **SET_ENV}
    with fake_vllm(tmp_path, process) as server:
        code, doc = run(shell, ["--pid", str(server.pid), "--json"], capsys)
        _, text = run(shell, ["--pid", str(server.pid)], capsys)
    _, mine = run(shell, ["--root", "/", "--json"], capsys)
    target, model = doc["target"], str(tmp_path / "models" / "m")
    assert code == 2  # the model directory has no weights: checkpoint.format fails
    assert (target["kind"], target["pid"], target["chosen"]) == (
        "process", server.pid, f"--pid {server.pid}")
    assert target["label"].startswith(f"process {server.pid} (vllm serve {model} ")
    assert target["serving"]["tensor_parallel_size"] == {
        "value": 2, "source": "`--tensor-parallel-size 2` on the command line"}
    assert target["serving"]["max_model_len"]["value"] == 8192
    assert target["serving"]["model_dir"]["value"] == model
    assert doc["host"]["model"] == f"{model} (from `vllm serve {model}` on the command line)"
    assert f"of process {server.pid}; packages read without running it" in doc["host"]["python"]

    results, shells = by_id(doc), by_id(mine)
    assert results["logging.level"]["status"] == "warn"
    assert "level 1 (INFO)" in results["logging.level"]["summary"]
    assert "level 3 (ERROR)" in shells["logging.level"]["summary"]
    assert shells["logging.level"]["summary"].endswith("(judged: this shell's environment)")
    assert f"environment judged: process {server.pid}" in results["logging.level"]["evidence"][0]
    assert "ASCEND_* set: ASCEND_GLOBAL_LOG_LEVEL, ASCEND_HOME_PATH, ASCEND_OPP_PATH, " \
        "ASCEND_TOOLKIT_HOME" in results["cann.environment"]["evidence"]
    assert "ASCEND_* set: ASCEND_GLOBAL_LOG_LEVEL" in shells["cann.environment"]["evidence"]
    packages = " ".join(results["versions.parity"]["evidence"])
    assert "torch_npu 2.7.1.post1" in packages and "vllm_ascend 0.11.0" in packages
    assert "torch_npu 2.7.1.post1" not in " ".join(shells["versions.parity"]["evidence"])
    assert results["checkpoint.format"]["status"] != "skip"  # the command line's model
    assert model in results["checkpoint.format"]["summary"]
    assert text["text"].splitlines()[1].startswith(f"target: process {server.pid} (vllm serve")


def test_discovery_finds_the_server_without_pid(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    shell = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    with fake_vllm(tmp_path, {"ASCEND_GLOBAL_LOG_LEVEL": "0"}) as server:
        _, doc = run(shell, ["--json", "--only", "logging.level"], capsys)
    target = doc["target"]
    assert server.pid in [c["pid"] for c in target["candidates"]]
    mine = next(c for c in target["candidates"] if c["pid"] == server.pid)
    assert mine["server"] == "vllm" and mine["label"].startswith("vllm serve ")
    if len(target["candidates"]) == 1:
        assert target["pid"] == server.pid
        assert target["chosen"] == "discovered: the only candidate, a vLLM server"
        assert "level 0 (DEBUG)" in doc["results"][0]["summary"]


def test_no_server_is_this_shell_and_the_verdicts_say_so(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "proc").mkdir()
    monkeypatch.setattr("probes.target.proc.PROC", str(tmp_path / "proc"))
    shell = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "ASCEND_GLOBAL_LOG_LEVEL": "1"}
    _, doc = run(shell, ["--json", "--only", "logging.level"], capsys)
    assert (doc["target"]["kind"], doc["target"]["chosen"]) == ("shell",
                                                                "no serving process found")
    result = doc["results"][0]
    assert result["summary"].endswith("(judged: this shell's environment)")
    assert result["evidence"][0].startswith("environment judged: this shell's (no serving "
                                            "process found)")


# -- a process in another mount namespace ---------------------------------------------------------


PID = 4242


def container(tmp_path: Path, cpus: str = "2-3") -> tuple[FakeRoot, dict[str, str]]:
    """A fake /proc holding process PID, whose root is an Atlas 800I A2's tree with a Python
    and the packages of the deployment inside it; the NUMA nodes are 0 (CPUs 0-1, every NPU)
    and 1 (CPUs 2-3)."""
    proc = tmp_path / "proc" / str(PID)
    tree = container_root(proc)
    tree.file("/models/qwen/config.json", '{"model_type": "qwen3_moe"}')
    tree.file("/sys/devices/system/node/node0/cpulist", "0-1\n")
    tree.file("/sys/devices/system/node/node1/cpulist", "2-3\n")
    env = {**base_env(), "ASCEND_GLOBAL_LOG_LEVEL": "1", "ASCEND_RT_VISIBLE_DEVICES": "0,1"}
    env.pop("PYTHONPATH", None)
    argv = ["/usr/bin/python3.10", "/usr/local/bin/vllm", "serve", "/models/qwen",
            "--tensor-parallel-size", "2", "--max-model-len", "32768"]
    plant_process(proc, argv, env, f"Cpus_allowed_list:\t{cpus}\nMems_allowed_list:\t1\n")
    shell = {"PATH": f"{tree.path}/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path)}
    return tree, shell


@pytest.fixture
def fake_proc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setattr("probes.target.proc.PROC", str(tmp_path / "proc"))
    yield tmp_path / "proc"


def test_a_container_is_judged_through_its_root(tmp_path: Path, fake_proc: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    tree, shell = container(tmp_path)
    policy = str(fixture_policy(tree))
    _, doc = run(shell, ["--pid", str(PID), "--json", "--policy", policy], capsys)
    _, outside = run(shell, ["--root", str(tree.path), "--json", "--policy", policy,
                             "--python", "/usr/bin/python3"], capsys)
    process = doc["target"]["process"]
    assert (process["mount_namespace"], process["files_root"], process["ns_pid"]) == (
        "other", f"{fake_proc}/{PID}/root", 1)
    assert doc["host"]["description"] == f"live, files of process {PID} under " \
        f"{fake_proc}/{PID}/root"
    results = by_id(doc)
    assert results["cann.environment"]["status"] == "pass"  # its set_env, its toolkit
    assert by_id(outside)["cann.environment"]["status"] == "fail"  # the shell has no set_env
    assert "set_env.sh not sourced" in by_id(outside)["cann.environment"]["summary"]
    assert by_id(outside)["cann.environment"]["rules"][0] == "set-env-not-sourced"
    assert results["versions.parity"]["status"] == "pass"  # its packages, read statically
    assert doc["host"]["python"].startswith("/usr/bin/python3.10 (Python 3.10, of process")
    assert results["devices.nodes"]["evidence"][0] == (
        f"as process {PID} sees them: its mount namespace, read through "
        f"{fake_proc}/{PID}/root")
    pcie = results["pcie.contention"]
    assert pcie["status"] == "warn"
    assert f"process {PID} may run on CPUs 2-3 (NUMA node 1) only, far from NPU 0 chip 0 on " \
        "node 0, NPU 1 chip 0 on node 0" in pcie["summary"]
    assert "numactl" in pcie["remedy"]
    assert pcie["rules"] == ["numa-far-from-npus"]
    assert doc["host"]["model"].startswith("/models/qwen (from `vllm serve /models/qwen`")
    assert doc["target"]["serving"]["tensor_parallel_size"]["value"] == 2
    assert "/models/qwen" in results["checkpoint.format"]["summary"]


def test_pinned_near_its_npus_is_not_a_warning(tmp_path: Path, fake_proc: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    _, shell = container(tmp_path, cpus="0-1")
    _, doc = run(shell, ["--pid", str(PID), "--json", "--only", "pcie.contention"], capsys)
    result = doc["results"][0]
    assert result["status"] == "pass"
    assert result["rules"] == []
    affinity = f"NUMA affinity: process {PID} may run on CPUs 0-1 (NUMA node 0); its NPUs " \
        "from ASCEND_RT_VISIBLE_DEVICES=0,1 inside a container that sees every device of the host"
    assert any(line.startswith(affinity) for line in result["evidence"]), result["evidence"]


def test_a_bundle_of_a_pid_run_replays_the_same_verdicts(
        tmp_path: Path, fake_proc: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tree, shell = container(tmp_path)
    policy = str(shutil.copy(fixture_policy(tree), tmp_path / "policy.yaml"))
    out = tmp_path / "b.tar.gz"
    _, direct = run(shell, ["--pid", str(PID), "--json", "--policy", policy], capsys)
    code, _ = run(shell, ["bundle", "--pid", str(PID), "--policy", policy, "-o", str(out)],
                  capsys)
    assert code == 0
    shutil.rmtree(fake_proc)  # the process and its files are gone: only the bundle is left
    _, replayed = run({"PATH": "/usr/bin:/bin"}, ["--from", str(out), "--json", "--policy",
                                                  policy], capsys)
    assert pairs(replayed) == pairs(direct)
    assert replayed["target"]["pid"] == PID
    assert replayed["target"]["process"]["cmdline"][2:4] == ["serve", "/models/qwen"]
    assert replayed["host"]["model"] == direct["host"]["model"]


def test_a_container_process_that_exits_during_the_run_is_refused(
        tmp_path: Path, fake_proc: Path) -> None:
    container(tmp_path)
    observed = observe(HostOptions(pid=PID))
    (fake_proc / str(PID) / "stat").unlink()
    with pytest.raises(UsageError, match=f"process {PID} exited during the run: its files"):
        still_there(observed)


# -- processes that cannot be read ----------------------------------------------------------------


def test_a_process_that_exited_is_one_line_exit_3(capsys: pytest.CaptureFixture[str]) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert main(["--pid", str(gone.pid)]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--pid {gone.pid}: " in err and "no such process" in err


def test_a_process_that_exits_during_the_run_is_said(tmp_path: Path) -> None:
    with fake_vllm(tmp_path, {}) as server:
        observed = observe(HostOptions(pid=server.pid))
    target = still_there(observed)
    assert target.problems[-1] == (f"process {server.pid} exited during the run: its "
                                   "environment and command line are judged as they were "
                                   "at the start")


NO_PTRACE = ["setpriv", "--bounding-set=-sys_ptrace,-dac_override,-dac_read_search", "--"]
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


@pytest.fixture
def other_users_server() -> Iterator[int]:
    """A `vllm serve` process of another user (nobody), in a directory nobody can read."""
    if os.geteuid() != 0 or not shutil.which("setpriv") or not os.path.exists("/usr/bin/python3"):
        pytest.skip("needs root, setpriv and /usr/bin/python3 to run a process as another user")
    where = Path(tempfile.mkdtemp(prefix="ascend-target-"))
    try:
        where.chmod(0o755)
        script = write_script(where, "vllm", "/usr/bin/python3")
        with running([str(script), "serve", "/models/m"], {"PATH": "/usr/bin:/bin",
                                                          "SECRET_OF_THEIRS": "x"},
                     preexec=NOBODY) as pid:
            yield pid
    finally:
        shutil.rmtree(where)


def doctor_without_privileges(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "PYTHONPATH": str(ROOT), "NO_COLOR": "1"}
    return subprocess.run([*NO_PTRACE, sys.executable, "-m", "checks.cli", *argv], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120)


def _hint(pid: int) -> str:
    """Root without CAP_SYS_PTRACE is told that, an ordinary user to use sudo."""
    return "lacks CAP_SYS_PTRACE" if os.geteuid() == 0 else f"`sudo ascend-doctor --pid {pid}`"


def test_the_permission_hint_fits_who_runs_the_doctor() -> None:
    from probes.target.resolve import _denied_hint

    assert "sudo ascend-doctor --pid 7" in _denied_hint(7, 1000, euid=1000)
    root = _denied_hint(7, 1000, euid=0)
    assert "CAP_SYS_PTRACE" in root and "sudo" not in root and "run the doctor as root" not in root


def test_permission_denied_on_a_named_process_is_one_line(other_users_server: int) -> None:
    out = doctor_without_privileges("--pid", str(other_users_server))
    assert out.returncode == 3 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert f"/proc/{other_users_server}/environ: permission denied" in out.stderr
    assert _hint(other_users_server) in out.stderr


def test_a_discovered_process_that_cannot_be_read_is_skip_not_pass(
        other_users_server: int) -> None:
    out = doctor_without_privileges("--json", "--only", "logging.level,cann.environment,"
                                    "versions.parity")
    doc = json.loads(out.stdout)
    assert other_users_server in [c["pid"] for c in doc["target"]["candidates"]]
    if doc["target"]["pid"] != other_users_server:
        pytest.skip("another run's server was chosen first")
    assert "permission denied" in doc["target"]["environment_error"]
    results = by_id(doc)
    for check in ("logging.level", "cann.environment"):
        assert results[check]["status"] == "skip"
        assert "permission denied" in results[check]["summary"]
        assert _hint(other_users_server) in results[check]["summary"]
    parity = results["versions.parity"]  # the toolkit is found through the environment
    assert parity["status"] == "skip" and "permission denied" in parity["summary"]


def test_the_environment_of_pid_1_when_not_root(capsys: pytest.CaptureFixture[str]) -> None:
    """Where the suite runs unprivileged (CI), pid 1 is another user's process."""
    if os.access("/proc/1/environ", os.R_OK):
        pytest.skip("/proc/1/environ is readable here (root)")
    assert main(["--pid", "1"]) == 3
    err = capsys.readouterr().err
    assert "permission denied" in err and "sudo ascend-doctor --pid 1" in err


# -- an environment file --------------------------------------------------------------------------


def test_env_file_judges_a_service_not_running(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    unit = tmp_path / "vllm.env"
    unit.write_text('# EnvironmentFile=\nASCEND_GLOBAL_LOG_LEVEL="0"\nHOME=/var/lib/vllm\n')
    shell = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "ASCEND_GLOBAL_LOG_LEVEL": "3"}
    _, doc = run(shell, ["--env-file", str(unit), "--json", "--only", "logging.level"], capsys)
    assert doc["target"]["kind"] == "env_file"
    assert doc["target"]["environment"] == (
        f"{unit} (EnvironmentFile lines); files read: this machine's files under /, not those "
        "of the container image or host the service will run in (name that root with --root "
        "DIR)")
    script = tmp_path / "start.sh"
    script.write_text("#!/bin/sh\nsource /usr/local/Ascend/ascend-toolkit/set_env.sh\n"
                      "exec vllm serve /m\n")
    assert main(["--env-file", str(script), "--only", "cann.environment"]) == 3
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"--env-file {script}: line 1: `#!/bin/sh`" in err
    assert "level 0 (DEBUG)" in doc["results"][0]["summary"]


@pytest.mark.parametrize(("argv", "message"), [
    (["--env-file", "/nonexistent/x.env"], "--env-file /nonexistent/x.env: No such file"),
    (["--pid", "1", "--env-file", "x"], "--pid and --env-file exclude each other"),
    (["--pid", "1", "--root", "/"], "leave out --root"),
    (["--from", "x.tar.gz", "--pid", "1"], "--from replays the target it recorded"),
])
def test_bad_target_options_are_one_line(argv: list[str], message: str,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 3
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_pid_must_be_a_process_id(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--pid", "abc"])
    assert exited.value.code == 3
    assert "'abc' is not a process id" in capsys.readouterr().err


# -- a real mount namespace -----------------------------------------------------------------------


def test_a_real_mount_namespace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A process whose /mnt is its own (unshare -m): its model directory exists only there."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare(1) for a mount namespace")
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True, timeout=30)
    if probe.returncode != 0:
        pytest.skip(f"unshare -m refused here: {probe.stderr.decode().strip()}")
    script = write_script(tmp_path / "bin", "vllm", sys.executable)
    inside = (f"mount --make-rprivate / && mount -t tmpfs none /mnt && mkdir -p /mnt/models/m "
              f"&& echo '{{}}' > /mnt/models/m/config.json && exec {script} serve /mnt/models/m "
              "-tp 4")
    with running(["unshare", "-m", "/bin/sh", "-c", inside], {"PATH": "/usr/bin:/bin:/sbin",
                                                              "ASCEND_GLOBAL_LOG_LEVEL": "2"}
                 ) as shell_pid:
        pid = next(p for p in ProcReader().pids()
                   if p == shell_pid or ProcReader().status(p).ppid == shell_pid)
        _, doc = run({"PATH": "/usr/bin:/bin"}, ["--pid", str(pid), "--json", "--only",
                                                 "logging.level"], capsys)
    target = doc["target"]
    assert target["process"]["mount_namespace"] == "other"
    assert target["process"]["files_root"] == f"/proc/{pid}/root"
    assert not os.path.exists("/mnt/models/m")  # not on this side of the namespace
    assert target["serving"]["model_dir"]["value"] == "/mnt/models/m"
    assert "level 2 (WARNING)" in doc["results"][0]["summary"]


# -- what else follows the target --------------------------------------------------------------


def test_python_overrides_the_targets_interpreter(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """--python is run (as before), with the target's environment: its PYTHONPATH counts."""
    with fake_vllm(tmp_path, {}) as server:
        _, doc = run({"PATH": "/usr/bin:/bin"}, ["--pid", str(server.pid), "--python",
                                                  sys.executable, "--json", "--only",
                                                  "versions.parity"], capsys)
    assert doc["host"]["python"] == sys.executable  # not "read without running it"
    assert "torch_npu 2.7.1.post1" in " ".join(doc["results"][0]["evidence"])


def test_baseline_and_junit_carry_the_target(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    junit = tmp_path / "doctor.xml"
    base = tmp_path / "base.yaml"
    shell = {"PATH": "/usr/bin:/bin", "ASCEND_GLOBAL_LOG_LEVEL": "3"}
    with fake_vllm(tmp_path, {"ASCEND_GLOBAL_LOG_LEVEL": "1"}) as server:
        run(shell, ["--pid", str(server.pid), "--junit", str(junit), "--only", "logging.level"],
            capsys)
        assert run(shell, ["baseline", "record", "--pid", str(server.pid), "-o", str(base)],
                   capsys)[0] == 0
    xml = junit.read_text()
    assert f'<property name="target.pid" value="{server.pid}" />' in xml
    assert '<property name="target.serving.tensor_parallel_size" value="2" />' in xml
    assert "ASCEND_GLOBAL_LOG_LEVEL: '1'" in base.read_text()


def test_a_bundle_keeps_the_targets_secrets_out(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    secret = "hf_Zq8LmN3pR7tV2xY5bC9dF1gH4jK6"
    model = tmp_path / "models" / "m"
    tail = ("serve", str(model), "--api-key", secret, "-tp", "2")
    out = tmp_path / "b.tar.gz"
    with fake_vllm(tmp_path, {"HF_TOKEN": secret}, tail=tail) as server:
        assert run({"PATH": "/usr/bin:/bin"}, ["bundle", "--pid", str(server.pid), "--no-logs",
                                               "-o", str(out)], capsys)[0] == 0
    with tarfile.open(out) as tar:
        data = b"".join(_read(tar, m) for m in tar.getmembers() if m.isfile())
    assert secret.encode() not in data
    _, replayed = run({"PATH": "/usr/bin:/bin"}, ["--from", str(out), "--json"], capsys)
    cmdline = replayed["target"]["process"]["cmdline"]
    assert cmdline[-2:] == ["-tp", "2"] and cmdline[-3] != secret  # masked, same place
    assert replayed["target"]["serving"]["tensor_parallel_size"]["value"] == 2


def _read(tar: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    handle = tar.extractfile(member)
    assert handle is not None
    return handle.read()


def test_a_container_with_some_devices_is_not_matched_to_host_rows(
        tmp_path: Path, fake_proc: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tree, shell = container(tmp_path)
    for n in (0, 1, 2, 3, 5, 6):  # the container was given /dev/davinci4 and davinci7 only
        (tree.path / "dev" / f"davinci{n}").unlink()
    _, doc = run(shell, ["--pid", str(PID), "--json", "--only", "pcie.contention"], capsys)
    result = doc["results"][0]
    assert "far from" not in result["summary"]  # npu-smi rows 0 and 1 are not its chips
    assert any("ASCEND_RT_VISIBLE_DEVICES=0,1 inside a container indexes the container's own "
               "devices (it sees /dev/davinci4, /dev/davinci7), not the rows of the host's "
               "npu-smi table" in line for line in result["evidence"])


def test_tokenizer_checks_read_a_containers_model(tmp_path: Path, fake_proc: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("transformers")
    from tests.tokenizer_fixtures import qwen3_moe_config, write_qwen3_model_dir

    tree, shell = container(tmp_path)
    # a Qwen3 tokenizer shipped with a Qwen3.5/3.6-sized embedding, inside the container
    write_qwen3_model_dir(tree.path / "models" / "qwen",
                          config=qwen3_moe_config(vocab_size=248320))
    _, doc = run(shell, ["--pid", str(PID), "--json", "--only", "tokenizer.token-ids"], capsys)
    result = doc["results"][0]
    assert result["status"] == "fail" and result["rules"] == ["foreign-tokenizer"]
    assert result["summary"].startswith("a Qwen3 tokenizer (151669 ids) on a Qwen3.5/3.6")
    assert f"as process {PID} sees them: its mount namespace, read through " \
        f"{fake_proc}/{PID}/root" in result["evidence"]
