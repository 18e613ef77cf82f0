"""`ascend-doctor ops` and `ascend-doctor bench` as a user meets them: outputs, exit codes,
one-line errors."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from checks.cli import main
from engine import cpu_kernel
from tests.engine.tiny_configs import write
from tests.machines import site_packages

ROOT = Path(__file__).resolve().parents[2]
QWEN36_FP8 = ROOT / "tests" / "data" / "models" / "Qwen3.6-35B-A3B-FP8"


def test_ops_json_on_the_cpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["ops", "--model", str(write(tmp_path, "qwen3_moe")), "--device", "cpu",
                 "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["schema"] == "ascend-doctor-ops/1"
    assert doc["device"] == "cpu" and not doc["predicted"] and doc["warnings"] == 0
    assert {"aten::mm", "aten::topk"} <= {op["op"] for op in doc["operators"]}
    assert doc["fused_ops"] == [{"name": "npu_rms_norm", "status": "not used",
                                 "detail": "the engine uses vendor fused ops on npu only"}]


def test_ops_predicts_for_a_release(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["ops", "--model", str(QWEN36_FP8), "--torch-npu", "2.6.0.post3", "--fp8",
                 "resident"])
    out = capsys.readouterr().out
    assert code == 0
    assert "torch 2.6 line (torch_npu 2.6.0.post3)" in out and "PREDICTED" in out
    assert "qwen3_5_moe, 40 layers, bfloat16, FP8 resident" in out
    assert "aten::scaled_dot_product_attention" in out and "0 without a kernel" in out
    assert "517f2e7d0f202f38b76310706cb977ca2388ad21" in out


def test_ops_predicts_for_the_torch_npu_of_another_interpreter(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", site_packages(tmp_path / "site", {"torch_npu": "2.5.1"}))
    code = main(["ops", "--model", str(write(tmp_path / "m", "llama")), "--python",
                 sys.executable, "--json"])
    assert code == 0
    assert "torch_npu 2.5.1" in json.loads(capsys.readouterr().out)["target"]


def test_ops_exits_1_when_an_operator_has_no_kernel(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    import engine.model

    original = engine.model.swiglu
    lib = torch.library.Library("opscan_cli", "DEF")
    lib.define("cuda_only(Tensor x) -> Tensor")
    lib.impl("cuda_only", lambda x: x.clone(), "CUDA")
    lib.impl("cuda_only", lambda x: torch.empty_like(x), "Meta")
    monkeypatch.setattr(engine.model, "swiglu",
                        lambda x, w: torch.ops.opscan_cli.cuda_only(original(x, w)))
    try:
        code = main(["ops", "--model", str(write(tmp_path, "llama")), "--device", "cpu"])
    finally:
        lib._destroy()
    out = capsys.readouterr().out
    assert code == 1
    assert "operators WITHOUT a kernel on the device" in out
    assert "opscan_cli::cuda_only" in out and "Block.feed_forward" in out


@pytest.mark.parametrize(("argv", "message"), [
    (["--torch-npu", "latest"], "is not a version"),
    (["--device", "npu", "--python", "/nonexistent/python"], "/nonexistent/python"),
])
def test_ops_bad_inputs_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     argv: list[str], message: str) -> None:
    code = main(["ops", "--model", str(write(tmp_path, "llama")), *argv])
    err = capsys.readouterr().err
    assert code == 3 and message in err and len(err.strip().splitlines()) == 1


def test_ops_without_a_config_names_the_directory(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["ops", "--model", str(tmp_path / "nowhere")])
    err = capsys.readouterr().err
    assert code == 3 and "nowhere" in err and "Traceback" not in err


@pytest.mark.skipif(torch.backends.cuda.is_built(), reason="this torch has CUDA kernels")
def test_ops_on_cuda_with_a_cpu_only_torch(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["ops", "--model", str(write(tmp_path, "llama")), "--device", "cuda"])
    assert code == 3 and "built without CUDA" in capsys.readouterr().err


# The RMSNorm case is named after the fused op that replaces the plain one where admitted
# (on this CPU: the compiled kernel's, when it builds).
NORM = "rmsnorm (cpu_kernel_rms_norm) 1 tokens" if cpu_kernel.kernel() else "rmsnorm 1 tokens"


def _planted(path: Path, median_s: float) -> Path:
    """A result recorded elsewhere: every operator of the tiny model at `median_s`."""
    names = ["gemv attn.q_proj", "gemv mlp.gate_proj", "gemv lm_head", NORM]
    path.write_text(json.dumps({
        "schema": "ascend-doctor-bench/1", "device": "cpu", "device_name": "the other box",
        "torch": "2.13.0", "peaks": {"copy_gb_per_s": 20.0, "matmul_tflop_per_s": 0.3},
        "operators": [{"name": n, "median_s": median_s, "shape": "?"} for n in names]}))
    return path


def test_bench_quick_writes_its_result_and_compares(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    model = write(tmp_path / "m", "llama")
    faster_there = _planted(tmp_path / "there.json", 1e-12)
    code = main(["bench", "--model", str(model), "--device", "cpu", "--quick", "-o",
                 str(tmp_path / "here.json"), "--compare", str(faster_there), "--json"])
    shown = json.loads(capsys.readouterr().out)
    assert code == 1  # everything is slower than 1 ps
    written = json.loads((tmp_path / "here.json").read_text())
    assert written["schema"] == "ascend-doctor-bench/1" and "comparison" not in written
    assert {"gemv attn.q_proj", "gemv lm_head", "attention decode 1024 ctx"} <= {
        op["name"] for op in written["operators"]}
    assert set(shown["comparison"]["slower"]) == {"gemv attn.q_proj", "gemv mlp.gate_proj",
                                                   "gemv lm_head", NORM}
    # the same result against a slower machine: nothing got slower here
    code = main(["bench", "--model", str(model), "--device", "cpu", "--quick", "--compare",
                 str(_planted(tmp_path / "slow.json", 1e3))])
    out = capsys.readouterr().out
    assert code == 0 and "no operator is more than 10% slower than on the other box" in out
    assert "measured peaks: copy" in out and "% of roofline" in out


def test_bench_refuses_a_bad_comparison_before_running(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "x.json").write_text("[]")
    code = main(["bench", "--model", str(write(tmp_path / "m", "llama")), "--compare",
                 str(tmp_path / "x.json")])
    err = capsys.readouterr().err
    assert code == 3 and "--compare" in err and "x.json" in err
