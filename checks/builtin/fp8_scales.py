"""checkpoint.fp8-scales: every FP8 weight has the scale its format says, and the scales are sane.

The format comes from `quantization_config` (probes.model.quant), and each is judged as it is
meant:
- block FP8 (`quant_method: fp8` with `weight_block_size`; Qwen3/3.5/3.6-FP8, DeepSeek-V3):
  `X.weight_scale_inv`, one per tile, shape `[ceil(out/b), ceil(in/b)]` (huggingface/
  transformers src/transformers/integrations/finegrained_fp8.py @ v5.24.0);
- compressed-tensors float8 (llm-compressor): `X.weight_scale` of shape `[1]` (tensor),
  `[out, 1]` (channel) or a block grid, `X.input_scale` when activations are static
  (vllm-project/compressed-tensors src/compressed_tensors/quantization/lifecycle/
  initialize.py @ 027d00c87ca6);
- `fp8` without a block size: one `X.weight_scale` per weight, `X.input_scale` when static
  (vllm-project/vllm vllm/model_executor/layers/quantization/fp8.py @ 0071b24bf8fe).
Without a usable `quantization_config` the layout is read from the tensor names beside the
FP8 weights, and said so.

Every scale is the multiplier that restores the weight, so it is positive and finite: NaN,
infinite or negative is a failure; zero is a warning (it fits an all-zero tile). No vendor
publishes a scale range; the bounds are derived from the float formats (`derived_range`).
Shards that are missing or unreadable are not scale problems: their weights are counted as not
checked and named (checkpoint.format says what is missing).
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from checks.builtin.checkpoint import is_fp8, model_or_skip
from checks.context import Context
from checks.model import Finding, failed, passed, skipped, warned
from probes.errors import HostError
from probes.model.safetensors_header import FP8_DTYPES, shown

if TYPE_CHECKING:
    from probes.model.reader import ModelDir, TensorInfo

SCALE_DTYPES = ("F32", "BF16", "F16")
TOP_N = 5

# (largest finite, smallest positive subnormal) of the dtype a weight is dequantised to.
DEQUANT_LIMITS: dict[str, tuple[float, float]] = {
    "bfloat16": (3.3895313892515355e38, 2.0**-133),
    "float16": (65504.0, 2.0**-24),
    "float32": (3.4028234663852886e38, 2.0**-149),
}
# (largest finite, smallest positive subnormal) of the stored 8-bit float (arXiv:2209.05433)
FP8_LIMITS: dict[str, tuple[float, float]] = {
    "F8_E4M3": (448.0, 2.0**-9),
    "F8_E5M2": (57344.0, 2.0**-16),
}
SCHEME_WORDS = {"block": "block scales", "channel": "per-channel scales",
                "tensor": "per-tensor scales"}

CHECK_RULES: dict[str, dict[str, str]] = {
    "checkpoint.fp8-scales": {
        "no-model": "skip",
        "not-recorded": "skip",
        "model-unreadable": "skip",
        "not-fp8": "skip",
        "weights-not-here": "skip",
        "no-fp8-tensors": "warn",
        "scale-missing": "fail",
        "scale-shape": "fail",
        "scale-dtype": "fail",
        "scale-unreadable": "fail",
        "scale-not-finite": "fail",
        "scale-negative": "fail",
        "scale-out-of-range": "fail",
        "scale-zero": "warn",
        "scale-outlier": "warn",
        "listed-not-converted": "warn",
        "shards-not-checked": "warn",
    },
}


@dataclass(frozen=True)
class ScaleLayout:
    """Where a checkpoint keeps its FP8 scales, and where that was read."""

    scheme: str  # block | channel | tensor
    suffix: str  # weight_scale_inv | weight_scale
    block: tuple[int, int] | None = None
    input_scales: bool = False
    source: str = ""

    def scale_name(self, weight: str) -> str:
        return weight.removesuffix("weight") + self.suffix

    def describe(self) -> str:
        grid = f" of {self.block[0]}x{self.block[1]}" if self.block else ""
        inputs = ", with input_scale" if self.input_scales else ""
        return f"{SCHEME_WORDS[self.scheme]}{grid} in X.{self.suffix}{inputs} ({self.source})"


@dataclass(frozen=True)
class ScaleProblem:
    tensor: str  # the scale tensor's name (or the weight's when the scale is missing)
    severity: str  # fail or warn
    count: int  # blocks affected; 1 for structural problems
    detail: str
    rule: str = ""


# -- the layout ---------------------------------------------------------------------------------


def layout(model: ModelDir, default_block: int) -> ScaleLayout:
    """From quantization_config; without a usable one, from the names beside the weights."""
    quant = model.config.quant
    if quant.is_fp8:
        block = f", block {list(quant.block_size)}" if quant.block_size else ""
        return ScaleLayout(quant.scheme, quant.scale_suffix, quant.block_size,
                           quant.input_scales,
                           f"quantization_config: {quant.method} {quant.scheme}{block}")
    names = set(model.tensors) | set(model.weight_map)
    source = "inferred from the tensor names: quantization_config does not say"
    if any(n.endswith(".weight_scale_inv") for n in names):
        return ScaleLayout("block", "weight_scale_inv", (default_block, default_block),
                           source=source + f"; block {default_block} from the policy")
    scale = next((t for n, t in model.tensors.items() if n.endswith(".weight_scale")), None)
    scheme = "channel" if scale is not None and len(scale.shape) >= 2 and scale.shape[-1] == 1 \
        and scale.shape[-2] > 1 else "tensor"
    return ScaleLayout(scheme, "weight_scale", source=source)


def expected_shapes(weight: TensorInfo, where: ScaleLayout) -> tuple[tuple[int, ...], ...]:
    """The scale shapes the layout accepts for this weight ([.., out, in])."""
    *lead, rows, cols = weight.shape if len(weight.shape) >= 2 else (1, 1, *weight.shape)[-2:]
    if where.scheme == "block" and where.block:
        # ceil: a ragged last row/column of tiles still gets its own scale
        return ((*lead, math.ceil(rows / where.block[0]), math.ceil(cols / where.block[1])),)
    if where.scheme == "channel":
        return ((*lead, rows, 1),)
    return ((*lead, 1), tuple(lead)) if lead else ((1,), ())


# -- ranges -------------------------------------------------------------------------------------


def derived_range(dequant_dtype: str, fp8_dtype: str = "F8_E4M3") -> tuple[float, float, str]:
    """(min, max, why) scale bounds derived from the 8-bit float and the dequantised dtype.

    A sanity bound, not a vendor rule (no vendor publishes one; a [2^-12, 2^12] range circulates
    without any CANN document behind it): the largest code times the scale must stay finite
    in the dequantised dtype, and the smallest non-zero code times the scale must not
    underflow to zero there.
    """
    name = dequant_dtype if dequant_dtype in DEQUANT_LIMITS else "bfloat16"
    largest, tiniest = DEQUANT_LIMITS[name]
    fp8_max, fp8_min = FP8_LIMITS.get(fp8_dtype, FP8_LIMITS["F8_E4M3"])
    return (tiniest / fp8_min, largest / fp8_max,
            f"derived: {fp8_max:g}*scale finite and {fp8_min:g}*scale non-zero in {name}")


def scale_range(ctx: Context, model: ModelDir, fp8_dtype: str) -> tuple[float, float, str]:
    low, high, why = derived_range(model.config.dtype, fp8_dtype)
    policy_min = ctx.policy.get("checkpoint", "fp8_scale_min")
    policy_max = ctx.policy.get("checkpoint", "fp8_scale_max")
    if policy_min is None and policy_max is None:
        return low, high, why
    return (low if policy_min is None else float(policy_min),
            high if policy_max is None else float(policy_max), "policy checkpoint.fp8_scale_*")


# -- one weight ---------------------------------------------------------------------------------


def structural_problem(scale: TensorInfo | None, weight: TensorInfo,
                       where: ScaleLayout) -> ScaleProblem | None:
    name = where.scale_name(weight.name)
    if scale is None:
        return ScaleProblem(weight.name, "fail", 1, f"has no {name}", "scale-missing")
    shapes = expected_shapes(weight, where)
    if scale.shape not in shapes:
        wanted = " or ".join(str(list(s)) for s in shapes)
        return ScaleProblem(scale.name, "fail", 1, f"shape {list(scale.shape)}, expected "
                            f"{wanted} for weight {list(weight.shape)} ({where.describe()})",
                            "scale-shape")
    if scale.dtype not in SCALE_DTYPES:
        return ScaleProblem(scale.name, "fail", 1, f"dtype {scale.dtype}, expected "
                            "F32/BF16/F16", "scale-dtype")
    return None


@dataclass(frozen=True)
class Limits:
    low: float
    high: float
    outlier_ratio: float | None  # None: no outlier test (one value per tensor)


def value_problems(name: str, values: Sequence[float], limits: Limits) -> list[ScaleProblem]:
    """What is wrong with one scale tensor's values. Counted on the sorted finite values with
    bisect (C speed, no numpy: its import costs more than a checkpoint's scales)."""
    finite, nan, infinite, minus_infinite = _finite_sorted(values)
    below_zero = bisect_left(finite, 0.0)  # -0.0 is a zero, as for numpy
    positive = bisect_right(finite, 0.0)
    counts = [("NaN", nan, "fail", "scale-not-finite"),
              ("infinite", infinite, "fail", "scale-not-finite"),
              ("negative", below_zero + minus_infinite, "fail", "scale-negative"),
              ("zero (an all-zero tile?)", positive - below_zero, "warn", "scale-zero")]
    problems = [ScaleProblem(name, severity, n, f"{n} {kind}", rule)
                for kind, n, severity, rule in counts if n]
    good = finite[positive:]
    out_of_range = _outside(good, limits.low, limits.high)
    if out_of_range:
        problems.append(ScaleProblem(name, "fail", out_of_range, f"{out_of_range} outside "
                                     f"[{limits.low:.3g}, {limits.high:.3g}]",
                                     "scale-out-of-range"))
    if len(good) > 1 and limits.outlier_ratio is not None:
        median, ratio = _median(good), limits.outlier_ratio
        outliers = _outside(good, median / ratio, median * ratio)
        if outliers:
            problems.append(ScaleProblem(name, "warn", outliers, f"{outliers} outliers vs "
                                         f"median {median:.3g} (ratio {ratio:g})",
                                         "scale-outlier"))
    return problems


def _finite_sorted(values: Sequence[float]) -> tuple[list[float], int, int, int]:
    """(the finite values sorted, how many are NaN, how many infinite, how many of those -inf)."""
    if math.isfinite(sum(values)):  # the common case, at C speed
        return sorted(values), 0, 0, 0
    finite = sorted(v for v in values if math.isfinite(v))
    nan = sum(1 for v in values if v != v)
    minus_infinite = sum(1 for v in values if v == -math.inf)
    return finite, nan, len(values) - len(finite) - nan, minus_infinite


def _outside(ordered: list[float], low: float, high: float) -> int:
    """How many of the sorted values are below `low` or above `high`."""
    if low > high:  # every value is one or the other
        return len(ordered)
    return bisect_left(ordered, low) + len(ordered) - bisect_right(ordered, high)


def _median(ordered: list[float]) -> float:
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


# -- the model ----------------------------------------------------------------------------------


@dataclass
class Tally:
    """What was checked, what was not, and what was wrong."""

    problems: list[ScaleProblem]
    weights: int = 0
    values: int = 0
    dtypes: Counter[str] | None = None
    unchecked: int = 0  # scales of present weights that live in a missing/unreadable shard
    raw: dict[str, bytes] = field(default_factory=dict)  # scales read ahead (_read_ahead)


def _broken(model: ModelDir) -> set[str]:
    return set(model.missing_shards) | set(model.unreadable_shards)


# Scales read together: one open of each shard per batch on a live machine, instead of one
# per scale (480 for a small MoE); a bounded batch keeps the bytes held at once bounded.
READ_AHEAD_WEIGHTS = 256


def _scale_names(weight: TensorInfo, where: ScaleLayout) -> list[str]:
    names = [where.scale_name(weight.name)]
    if where.input_scales:
        names.append(weight.name.removesuffix("weight") + "input_scale")
    return names


def _read_ahead(ctx: Context, model: ModelDir, weights: Sequence[TensorInfo],
                where: ScaleLayout) -> dict[str, bytes]:
    """The bytes of the scales of `weights`, read together (probes.model.reader.read_raw);
    {} when the batch cannot be read: each scale is then read alone, as without a batch, and
    its own error is said."""
    from probes.model.reader import read_raw

    names = [n for w in weights for n in _scale_names(w, where)
             if n in model.tensors and model.shard(model.tensors[n].shard) is not None]
    try:
        return read_raw(ctx.host, model, names)
    except (HostError, KeyError, ValueError):
        return {}


def _read_values(ctx: Context, model: ModelDir, scale: TensorInfo, limits: Limits,
                 tally: Tally) -> None:
    from probes.model.reader import CheckpointError, floats_of, load_floats

    raw = tally.raw.get(scale.name)
    try:
        values = (load_floats(ctx.host, model, scale.name) if raw is None
                  else floats_of(model, scale.name, raw))
    except CheckpointError as exc:  # a truncated shard; checkpoint.format names it too
        tally.problems.append(ScaleProblem(scale.name, "fail", 1, f"unreadable ({exc})",
                                           "scale-unreadable"))
        return
    tally.values += len(values)
    tally.problems.extend(value_problems(scale.name, values, limits))


def check_weight(ctx: Context, model: ModelDir, weight: TensorInfo, where: ScaleLayout,
                 limits: Limits, tally: Tally) -> None:
    tally.weights += 1
    if model.config.quant.skips(weight.name.removesuffix(".weight")):
        tally.problems.append(ScaleProblem(weight.name, "warn", 1, "stored as FP8 but listed "
                                           "in modules_to_not_convert (a loader keeps it as "
                                           "is)", "listed-not-converted"))
    for index, name in enumerate(_scale_names(weight, where)):
        scale = model.tensors.get(name)
        if scale is None and model.weight_map.get(name) in _broken(model):
            tally.unchecked += 1
            continue
        layout_of = where if index == 0 else ScaleLayout("tensor", "input_scale")
        problem = structural_problem(scale, weight, layout_of)
        if problem is not None:
            tally.problems.append(problem)
            continue
        assert scale is not None
        assert tally.dtypes is not None
        tally.dtypes[scale.dtype] += 1
        _read_values(ctx, model, scale, limits if layout_of.scheme != "tensor" else
                     Limits(limits.low, limits.high, None), tally)


def fp8_scales(ctx: Context) -> Finding:
    model, why_not = model_or_skip(ctx)
    if model is None:
        assert why_not is not None
        return why_not
    if not is_fp8(model):
        return skipped("not an FP8 checkpoint", f"quant_method: {model.config.quant_method or '-'}",
                       rules=("not-fp8",))
    weights = sorted((t for t in model.tensors.values() if t.dtype in FP8_DTYPES),
                     key=lambda t: t.name)
    if not weights:
        return _no_weights(model)
    where = layout(model, int(ctx.policy.get("checkpoint", "fp8_block_size")))
    low, high, why = scale_range(ctx, model, weights[0].dtype)
    limits = Limits(low, high, float(ctx.policy.get("checkpoint", "fp8_scale_outlier_ratio")))
    tally = Tally([], dtypes=Counter())
    for start in range(0, len(weights), READ_AHEAD_WEIGHTS):
        batch = weights[start:start + READ_AHEAD_WEIGHTS]
        tally.raw = _read_ahead(ctx, model, batch, where)
        for weight in batch:
            check_weight(ctx, model, weight, where, limits, tally)
    tally.raw = {}
    return _scale_finding(model, tally, where, (low, high, why))


def _no_weights(model: ModelDir) -> Finding:
    broken = sorted(_broken(model))
    if broken:
        total = len(model.shards) + len(broken)
        return skipped(f"no FP8 weight could be read: {len(broken)} of {total} shards are "
                       "missing or unreadable (see checkpoint.format)",
                       f"not checked: {', '.join(broken[:TOP_N])}"
                       + (f" and {len(broken) - TOP_N} more" if len(broken) > TOP_N else ""),
                       rules=("weights-not-here",))
    return warned(f"config.json says {model.config.quant_method or 'FP8'} but no tensor is "
                  "stored as 8-bit float",
                  "check that config.json belongs to these weights (a BF16 export with an "
                  "FP8 config?); loaders build FP8 layers from the config",
                  f"quant_method: {model.config.quant_method or '-'}",
                  rules=("no-fp8-tensors",))


def _worst_first(problems: Iterable[ScaleProblem]) -> list[tuple[str, list[ScaleProblem]]]:
    by_tensor: dict[str, list[ScaleProblem]] = {}
    for p in problems:
        by_tensor.setdefault(p.tensor, []).append(p)

    def rank(item: tuple[str, list[ScaleProblem]]) -> tuple[int, int, str]:
        name, found = item
        fails = sum(p.count for p in found if p.severity == "fail")
        return (-int(fails > 0), -sum(p.count for p in found), name)

    return sorted(by_tensor.items(), key=rank)


def _describe(tensor: str, found: list[ScaleProblem]) -> str:

    return f"{shown(tensor)}: " + ", ".join(p.detail for p in found)


def _unchecked_line(model: ModelDir, tally: Tally) -> str:
    broken = sorted(_broken(model))
    if not broken:
        return ""
    total = len(model.shards) + len(broken)
    shown = ", ".join(broken[:3]) + (f" and {len(broken) - 3} more" if len(broken) > 3 else "")
    scales = f"; {tally.unchecked} scales of the weights read are in them" \
        if tally.unchecked else ""
    return (f"{len(broken)} of {total} shards missing or unreadable ({shown}): the FP8 weights "
            f"in them were not checked{scales} (see checkpoint.format)")


def _scale_finding(model: ModelDir, tally: Tally, where: ScaleLayout,
                   bounds: tuple[float, float, str]) -> Finding:
    low, high, why = bounds
    dtypes = tally.dtypes or Counter()
    dtype_text = ", ".join(f"{d} x{n}" for d, n in sorted(dtypes.items())) or "-"
    unchecked = _unchecked_line(model, tally)
    evidence = (f"format: {where.describe()}",
                f"{tally.weights} FP8 weights read, {tally.values} scale values, scale dtypes "
                f"{dtype_text}",
                f"scale range [{low:.3g}, {high:.3g}] ({why})",
                *((unchecked,) if unchecked else ()))
    not_checked = ("shards-not-checked",) if unchecked else ()
    if not tally.problems:
        summary = f"{tally.weights} FP8 weights have sane {SCHEME_WORDS[where.scheme]}"
        if unchecked:
            return warned(f"{summary}; {unchecked}", "download the missing shards and run "
                          "again (see checkpoint.format)", *evidence, rules=not_checked)
        return passed(summary, *evidence)
    rules = (*dict.fromkeys(p.rule for p in tally.problems), *not_checked)
    ranked = _worst_first(tally.problems)
    top = tuple(_describe(name, found) for name, found in ranked[:TOP_N])
    more = (f"... and {len(ranked) - TOP_N} more tensors",) if len(ranked) > TOP_N else ()
    worst_name, worst = ranked[0]
    broken = _broken(model)
    missing = (f" ({len(broken)} of {len(model.shards) + len(broken)} shards missing or "
               "unreadable: not checked)" if broken else "")
    summary = (f"{len(ranked)} of {tally.weights} FP8 weights read have scale problems"
               f"{missing}; worst {_describe(worst_name, worst)}")
    if any(p.severity == "fail" for p in tally.problems):
        return failed(summary, "re-export or re-download the checkpoint: a missing, misshapen "
                      "or non-finite scale dequantises to garbage or NaN", *top, *more,
                      *evidence, rules=rules)
    return warned(summary, "compare with the published checkpoint: a zero scale zeroes its "
                  "tile, extreme block scales point to a broken quantisation run", *top, *more,
                  *evidence, rules=rules)
