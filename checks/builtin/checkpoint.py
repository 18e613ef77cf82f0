"""checkpoint.format: is the checkpoint under --model whole, and can these chips serve it as it
is stored?

Two questions, kept apart so that a sound checkpoint is never mistaken for a broken one:
- integrity: every shard the index names is there and opens the way the loader opens it (the
  reader validates each safetensors header as the format's own reader does,
  probes.model.safetensors_header), each file is as long as its header says, and the shards hold
  the tensors config.json needs (checks.builtin.tensor_coverage);
- deployability: an FP8 checkpoint on a chip without FP8 compute (checks.builtin.fp8_gate)
  cannot be served as FP8 there — its own summary and remedy, which never say "re-download".

Everything is read through probes.model.reader (headers only), so a 236 GB checkpoint is judged
from a few MB and a recording of the box answers the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from checks.context import Context
from checks.model import NO_MODEL, Finding, failed, passed, skipped, warned
from probes.errors import HostError, NotRecorded
from probes.model.families import KNOWN_MODEL_TYPES
from probes.model.safetensors_header import FP8_DTYPES, shown

if TYPE_CHECKING:
    from checks.builtin.fp8_gate import Fp8Gate
    from checks.builtin.tensor_coverage import Coverage
    from probes.model.reader import ModelDir

# probes.model.reader is imported by the functions that read a model: a run without --model
# never loads it.

KNOWN_ARCHITECTURES = KNOWN_MODEL_TYPES  # the one family table's model types
NAMED = 3  # shards named in a summary line before "and N more"
REDOWNLOAD = "re-download the shards named above (compare sizes with the model repository)"

# The rules of checkpoint.format: name -> the statuses they give (the playbook's "What the
# check does" lists the same).
CHECK_RULES: dict[str, dict[str, str]] = {
    "checkpoint.format": {
        "no-model": "skip",
        "not-recorded": "skip",
        "unreadable": "fail",
        "shards-missing": "fail",
        "shard-refused": "fail",
        "shard-size": "fail",
        "tensors-missing": "fail",
        "fp8-not-servable": "fail",
        "fp8-unknown-chip": "warn",
        "unknown-architecture": "warn",
        # an msModelSlim (W8A8/W4A8) checkpoint: checks.builtin.modelslim
        "modelslim-description-missing": "fail",
        "modelslim-description-unreadable": "fail",
        "modelslim-tensors-mismatch": "fail",
        "modelslim-conflicting-config": "fail",
        "modelslim-flag-missing": "warn/fail",
        "modelslim-no-quant-type": "warn",
    },
}


def model_dir(ctx: Context) -> ModelDir:
    """The checkpoint under --model, read once per run. Raises CheckpointError/HostError."""
    assert ctx.model_dir is not None
    from probes.model.reader import read_model_dir

    return ctx.fact("checkpoint", lambda: read_model_dir(ctx.host, str(ctx.model_dir)))


def is_fp8(model: ModelDir) -> bool:
    """quantization_config says FP8 (block, per-tensor, per-channel, compressed-tensors float8)
    or a tensor is stored as 8-bit float."""
    return model.config.quant.is_fp8 or any(t.dtype in FP8_DTYPES
                                            for t in model.tensors.values())


# The skips model_or_skip tags; a check that uses it declares them among its own rules.
MODEL_SKIP_RULES = ("no-model", "not-recorded", "model-unreadable")


def model_or_skip(ctx: Context) -> tuple[ModelDir | None, Finding | None]:
    """The model, or the skip that says why there is none to look at (tagged with one of
    MODEL_SKIP_RULES)."""
    no_model, not_recorded, unreadable = MODEL_SKIP_RULES
    if ctx.model_dir is None:
        return None, skipped(NO_MODEL, rules=(no_model,))
    from probes.model.reader import CheckpointError

    try:
        return model_dir(ctx), None
    except NotRecorded as exc:
        return None, skipped(f"the model directory was not recorded ({exc.path})",
                             rules=(not_recorded,))
    except (CheckpointError, HostError) as exc:
        return None, skipped(f"cannot read the checkpoint: {exc} (see checkpoint.format)",
                             rules=(unreadable,))


# -- what it is ---------------------------------------------------------------------------------


def precision(model: ModelDir) -> str:
    if is_fp8(model):
        return fp8_label(model)
    by_dtype: dict[str, int] = {}
    for t in model.tensors.values():
        by_dtype[t.dtype] = by_dtype.get(t.dtype, 0) + t.nbytes
    if by_dtype.get("I8", 0) > 0:
        return "W8A8-int8"
    names = {"BF16": "BF16", "F16": "FP16", "F32": "FP32"}
    floats = {names[d]: n for d, n in by_dtype.items() if d in names}
    if floats:
        return max(floats, key=lambda d: floats[d])
    return model.config.dtype or "unknown"


def fp8_label(model: ModelDir) -> str:
    quant = model.config.quant
    how = {"block": (f"block {quant.block_size[0]}x{quant.block_size[1]}"
                     if quant.block_size else "block"),
           "tensor": "per-tensor scales", "channel": "per-channel scales"}.get(quant.scheme, "")
    parts = [p for p in ("compressed-tensors" if quant.method == "compressed-tensors" else "",
                         how) if p]
    return "FP8" + (f" ({', '.join(parts)})" if parts else "")


def shard_count(model: ModelDir) -> int:
    return len(model.shards) + len(model.missing_shards) + len(model.unreadable_shards)


def _some(names: list[str]) -> str:
    shown = ", ".join(names[:NAMED])
    return shown + (f" and {len(names) - NAMED} more" if len(names) > NAMED else "")


# -- integrity ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    rule: str
    text: str


def integrity_problems(model: ModelDir) -> list[Problem]:
    """Why a loader could not read every tensor, grouped (one line per kind of damage)."""

    found: list[Problem] = []
    total = shard_count(model)
    if model.missing_shards:
        found.append(Problem("shards-missing", f"{len(model.missing_shards)} of {total} shards "
                             "named by model.safetensors.index.json are missing: "
                             + _some(list(model.missing_shards))))
    found += [Problem("shard-refused", f"{error} (a loader refuses this shard)")
              for error in model.header_errors]
    for shard in model.shards:
        if not shard.size_ok:
            how = "truncated" if shard.size_bytes < shard.expected_bytes else "longer than it says"
            found.append(Problem("shard-size", f"shard {shown(shard.name)} is "
                                 f"{shard.size_bytes:,} bytes, its header says "
                                 f"{shard.expected_bytes:,} (8 + header + data): {how}"))
    broken = set(model.missing_shards) | set(model.unreadable_shards)
    absent = [n for n, s in model.weight_map.items() if s not in broken and n not in model.tensors]
    if absent:
        found.append(Problem("tensors-missing", f"{len(absent):,} tensors the index lists are "
                             f"not in their shard, e.g. {shown(absent[0])} "
                             f"({shown(model.weight_map[absent[0]])})"))
    return found


def coverage_problem(found: Coverage) -> Problem | None:
    if not found.counted or found.complete:
        return None
    return Problem("tensors-missing", found.line())


# -- the check ----------------------------------------------------------------------------------


@dataclass
class Verdict:
    fails: list[Problem]
    warns: list[Problem]
    remedies: list[str]


def checkpoint_format(ctx: Context) -> Finding:
    if ctx.model_dir is None:
        return skipped(NO_MODEL, rules=("no-model",))
    from probes.model.reader import CheckpointError

    try:
        model = model_dir(ctx)
    except NotRecorded as exc:
        return skipped(f"the model directory was not recorded ({exc.path})",
                       rules=("not-recorded",))
    except (CheckpointError, HostError) as exc:
        return _unreadable(ctx, str(ctx.model_dir), exc)
    from checks.builtin.tensor_coverage import coverage

    found = coverage(model)
    verdict = Verdict(integrity_problems(model), [], [])
    problem = coverage_problem(found)
    if problem is not None:
        verdict.fails.append(problem)
    if verdict.fails:
        verdict.remedies.append(REDOWNLOAD)
    gate = _deployability(ctx, model, verdict)
    slim = _modelslim(ctx, model, verdict)
    _architecture(model, verdict)
    return _finding(model, found, gate, verdict, slim)


def _unreadable(ctx: Context, directory: str, exc: Exception) -> Finding:
    """The shards cannot be read; what config.json, the msModelSlim description and the
    command line say is still judged (an FP8 checkpoint on a chip without FP8, a W8A8 one
    without --quantization ascend)."""
    from checks.builtin.modelslim import without_weights
    from probes.model.reader import CheckpointError, read_config

    verdict = Verdict([], [], [])
    evidence: tuple[str, ...] = ()
    try:
        config = read_config(ctx.host, directory)
    except (CheckpointError, HostError):
        config = None
    if config is not None:
        if config.quant.is_fp8:
            _fp8_gate(ctx, verdict)
        slim = without_weights(ctx, directory, config)
        verdict.fails += [Problem(rule, text) for rule, text in slim.fails]
        verdict.warns += [Problem(rule, text) for rule, text in slim.warns]
        verdict.remedies += slim.remedies
        evidence = tuple(slim.evidence)
    said = [*verdict.fails, *verdict.warns]
    rules = ("unreadable", *dict.fromkeys(p.rule for p in said))
    remedy = "; ".join(["point --model at a Hugging Face model directory with config.json and "
                        "safetensors shards, and download what is missing or broken",
                        *verdict.remedies])
    return failed("; ".join([f"cannot read the checkpoint: {exc}", *(p.text for p in said)]),
                  remedy, *evidence, rules=rules)


def _modelslim(ctx: Context, model: ModelDir, verdict: Verdict) -> tuple[str, ...]:
    """The msModelSlim rules (checks.builtin.modelslim); their evidence lines."""
    from checks.builtin.modelslim import modelslim

    slim = modelslim(ctx, model)
    verdict.fails += [Problem(rule, text) for rule, text in slim.fails]
    verdict.warns += [Problem(rule, text) for rule, text in slim.warns]
    verdict.remedies += slim.remedies
    return tuple(slim.evidence)


def _deployability(ctx: Context, model: ModelDir, verdict: Verdict) -> Fp8Gate | None:
    if not is_fp8(model):
        return None
    return _fp8_gate(ctx, verdict)


def _fp8_gate(ctx: Context, verdict: Verdict) -> Fp8Gate:
    """An FP8 checkpoint on these chips: served as FP8, not servable, or not known."""
    from checks.builtin.fp8_gate import ALTERNATIVES, REMEDY, fp8_gate

    gate = fp8_gate(ctx)
    if gate.status == "no-fp8":
        broken = bool(verdict.fails)
        verdict.fails.append(Problem("fp8-not-servable", gate.reason))
        verdict.remedies.append("once it is complete, it still cannot be served as FP8 on "
                                f"this chip: {ALTERNATIVES}" if broken else REMEDY)
    elif gate.status == "unknown":
        verdict.warns.append(Problem("fp8-unknown-chip", f"FP8 checkpoint: {gate.reason}"))
        verdict.remedies.append(f"on a chip without FP8 compute, {ALTERNATIVES}")
    return gate


def _architecture(model: ModelDir, verdict: Verdict) -> None:
    arch = model.config.model_type or "-"
    if model.config.model_type not in KNOWN_ARCHITECTURES:
        verdict.warns.append(Problem("unknown-architecture", f"architecture {arch} is not one "
                                     f"this project knows ({', '.join(KNOWN_ARCHITECTURES)})"))
        verdict.remedies.append("check that your serving engine supports this architecture")


def _evidence(model: ModelDir, found: Coverage, gate: Fp8Gate | None) -> tuple[str, ...]:
    total = shard_count(model)
    read = len(model.shards)
    lines = [f"precision: {precision(model)}",
             f"architecture: {model.config.model_type or '-'} "
             f"({model.config.architecture or '-'})",
             f"shards: {total}" + ("" if read == total else f" named, {read} read"),
             f"size of the shards read: {model.total_bytes:,} bytes "
             f"({model.total_bytes / 2**30:.2f} GiB)"]
    if model.index_total_size:
        lines.append(f"the index's metadata.total_size: {model.index_total_size:,} bytes of "
                     "tensor data")
    lines.append(f"tensors: {found.line()}")
    if gate is not None and gate.chips:
        lines.append(f"chips here: {gate.chips}")
    return tuple(lines)


def _finding(model: ModelDir, found: Coverage, gate: Fp8Gate | None,
             verdict: Verdict, extra: tuple[str, ...] = ()) -> Finding:
    evidence = (*_evidence(model, found, gate), *extra)
    problems = [*verdict.fails, *verdict.warns]
    # several problems are also listed one per line; a single one is the summary already
    listed = tuple(p.text for p in problems) if len(problems) > 1 else ()
    remedy = "; ".join(dict.fromkeys(verdict.remedies))
    rules = tuple(dict.fromkeys(p.rule for p in problems))
    integrity = [p for p in verdict.fails if p.rule != "fp8-not-servable"]
    if integrity:
        return failed("; ".join(p.text for p in integrity), remedy, *listed, *evidence,
                      rules=rules)
    if verdict.fails:  # sound, but not servable as FP8 here: said as such
        what = f"sound {precision(model)} checkpoint ({_whole(model, found)})"
        return failed(f"{what} that {verdict.fails[0].text}", remedy, *listed, *evidence,
                      rules=rules)
    if verdict.warns:
        return warned("; ".join(p.text for p in verdict.warns), remedy, *listed, *evidence,
                      rules=rules)
    arch = model.config.model_type or "-"
    return passed(f"{precision(model)} {arch} checkpoint, {_whole(model, found)}", *evidence)


def _whole(model: ModelDir, found: Coverage) -> str:
    tensors = f", all {found.needed:,} tensors config.json needs" if found.counted else ""
    shards = shard_count(model)
    return f"{shards} shard{'' if shards == 1 else 's'} complete{tensors}"
