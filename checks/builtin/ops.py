"""engine.op-coverage: does the NPU have a kernel for every operator the model runs?

The engine traces one prefill and one decode step of --model on the meta device (its config is
enough) and judges each aten operator that would reach the NPU: probed in the dispatcher when
the doctor's own Python imports the judged interpreter's torch_npu, otherwise predicted from
torch_npu's published operator registry for the torch_npu (or, without one, the torch line)
installed in the judged interpreter. An operator without a kernel is a warning naming where in
the model it is called: torch_npu runs it on the CPU or fails.

The operators traced are this project's engine's (engine/: its own implementation of the
model), never a serving engine's: against a vLLM or MindIE target the check skips, since
those run their own model code and fused kernels (vllm-ascend's custom operators, MindIE's
ATB operators), which the trace does not run.

The check loads torch, so it runs only when named (`--only engine.op-coverage`); torch and the
engine are imported inside the function.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

from checks.builtin import facts
from checks.builtin.checkpoint import is_fp8, model_or_skip
from checks.context import Context
from checks.model import Finding, passed, skipped, warned
from probes.errors import HostError, NotRecorded

if TYPE_CHECKING:
    from engine.tools.opcoverage import Judge
    from probes.model.config import ConfigFacts
    from probes.model.reader import ModelDir

CHECK_RULES: dict[str, dict[str, str]] = {
    "engine.op-coverage": {
        "no-torch": "skip",
        "no-config": "skip",
        "nothing-to-judge": "skip",
        "engine-cannot-trace": "skip",
        "no-torch-npu": "skip",
        "serving-engine-target": "skip",
        "operator-without-kernel": "warn",
    },
}
REMEDY = ("An operator without an NPU kernel runs through torch_npu's CPU fallback (a copy to "
          "the host and back on every call) or fails. Use a torch_npu release whose registry "
          "has it, or change the model code that calls it (see `ascend-doctor explain "
          "engine.op-coverage`).")
SHOWN = 5
WHOSE = "this project's engine (engine/, its own implementation of the model)"
SERVERS = {"vllm": "vLLM (vllm-ascend)", "mindie": "MindIE"}


def _own_torch_npu() -> str | None:
    """The torch_npu version the doctor's own Python would import, if any."""
    if importlib.util.find_spec("torch_npu") is None:
        return None

    try:
        return version("torch_npu")
    except PackageNotFoundError:
        return None


def _judge(ctx: Context) -> tuple[Judge | None, str, bool]:
    """How the NPU's kernels are known for the judged interpreter (None: the reason to skip),
    and whether that interpreter has a torch_npu to judge."""
    from engine.tools.opscan import choose_judge, predict_for

    py = facts.python(ctx)
    where = py.interpreter or "the judged interpreter"
    if py.error:
        return None, f"the packages of {where} were not read ({py.error})", False
    npu, torch = py.version_of("torch_npu"), py.version_of("torch")
    if npu is not None and npu == _own_torch_npu():
        return choose_judge("npu"), f"torch_npu {npu}, probed in the doctor's Python", True
    if npu is not None:
        return (predict_for(npu, f"torch_npu {npu} in {where}"), f"torch_npu {npu} (predicted)",
                True)
    if torch is not None:
        return (predict_for(torch, f"torch {torch} in {where}, which has no torch_npu"),
                f"torch {torch}'s line (predicted; {where} has no torch_npu)", False)
    return None, (f"neither torch_npu nor torch is installed in {where}: nothing to predict "
                  "for (`ascend-doctor ops --model DIR --torch-npu VERSION` predicts for a "
                  "release)"), False


def _scale_dtype(model: ModelDir) -> str | None:
    return next((t.dtype for name, t in model.tensors.items()
                 if name.endswith(("weight_scale_inv", "weight_scale"))), None)


def _read_model(ctx: Context) -> tuple[ConfigFacts | None, str | None, bool, str]:
    """(config facts, FP8 scale dtype, FP8 weights?, why not) of --model: the config is
    enough (the shards only tell the scale dtype), so a directory without weights scans too."""
    from probes.model.reader import CheckpointError, read_config

    model, _ = model_or_skip(ctx)
    if model is not None:
        return model.config, _scale_dtype(model), is_fp8(model), ""
    try:
        config = read_config(ctx.host, str(ctx.model_dir))
    except NotRecorded as exc:
        return None, None, False, f"the model's config.json was not recorded ({exc.path})"
    except (CheckpointError, HostError) as exc:
        return None, None, False, f"cannot read the model's config.json: {exc}"
    return config, None, config.quant.is_fp8, ""


def _serving_engine(ctx: Context) -> Finding | None:
    server = SERVERS.get(ctx.target.serving.server)
    if server is None:
        return None
    return skipped(f"the target is a {server} server: the trace is of the operators of "
                   f"{WHOSE}, not of {server}'s own model code and fused kernels, which it "
                   "does not run; `ascend-doctor ops --model DIR` shows this project's trace",
                   f"target: {ctx.target.label}", rules=("serving-engine-target",))


def op_coverage(ctx: Context) -> Finding:
    serving = _serving_engine(ctx)
    if serving is not None:
        return serving
    if importlib.util.find_spec("torch") is None:
        return skipped("torch is not installed in the doctor's Python: the trace needs it "
                       "(pip install torch, or run `ascend-doctor ops` where it is)",
                       rules=("no-torch",))
    config, scale_dtype, fp8, why = _read_model(ctx)
    if config is None:
        return skipped(why, rules=("no-config",))
    judge, how, has_npu = _judge(ctx)
    if judge is None:
        return skipped(how, rules=("nothing-to-judge",))
    from engine.config import from_facts
    from engine.errors import EngineError
    from engine.tools.opscan import scan

    try:
        report = scan(from_facts(config), judge, fp8_mode="resident" if fp8 else "dequantize",
                      scale_dtype=scale_dtype, model=str(ctx.model_dir))
    except EngineError as exc:
        return skipped(f"the engine cannot trace this model: {exc}",
                       rules=("engine-cannot-trace",))
    return verdict(report.document(), how, has_npu)


def _site(op: Mapping[str, Any]) -> str:
    sites = op.get("sites") or [{}]
    layers = f" [{sites[0]['layers']}]" if sites[0].get("layers") else ""
    return f"{sites[0].get('where') or '-'}{layers}"


def verdict(document: Mapping[str, Any], how: str, has_npu: bool = True) -> Finding:
    """pass when every operator has a kernel, warn naming each one that has none; without a
    torch_npu in the judged interpreter there is no deployment to pass: skip with what the
    prediction for its torch line found."""
    ops: Sequence[Mapping[str, Any]] = document.get("operators", [])
    lacking = [op for op in ops if op.get("status") in ("fallback", "missing")]
    fused = [f"fused op {f['name']}: {f['status']} ({f['detail']})"
             for f in document.get("fused_ops", [])]
    common = [f"target: {document.get('target')}", *fused,
              *[n for n in document.get("notes", []) if str(n).startswith("source:")]]
    if not lacking:
        composite = sum(1 for op in ops if op.get("status") == "composite")
        found = (f"all {len(ops)} operators of one prefill + decode of {WHOSE} have NPU "
                 f"kernels ({len(ops) - composite} native, {composite} composite) for {how}")
        if not has_npu:
            return skipped(f"no torch_npu to judge; {found}", *common, rules=("no-torch-npu",))
        return passed(found, *common)
    names = ", ".join(str(op["op"]) for op in lacking[:SHOWN])
    more = f" and {len(lacking) - SHOWN} more" if len(lacking) > SHOWN else ""
    evidence = [f"{op['op']}: {op.get('detail')}; called from {_site(op)}; "
                f"{op.get('prefill_calls', 0)} calls per prefill, {op.get('decode_calls', 0)} "
                "per decode step" for op in lacking]
    return warned(f"{len(lacking)} of {len(ops)} operators of {WHOSE} have no NPU kernel "
                  f"for {how}: {names}{more}", REMEDY, *evidence, *common,
                  rules=("operator-without-kernel",))
