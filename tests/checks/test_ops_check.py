"""engine.op-coverage: runs only when asked (it loads torch), judges the judged interpreter's
torch_npu, warns naming each operator without a kernel and where it is called."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from checks.builtin.ops import op_coverage, verdict
from checks.context import Context
from checks.model import Finding
from checks.policy import load_policy
from checks.registry import all_checks
from probes.live import LiveHost
from tests.engine.tiny_configs import write
from tests.machines import site_packages

ROOT = Path(__file__).resolve().parents[2]
CHECK = "engine.op-coverage"


def check() -> Any:
    return next(c for c in all_checks() if c.id == CHECK)


def context(tmp_path: Path, packages: dict[str, str], model: Path | None,
            asked: bool = True) -> Context:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": site_packages(tmp_path / "site", packages)}
    host = LiveHost(root="/", env=env, python=sys.executable)
    return Context(host, load_policy(), model, requested=frozenset({CHECK} if asked else ()))


def test_it_runs_only_when_asked(tmp_path: Path) -> None:
    model = write(tmp_path / "m", "llama")
    assert "not asked for" in check().missing_input(context(tmp_path, {}, model, asked=False))
    assert f"--only {CHECK}" in check().missing_input(context(tmp_path, {}, model, asked=False))
    assert check().missing_input(context(tmp_path, {}, None)) == "no --model given"
    assert check().missing_input(context(tmp_path, {}, model)) == ""


def test_predicted_for_the_judged_interpreters_torch_npu(tmp_path: Path) -> None:
    found = op_coverage(context(tmp_path, {"torch": "2.5.1", "torch_npu": "2.5.1"},
                                write(tmp_path / "m", "qwen3_5_moe", fp8=True)))
    assert found.status == "pass" and found.rules == (), found
    assert "have NPU kernels" in found.summary and "torch_npu 2.5.1 (predicted)" in found.summary
    assert any(e.startswith("target: npu, torch 2.5 line") for e in found.evidence)
    assert any("fused op npu_rms_norm: available" in e for e in found.evidence)
    assert any("517f2e7d0f202f38b76310706cb977ca2388ad21" in e for e in found.evidence)


@pytest.mark.parametrize(("server", "name"), [("vllm", "vLLM (vllm-ascend)"),
                                              ("mindie", "MindIE")])
def test_a_serving_engine_target_is_a_skip_saying_whose_operators(
        tmp_path: Path, server: str, name: str) -> None:
    from dataclasses import replace

    from probes.target.model import ServingArgs, shell_target

    ctx = context(tmp_path, {"torch": "2.5.1", "torch_npu": "2.5.1"},
                  write(tmp_path / "m", "llama"))
    ctx.target = replace(shell_target(), label="process 42 (vllm serve /m)",
                         serving=ServingArgs(server=server))
    found = op_coverage(ctx)
    assert found.status == "skip" and found.rules == ("serving-engine-target",)
    assert found.summary.startswith(f"the target is a {name} server: the trace is of the "
                                    "operators of this project's engine")
    assert "target: process 42 (vllm serve /m)" in found.evidence


def test_without_torch_npu_there_is_nothing_to_pass(tmp_path: Path) -> None:
    found = op_coverage(context(tmp_path, {"torch": "2.7.1"}, write(tmp_path / "m", "llama")))
    assert found.status == "skip" and found.summary.startswith("no torch_npu to judge")
    assert found.rules == ("no-torch-npu",)
    assert "torch 2.7.1's line (predicted;" in found.summary


def test_nothing_to_judge_without_torch_npu_and_torch(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from probes.host import PythonEnvironment

    ctx = context(tmp_path, {}, write(tmp_path / "m", "llama"))
    monkeypatch.setattr(ctx.host, "python_packages",
                        lambda: PythonEnvironment("/opt/py/bin/python", packages={}))
    found = op_coverage(ctx)
    assert found.status == "skip" and found.rules == ("nothing-to-judge",)
    assert "neither torch_npu nor torch is installed in /opt/py/bin/python" in found.summary


def test_skips_that_name_what_is_missing(tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    packages = {"torch": "2.5.1", "torch_npu": "2.5.1"}
    no_config = op_coverage(context(tmp_path / "a", packages, tmp_path / "empty"))
    assert no_config.status == "skip" and no_config.rules == ("no-config",)
    assert "config.json" in no_config.summary
    (tmp_path / "gpt2").mkdir()
    (tmp_path / "gpt2" / "config.json").write_text(json.dumps(
        {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": 10}))
    refused = op_coverage(context(tmp_path / "b", packages, tmp_path / "gpt2"))
    assert refused.status == "skip" and refused.rules == ("engine-cannot-trace",)
    assert "not supported" in refused.summary
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "torch" else find_spec(name, *a))
    no_torch = op_coverage(context(tmp_path / "c", packages, write(tmp_path / "m", "llama")))
    assert no_torch.status == "skip" and no_torch.rules == ("no-torch",)


def _document(statuses: dict[str, str]) -> dict[str, Any]:
    return {"target": "npu, torch 2.5 line", "fused_ops": [], "notes": ["source: x @ 1"],
            "operators": [{"op": op, "status": status, "detail": f"{op} detail",
                           "prefill_calls": 40, "decode_calls": 40,
                           "sites": [{"where": "SparseMoe._grouped > swiglu",
                                      "layers": "deltanet+moe x30", "calls": 40}]}
                          for op, status in statuses.items()]}


def test_an_operator_without_a_kernel_is_a_warning_naming_where_it_is_called() -> None:
    found: Finding = verdict(_document({"aten::mm": "native", "aten::t": "composite",
                                        "aten::foo": "fallback", "x::bar": "missing"}),
                             "torch_npu 2.5.1 (predicted)")
    assert found.status == "warn" and found.rules == ("operator-without-kernel",)
    assert found.summary == ("2 of 4 operators of this project's engine (engine/, its own "
                             "implementation of the model) have no NPU kernel for torch_npu 2.5.1 "
                             "(predicted): aten::foo, x::bar")
    assert found.evidence[0] == ("aten::foo: aten::foo detail; called from SparseMoe._grouped > "
                                 "swiglu [deltanet+moe x30]; 40 calls per prefill, 40 per "
                                 "decode step")
    assert "CPU fallback" in found.remedy
    unjudged = verdict(_document({"aten::foo": "fallback"}), "torch 2.13", has_npu=False)
    assert unjudged.status == "warn"  # what the prediction found is still worth a warning
    clean = verdict(_document({"aten::mm": "native", "aten::t": "composite"}), "v")
    assert clean.status == "pass" and "(1 native, 1 composite)" in clean.summary


def test_a_run_that_does_not_ask_loads_no_torch(tmp_path: Path) -> None:
    write(tmp_path / "m", "llama")  # /m under --root
    code = (
        "import io, contextlib, json, sys\n"
        "import checks.cli as cli\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        f"    cli.main(['--root', {str(tmp_path)!r}, '--model', '/m', '--json'])\n"
        "report = json.loads(out.getvalue())\n"
        "row = next(r for r in report['results'] if r['id'] == 'engine.op-coverage')\n"
        "print(json.dumps([row['status'], row['summary'], 'torch' in sys.modules,\n"
        "                  'engine.tools.opscan' in sys.modules,\n"
        "                  'checks.builtin.ops' in sys.modules]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=120, check=True)
    status, summary, *loaded = json.loads(out.stdout.splitlines()[-1])
    assert status == "skip" and "not asked for" in summary
    assert loaded == [False, False, False]


@pytest.mark.parametrize("family", ["mixtral", "qwen3_next"])
def test_asked_for_by_name_it_runs_in_the_doctor(tmp_path: Path, family: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from checks.cli import main

    # --root /: this shell is the target (a server running beside the tests is not judged)
    code = main(["--root", "/", "--model", str(write(tmp_path / "m", family)), "--only", CHECK,
                 "--json"])
    report = json.loads(capsys.readouterr().out)
    (row,) = report["results"]
    # this test venv has torch but no torch_npu: predicted for its torch line, not judged
    assert code == 0 and row["status"] == "skip" and "have NPU kernels" in row["summary"]
