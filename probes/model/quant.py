"""`quantization_config` -> QuantFormat: how a checkpoint stores its quantised linears.

- `quant_method: fp8` with `weight_block_size` (Qwen3/3.5/3.6-FP8, DeepSeek-V3): block FP8,
  `X.weight` float8_e4m3fn plus `X.weight_scale_inv` per tile (the dequantisation multiplier).
- `quant_method: fp8` without a block size (AutoFP8): one `X.weight_scale` per tensor, and
  `X.input_scale` when `activation_scheme` is static.
- `quant_method: compressed-tensors` (llm-compressor) with 8-bit float weights: strategy
  `tensor`, `channel` ([out, 1] scales) or `block` (`block_structure`), all `weight_scale`.
Anything else (gptq, awq, bitsandbytes, ...) is `unknown`: named, never guessed at.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any


@dataclass(frozen=True)
class FieldProblem:
    """One malformed field of config.json: `message` reads as a sentence naming it."""

    field: str
    message: str


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class QuantFormat:
    """How a checkpoint stores quantised linears (`quantization_config`).

    scheme: `block` (fp8 with `weight_block_size`: `weight_scale_inv` per tile), `tensor`
    (one `weight_scale` per weight), `channel` (`weight_scale` [out, 1]), `none`, or
    `unknown` for methods this project does not read (gptq, awq, bitsandbytes, ...).
    """

    method: str = ""  # quant_method as written; "" when there is no quantization_config
    scheme: str = "none"
    scale_suffix: str = ""  # "weight_scale_inv" | "weight_scale" | ""
    block_size: tuple[int, int] | None = None
    input_scales: bool = False  # static activation scales stored as `input_scale`
    activation_scheme: str = ""
    fmt: str = ""
    modules_to_not_convert: tuple[str, ...] = ()

    @property
    def is_fp8(self) -> bool:
        return self.scheme in ("block", "tensor", "channel")

    def skips(self, module: str) -> bool:
        """Whether `module` (a tensor name without `.weight`) is listed as not converted:
        named, or inside a named module."""
        names, prefixes = self._skip_index
        return module in names or module.startswith(prefixes)

    @cached_property
    def _skip_index(self) -> tuple[frozenset[str], tuple[str, ...]]:
        # asked once per weight (thousands), against lists of hundreds of names
        listed = self.modules_to_not_convert
        return frozenset(listed), tuple(m + "." for m in listed)



def parse_quantization(quant: Any) -> tuple[QuantFormat, list[FieldProblem]]:
    """`quantization_config` -> QuantFormat (fp8 block / tensor / channel, none, unknown)."""
    if quant is None:
        return QuantFormat(), []
    if not isinstance(quant, Mapping):
        return QuantFormat(scheme="unknown"), [FieldProblem(
            "quantization_config", "field 'quantization_config' must be an object")]
    method = str(quant.get("quant_method") or "")
    skip = quant.get("modules_to_not_convert") or quant.get("ignored_layers") or \
        quant.get("ignore") or []
    skipped = tuple(str(n) for n in skip) if isinstance(skip, list) else ()
    common = _Common(method, skipped, str(quant.get("activation_scheme") or ""),
                     str(quant.get("fmt") or ""))
    if method == "fp8":
        return _fp8_format(quant, common)
    if method == "compressed-tensors":
        return _compressed_tensors_format(quant, common), []
    return QuantFormat(scheme="unknown", **common.fields()), []


@dataclass(frozen=True)
class _Common:
    """The fields every quantisation format shares."""

    method: str
    modules_to_not_convert: tuple[str, ...]
    activation_scheme: str
    fmt: str

    def fields(self) -> dict[str, Any]:
        return {"method": self.method, "modules_to_not_convert": self.modules_to_not_convert,
                "activation_scheme": self.activation_scheme, "fmt": self.fmt}


def _fp8_format(quant: Mapping[str, Any],
                common: _Common) -> tuple[QuantFormat, list[FieldProblem]]:
    """quant_method fp8: block FP8 with weight_block_size (Qwen, DeepSeek), else one
    weight_scale per tensor (AutoFP8), with input_scale when activations are static."""
    block = quant.get("weight_block_size")
    static = common.activation_scheme == "static"
    if block is None:
        return QuantFormat(scheme="tensor", scale_suffix="weight_scale", input_scales=static,
                           **common.fields()), []
    if not (isinstance(block, list) and len(block) == 2 and all(is_int(b) and b > 0
                                                                  for b in block)):
        return QuantFormat(scheme="unknown", **common.fields()), [FieldProblem(
            "quantization_config.weight_block_size",
            f"field 'quantization_config.weight_block_size' must be two positive ints, got "
            f"{block!r:.40}")]
    return QuantFormat(scheme="block", scale_suffix="weight_scale_inv",
                       block_size=(int(block[0]), int(block[1])), input_scales=static,
                       **common.fields()), []


def _compressed_tensors_format(quant: Mapping[str, Any],
                               common: _Common) -> QuantFormat:
    """llm-compressor's float 8-bit weights: strategy tensor / channel / block, weight_scale."""
    groups = quant.get("config_groups")
    for group in (groups.values() if isinstance(groups, Mapping) else ()):
        weights = group.get("weights") if isinstance(group, Mapping) else None
        if not isinstance(weights, Mapping):
            continue
        if weights.get("type") != "float" or weights.get("num_bits") != 8:
            continue
        strategy = weights.get("strategy")
        activations = group.get("input_activations")
        static = isinstance(activations, Mapping) and activations.get("dynamic") is False
        block = weights.get("block_structure")
        if strategy == "block" and isinstance(block, list) and len(block) == 2 \
                and all(is_int(b) and b > 0 for b in block):
            return QuantFormat(scheme="block", scale_suffix="weight_scale",
                               block_size=(int(block[0]), int(block[1])), input_scales=static,
                               **common.fields())
        if strategy in ("tensor", "channel"):
            return QuantFormat(scheme=str(strategy), scale_suffix="weight_scale",
                               input_scales=static, **common.fields())
    return QuantFormat(scheme="unknown", **common.fields())


# -- msModelSlim's description file -----------------------------------------------------------

# What msModelSlim writes beside its W8A8/W4A8 safetensors and vllm-ascend's `--quantization
# ascend` loader reads: `model_quant_type` (the whole checkpoint's type), optional settings
# (`fa_quant_type`, `kv_quant_type`, `group_size`, `version`) and one entry per tensor, its type
# (`FLOAT` for a tensor kept in floating point, else W8A8, W8A8_DYNAMIC, W4A8_DYNAMIC, ...).
# Sources: vllm-project/vllm-ascend vllm_ascend/quantization/modelslim_config.py @ 02f6f8fef3ab
# (MODELSLIM_CONFIG_FILENAME, get_linear_quant_type, is_layer_skipped_ascend) and the example in
# vllm-project/vllm-ascend docs/source/user_guide/feature_guide/quantization.md @ 1e6dd18a348b.
MODELSLIM_DESCRIPTION = "quant_model_description.json"
FLOAT_TYPE = "FLOAT"


@dataclass(frozen=True)
class ModelSlimDescription:
    """quant_model_description.json as facts: the overall type and each tensor's type."""

    model_quant_type: str | None
    tensor_types: Mapping[str, str]  # tensor name -> FLOAT / W8A8 / ...
    settings: Mapping[str, Any]  # the keys that name no tensor (fa_quant_type, version, ...)
    problems: tuple[str, ...] = ()  # entries that are not a type string

    @property
    def quantized(self) -> tuple[str, ...]:
        """Tensors described as quantised (anything but FLOAT)."""
        return tuple(n for n, t in self.tensor_types.items() if t != FLOAT_TYPE)


def parse_modelslim_description(document: Any) -> ModelSlimDescription:
    """The description as facts; a key with a dot names a tensor, one without is a setting."""
    if not isinstance(document, Mapping):
        return ModelSlimDescription(None, {}, {}, (f"expected a JSON object, got "
                                                   f"{type(document).__name__}",))
    types: dict[str, str] = {}
    settings: dict[str, Any] = {}
    problems: list[str] = []
    for key, value in document.items():
        name = str(key)
        if "." not in name:
            settings[name] = value
        elif isinstance(value, str) and value:
            types[name] = value
        else:
            problems.append(f"{name}: {str(value)[:40]!r} is not a quantisation type")
    overall = settings.get("model_quant_type")
    return ModelSlimDescription(overall if isinstance(overall, str) and overall else None,
                                types, settings, tuple(problems))
