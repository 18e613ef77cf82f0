"""checkpoint.fp8-scales and checkpoint.format: judge a model directory from its headers.

Both read through probes.checkpoint (headers, and for fp8-scales only the scale tensors), so
a 31 GB checkpoint is judged from a few MB and a recording of the box answers the same.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from checks.builtin import facts
from checks.context import Context
from checks.model import NO_MODEL, Finding, failed, passed, skipped, warned
from probes.errors import HostError, NotRecorded

if TYPE_CHECKING:
    import numpy as np

    from probes.checkpoint import ModelDir, TensorInfo

# probes.checkpoint is imported by the functions that read a model: a run without --model
# never loads it.

SCALE_DTYPES = ("F32", "BF16", "F16")
KNOWN_ARCHITECTURES = ("llama", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe",
                       "qwen3_next", "qwen3_5_moe")
TOP_N = 5

# (largest finite, smallest positive subnormal) of the dtype a weight is dequantised to.
DEQUANT_LIMITS: dict[str, tuple[float, float]] = {
    "bfloat16": (3.3895313892515355e38, 2.0**-133),
    "float16": (65504.0, 2.0**-24),
    "float32": (3.4028234663852886e38, 2.0**-149),
}

FP8_REMEDY = ("convert to BF16, use an msModelSlim W8A8 checkpoint (--quantization ascend), "
              "or this project's engine with FP8 weights resident (dequantised per use)")
FP8_FACT = ("FP8 E4M3 compute exists only on Ascend 950; A2 (910B) and A3 have none "
            "(facts COMPAT.yaml fp8_support)")


def model_dir(ctx: Context) -> ModelDir:
    """The checkpoint under --model, read once per run. Raises CheckpointError/HostError."""
    assert ctx.model_dir is not None
    from probes.checkpoint import read_model_dir

    return ctx.fact("checkpoint", lambda: read_model_dir(ctx.host, str(ctx.model_dir)))


def is_fp8(model: ModelDir) -> bool:
    return model.config.quant_method == "fp8" or any(
        t.dtype in ("F8_E4M3", "F8_E5M2") for t in model.tensors.values())


def model_or_skip(ctx: Context) -> tuple[ModelDir | None, Finding | None]:
    """The model, or the skip that says why there is none to look at."""
    if ctx.model_dir is None:
        return None, skipped(NO_MODEL)
    from probes.checkpoint import CheckpointError

    try:
        return model_dir(ctx), None
    except NotRecorded as exc:
        return None, skipped(f"the model directory was not recorded ({exc.path})")
    except (CheckpointError, HostError) as exc:
        return None, skipped(f"cannot read the checkpoint: {exc} (see checkpoint.format)")


# -- fp8-scales ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ScaleProblem:
    tensor: str  # the scale tensor's name (or the weight's when the scale is missing)
    severity: str  # fail or warn
    count: int  # blocks affected; 1 for structural problems
    detail: str


def scale_name(weight: str) -> str:
    return weight + "_scale_inv"


def derived_range(weight_dtype: str) -> tuple[float, float, str]:
    """(min, max, why) scale bounds derived from E4M3 and the dequantised dtype.

    A sanity bound, not a vendor rule (no vendor publishes one; the [2^-12, 2^12] range seen
    in folklore is not in any CANN document, facts/FACTCHECK.md B1):
    - max: the largest code, 448 * scale, must stay finite in the dequantised dtype;
    - min: the smallest non-zero code, 2^-9 * scale, must not underflow to zero there.
    """
    from probes.checkpoint import E4M3_MAX, E4M3_MIN_SUBNORMAL

    name = weight_dtype if weight_dtype in DEQUANT_LIMITS else "bfloat16"
    largest, tiniest = DEQUANT_LIMITS[name]
    return (tiniest / E4M3_MIN_SUBNORMAL, largest / E4M3_MAX,
            f"derived: 448*scale finite and 2^-9*scale non-zero in {name}")


def scale_range(ctx: Context, model: ModelDir) -> tuple[float, float, str]:
    low, high, why = derived_range(model.config.dtype)
    policy_min = ctx.policy.get("checkpoint", "fp8_scale_min")
    policy_max = ctx.policy.get("checkpoint", "fp8_scale_max")
    if policy_min is None and policy_max is None:
        return low, high, why
    return (low if policy_min is None else float(policy_min),
            high if policy_max is None else float(policy_max), "policy checkpoint.fp8_scale_*")


def _listed(weight: str, skip_modules: tuple[str, ...]) -> bool:
    module = weight.removesuffix(".weight")
    return any(module == m or module.startswith(m + ".") for m in skip_modules)


def structural_problem(model: ModelDir, weight: TensorInfo,
                       block: tuple[int, int]) -> ScaleProblem | None:
    scale = model.tensors.get(scale_name(weight.name))
    if scale is None:
        return ScaleProblem(weight.name, "fail", 1, f"has no {scale_name(weight.name)}")
    # ceil: a ragged last row/column of blocks still gets its own scale (FP8_FORMAT.md §3)
    # leading dims (fused experts [E, out, in]) keep one grid per matrix
    *lead, rows, cols = weight.shape if len(weight.shape) >= 2 else (1, 1, *weight.shape)[-2:]
    expected = (*lead, math.ceil(rows / block[0]), math.ceil(cols / block[1]))
    if scale.shape != expected:
        return ScaleProblem(scale.name, "fail", 1, f"shape {list(scale.shape)}, expected "
                            f"{list(expected)} for weight {list(weight.shape)} in "
                            f"{block[0]}x{block[1]} blocks")
    if scale.dtype not in SCALE_DTYPES:
        return ScaleProblem(scale.name, "fail", 1, f"dtype {scale.dtype}, expected F32/BF16/F16")
    return None


def value_problems(name: str, values: np.ndarray, low: float, high: float,
                   ratio: float) -> list[ScaleProblem]:
    import numpy as np

    flat = values.astype(np.float64).ravel()
    bad = {
        "NaN": int(np.isnan(flat).sum()),
        "infinite": int(np.isinf(flat).sum()),
        "zero": int((flat == 0).sum()),
        "negative": int((flat < 0).sum()),
    }
    problems = [ScaleProblem(name, "fail", n, f"{n} {kind}") for kind, n in bad.items() if n]
    good = flat[np.isfinite(flat) & (flat > 0)]
    out_of_range = int(((good < low) | (good > high)).sum())
    if out_of_range:
        problems.append(ScaleProblem(name, "fail", out_of_range,
                                     f"{out_of_range} outside [{low:.3g}, {high:.3g}]"))
    if good.size:
        median = float(np.median(good))
        outliers = int(((good > median * ratio) | (good < median / ratio)).sum())
        if outliers:
            problems.append(ScaleProblem(name, "warn", outliers, f"{outliers} outliers vs "
                                         f"median {median:.3g} (ratio {ratio:g})"))
    return problems


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
    return f"{tensor}: " + ", ".join(p.detail for p in found)


def fp8_scales(ctx: Context) -> Finding:
    model, why_not = model_or_skip(ctx)
    if model is None:
        assert why_not is not None
        return why_not
    if not is_fp8(model):
        return skipped("not an FP8 checkpoint", f"quant_method: {model.config.quant_method or '-'}")
    default = int(ctx.policy.get("checkpoint", "fp8_block_size"))
    block = model.config.weight_block_size or (default, default)
    low, high, why = scale_range(ctx, model)
    ratio = float(ctx.policy.get("checkpoint", "fp8_scale_outlier_ratio"))
    weights = [t for t in model.tensors.values() if t.dtype == "F8_E4M3"]
    if not weights:
        return skipped("quant_method is fp8 but no tensor is stored as F8_E4M3")
    from probes.checkpoint import CheckpointError, load_tensor

    problems: list[ScaleProblem] = []
    blocks = 0
    scale_dtypes: Counter[str] = Counter()
    skip_modules = model.config.modules_to_not_convert
    for weight in sorted(weights, key=lambda t: t.name):
        if _listed(weight.name, skip_modules):
            problems.append(ScaleProblem(weight.name, "warn", 1, "stored as F8_E4M3 but listed "
                                         "in modules_to_not_convert (a loader keeps it as is)"))
        structural = structural_problem(model, weight, block)
        if structural is not None:
            problems.append(structural)
            continue
        scale = model.tensors[scale_name(weight.name)]
        scale_dtypes[scale.dtype] += 1
        try:
            values = load_tensor(ctx.host, model, scale.name)
        except CheckpointError as exc:  # a truncated shard; checkpoint.format names it too
            problems.append(ScaleProblem(scale.name, "fail", 1, f"unreadable ({exc})"))
            continue
        blocks += values.size
        problems += value_problems(scale.name, values, low, high, ratio)
    problems += unchecked_shards(model)
    return _scale_finding(problems, len(weights), blocks, block, scale_dtypes, (low, high, why))


def unchecked_shards(model: ModelDir) -> list[ScaleProblem]:
    """Missing or unreadable shards hide their scales: say so rather than pass silently."""
    names = [*model.missing_shards, *model.unreadable_shards]
    return [ScaleProblem(name, "warn", 1, "shard missing or unreadable, its scales were not "
                         "checked (see checkpoint.format)") for name in names]


def _scale_finding(problems: list[ScaleProblem], weights: int, blocks: int,
                   block: tuple[int, int],
                   dtypes: Counter[str], bounds: tuple[float, float, str]) -> Finding:
    low, high, why = bounds
    dtype_text = ", ".join(f"{d} x{n}" for d, n in sorted(dtypes.items())) or "-"
    summary_evidence = (f"{weights} FP8 weights, {blocks} scale blocks of {block[0]}x{block[1]}, "
                        f"scale dtypes {dtype_text}",
                        f"scale range [{low:.3g}, {high:.3g}] ({why})")
    if not problems:
        return passed(f"{weights} FP8 weights have sane block scales", *summary_evidence)
    ranked = _worst_first(problems)
    top = tuple(_describe(name, found) for name, found in ranked[:TOP_N])
    more = (f"... and {len(ranked) - TOP_N} more tensors",) if len(ranked) > TOP_N else ()
    evidence = top + more + summary_evidence
    worst_name, worst = ranked[0]
    summary = (f"{len(ranked)} of {weights} FP8 weights have scale problems; worst "
               f"{_describe(worst_name, worst)}")
    if any(p.severity == "fail" for p in problems):
        return failed(summary, "re-export or re-download the checkpoint: a missing, misshapen "
                      "or non-finite scale dequantises to garbage or NaN", *evidence)
    return warned(summary, "compare with the published checkpoint; extreme block scales point "
                  "to a broken quantisation run", *evidence)


# -- format -------------------------------------------------------------------------------


def precision(model: ModelDir) -> str:
    if is_fp8(model):
        block = model.config.weight_block_size
        return "FP8" + (f" (block {block[0]}x{block[1]})" if block else "")
    by_dtype: Counter[str] = Counter()
    for t in model.tensors.values():
        by_dtype[t.dtype] += t.nbytes
    if by_dtype.get("I8", 0) > 0:
        return "W8A8-int8"
    names = {"BF16": "BF16", "F16": "FP16", "F32": "FP32"}
    floats = {names[d]: n for d, n in by_dtype.items() if d in names}
    if floats:
        return max(floats, key=lambda d: floats[d])
    return model.config.dtype or "unknown"


def shard_problems(model: ModelDir) -> list[str]:
    found = [f"shard {name} named by the index is missing" for name in model.missing_shards]
    found += list(model.header_errors)
    for shard in model.shards:
        if shard.size_ok:
            continue
        size = "longer than" if shard.size_bytes is None else f"{shard.size_bytes} bytes,"
        found.append(f"shard {shard.name} is {size} expected {shard.expected_bytes} "
                     "(8 + header + data); truncated or corrupt")
    unreadable = set(model.missing_shards) | {s for s in model.weight_map.values()
                                              if model.shard(s) is None}
    absent = [n for n, s in model.weight_map.items()
              if s not in unreadable and n not in model.tensors]
    if absent:
        found.append(f"{len(absent)} tensors in the index are not in their shard, "
                     f"e.g. {absent[0]} ({model.weight_map[absent[0]]})")
    return found


def chip_families(ctx: Context) -> set[str] | None:
    """A2 / A3 / 950 / other for each chip npu-smi shows; None when there is no NPU reading."""
    reading = facts.npu(ctx)
    if reading.is_error or reading.kind != "info":
        return None
    families = set()
    for chip in reading.document.get("chips", []):
        name = str(chip.get("name") or "").replace("Ascend", "")
        if name.startswith("910B"):
            families.add("A2")
        elif name == "910" or name.startswith("910_93"):
            families.add("A3")  # A3 dies print as `Ascend910`
        elif "950" in name:
            families.add("950")
        else:
            families.add(name or "unknown")
    return families


def fp8_on_npu(ctx: Context) -> tuple[str, str] | None:
    """(severity, message) for an FP8 checkpoint against the NPUs here, None when fine."""
    families = chip_families(ctx)
    if families is None:
        return "warn", f"no NPU reading here; {FP8_FACT}"
    blocked = sorted(families & {"A2", "A3"})
    if blocked:
        return "fail", (f"FP8 checkpoint on {'/'.join(blocked)} NPUs: vllm-ascend and MindIE "
                        f"cannot serve it as FP8; {FP8_FACT}")
    return None


def checkpoint_format(ctx: Context) -> Finding:
    if ctx.model_dir is None:
        return skipped(NO_MODEL)
    from probes.checkpoint import CheckpointError

    try:
        model = model_dir(ctx)
    except NotRecorded as exc:
        return skipped(f"the model directory was not recorded ({exc.path})")
    except (CheckpointError, HostError) as exc:
        return failed(f"cannot read the checkpoint: {exc}",
                      "point --model at a Hugging Face model directory with config.json and "
                      "safetensors shards, and re-download what is broken")
    arch = model.config.model_type or "-"
    shard_count = len(model.shards) + len(model.missing_shards) + len(model.header_errors)
    evidence = (f"precision: {precision(model)}",
                f"architecture: {arch} ({model.config.architecture or '-'})",
                f"shards: {shard_count}",
                f"total size: {model.total_bytes:,} bytes ({model.total_bytes / 2**30:.2f} GiB)")
    fails = shard_problems(model)
    remedies = ["re-download the shards named above (compare sizes with the hub)"] if fails else []
    warns: list[str] = []
    verdict = fp8_on_npu(ctx) if is_fp8(model) else None
    if verdict is not None:
        (fails if verdict[0] == "fail" else warns).append(verdict[1])
        remedies.append(FP8_REMEDY)
    if model.config.model_type not in KNOWN_ARCHITECTURES:
        warns.append(f"architecture {arch} is not one this project knows "
                     f"({', '.join(KNOWN_ARCHITECTURES)})")
        remedies.append("check that your serving engine supports this architecture")
    # several problems are also listed one per line; a single one is the summary already
    listed = [*fails, *warns] if len(fails) + len(warns) > 1 else []
    if fails:
        return failed("; ".join(fails), "; ".join(remedies), *listed, *evidence)
    if warns:
        return warned("; ".join(warns), "; ".join(remedies), *listed, *evidence)
    return passed(f"{precision(model)} {arch} checkpoint, {shard_count} shards complete",
                  *evidence)
