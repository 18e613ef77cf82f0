"""The chat-template renderer a --model run starts early (checks.builtin.tokenizer_early):
the findings are those of a renderer started late, its limits hold, and no process is left
behind on any path. Forking needs a process with one thread: those cases run in a fresh
interpreter."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from checks import cli
from checks.builtin import tokenizer_early
from tests.tokenizer_fixtures import write_qwen3_model_dir

ROOT = Path(__file__).resolve().parents[2]

# children of this process, zombies included: what was not reaped counts
CHILDREN = """
def children():
    import os
    found = []
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/stat") as handle:
                fields = handle.read().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[1]) == os.getpid():
            found.append(int(name))
    return found
"""


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_qwen3_model_dir(tmp_path_factory.mktemp("qwen3") / "model")


def forked_run(model: Path, before: str = "") -> dict[str, object]:
    """Both tokenizer checks with the renderer started early and the observation forked, and
    again in-process with a renderer started late; `before` runs once the renderer waits."""
    script = CHILDREN + f"""
import json, os
import checks.builtin.tokenizer as module
from checks.builtin import tokenizer_early
from checks.builtin.tokenizer_ids import tokenizer_token_ids
from checks.context import Context
from checks.policy import load_policy
from probes.forked import can_fork
from probes.live import LiveHost
from pathlib import Path
model = Path({str(model)!r})
could = can_fork()
tokenizer_early.start()
{before}
ctx = Context(LiveHost(), load_policy(None), model_dir=model)
module.prefetch(ctx)
forked = ctx.fact(module.FORKED_FACT, lambda: None)
was_forked = forked is not None and forked.forked
early = (tokenizer_token_ids(ctx), module.tokenizer_dtype(ctx))
tokenizer_early.discard()
left = children()
here = Context(LiveHost(), load_policy(None), model_dir=model)
late = (tokenizer_token_ids(here), module.tokenizer_dtype(here))
print(json.dumps({{
    "could_fork": could,
    "forked": was_forked,
    "same": early == late,
    "summaries": [f.summary for f in early],
    "left": left,
}}))
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    out: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    if not out["could_fork"]:
        pytest.skip("forking needs one thread and 2 cores")
    assert out["forked"]
    return out


def test_the_early_renderer_gives_the_same_findings(healthy: Path) -> None:
    out = forked_run(healthy)
    assert out["same"] and out["left"] == []


def test_a_looping_template_stops_the_same_way(healthy: Path, tmp_path: Path) -> None:
    model = tmp_path / "looping"
    shutil.copytree(healthy, model)
    (model / "chat_template.jinja").write_text(
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}")
    out = forked_run(model)
    assert out["same"] and out["left"] == []
    assert "stopped: more than 200000 steps" in str(out["summaries"])


def test_a_stuck_renderer_is_killed_at_its_timeout(healthy: Path) -> None:
    """The renderer stops answering (SIGSTOP): its wall-clock limit kills it, the tokenizer
    is still loaded in the forked child, and the template's note says why."""
    stop = """
import dataclasses, signal, probes.limited, probes.model.chat_template as chat
os.kill(tokenizer_early._WAITING[0].pid, signal.SIGSTOP)
chat.MAX_SECONDS = 0.0
probes.limited.Limits = dataclasses.make_dataclass(
    "Quick", [("memory_bytes", int, 256 << 20), ("cpu_s", int, 3), ("wall_s", float, 0.5),
              ("answer_bytes", int, 1 << 20)], frozen=True)
"""
    out = forked_run(healthy, stop)
    assert out["left"] == []
    assert "stopped: more than 0.5 s" in str(out["summaries"])
    assert "not loaded" not in str(out["summaries"])


def test_a_renderer_that_cannot_start_is_said_in_one_line(healthy: Path) -> None:
    broken = """
import probes.spawn
from probes.spawn import Started
tokenizer_early.discard()
tokenizer_early._WAITING.append(Started(("python",), None, "No such file or directory"))
"""
    out = forked_run(healthy, broken)
    assert out["left"] == []
    assert "stopped: No such file or directory" in str(out["summaries"])


def children_of_this_process() -> list[int]:
    namespace: dict[str, object] = {}
    exec(CHILDREN, namespace)  # the same scan as in the fresh interpreters above
    return namespace["children"]()  # type: ignore[operator,no-any-return]


def test_the_command_line_starts_it_only_for_a_model(healthy: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[bool] = []
    monkeypatch.setattr(tokenizer_early, "start", lambda: started.append(True))
    cli.main(["--root", "/nonexistent-root-for-test", "--only", "tokenizer.dtype"])
    cli.main(["--model", str(healthy), "--only", "checkpoint.format"])
    cli.main(["--model", str(healthy), "--skip", "tokenizer.dtype,tokenizer.token-ids"])
    assert started == []
    cli.main(["--model", str(healthy), "--only", "tokenizer.dtype", "--json"])
    assert started == [True]


def test_a_run_that_does_not_use_it_leaves_no_process(healthy: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    before = set(children_of_this_process())
    no_template = tmp_path / "plain"
    shutil.copytree(healthy, no_template)
    for name in ("chat_template.jinja", "chat_template.json"):
        (no_template / name).unlink(missing_ok=True)
    config = json.loads((no_template / "tokenizer_config.json").read_text())
    config.pop("chat_template", None)
    (no_template / "tokenizer_config.json").write_text(json.dumps(config))
    for model in (no_template, tmp_path / "missing", healthy):
        cli.main(["--model", str(model), "--only", "tokenizer.dtype", "--json"])
    capsys.readouterr()
    assert tokenizer_early._WAITING == []
    assert set(children_of_this_process()) <= before, os.listdir("/proc/self/task")


def test_a_run_whose_tokenizer_check_timed_out_leaves_no_renderer(healthy: Path,
                                                                   tmp_path: Path) -> None:
    """The renderer stops answering (SIGSTOP) and its own wall-clock limit is long, so the
    check times out first while a thread still waits on it: the run ends it anyway."""
    policy = tmp_path / "policy.yaml"
    policy.write_text("runner:\n  check_timeout_s: 1\n")
    script = CHILDREN + f"""
import contextlib, io, json, os, signal, time
import probes.model.chat_template as chat
from checks import cli
from checks.builtin import tokenizer_early
chat.MAX_SECONDS = 600.0
real_start = tokenizer_early.start
pids = []
def start():
    real_start()
    pids.append(tokenizer_early._WAITING[0].pid)
    os.kill(pids[0], signal.SIGSTOP)
tokenizer_early.start = start
with contextlib.redirect_stdout(io.StringIO()) as out:
    cli.main(["--model", {str(healthy)!r}, "--only", "tokenizer.dtype", "--json",
              "--policy", {str(policy)!r}])
status = json.loads(out.getvalue())["results"][0]["status"]
def alive(pid):
    try:
        with open(f"/proc/{{pid}}/stat") as handle:
            return handle.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False
deadline = time.monotonic() + 5
while pids and alive(pids[0]) and time.monotonic() < deadline:
    time.sleep(0.05)
print(json.dumps({{"status": status, "started": bool(pids),
                   "alive": bool(pids) and alive(pids[0])}}))
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["started"] and out["status"] != "pass"
    assert not out["alive"]
