"""checkpoint.format's questions about an msModelSlim (W8A8, W4A8) checkpoint: is its
quant_model_description.json there, does it describe the tensors the shards hold, does
config.json name no other quantisation method, and does a vLLM target pass
`--quantization ascend`?

What vllm-ascend does with it (vllm-project/vllm-ascend
vllm_ascend/quantization/modelslim_config.py @ 02f6f8fef3ab): `--quantization ascend` loads
quant_model_description.json from the model directory and refuses to start without it; each
linear layer's type is looked up as `<layer>.weight` in it, `FLOAT` meaning "not quantised";
a config.json `quantization_config` whose `quant_method` is set takes precedence over the
description. vllm-ascend's quantisation guide asks for `--quantization ascend` with ModelSlim
checkpoints (docs/source/user_guide/feature_guide/quantization.md @ 1e6dd18a348b).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from checks.context import Context
from probes.errors import HostError
from probes.host import normalise_dist_name

if TYPE_CHECKING:
    from probes.model.quant import ModelSlimDescription
    from probes.model.reader import ConfigFacts, ModelDir

FLOAT_DTYPES = ("BF16", "F16", "F32")
INT_DTYPES = ("I8", "U8", "I4", "U4")  # msModelSlim stores int8 (and packed int4) weights
ASCEND = "ascend"
NAMED = 3
LOADER = "vllm-project/vllm-ascend vllm_ascend/quantization/modelslim_config.py @ 02f6f8fef3ab"


@dataclass
class SlimVerdict:
    """What checkpoint.format adds for an msModelSlim checkpoint: (rule, text) pairs."""

    fails: list[tuple[str, str]] = field(default_factory=list)
    warns: list[tuple[str, str]] = field(default_factory=list)
    remedies: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)


def _some(names: list[str]) -> str:
    from probes.model.safetensors_header import shown

    text = ", ".join(shown(n) for n in names[:NAMED])
    return text + (f" and {len(names) - NAMED:,} more" if len(names) > NAMED else "")


def int_weights(model: ModelDir) -> list[str]:
    return [n for n, t in model.tensors.items() if n.endswith(".weight") and t.dtype in INT_DTYPES]


def _read(ctx: Context, directory: str) -> ModelSlimDescription | str | None:
    """The description, why it cannot be read, or None when there is none."""
    from probes.model.quant import MODELSLIM_DESCRIPTION, parse_modelslim_description
    from probes.model.reader import CheckpointError, join, read_json

    path = join(directory, MODELSLIM_DESCRIPTION)
    try:
        if not ctx.host.exists(path):
            return None
        return parse_modelslim_description(read_json(ctx.host, path))
    except (CheckpointError, HostError) as exc:
        return str(exc)


def _quant_flag(ctx: Context) -> tuple[str | None, str]:
    """(the --quantization value, where) of a vLLM target; (None, "") when not given."""
    proc = ctx.target.process
    if ctx.target.serving.server != "vllm" or proc is None:
        return None, ""
    from probes.target.memory_args import quantization_flag

    found = quantization_flag(proc.cmdline)
    return (found.value, found.source) if found else (None, "")


def _other_json(ctx: Context, model: ModelDir) -> str:

    try:
        names = sorted(n for n in ctx.host.list_dir(model.path) if n.startswith("quant_model")
                       and n.endswith(".json"))
    except HostError:
        return ""
    return f" ({', '.join(names)} there: vllm-ascend reads only the exact name)" if names else ""


def modelslim(ctx: Context, model: ModelDir) -> SlimVerdict:
    """The msModelSlim rules for this checkpoint (nothing when it is not one)."""
    verdict = SlimVerdict()
    found = _read(ctx, model.path)
    given, where = _quant_flag(ctx)
    method = model.config.quant.method if model.config.quantization else None
    ints = int_weights(model)
    if found is None:
        _without_description(ctx, model, verdict, ints, given, where, method)
        return verdict
    if isinstance(found, str):
        verdict.fails.append(("modelslim-description-unreadable", found))
        verdict.remedies.append("re-create quant_model_description.json with msModelSlim, or "
                                "copy it from where the checkpoint was quantised")
        return verdict
    _with_description(model, found, verdict)
    _config_and_flag(ctx, model.config, found, verdict, given, where, method)
    return verdict


def without_weights(ctx: Context, directory: str, config: ConfigFacts) -> SlimVerdict:
    """Where the shards cannot be read: config.json, the description and the command line
    still can, and `--quantization ascend` missing is still a reason the start fails."""
    from probes.model.quant import ModelSlimDescription

    verdict = SlimVerdict()
    found = _read(ctx, directory)
    if not isinstance(found, ModelSlimDescription):
        return verdict
    given, where = _quant_flag(ctx)
    method = config.quant.method if config.quantization else None
    _config_and_flag(ctx, config, found, verdict, given, where, method)
    return verdict


def _without_description(ctx: Context, model: ModelDir, verdict: SlimVerdict, ints: list[str],
                         given: str | None, where: str, method: str | None) -> None:
    if given == ASCEND:
        verdict.fails.append(("modelslim-description-missing", f"{where} but the model "
                              f"directory has no quant_model_description.json"
                              f"{_other_json(ctx, model)}: vllm-ascend refuses to start "
                              f"({LOADER})"))
        verdict.remedies.append("drop --quantization ascend for a float checkpoint, or serve "
                                "the msModelSlim output directory with its description file")
    elif ints and not method:
        verdict.fails.append(("modelslim-description-missing", f"{len(ints):,} int8 weights "
                              f"({_some(ints)}) with neither quant_model_description.json nor "
                              f"a quantization_config in config.json{_other_json(ctx, model)}"
                              ": no loader knows how to dequantise them"))
        verdict.remedies.append("copy quant_model_description.json from the msModelSlim output "
                                "into the model directory")


def _with_description(model: ModelDir, found: ModelSlimDescription,
                      verdict: SlimVerdict) -> None:
    types = found.tensor_types
    verdict.evidence.append(
        f"quant_model_description.json: model_quant_type {found.model_quant_type or 'absent'}, "
        f"{len(types):,} tensors described, {len(found.quantized):,} quantised")
    if found.model_quant_type is None:
        verdict.warns.append(("modelslim-no-quant-type", "quant_model_description.json has "
                              "no model_quant_type: which msModelSlim scheme made it is not "
                              "said"))
        verdict.remedies.append("use the description file msModelSlim wrote, unedited")
    complete = not (model.missing_shards or model.unreadable_shards)
    mismatches = _mismatches(model, types, complete)
    mismatches += list(found.problems[:NAMED])
    if mismatches:
        verdict.fails.append(("modelslim-tensors-mismatch", "quant_model_description.json does "
                              "not match the tensors: " + "; ".join(mismatches)))
        verdict.remedies.append("use the description file written with these shards by the "
                                "same msModelSlim run")


def looked_up(name: str) -> bool:
    """A tensor the loader asks the description about: a layer's `.weight` (linear, MoE,
    embedding), not a norm's weight nor a scale or offset beside a quantised weight."""
    if not name.endswith(".weight"):
        return False
    module = name[: -len(".weight")].rsplit(".", 1)[-1]
    return "norm" not in module


def _mismatches(model: ModelDir, described: Mapping[str, str], complete: bool) -> list[str]:
    """How the description and the shards disagree, one line per kind."""
    tensors = model.tensors
    out: list[str] = []
    undescribed = [n for n in tensors if n not in described and looked_up(n)]
    if undescribed:
        out.append(f"{len(undescribed):,} weights not described ({_some(undescribed)}); the "
                   "loader looks up every layer's `<layer>.weight` there")
    if complete:
        absent = [n for n in described if n not in tensors and n not in model.weight_map]
        if absent:
            out.append(f"{len(absent):,} described tensors are in no shard ({_some(absent)})")
    as_float = [n for n, kind in described.items() if kind != "FLOAT" and n.endswith(".weight")
                and n in tensors and tensors[n].dtype in FLOAT_DTYPES]
    if as_float:
        out.append(f"{len(as_float):,} weights described as quantised are stored as floats "
                   f"({_some(as_float)})")
    as_int = [n for n, kind in described.items() if kind == "FLOAT" and n in tensors
              and tensors[n].dtype in INT_DTYPES]
    if as_int:
        out.append(f"{len(as_int):,} tensors described as FLOAT are stored as integers "
                   f"({_some(as_int)})")
    return out


def _config_and_flag(ctx: Context, config: ConfigFacts, found: ModelSlimDescription,
                     verdict: SlimVerdict, given: str | None, where: str,
                     method: str | None) -> None:
    if method and method != ASCEND:
        verdict.fails.append(("modelslim-conflicting-config", f"config.json's "
                              f"quantization_config names quant_method {method}, which vLLM "
                              "takes over the msModelSlim description"))
        verdict.remedies.append("remove quantization_config from config.json (msModelSlim's "
                                "description carries the quantisation)")
    if ctx.target.serving.server != "vllm" or not _declares_quantisation(found):
        return
    if given is None:
        _without_flag(ctx, config, verdict)
    elif given != ASCEND:
        verdict.fails.append(("modelslim-flag-missing", f"{where}: an msModelSlim checkpoint "
                              "needs --quantization ascend"))
        verdict.remedies.append("serve it with --quantization ascend")
    else:
        verdict.evidence.append(f"{where}: the msModelSlim loader")


def _declares_quantisation(found: ModelSlimDescription) -> bool:
    """A tensor described as quantised, or a whole-checkpoint type other than FLOAT (a
    description whose per-tensor entries were not read still says what it is)."""
    overall = (found.model_quant_type or "").upper()
    return bool(found.quantized) or overall not in ("", "FLOAT")


AUTO_DETECT = ("vllm-project/vllm-ascend#6645, vllm-project/vllm-ascend#7111: "
               "vllm_ascend/quantization/utils.py maybe_auto_detect_quantization")


def auto_detects(ctx: Context) -> bool | None:
    """Does the target's vllm-ascend pick `ascend` itself when quant_model_description.json is
    there (its quantization utils define maybe_auto_detect_quantization)? None: unknown."""
    from checks.builtin import facts

    python = facts.python(ctx)
    location = python.locations.get(normalise_dist_name("vllm-ascend"))
    if python.error or not location:
        return None
    path = f"{location}/vllm_ascend/quantization/utils.py"
    try:
        text = ctx.host.read_bytes(path, 0, 512 * 1024).decode("utf-8", "replace")
    except HostError:
        return None
    return "def maybe_auto_detect_quantization" in text


def _without_flag(ctx: Context, config: ConfigFacts, verdict: SlimVerdict) -> None:
    """No --quantization: fine where vllm-ascend detects the checkpoint itself."""
    quant = config.quantization
    if quant is not None and not quant.get("quant_method"):
        verdict.evidence.append("no --quantization: config.json's quantization_config has no "
                                "quant_method, which vllm-ascend takes as `ascend` "
                                f"(override_quantization_method, {LOADER})")
        return
    detects = auto_detects(ctx)
    if detects:
        verdict.evidence.append("no --quantization: the installed vllm-ascend detects "
                                f"quant_model_description.json itself ({AUTO_DETECT})")
        return
    if detects is None:
        verdict.warns.append(("modelslim-flag-missing", "an msModelSlim checkpoint served by "
                              "vLLM without --quantization ascend: only vllm-ascend releases "
                              f"with auto-detection ({AUTO_DETECT}) load it as quantised, and "
                              "whether the installed one has it could not be read"))
    else:
        verdict.fails.append(("modelslim-flag-missing", "an msModelSlim checkpoint served by "
                              "vLLM without --quantization ascend, and the installed "
                              "vllm-ascend does not detect it itself: its int8 weights are "
                              "not loaded as quantised"))
    verdict.remedies.append("add --quantization ascend to the vllm serve command line")
