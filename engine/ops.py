"""Optional vendor fused ops, each admitted only after a numerical self-check.

A candidate is used only if it loads, runs on random inputs on the target device and
matches the standard torch path within tolerance; `FusedOps.active` lists the admitted ones
for the stats and `rejected` says why the others were not. Without torch_npu no candidate
loads and the standard path runs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from engine import cpu_kernel
from engine.layers import NormFn, rms_norm

InputMaker = Callable[[torch.device, torch.dtype], tuple[Any, ...]]
Op = Callable[..., torch.Tensor]


@dataclass
class FusedOps:
    """The kernels the model calls; defaults are the standard torch path."""

    rms_norm: NormFn = rms_norm
    active: list[str] = field(default_factory=list)
    rejected: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Candidate:
    """A vendor op that may replace the standard kernel in slot `slot` of FusedOps."""

    name: str
    slot: str
    load: Callable[[], Op]  # raises when the op is not available
    reference: Op
    make_inputs: InputMaker


def tolerance_for(dtype: torch.dtype) -> float:
    return 1e-5 if dtype == torch.float32 else 2e-2


def self_check(candidate: Op, reference: Op, make_inputs: InputMaker, device: torch.device,
               dtype: torch.dtype) -> str | None:
    """None when candidate matches reference on random inputs, else the reason it does not."""
    tolerance = tolerance_for(dtype)
    try:
        inputs = make_inputs(device, dtype)
        got = candidate(*inputs)
        want = reference(*inputs)
    except Exception as exc:
        return f"raised {type(exc).__name__}: {exc}"
    if got.shape != want.shape:
        return f"shape {tuple(got.shape)} != {tuple(want.shape)}"
    if not torch.allclose(got.float(), want.float(), atol=tolerance, rtol=tolerance):
        diff = (got.float() - want.float()).abs().max().item()
        return f"max abs difference {diff:.3g} exceeds tolerance {tolerance}"
    return None


def admit(candidates: Sequence[Candidate], device: torch.device,
          dtype: torch.dtype) -> FusedOps:
    """FusedOps with every candidate that loads and passes its self-check installed."""
    ops = FusedOps()
    for candidate in candidates:
        try:
            op = candidate.load()
        except Exception as exc:
            ops.rejected[candidate.name] = f"unavailable: {exc}"
            continue
        reason = self_check(op, candidate.reference, candidate.make_inputs, device, dtype)
        if reason is None:
            setattr(ops, candidate.slot, op)
            ops.active.append(candidate.name)
        else:
            ops.rejected[candidate.name] = reason
    return ops


def _norm_inputs(device: torch.device, dtype: torch.dtype) -> tuple[Any, ...]:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(3, 7, 256, generator=generator).to(device=device, dtype=dtype)
    weight = (1 + 0.1 * torch.randn(256, generator=generator)).to(device=device, dtype=dtype)
    return x, weight, 1e-6


def _load_npu_rms_norm() -> Op:
    torch_npu = importlib.import_module("torch_npu")

    def fused(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        return torch_npu.npu_rms_norm(x, weight, eps)[0]

    return fused


def _load_cpu_rms_norm() -> Op:
    """The compiled kernel's RMSNorm (engine.cpu_kernel) for a decode step's rows: one call
    where the standard path dispatches six ops (about 25 against 2 us a row on a 2-core Xeon
    VM, 61 norms a SmolLM2 token); larger inputs keep the standard path."""

    if cpu_kernel.kernel() is None:
        raise RuntimeError(cpu_kernel.why_not)

    def fused(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        y = cpu_kernel.rms_norm(x, weight, eps)
        return y if y is not None else rms_norm(x, weight, eps)

    return fused


NPU_CANDIDATES: tuple[Candidate, ...] = (
    Candidate("npu_rms_norm", "rms_norm", _load_npu_rms_norm, rms_norm, _norm_inputs),
)
CPU_CANDIDATES: tuple[Candidate, ...] = (
    Candidate("cpu_kernel_rms_norm", "rms_norm", _load_cpu_rms_norm, rms_norm, _norm_inputs),
)


def in_use(ops: FusedOps, zero_centred_norm: bool) -> FusedOps:
    """The ops a model runs: a zero-centred RMSNorm (the hybrids') keeps the standard path,
    so an admitted RMSNorm is listed as not used there."""
    if not zero_centred_norm:
        return ops
    return FusedOps(rejected={**ops.rejected,
                              **{name: "not used: this model's RMSNorm is zero-centred"
                                 for name in ops.active}})


def select_fused_ops(device: torch.device, dtype: torch.dtype) -> FusedOps:
    """The admitted fused ops for `device`: torch_npu's on the NPU, the compiled CPU
    kernel's on the CPU, none elsewhere."""
    candidates = {"npu": NPU_CANDIDATES, "cpu": CPU_CANDIDATES}.get(device.type, ())
    return admit(candidates, device, dtype)
