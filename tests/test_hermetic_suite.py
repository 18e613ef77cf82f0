"""The suite never depends on what else runs on the machine (issue 27): the commands the
CLI-level tests run give the same verdicts with a `vllm serve /models/x --port N` process
beside them (a developer's Ascend box, a fake vllm_ascend on its PYTHONPATH) as without it.

Each command runs in a PID namespace of its own (unshare -pf --mount-proc), alone or with
the server started inside: "alone" is alone even where other runs have servers, and the server
is the one a run without a target judges (the last test), so the comparison can fail."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from machines import site_packages
from target_fixtures import SERVER_PACKAGES, isolated, pid_namespace_missing, write_script
from tokenizer_fixtures import write_qwen3_model_dir

from tests.engine.tiny_configs import write

ROOT = Path(__file__).resolve().parents[1]
SHELL = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "NO_COLOR": "1"}
# a server that would fail or warn every environment check it was judged by
LOUD = {"ASCEND_GLOBAL_LOG_LEVEL": "0", "ASCEND_SLOG_PRINT_TO_STDOUT": "1",
        "ASCEND_MODULE_LOG_LEVEL": "RUNTIME=0"}
ENDPOINT_CHECKS = "endpoint.health,endpoint.smoke,endpoint.metrics"
DIGITS = re.compile(r"\d+")
NAMES = ("installed program (--root /)", "stopped endpoint", "endpoint checks without --endpoint",
         "environment file", "tokenizer of --model", "hbm-fit of --model",
         "op coverage of --model")


def commands(where: Path) -> dict[str, list[str]]:
    """The commands of the CLI-level tests (test_cli, test_endpoint_cli, test_target,
    test_ops_check, test_audit_scenarios), by what they judge."""
    unit = where / "vllm.env"
    unit.write_text('ASCEND_GLOBAL_LOG_LEVEL="3"\nHOME=/var/lib/vllm\n')
    model = where / "qwen3"
    if not model.is_dir():
        write_qwen3_model_dir(model)
    argvs = (["--root", "/"],
             ["--endpoint", "http://127.0.0.1:9/v1", "--only", ENDPOINT_CHECKS],
             ["--only", ENDPOINT_CHECKS],
             ["--env-file", str(unit), "--only", "logging.level,cann.environment,versions.parity"],
             ["--root", "/", "--model", str(model), "--only",
              "tokenizer.token-ids,tokenizer.dtype"],
             ["--model", str(model), "--tp", "2", "--only", "npu.hbm-fit"],
             ["--root", "/", "--model", str(write(where / "mixtral", "mixtral")), "--only",
              "engine.op-coverage"])
    return dict(zip(NAMES, argvs, strict=True))


def doctor(argv: Sequence[str], server: Mapping[str, Any] | None = None
           ) -> tuple[int, dict[str, Any]]:
    """`ascend-doctor ARGV --json` in a PID namespace of its own, `server` beside it."""
    out = isolated([sys.executable, "-m", "checks.cli", *argv, "--json"], SHELL, ROOT,
                   server=(server["argv"], server["env"]) if server else None)
    assert out.stdout, out.stderr[-2000:]
    return out.returncode, json.loads(out.stdout)


def fake_server(where: Path) -> dict[str, Any]:
    """`vllm serve /models/x --port 8000` with vllm_ascend on its PYTHONPATH, loud logging."""
    site = site_packages(where / "server-site", dict(SERVER_PACKAGES))
    script = write_script(where / "server-bin", "vllm", sys.executable)
    return {"argv": [str(script), "serve", "/models/x", "--port", "8000"],
            "env": {"PATH": "/usr/bin:/bin", **LOUD, "PYTHONPATH": site}}


def verdicts(code: int, doc: Mapping[str, Any]) -> tuple[int, list[tuple[str, ...]]]:
    """What a test asserts: the exit code, each check's status, rules and summary (its
    numbers left out: timings and free space change from run to run)."""
    return code, [(r["id"], r["status"], ",".join(r["rules"]), DIGITS.sub("#", r["summary"]))
                  for r in doc["results"]]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every command run alone, then with the server beside it, and a run without a target."""
    pytest.importorskip("tokenizers")
    missing = pid_namespace_missing()
    if missing:
        pytest.skip(missing)
    where = tmp_path_factory.mktemp("hermetic")
    server = fake_server(where)
    return {"alone": {name: doctor(argv) for name, argv in commands(where).items()},
            "beside": {name: doctor(argv, server) for name, argv in commands(where).items()},
            "found": doctor(["--only", "logging.level"], server)}


@pytest.mark.parametrize("name", NAMES)
def test_the_same_verdicts_beside_a_serving_process(runs: dict[str, Any], name: str) -> None:
    assert verdicts(*runs["beside"][name]) == verdicts(*runs["alone"][name])


def test_the_server_beside_is_the_one_a_run_without_target_judges(
        runs: dict[str, Any]) -> None:
    _, doc = runs["found"]
    assert doc["target"]["chosen"] == "discovered: the only candidate, a vLLM server"
    assert doc["target"]["process"]["cmdline"][-4:] == ["serve", "/models/x", "--port", "8000"]
    (result,) = doc["results"]
    assert result["status"] == "warn" and "level 0 (DEBUG)" in result["summary"]
