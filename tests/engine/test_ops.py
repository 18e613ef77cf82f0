"""Vendor fused ops are admitted only after a self-check; checked here with stand-ins."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

import engine.runner
from engine import Engine, cpu_kernel
from engine.layers import rms_norm
from engine.ops import Candidate, FusedOps, Op, admit, select_fused_ops, self_check
from tests.engine.tiny_models import save_tiny

CPU = torch.device("cpu")


def inputs(device: torch.device, dtype: torch.dtype) -> tuple[Any, ...]:
    return torch.randn(2, 3, 16, dtype=dtype), torch.rand(16, dtype=dtype) + 0.5, 1e-6


def loader(op: Op) -> Any:
    return lambda: op


def fail_to_load() -> Op:
    raise ImportError("No module named 'torch_npu'")


def faithful(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    x32 = x.float()
    return w * (x32 / torch.sqrt(x32.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def test_self_check_accepts_a_faithful_op() -> None:
    assert self_check(faithful, rms_norm, inputs, CPU, torch.float32) is None


def test_self_check_reports_why() -> None:
    def wrong(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
        return rms_norm(x, w, eps) * 1.01

    def broken(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
        raise RuntimeError("aclnn error 561103")

    def flat(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
        return rms_norm(x, w, eps).flatten()

    assert "max abs difference" in str(self_check(wrong, rms_norm, inputs, CPU, torch.float32))
    assert "aclnn error" in str(self_check(broken, rms_norm, inputs, CPU, torch.float32))
    assert "shape" in str(self_check(flat, rms_norm, inputs, CPU, torch.float32))


def test_admit_installs_only_passing_candidates() -> None:
    def wrong(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
        return x

    candidates = [
        Candidate("missing_norm", "rms_norm", fail_to_load, rms_norm, inputs),
        Candidate("wrong_norm", "rms_norm", loader(wrong), rms_norm, inputs),
        Candidate("good_norm", "rms_norm", loader(faithful), rms_norm, inputs),
    ]
    ops = admit(candidates, CPU, torch.float32)
    assert ops.active == ["good_norm"]
    assert ops.rms_norm is faithful
    assert ops.rejected["missing_norm"].startswith("unavailable")
    assert "max abs difference" in ops.rejected["wrong_norm"]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_on_the_cpu_only_the_compiled_kernel_s_norm_is_a_candidate(
        dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch) -> None:
    ops = select_fused_ops(CPU, dtype)
    if cpu_kernel.kernel() is None:
        assert ops.active == [] and ops.rms_norm is rms_norm
        assert ops.rejected["cpu_kernel_rms_norm"].startswith("unavailable")
    else:
        assert ops.active == ["cpu_kernel_rms_norm"] and not ops.rejected
    monkeypatch.setattr(cpu_kernel, "_loaded", [None])  # no kernel on this machine
    monkeypatch.setattr(cpu_kernel, "why_not", "ASCEND_DOCTOR_CPU_KERNEL=0")
    ops = select_fused_ops(CPU, dtype)
    assert ops.active == [] and ops.rms_norm is rms_norm
    assert ops.rejected == {"cpu_kernel_rms_norm": "unavailable: ASCEND_DOCTOR_CPU_KERNEL=0"}
    assert select_fused_ops(torch.device("meta"), dtype).active == []


def test_an_admitted_op_is_used_and_reported(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    save_tiny("qwen3", tmp_path)
    calls: list[int] = []

    def stand_in(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
        calls.append(1)
        return faithful(x, w, eps)

    def select(device: torch.device, dtype: torch.dtype) -> FusedOps:
        return admit([Candidate("stand_in_rms_norm", "rms_norm", loader(stand_in), rms_norm,
                                inputs)], device, dtype)

    monkeypatch.setattr(engine.runner, "select_fused_ops", select)
    eng = Engine.load(tmp_path, device="cpu", dtype="float32", max_seq_len=16)
    calls.clear()
    reference = Engine.load(tmp_path, device="cpu", dtype="float32", max_seq_len=16)
    eng.logits([3, 4, 5])
    assert calls  # the model called the admitted op
    assert eng.stats.fused_ops == ("stand_in_rms_norm",)
    assert torch.allclose(eng.logits([3, 4, 5]), reference.logits([3, 4, 5]), atol=1e-5)


def test_auto_device_prefers_npu_then_cuda_then_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine.runner, "npu_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert engine.runner.pick_device("auto") == CPU
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert engine.runner.auto_device_type() == "cuda"
    monkeypatch.setattr(engine.runner, "npu_available", lambda: True)
    assert engine.runner.auto_device_type() == "npu"


def test_asking_for_a_missing_npu_is_a_clear_error() -> None:
    with pytest.raises(engine.runner.EngineError, match="torch_npu"):
        engine.runner.pick_device("npu")
