"""`ascend-doctor ops` and the engine.op-coverage check: which operators of a model would reach
a device, and does the device have kernels for them?

    report = scan(config, choose_judge("npu", torch_npu="2.5.1"))

The model is built from its config on the meta device (engine.tools.meta_model), one prefill and one
decode step are traced (engine.tools.optrace), and each operator that reaches the device is judged
(engine.tools.opcoverage): probed in this process's dispatcher, or predicted from torch_npu's
registry (engine.tools.npu_registry) when torch_npu is not installed here. The vendor fused ops the
engine may use (engine.ops) are listed with whether they are available and admitted.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from engine.config import ModelConfig, load_config
from engine.errors import EngineError, ModelFormatError
from engine.ops import NPU_CANDIDATES, Candidate, admit
from engine.options import TRACE_DEVICES as DEVICES
from engine.runner import npu_available, parse_dtype
from engine.tools.meta_model import LayerUse, build_meta_model
from engine.tools.npu_registry import Registry, load_registry, parse_version, version_text
from engine.tools.opcoverage import DispatcherJudge, Judge, OpRow, RegistryJudge, rows
from engine.tools.optrace import PREFILL_TOKENS, qualified, trace
from engine.weights import read_model
from probes.textsafe import one_line

SCHEMA = "ascend-doctor-ops/1"


@dataclass(frozen=True)
class FusedOp:
    """A vendor fused op the engine can use, and what became of it on this target."""

    name: str
    status: str  # admitted | rejected | available | unavailable | not used
    detail: str


@dataclass(frozen=True)
class CoverageReport:
    model: str
    architecture: str
    dtype: str
    fp8_mode: str  # "" without FP8 weights
    num_layers: int
    layers: tuple[LayerUse, ...]
    prefill_tokens: int
    device: str
    target: str
    predicted: bool
    rows: tuple[OpRow, ...]
    fused: tuple[FusedOp, ...]
    notes: tuple[str, ...]

    @property
    def warnings(self) -> tuple[OpRow, ...]:
        return tuple(row for row in self.rows if row.kernel.warns)

    def document(self) -> dict[str, Any]:
        """The JSON document (schema ascend-doctor-ops/1)."""
        return {
            "schema": SCHEMA, "model": self.model, "architecture": self.architecture,
            "dtype": self.dtype, "fp8_mode": self.fp8_mode or None,
            "num_layers": self.num_layers, "device": self.device, "target": self.target,
            "predicted": self.predicted, "prefill_tokens": self.prefill_tokens,
            "traced_layers": [{"index": u.index, "kind": u.label, "stands_for": u.stands_for}
                              for u in self.layers],
            "operators": [_row_document(row) for row in self.rows],
            "fused_ops": [{"name": f.name, "status": f.status, "detail": f.detail}
                          for f in self.fused],
            "warnings": len(self.warnings), "notes": list(self.notes),
        }


def _row_document(row: OpRow) -> dict[str, Any]:
    return {"op": qualified(row.op), "status": row.kernel.status, "detail": row.kernel.detail,
            "prefill_calls": row.prefill, "decode_calls": row.decode,
            "dtypes": list(row.dtypes), "shapes": list(row.shapes),
            "distinct_shapes": row.shape_count, "runs_whole": row.whole,
            "sites": [{"where": s.where, "layers": s.layers, "calls": s.count}
                      for s in row.sites]}


# -- which device, probed or predicted --------------------------------------------------------


def _import_torch_npu() -> tuple[Any, str]:
    """(torch_npu module or None, why not)."""
    try:
        return importlib.import_module("torch_npu"), ""
    except Exception as exc:  # a broken install raises more than ImportError
        return None, f"{type(exc).__name__}: {exc}"


def choose_judge(device: str, torch_npu: str | None = None,
                 registry: Registry | None = None) -> Judge:
    """Probe this process's dispatcher, or predict from torch_npu's registry for `torch_npu`
    (a version: 2.5.1, 2.5.1.post3) when it is given or torch_npu is not importable here."""
    if device == "cpu":
        return DispatcherJudge("CPU", f"cpu: kernels of torch {torch.__version__}, probed")
    if device == "cuda":
        if not torch.backends.cuda.is_built():
            raise EngineError(f"this torch ({torch.__version__}) is built without CUDA: it holds "
                              "no CUDA kernels to ask about; run the scan where torch with CUDA "
                              "is installed")
        return DispatcherJudge("CUDA", f"cuda: kernels of torch {torch.__version__}, probed")
    if device != "npu":
        raise EngineError(f"device {device!r} is not one of {', '.join(DEVICES)}")
    if torch_npu is None:
        module, why = _import_torch_npu()
        if module is not None:
            version = getattr(module, "__version__", "?")
            return DispatcherJudge("PrivateUse1", f"npu: PrivateUse1 kernels of torch_npu "
                                                  f"{version}, probed")
        reason = "not installed here" if why.startswith("ModuleNotFoundError") else \
            f"not importable here ({why})"
        return predict_for(torch.__version__, f"this torch's line: torch_npu is {reason}; "
                                              "--torch-npu VERSION predicts for a release",
                           registry)
    return predict_for(torch_npu, f"torch_npu {torch_npu}", registry)


def predict_for(release: str, what: str, registry: Registry | None = None) -> RegistryJudge:
    """A judge predicting from the registry for the torch line of `release` (a torch or
    torch_npu version: torch_npu is built per torch release and numbered after it)."""
    version = parse_version(release)
    if version is None:
        raise EngineError(f"torch_npu {release!r} is not a version (e.g. 2.5.1 or 2.5.1.post3)")
    table = registry if registry is not None else load_registry()
    return RegistryJudge(table, version, f"npu, torch {version_text(version)} line ({what}), "
                                         "predicted from torch_npu's operator registries")


# -- the fused ops ------------------------------------------------------------------------------


def fused_ops(judge: Judge, dtype: torch.dtype,
              candidates: Sequence[Candidate] = NPU_CANDIDATES) -> tuple[FusedOp, ...]:
    if isinstance(judge, RegistryJudge):
        return tuple(_predicted_fused(judge, c.name) for c in candidates)
    if not isinstance(judge, DispatcherJudge) or judge.key != "PrivateUse1":
        return tuple(FusedOp(c.name, "not used", "the engine uses vendor fused ops on npu "
                                                 "only") for c in candidates)

    if not npu_available():
        return tuple(_loadable(c) for c in candidates)
    chosen = admit(candidates, torch.device("npu", 0), dtype)
    return tuple(FusedOp(c.name, "admitted", "passed the engine's self-check on npu:0")
                 if c.name in chosen.active else
                 FusedOp(c.name, "rejected", chosen.rejected.get(c.name, "")) for c in candidates)


def _predicted_fused(judge: RegistryJudge, name: str) -> FusedOp:
    answer = judge.registry.answer(name, judge.version)
    if answer.has_kernel:
        return FusedOp(name, "available", f"predicted (registry: {', '.join(answer.paths)}); "
                                          "the engine's self-check runs on an NPU at start-up")
    where = f"listed for {answer.listed_for} only" if answer.listed else "not in the registry"
    return FusedOp(name, "unavailable", f"predicted ({where}): the standard path runs")


def _loadable(candidate: Candidate) -> FusedOp:
    try:
        candidate.load()
    except Exception as exc:
        return FusedOp(candidate.name, "unavailable", f"{type(exc).__name__}: {exc}")
    return FusedOp(candidate.name, "available", "torch_npu has it; the self-check needs an NPU "
                                                "device and none is visible")


# -- the scan -------------------------------------------------------------------------------------


def scale_dtype_of(path: Path) -> str | None:
    """The dtype of the checkpoint's FP8 scales (BF16, F16, F32) from its headers, or None
    when the directory holds no shards (a config alone)."""

    try:
        model = read_model(path)
    except EngineError:
        return None
    return next((info.dtype for name, info in model.tensors.items()
                 if name.endswith(("weight_scale_inv", "weight_scale"))), None)


def scan(config: ModelConfig, judge: Judge, *, dtype: str = "bfloat16",
         fp8_mode: str = "dequantize", scale_dtype: str | None = None,
         prefill_tokens: int = PREFILL_TOKENS, model: str = "") -> CoverageReport:
    torch_dtype = parse_dtype(dtype)
    try:  # on the meta device: a config whose shapes disagree fails here, costing nothing
        meta = build_meta_model(config, torch_dtype, fp8_mode, prefill_tokens + 1,
                                scale_dtype or "BF16")
        traced = trace(meta, prefill_tokens)
    except (RuntimeError, ValueError) as exc:
        raise ModelFormatError(f"the config's shapes do not fit together "
                               f"({type(exc).__name__}: {one_line(str(exc))[:160]}); fix "
                               "config.json") from None
    found = tuple(rows(traced, judge))
    notes = _notes(traced.layers, prefill_tokens, judge, meta.fp8_mode, scale_dtype)
    return CoverageReport(model or config.architecture, config.architecture,
                          str(torch_dtype).removeprefix("torch."), meta.fp8_mode,
                          config.num_layers, traced.layers, prefill_tokens,
                          judge.target.split(":", 1)[0].split(",", 1)[0], judge.target,
                          judge.predicted, found,
                          fused_ops(judge, torch_dtype), notes)


def _notes(layers: tuple[LayerUse, ...], prefill_tokens: int, judge: Judge, fp8_mode: str,
           scale_dtype: str | None) -> tuple[str, ...]:
    kinds = ", ".join(f"layer {u.index} for the {u.stands_for} {u.label} layers"
                      for u in layers)
    notes = [f"traced on the meta device (no weights): one prefill of {prefill_tokens} tokens "
             f"and one decode step; counts are for the whole model ({kinds})",
             "expert calls follow a synthetic routing (tokens spread evenly over the experts): "
             "meta tensors hold no router scores",
             "composite: torch runs the operator as other operators, which then need kernels "
             "of their own (they are not listed)"]
    if fp8_mode == "resident" and scale_dtype is None:
        notes.append("FP8 scale dtype not read (no shards): BF16 scales assumed")
    if isinstance(judge, RegistryJudge):
        notes += [f"source: {line}" for line in judge.registry.provenance]
        notes.append("predicted, not probed: the registry at that commit; an older torch_npu "
                     "release of the same torch line may lack operators added since")
    return tuple(notes)


def scan_path(path: Path, device: str, torch_npu: str | None = None, dtype: str = "bfloat16",
              fp8_mode: str = "dequantize") -> CoverageReport:
    """`ascend-doctor ops --model DIR`: read the config (and the FP8 scale dtype) and scan."""
    config = load_config(path)
    scale = scale_dtype_of(path) if config.fp8 is not None else None
    return scan(config, choose_judge(device, torch_npu), dtype=dtype, fp8_mode=fp8_mode,
                scale_dtype=scale, model=str(path))
