"""config.json -> one frozen `ConfigFacts`: what the model is, read once for the doctor and the
engine alike.

Spellings seen in the wild are all accepted: the language model's fields nested in
`text_config` (Qwen3.5/3.6), `num_experts` / `num_local_experts`, `rope_theta` /
`rope_parameters.rope_theta` (transformers 5 writes the latter), `torch_dtype` / `dtype`,
`modules_to_not_convert` / `ignored_layers` / `ignore`. Absent optional fields take
transformers' class defaults for the family, so a config means the same model here as there.

Parsing never raises for a bad field: the value is dropped and `problems` names the field and
what is wrong, so the doctor can still say what it could read and the engine can refuse with
that one line. Nothing here is proportional to the config's numbers (a config claiming 10**9
layers costs nothing until something plans for it: `probes.model.memory`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from probes.model.families import (
    FAMILIES,
    FAMILY_BY_CLASS,
    FAMILY_DEFAULTS,
    HYBRID_FAMILIES,
    SHARED_EXPERT_FAMILIES,
)
from probes.model.quant import FieldProblem, QuantFormat, is_int, parse_quantization

FULL_ATTENTION = "full_attention"
LINEAR_ATTENTION = "linear_attention"
LAYER_TYPES = (FULL_ATTENTION, LINEAR_ATTENTION)

@dataclass(frozen=True)
class ConfigFacts:
    """A config.json as facts. Fields are None when absent or malformed (see `problems`)."""

    architecture: str  # architectures[0], e.g. Qwen3MoeForCausalLM; "" when absent
    model_type: str  # the top-level model_type
    dtype: str  # torch_dtype (v4) or dtype (v5), e.g. bfloat16
    quantization: Mapping[str, Any] | None  # quantization_config as written
    vocab_size: int | None = None
    num_hidden_layers: int | None = None
    hidden_size: int | None = None
    num_attention_heads: int | None = None
    num_key_value_heads: int | None = None
    head_dim: int | None = None  # given, or the family default (qwen3_next: 256)
    num_experts: int | None = None  # num_experts (Hub) or num_local_experts (v5, Mixtral)
    layer_types: tuple[str, ...] = ()  # as written; see layer_kind() for derived ones
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    family: str = ""  # one of FAMILIES, "" when not one this project knows
    text_model_type: str = ""  # text_config.model_type (qwen3_5_moe_text)
    nested: bool = False  # the language model's fields came from text_config
    intermediate_size: int | None = None
    moe_intermediate_size: int | None = None
    shared_expert_intermediate_size: int | None = None  # None: no shared expert (see above)
    num_experts_per_tok: int | None = None
    norm_topk_prob: bool | None = None
    decoder_sparse_step: int | None = None
    mlp_only_layers: tuple[int, ...] = ()
    full_attention_interval: int | None = None
    linear_num_key_heads: int | None = None
    linear_num_value_heads: int | None = None
    linear_key_head_dim: int | None = None
    linear_value_head_dim: int | None = None
    linear_conv_kernel_dim: int | None = None
    attn_output_gate: bool | None = None
    partial_rotary_factor: float = 1.0
    rope_theta: float | None = None
    rope_scaling: Mapping[str, Any] | None = None  # rope_scaling / non-default rope_parameters
    rms_norm_eps: float | None = None
    max_position_embeddings: int | None = None
    tie_word_embeddings: bool = False
    attention_bias: bool = False
    bos_token_id: int | None = None
    eos_token_ids: tuple[int, ...] = ()
    pad_token_id: int | None = None
    mtp_num_hidden_layers: int = 0
    quant: QuantFormat = field(default_factory=QuantFormat)
    problems: tuple[FieldProblem, ...] = ()
    source: str = field(default="config.json", compare=False)

    # -- what the doctor's checks already read ----------------------------------------------

    @property
    def quant_method(self) -> str:
        return self.quant.method

    @property
    def weight_block_size(self) -> tuple[int, int] | None:
        return self.quant.block_size

    @property
    def modules_to_not_convert(self) -> tuple[str, ...]:
        return self.quant.modules_to_not_convert

    # -- derived facts ------------------------------------------------------------------------

    @property
    def is_hybrid(self) -> bool:
        """Linear-attention layers present (explicit layer_types or a hybrid family)."""
        return LINEAR_ATTENTION in self.layer_types or (
            not self.layer_types and (self.family in HYBRID_FAMILIES
                                      or self.full_attention_interval is not None))

    @property
    def weight_prefix(self) -> str:
        """Where the language model's tensors live in the checkpoint."""
        return "model.language_model." if self.family == "qwen3_5_moe" else "model."

    def layer_kind(self, layer: int) -> str:
        """full_attention or linear_attention for one layer (explicit, or transformers' rule
        `(i + 1) % full_attention_interval == 0` -> full attention)."""
        if self.layer_types:
            return self.layer_types[layer] if layer < len(self.layer_types) else FULL_ATTENTION
        interval = self.full_attention_interval
        if not self.is_hybrid or not interval:
            return FULL_ATTENTION
        return FULL_ATTENTION if (layer + 1) % interval == 0 else LINEAR_ATTENTION

    def full_attention_layers(self) -> int:
        """How many layers keep a KV cache (counted without listing the layers)."""
        layers = self.num_hidden_layers or 0
        if self.layer_types:
            return sum(1 for kind in self.layer_types[:layers] if kind == FULL_ATTENTION)
        if not self.is_hybrid or not self.full_attention_interval:
            return layers
        return layers // self.full_attention_interval

    def is_moe_layer(self, layer: int) -> bool:
        """transformers' rule: sparse iff experts exist, the layer is not in mlp_only_layers
        and (i + 1) % decoder_sparse_step == 0 (Qwen3.5/3.6: every layer)."""
        if not self.num_experts:
            return False
        step = self.decoder_sparse_step or 1
        return layer not in self.mlp_only_layers and (layer + 1) % step == 0

    def moe_layers(self) -> int:
        """How many layers are sparse, counted arithmetically."""
        layers = self.num_hidden_layers or 0
        if not self.num_experts:
            return 0
        step = self.decoder_sparse_step or 1
        listed = {i for i in self.mlp_only_layers if 0 <= i < layers and (i + 1) % step == 0}
        return layers // step - len(listed)

    @property
    def rotary_dim(self) -> int | None:
        if self.head_dim is None:
            return None
        return int(self.head_dim * self.partial_rotary_factor)


# -- parsing ----------------------------------------------------------------------------------


class _Fields:
    """Typed reads of config fields; a bad value is recorded as a FieldProblem, not raised."""

    def __init__(self, data: Mapping[str, Any], defaults: Mapping[str, Any]) -> None:
        self.data = data
        self.defaults = defaults
        self.problems: list[FieldProblem] = []

    def _bad(self, key: str, what: str) -> None:
        self.problems.append(FieldProblem(key, f"field {key!r} must be {what}, got "
                                               f"{self.data.get(key)!r:.80}"))

    def value(self, key: str) -> Any:
        value = self.data.get(key)
        return self.defaults.get(key) if value is None else value

    def positive_int(self, key: str) -> int | None:
        value = self.value(key)
        if value is None:
            return None
        if not is_int(value) or value <= 0:
            self._bad(key, "a positive integer")
            return None
        return int(value)

    def token_id(self, key: str) -> int | None:
        value = self.data.get(key)
        if value is None:
            return None
        if not is_int(value) or value < 0:
            self._bad(key, "a non-negative integer")
            return None
        return int(value)

    def number(self, key: str) -> float | None:
        value = self.value(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 \
                or value == float("inf"):
            self._bad(key, "a positive number")
            return None
        return float(value)

    def flag(self, key: str) -> bool | None:
        value = self.value(key)
        if value is None:
            return None
        if not isinstance(value, bool):
            self._bad(key, "true or false")
            return None
        return value

    def int_list(self, key: str) -> tuple[int, ...]:
        value = self.data.get(key)
        if value is None:
            return ()
        if not isinstance(value, list) or not all(is_int(v) and v >= 0 for v in value):
            self._bad(key, "a list of layer indices")
            return ()
        return tuple(int(v) for v in value)


def _merged(data: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
    """The language model's fields: text_config (Qwen3.5/3.6) over the top level."""
    nested = data.get("text_config")
    if isinstance(nested, Mapping):
        return {**data, **nested}, True
    return dict(data), False


def family_of(data: Mapping[str, Any], text: Mapping[str, Any]) -> str:
    classes = data.get("architectures")
    names = [c for c in classes if isinstance(c, str)] if isinstance(classes, list) else []
    for name in names:
        if name in FAMILY_BY_CLASS:
            return FAMILY_BY_CLASS[name]
    for model_type in (data.get("model_type"), text.get("model_type")):
        if model_type in FAMILIES:
            return str(model_type)
    return ""


def _rope(fields: _Fields, merged: Mapping[str, Any]) -> tuple[float | None, Mapping[str, Any]
                                                             | None, float]:
    """(rope_theta, non-default scaling, partial_rotary_factor) from either spelling."""
    params = merged.get("rope_parameters")
    params = params if isinstance(params, Mapping) else {}
    theta_fields = _Fields({"rope_theta": merged.get("rope_theta", params.get("rope_theta"))},
                           fields.defaults)
    theta = theta_fields.number("rope_theta")
    fields.problems += theta_fields.problems
    partial = merged.get("partial_rotary_factor", params.get("partial_rotary_factor"))
    if partial is None:
        partial = fields.defaults.get("partial_rotary_factor", 1.0)
    if isinstance(partial, bool) or not isinstance(partial, (int, float)) or not 0 < partial <= 1:
        fields.problems.append(FieldProblem("partial_rotary_factor", "field "
                                            "'partial_rotary_factor' must be in (0, 1], got "
                                            f"{partial!r:.40}"))
        partial = 1.0
    scaling = merged.get("rope_scaling")
    for spec in (scaling, params):
        if isinstance(spec, Mapping) and spec.get("rope_type", spec.get("type")) not in (
                None, "default"):
            return theta, dict(spec), float(partial)
    if isinstance(scaling, Mapping):
        return theta, dict(scaling), float(partial)
    return theta, None, float(partial)


def _layer_types(fields: _Fields, layers: int | None) -> tuple[str, ...]:
    value = fields.data.get("layer_types")
    if value is None:
        return ()
    if not isinstance(value, list) or not all(v in LAYER_TYPES for v in value):
        fields._bad("layer_types", f"a list of {' / '.join(LAYER_TYPES)}")
        return ()
    if layers is not None and len(value) != layers:
        fields.problems.append(FieldProblem(
            "layer_types", f"field 'layer_types' lists {len(value)} layers but "
                           f"num_hidden_layers is {layers}"))
    return tuple(value)


def _eos(fields: _Fields) -> tuple[int, ...]:
    value = fields.data.get("eos_token_id")
    if value is None:
        return ()
    values = value if isinstance(value, list) else [value]
    if not all(is_int(v) and v >= 0 for v in values):
        fields._bad("eos_token_id", "an int or a list of ints")
        return ()
    return tuple(int(v) for v in values)


def parse_config(data: Any, path: str = "config.json") -> ConfigFacts:
    """A config.json document -> ConfigFacts. Never raises: see `ConfigFacts.problems`."""
    if not isinstance(data, Mapping):
        return ConfigFacts("", "", "", None, raw={}, source=path, problems=(FieldProblem(
            "", f"expected a JSON object, got {type(data).__name__}"),))
    merged, nested = _merged(data)
    family = family_of(data, merged)
    fields = _Fields(merged, FAMILY_DEFAULTS.get(family, {}))
    layers = fields.positive_int("num_hidden_layers")
    hidden = fields.positive_int("hidden_size")
    heads = fields.positive_int("num_attention_heads")
    experts_key = "num_experts" if merged.get("num_experts") is not None else "num_local_experts"
    theta, scaling, partial = _rope(fields, merged)
    quant, quant_problems = parse_quantization(data.get("quantization_config"))
    archs = data.get("architectures")
    text_type = merged.get("model_type") if nested else ""
    config = ConfigFacts(
        architecture=str(archs[0]) if isinstance(archs, list) and archs else "",
        model_type=str(data.get("model_type", "") or ""),
        dtype=str(merged.get("torch_dtype") or merged.get("dtype") or ""),
        quantization=data.get("quantization_config")
        if isinstance(data.get("quantization_config"), Mapping) else None,
        vocab_size=fields.positive_int("vocab_size"),
        num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads,
        num_key_value_heads=fields.positive_int("num_key_value_heads"),
        head_dim=fields.positive_int("head_dim"),
        num_experts=fields.positive_int(experts_key),
        layer_types=_layer_types(fields, layers),
        raw=data, family=family, text_model_type=str(text_type or ""), nested=nested,
        intermediate_size=fields.positive_int("intermediate_size"),
        moe_intermediate_size=fields.positive_int("moe_intermediate_size"),
        shared_expert_intermediate_size=fields.positive_int("shared_expert_intermediate_size")
        if family in SHARED_EXPERT_FAMILIES else None,
        num_experts_per_tok=fields.positive_int("num_experts_per_tok"),
        norm_topk_prob=fields.flag("norm_topk_prob"),
        decoder_sparse_step=fields.positive_int("decoder_sparse_step"),
        mlp_only_layers=fields.int_list("mlp_only_layers"),
        full_attention_interval=fields.positive_int("full_attention_interval"),
        linear_num_key_heads=fields.positive_int("linear_num_key_heads"),
        linear_num_value_heads=fields.positive_int("linear_num_value_heads"),
        linear_key_head_dim=fields.positive_int("linear_key_head_dim"),
        linear_value_head_dim=fields.positive_int("linear_value_head_dim"),
        linear_conv_kernel_dim=fields.positive_int("linear_conv_kernel_dim"),
        attn_output_gate=fields.flag("attn_output_gate"),
        partial_rotary_factor=partial, rope_theta=theta, rope_scaling=scaling,
        rms_norm_eps=fields.number("rms_norm_eps"),
        max_position_embeddings=fields.positive_int("max_position_embeddings"),
        tie_word_embeddings=bool(fields.flag("tie_word_embeddings")),
        attention_bias=bool(fields.flag("attention_bias")),
        bos_token_id=fields.token_id("bos_token_id"), eos_token_ids=_eos(fields),
        pad_token_id=fields.token_id("pad_token_id"),
        mtp_num_hidden_layers=fields.positive_int("mtp_num_hidden_layers") or 0,
        quant=quant, source=path,
    )
    problems = [*fields.problems, *quant_problems]
    return _with_derived(config, problems)


def _with_derived(config: ConfigFacts, problems: list[FieldProblem]) -> ConfigFacts:
    """head_dim from hidden / heads when neither the config nor the family gives one."""

    head_dim = config.head_dim
    if head_dim is None and config.hidden_size and config.num_attention_heads \
            and config.hidden_size % config.num_attention_heads == 0:
        head_dim = config.hidden_size // config.num_attention_heads
    return replace(config, head_dim=head_dim, problems=tuple(problems))


def special_token_ids(documents: Sequence[tuple[str, Mapping[str, Any]]],
                      keys: Sequence[str] = ("bos_token_id", "eos_token_id", "pad_token_id")
                      ) -> list[tuple[str, int]]:
    """("config.json eos_token_id", id) pairs from several documents, text_config included."""
    found: list[tuple[str, int]] = []
    for name, document in documents:
        nested = document.get("text_config")
        for source in (document, nested if isinstance(nested, Mapping) else {}):
            for key in keys:
                value = source.get(key)
                values = value if isinstance(value, list) else [value]
                found += [(f"{name} {key}", int(v)) for v in values
                          if isinstance(v, int) and not isinstance(v, bool)]
    return found
