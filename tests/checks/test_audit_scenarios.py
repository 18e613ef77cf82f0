"""The third audit's scenarios (issue 27), run as a user runs them: `ascend-doctor ... --json`
in its own process, against real processes, a real mount namespace, a loopback server and real
files. Each scenario asserts its verdict (status, rule, the processes / engines / files named)
and the verdict of its healthy twin."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from conftest import FakeRoot
from endpoint_fixtures import chat_stream, models_list, stub_server
from fp8_fixtures import bf16_model_tensors, fp8_model_tensors, model_config, write_model
from machines import build_a2, fixture_policy
from target_fixtures import BLANK, children, fake_vllm, running, write_script
from tokenizer_fixtures import qwen3_moe_config, write_qwen3_model_dir

from probes.target.proc import ProcReader

ROOT = Path(__file__).resolve().parents[2]
SHELL = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "NO_COLOR": "1"}
CLI_TIMEOUT_S = 180
QWEN35_VOCAB = 248320  # Qwen3.5/3.6's embedding rows (huggingface.co/Qwen/Qwen3.6-35B-A3B)


def doctor(*argv: str, env: Mapping[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    """`ascend-doctor ARGV --json` in its own process: (exit code, the report)."""
    out = subprocess.run([sys.executable, "-m", "checks.cli", *argv, "--json"], cwd=ROOT,
                         env=dict(env or SHELL), capture_output=True, text=True,
                         timeout=CLI_TIMEOUT_S)
    assert "Traceback" not in out.stderr, out.stderr[-2000:]
    assert out.stdout, out.stderr[-2000:]
    return out.returncode, json.loads(out.stdout)


def results(doc: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in doc["results"]}


def words(result: Mapping[str, Any]) -> str:
    return "\n".join([result["summary"], *result.get("evidence", ())])


# -- a setproctitle worker ------------------------------------------------------------------------

# an EngineCore that starts two workers: one overwrites its environment area (setproctitle),
# the other keeps it and runs at the log level given as the last argument
ENGINE = """import os, subprocess, sys, time
blank, level = sys.argv[1], sys.argv[2]
kids = [subprocess.Popen([sys.executable, blank, 'VLLM::Worker_TP0'], stdout=subprocess.PIPE),
        subprocess.Popen([sys.executable, '-c', 'import time; print(1, flush=True); '
                          'time.sleep(600)'], stdout=subprocess.PIPE,
                         env=dict(os.environ, ASCEND_GLOBAL_LOG_LEVEL=level))]
for kid in kids:
    kid.stdout.readline()
print('ready', flush=True)
time.sleep(600)
"""
SERVER = """import subprocess, sys, time
engine = subprocess.Popen([sys.executable, *sys.argv[-3:]], stdout=subprocess.PIPE)
engine.stdout.readline()
print('ready', flush=True)
time.sleep(600)
"""



@contextmanager
def serving_ranks(tmp_path: Path, level: str, worker_level: str) -> Iterator[tuple[int, int, int]]:
    """`vllm serve` at log `level`, its EngineCore, a worker with an overwritten environment and
    one at `worker_level`: yields (server, blank worker, other worker)."""
    blank = tmp_path / "blank.py"
    blank.write_text(BLANK)
    engine = tmp_path / "engine.py"
    engine.write_text(ENGINE)
    vllm = write_script(tmp_path / "bin", "vllm", sys.executable, SERVER)
    argv = [str(vllm), "serve", "/models/m", "--tp", "2", str(engine), str(blank), worker_level]
    env = {**SHELL, "ASCEND_GLOBAL_LOG_LEVEL": level}
    with running(argv, env) as server:
        (core,) = children(server)
        kids = children(core)
        blank_kids = [k for k in kids if ProcReader().cmdline(k) == ("VLLM::Worker_TP0",)]
        assert len(kids) == 2 and len(blank_kids) == 1, kids
        yield server, blank_kids[0], next(k for k in kids if k != blank_kids[0])


def test_a_setproctitle_worker_is_judged_through_its_server_and_every_rank(
        tmp_path: Path) -> None:
    with serving_ranks(tmp_path, "1", "0") as (server, blank, odd):
        code, doc = doctor("--pid", str(blank), "--only", "logging.level")
    (result,) = doc["results"]
    assert doc["target"]["pid"] == server and code == 1
    assert result["status"] == "warn" and "level 1 (INFO)" in result["summary"]
    assert set(result["rules"]) >= {"verbose-in-production", "ranks-disagree"}
    assert f"ranks disagree: process {odd}" in result["summary"]
    assert f"covers process {server} and the 3 processes it started" in words(result)
    assert "1 of them could not be read (overwritten (setproctitle))" in words(result)
    assert str(blank) in doc["target"]["chosen"]


def test_a_setproctitle_worker_of_a_quiet_server_passes(tmp_path: Path) -> None:
    with serving_ranks(tmp_path, "3", "3") as (server, blank, _):
        code, doc = doctor("--pid", str(blank), "--only", "logging.level")
    (result,) = doc["results"]
    assert doc["target"]["pid"] == server
    assert result["status"] == "pass" and "level 3 (ERROR)" in result["summary"], result
    assert code == 0 and result["rules"] == []
    assert f"covers process {server} and the 3 processes it started" in words(result)


# -- a reasoning model and two data-parallel engines behind a loopback server ------------------

METRICS = (Path(__file__).resolve().parents[1] / "corpus" / "serving" /
           "vllm_v1_names_a.prom").read_text()
KV_LINE = 'vllm:kv_cache_usage_perc{engine="0",model_name="Qwen/Qwen3-30B-A3B"} 0.21'


def two_engines(first: float, second: float) -> bytes:
    """The recorded vLLM metrics with a second data-parallel engine beside the first."""
    lines = (KV_LINE.replace("0.21", str(first)) + "\n" +
             KV_LINE.replace('"0"', '"1"').replace("0.21", str(second)))
    two = METRICS.replace(KV_LINE, lines)
    assert two != METRICS
    return two.encode()


def endpoint_run(stream: bytes, metrics: bytes, check: str) -> dict[str, Any]:
    routes = {"/v1/models": ("application/json", models_list("Qwen/Qwen3-30B-A3B")),
              "/v1/chat/completions": ("text/event-stream", stream),
              "/metrics": ("text/plain; version=0.0.4", metrics)}
    with stub_server(routes) as url:
        _, doc = doctor("--endpoint", f"{url}/v1", "--only", check)
    (result,) = doc["results"]
    return result


@pytest.mark.parametrize(("deltas", "arrived"), [
    ([{"role": "assistant", "content": ""}, {"reasoning_content": "Okay, the user"},
      {"reasoning_content": " wants one word"}], "reasoning_content"),
    ([{"role": "assistant", "content": "ready"}], ""),
])
def test_a_reasoning_model_streams_and_passes(deltas: list[dict[str, str]],
                                              arrived: str) -> None:
    result = endpoint_run(chat_stream(*deltas), METRICS.encode(), "endpoint.smoke")
    assert result["status"] == "pass", result["summary"]
    shown = f"streamed text ({arrived})" if arrived else "streamed text"
    assert f"{shown}, well-formed" in result["summary"]


def test_a_stream_without_any_text_fails() -> None:
    result = endpoint_run(chat_stream({"role": "assistant", "content": ""}), METRICS.encode(),
                          "endpoint.smoke")
    assert result["status"] == "fail" and result["rules"] == ["no-text"]


@pytest.mark.parametrize(("first", "second", "status", "shown"), [
    (0.48, 0.47, "pass", "KV cache 48% on the fullest engine (engine 0 48%, engine 1 47%)"),
    (0.93, 0.47, "warn", "KV cache 93% on the fullest engine (engine 0 93%, engine 1 47%)"),
])
def test_two_data_parallel_engines_are_each_shown_never_summed(
        first: float, second: float, status: str, shown: str) -> None:
    result = endpoint_run(chat_stream({"content": "ready"}), two_engines(first, second),
                          "endpoint.metrics")
    assert result["status"] == status and shown in result["summary"], result["summary"]
    assert result["rules"] == (["loaded"] if status == "warn" else [])


# -- module log levels ----------------------------------------------------------------------------


@pytest.mark.parametrize(("module_levels", "status", "rules"), [
    ("RUNTIME=0:GE=0", "warn", ["module-verbose-in-production"]),
    ("RUNTIME=3:GE=3", "pass", []),
])
def test_module_log_levels_of_a_server_are_judged(tmp_path: Path, module_levels: str,
                                                  status: str, rules: list[str]) -> None:
    env = {"ASCEND_GLOBAL_LOG_LEVEL": "3", "ASCEND_MODULE_LOG_LEVEL": module_levels,
           "HOME": str(tmp_path)}
    with fake_vllm(tmp_path, env) as server:
        _, doc = doctor("--pid", str(server.pid), "--only", "logging.level")
    (result,) = doc["results"]
    assert doc["target"]["pid"] == server.pid
    assert result["status"] == status and result["rules"] == rules, result["summary"]
    if status == "warn":
        assert "RUNTIME" in result["summary"] and "GE" in result["summary"]


# -- a start script given as an environment file --------------------------------------------------


def test_a_start_script_is_refused_as_an_environment_file(tmp_path: Path) -> None:
    script = tmp_path / "start.sh"
    script.write_text("#!/bin/sh\nsource /usr/local/Ascend/ascend-toolkit/set_env.sh\n"
                      "exec vllm serve /models/m\n")
    out = subprocess.run([sys.executable, "-m", "checks.cli", "--env-file", str(script),
                          "--only", "cann.environment", "--json"], cwd=ROOT, env=SHELL,
                         capture_output=True, text=True, timeout=CLI_TIMEOUT_S)
    assert out.returncode == 3 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert f"--env-file {script}: line 1: `#!/bin/sh`" in out.stderr


def test_an_environment_file_is_judged_and_says_whose_files(tmp_path: Path) -> None:
    unit = tmp_path / "vllm.env"
    unit.write_text('ASCEND_GLOBAL_LOG_LEVEL="0"\nHOME=/var/lib/vllm\n')
    code, doc = doctor("--env-file", str(unit), "--only", "logging.level")
    (result,) = doc["results"]
    assert doc["target"]["kind"] == "env_file"
    assert doc["target"]["environment"].startswith(f"{unit} (EnvironmentFile lines); files "
                                                   "read: this machine's files under /")
    assert result["status"] == "warn" and "level 0 (DEBUG)" in result["summary"]
    assert "verbose-in-production" in result["rules"] and code == 1


# -- a Qwen3 tokenizer on a Qwen3.5 model, on this machine and in a container ------------------


@pytest.fixture(scope="module")
def tokenizer_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A Qwen3 model directory, and the same tokenizer under a Qwen3.5-sized embedding."""
    pytest.importorskip("tokenizers")
    where = tmp_path_factory.mktemp("tokenizers")
    return {"qwen3": write_qwen3_model_dir(where / "qwen3"),
            "qwen3.5": write_qwen3_model_dir(where / "qwen35", qwen3_moe_config(
                vocab_size=QWEN35_VOCAB))}


def judge_tokenizer(result: Mapping[str, Any], model: str) -> None:
    if model == "qwen3":
        assert result["status"] == "pass", result["summary"]
        assert result["rules"] == []
    else:
        assert result["status"] == "fail" and result["rules"] == ["foreign-tokenizer"]
        assert result["summary"].startswith(
            f"a Qwen3 tokenizer (151669 ids) on a Qwen3.5/3.6 model (vocab_size {QWEN35_VOCAB})")


@pytest.mark.parametrize("model", ["qwen3", "qwen3.5"])
def test_a_qwen3_tokenizer_on_qwen35_fails(tokenizer_models: dict[str, Path],
                                          model: str) -> None:
    # --root /: this shell judged (a server beside would lend its interpreter to the summary)
    _, doc = doctor("--root", "/", "--model", str(tokenizer_models[model]), "--only",
                    "tokenizer.token-ids")
    judge_tokenizer(results(doc)["tokenizer.token-ids"], model)


def needs_a_mount_namespace() -> None:
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare(1) for a mount namespace")
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True, timeout=30)
    if probe.returncode != 0:
        pytest.skip(f"unshare -m refused here: {probe.stderr.decode().strip()}")


@pytest.mark.parametrize("model", ["qwen3", "qwen3.5"])
def test_a_container_targets_tokenizer_is_read_through_its_root(
        tmp_path: Path, tokenizer_models: dict[str, Path], model: str) -> None:
    """A server whose model directory exists only in its own mount namespace (a container):
    the tokenizer checks read it through /proc/PID/root, as the other checks do."""
    needs_a_mount_namespace()
    script = write_script(tmp_path / "bin", "vllm", sys.executable)
    inside = (f"mount --make-rprivate / && mount -t tmpfs none /mnt && mkdir -p /mnt/models "
              f"&& cp -r {tokenizer_models[model]} /mnt/models/m "
              f"&& exec {script} serve /mnt/models/m -tp 2")
    with running(["unshare", "-m", "/bin/sh", "-c", inside],
                 {"PATH": "/usr/bin:/bin:/sbin"}) as shell_pid:
        pid = next(p for p in ProcReader().pids()
                   if p == shell_pid or ProcReader().status(p).ppid == shell_pid)
        _, doc = doctor("--pid", str(pid), "--only", "tokenizer.token-ids")
    assert not os.path.exists("/mnt/models/m")  # only inside the namespace
    assert doc["target"]["process"]["files_root"] == f"/proc/{pid}/root"
    judge_tokenizer(results(doc)["tokenizer.token-ids"], model)


# -- a bundle of a checkpoint whose tensors are named model.embed_tokens.weight ----------------

REPLAYED = ("checkpoint.format", "npu.hbm-fit")


@pytest.mark.parametrize("fp8", [True, False])
def test_a_bundles_replay_gives_the_live_checkpoint_verdicts(fake_root: FakeRoot,
                                                             tmp_path: Path,
                                                             fp8: bool) -> None:
    """FP8 on an A2 fails checkpoint.format; its BF16 twin passes. The bundle keeps both."""
    host = build_a2(fake_root)
    fp8_tensors = fp8_model_tensors()
    embed = "model.embed_tokens.weight"  # the name once taken for a secret
    tensors = fp8_tensors if fp8 else {embed: fp8_tensors[embed], **bf16_model_tensors()}
    write_model(fake_root.path / "models" / "m", tensors, model_config(fp8=fp8), shards=2)
    env = dict(host.env)
    machine = ["--root", str(fake_root.path), "--python", "/usr/bin/python3",
               "--policy", str(fixture_policy(fake_root))]
    only = ["--only", ",".join(REPLAYED)]
    _, live = doctor(*machine, "--model", "/models/m", *only, env=env)
    out = tmp_path / "m.tar.gz"
    made = subprocess.run([sys.executable, "-m", "checks.cli", "bundle", *machine, "--model",
                           "/models/m", "--no-logs", "-o", str(out)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=CLI_TIMEOUT_S)
    assert made.returncode == 0, made.stderr[-2000:]
    _, replayed = doctor("--from", str(out), "--policy", str(fixture_policy(fake_root)), *only)
    live_statuses = {k: r["status"] for k, r in results(live).items()}
    assert {k: r["status"] for k, r in results(replayed).items()} == live_statuses
    assert results(replayed)["checkpoint.format"]["summary"] == \
        results(live)["checkpoint.format"]["summary"]  # the same shards, the same dtype
    assert replayed["host"]["model"] == "/models/m (the model the recorded run judged)"
    assert live_statuses["checkpoint.format"] == ("fail" if fp8 else "pass")
    assert live_statuses["npu.hbm-fit"] != "skip", results(live)["npu.hbm-fit"]["summary"]
    assert replayed["target"]["problems"] == []  # nothing the replay could not reproduce


def test_a_bundles_replay_gives_the_live_tokenizer_verdicts(fake_root: FakeRoot,
                                                            tmp_path: Path) -> None:
    pytest.importorskip("tokenizers")
    host = build_a2(fake_root)
    model = write_model(fake_root.path / "models" / "m", bf16_model_tensors(),
                        model_config(fp8=False), shards=2)
    tokenizer = write_qwen3_model_dir(tmp_path / "tok")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tokenizer / name, model / name)
    env = dict(host.env)
    machine = ["--root", str(fake_root.path), "--python", "/usr/bin/python3"]
    only = ["--only", "tokenizer.token-ids,tokenizer.dtype"]
    _, live = doctor(*machine, "--model", "/models/m", *only, env=env)
    out = tmp_path / "t.tar.gz"
    subprocess.run([sys.executable, "-m", "checks.cli", "bundle", *machine, "--model",
                    "/models/m", "--no-logs", "-o", str(out)], cwd=ROOT, env=env,
                   capture_output=True, text=True, timeout=CLI_TIMEOUT_S, check=True)
    _, replayed = doctor("--from", str(out), *only)
    statuses = {k: r["status"] for k, r in results(live).items()}
    assert "skip" not in statuses.values()
    assert {k: r["status"] for k, r in results(replayed).items()} == statuses
    # built from the recorded tokenizer.json: the same summaries, the same rules
    for check_id, live_result in results(live).items():
        assert results(replayed)[check_id]["rules"] == live_result["rules"]
    assert replayed["target"]["problems"] == []
