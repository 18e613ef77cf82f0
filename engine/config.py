"""Model configuration: one frozen `ModelConfig` from a HF config.json or GGUF metadata.

`parse_config` accepts the spellings seen in the wild: `num_experts` / `num_local_experts`,
`rope_theta` / `rope_parameters.rope_theta` (transformers 5 writes the latter), `torch_dtype` /
`dtype`, and a missing or null `head_dim` (then hidden_size / num_heads). Defaults for absent
optional fields are transformers' own class defaults, so a config means the same model here as
in transformers.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import ModelFormatError, UnsupportedArchitecture

SUPPORTED_ARCHITECTURES = ("llama", "qwen3", "qwen3_moe", "mixtral")

_ARCH_BY_CLASS = {
    "LlamaForCausalLM": "llama",
    "Qwen3ForCausalLM": "qwen3",
    "Qwen3MoeForCausalLM": "qwen3_moe",
    "MixtralForCausalLM": "mixtral",
}

# Families users will try that need layers this engine does not have yet.
_KNOWN_UNSUPPORTED = {
    "qwen3_next": "hybrid Gated-DeltaNet + attention MoE",
    "qwen3_5_moe": "hybrid Gated-DeltaNet + attention MoE (Qwen3.5/3.6)",
    "qwen3_5_moe_text": "hybrid Gated-DeltaNet + attention MoE (Qwen3.5/3.6)",
}

# transformers' defaults per architecture for fields a config may omit.
_DEFAULTS: dict[str, dict[str, Any]] = {
    "llama": {"rope_theta": 10000.0, "rms_norm_eps": 1e-6, "max_position_embeddings": 2048},
    "qwen3": {"rope_theta": 10000.0, "rms_norm_eps": 1e-6, "max_position_embeddings": 32768},
    "qwen3_moe": {"rope_theta": 10000.0, "rms_norm_eps": 1e-6, "max_position_embeddings": 32768},
    "mixtral": {"rope_theta": 1e6, "rms_norm_eps": 1e-5, "max_position_embeddings": 131072},
}


@dataclass(frozen=True)
class Fp8Config:
    """Block-FP8 quantisation as Qwen3-*-FP8 stores it (quantization_config, quant_method fp8)."""

    block_size: tuple[int, int] = (128, 128)
    modules_to_not_convert: tuple[str, ...] = ()
    activation_scheme: str = "dynamic"


@dataclass(frozen=True)
class ModelConfig:
    """Everything the engine needs to build and run one decoder-only model."""

    architecture: str  # "llama" | "qwen3" | "qwen3_moe" | "mixtral"
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int  # dense MLP width; 0 when no layer is dense
    moe_intermediate_size: int  # per-expert width; 0 for dense models
    num_experts: int  # 0 = dense
    num_experts_per_tok: int
    norm_topk_prob: bool
    router: str  # "softmax_topk" (Qwen3-MoE) | "topk_softmax" (Mixtral) | "" (dense)
    moe_layers: tuple[int, ...]
    qk_norm: bool
    attention_bias: bool
    rope_theta: float
    rope_scaling: dict[str, Any] | None
    rms_norm_eps: float
    max_position_embeddings: int
    tie_word_embeddings: bool
    bos_token_id: int | None
    eos_token_ids: tuple[int, ...]
    torch_dtype: str
    fp8: Fp8Config | None = None

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    def is_moe_layer(self, layer: int) -> bool:
        return layer in self.moe_layers


def parse_config(data: Mapping[str, Any], source: str = "config.json") -> ModelConfig:
    """Parse a HF config.json dict; errors name `source` and the field at fault."""
    if not isinstance(data, Mapping):
        raise ModelFormatError(f"{source}: expected a JSON object; re-download config.json")
    arch = _architecture(data, source)
    fields = _Fields(data, source)
    defaults = _DEFAULTS[arch]
    hidden = fields.positive_int("hidden_size")
    heads = fields.positive_int("num_attention_heads")
    layers = fields.positive_int("num_hidden_layers")
    head_dim = fields.optional_int("head_dim") or _head_dim(hidden, heads, source)
    experts, per_tok, moe_width, dense_width, moe_layers = _mlp_shape(arch, fields, layers)
    rope_theta, rope_scaling = _rope(data, source, defaults["rope_theta"])
    return ModelConfig(
        architecture=arch,
        vocab_size=fields.positive_int("vocab_size"),
        hidden_size=hidden,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=fields.optional_int("num_key_value_heads") or heads,
        head_dim=head_dim,
        intermediate_size=dense_width,
        moe_intermediate_size=moe_width,
        num_experts=experts,
        num_experts_per_tok=per_tok,
        # Mixtral's softmax over the k selected logits is normalised by construction.
        norm_topk_prob=arch == "mixtral" or bool(data.get("norm_topk_prob", False)),
        router={"qwen3_moe": "softmax_topk", "mixtral": "topk_softmax"}.get(arch, ""),
        moe_layers=moe_layers,
        qk_norm=arch in ("qwen3", "qwen3_moe"),
        attention_bias=bool(data.get("attention_bias", False)),
        rope_theta=rope_theta,
        rope_scaling=rope_scaling,
        rms_norm_eps=fields.number("rms_norm_eps", defaults["rms_norm_eps"]),
        max_position_embeddings=fields.optional_int("max_position_embeddings")
        or defaults["max_position_embeddings"],
        tie_word_embeddings=bool(data.get("tie_word_embeddings", False)),
        bos_token_id=fields.optional_int("bos_token_id"),
        eos_token_ids=_eos_ids(data.get("eos_token_id"), source),
        torch_dtype=str(data.get("torch_dtype") or data.get("dtype") or "float32"),
        fp8=parse_fp8(data.get("quantization_config"), source),
    )


def load_config(path: Path) -> ModelConfig:
    """Read `path/config.json` (or `path` itself when it is the file)."""
    file = path / "config.json" if path.is_dir() else path
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ModelFormatError(
            f"{file}: cannot read ({exc.strerror or exc}); "
            "point at a model directory with config.json"
        ) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ModelFormatError(
            f"{file}: not valid JSON (line {exc.lineno}); re-download it"
        ) from None
    return parse_config(data, str(file))


def parse_fp8(quant: Any, source: str = "config.json") -> Fp8Config | None:
    """`quantization_config` -> Fp8Config for block FP8; None when the model is not quantised."""
    if quant is None:
        return None
    if not isinstance(quant, Mapping):
        raise ModelFormatError(f"{source}: quantization_config must be an object")
    method = quant.get("quant_method")
    if method != "fp8":
        raise UnsupportedArchitecture(
            f"{source}: quantization_config.quant_method {method!r} is not supported; "
            "use a BF16 checkpoint or a block-FP8 one (quant_method 'fp8')"
        )
    fmt = quant.get("fmt", "e4m3")
    if fmt != "e4m3":
        raise UnsupportedArchitecture(f"{source}: FP8 fmt {fmt!r} is not supported; only e4m3")
    block = quant.get("weight_block_size") or [128, 128]
    if not (isinstance(block, list) and len(block) == 2 and all(_is_pos_int(b) for b in block)):
        raise ModelFormatError(
            f"{source}: quantization_config.weight_block_size {block!r} must be two positive ints"
        )
    skip = quant.get("modules_to_not_convert") or quant.get("ignored_layers") or []
    return Fp8Config(
        block_size=(int(block[0]), int(block[1])),
        modules_to_not_convert=tuple(str(name) for name in skip),
        activation_scheme=str(quant.get("activation_scheme", "dynamic")),
    )


def config_from_gguf(reader: Any) -> ModelConfig:
    """Build a ModelConfig from a `gguf.GGUFReader` of a llama-architecture file."""
    meta = _GgufMeta(reader)
    arch = meta.get("general.architecture")
    if arch != "llama":
        raise UnsupportedArchitecture(
            f"{meta.source}: GGUF architecture {arch!r} is not supported; only 'llama' GGUF files "
            f"load here (use a safetensors checkpoint for {', '.join(SUPPORTED_ARCHITECTURES)})"
        )
    hidden = meta.count("llama.embedding_length")
    heads = meta.count("llama.attention.head_count")
    vocab = meta.get("llama.vocab_size") or meta.length("tokenizer.ggml.tokens")
    if not vocab:
        raise ModelFormatError(f"{meta.source}: no tokenizer.ggml.tokens and no llama.vocab_size")
    eos = meta.get("tokenizer.ggml.eos_token_id")
    return ModelConfig(
        architecture="llama",
        vocab_size=int(vocab),
        hidden_size=hidden,
        num_layers=meta.count("llama.block_count"),
        num_heads=heads,
        num_kv_heads=int(meta.get("llama.attention.head_count_kv") or heads),
        head_dim=int(meta.get("llama.attention.key_length") or hidden // heads),
        intermediate_size=meta.count("llama.feed_forward_length"),
        moe_intermediate_size=0,
        num_experts=0,
        num_experts_per_tok=0,
        norm_topk_prob=False,
        router="",
        moe_layers=(),
        qk_norm=False,
        attention_bias=False,
        rope_theta=float(meta.get("llama.rope.freq_base") or 10000.0),
        rope_scaling=None,
        rms_norm_eps=float(meta.get("llama.attention.layer_norm_rms_epsilon") or 1e-5),
        max_position_embeddings=int(meta.get("llama.context_length") or 2048),
        tie_word_embeddings=not any(t.name == "output.weight" for t in reader.tensors),
        bos_token_id=meta.get("tokenizer.ggml.bos_token_id"),
        eos_token_ids=() if eos is None else (int(eos),),
        torch_dtype="float32",  # GGUF tensors are dequantised to float32
    )


# --- helpers -------------------------------------------------------------------------------


def _is_pos_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _architecture(data: Mapping[str, Any], source: str) -> str:
    classes = data.get("architectures") or []
    names = [c for c in classes if isinstance(c, str)] if isinstance(classes, list) else []
    for name in names:
        if name in _ARCH_BY_CLASS:
            return _ARCH_BY_CLASS[name]
    model_type = data.get("model_type")
    if model_type in SUPPORTED_ARCHITECTURES:
        return str(model_type)
    found = model_type or (names[0] if names else None)
    if found is None:
        raise ModelFormatError(
            f"{source}: no model_type or architectures field; re-download config.json"
        )
    why = _KNOWN_UNSUPPORTED.get(str(model_type), "")
    raise UnsupportedArchitecture(
        f"{source}: architecture {found!r}{f' ({why})' if why else ''} is not supported; "
        f"supported: {', '.join(SUPPORTED_ARCHITECTURES)}"
    )


class _Fields:
    """Typed access to config.json fields with errors that name the field."""

    def __init__(self, data: Mapping[str, Any], source: str) -> None:
        self.data = data
        self.source = source

    def positive_int(self, key: str) -> int:
        if self.data.get(key) is None:
            raise ModelFormatError(f"{self.source}: required field {key!r} is missing; "
                                   "re-download config.json or add it")
        value = self.optional_int(key)
        assert value is not None
        return value

    def optional_int(self, key: str) -> int | None:
        value = self.data.get(key)
        if value is None:
            return None
        if not _is_pos_int(value) and not (key.endswith("token_id") and value == 0):
            raise ModelFormatError(f"{self.source}: field {key!r} must be a positive integer, "
                                   f"got {value!r}")
        return int(value)

    def number(self, key: str, default: float) -> float:
        value = self.data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise ModelFormatError(f"{self.source}: field {key!r} must be a positive number, "
                                   f"got {value!r}")
        return float(value)


def _head_dim(hidden: int, heads: int, source: str) -> int:
    if hidden % heads:
        raise ModelFormatError(f"{source}: hidden_size {hidden} is not divisible by "
                               f"num_attention_heads {heads} and head_dim is not given")
    return hidden // heads


def _mlp_shape(arch: str, fields: _Fields,
               layers: int) -> tuple[int, int, int, int, tuple[int, ...]]:
    """(num_experts, experts_per_tok, moe_width, dense_width, moe_layers) for `arch`."""
    if arch in ("llama", "qwen3"):
        return 0, 0, 0, fields.positive_int("intermediate_size"), ()
    key = "num_experts" if fields.data.get("num_experts") is not None else "num_local_experts"
    experts = fields.positive_int(key)
    per_tok = fields.positive_int("num_experts_per_tok")
    if per_tok > experts:
        raise ModelFormatError(f"{fields.source}: num_experts_per_tok {per_tok} exceeds "
                               f"{key} {experts}")
    if arch == "mixtral":  # Mixtral's intermediate_size is the per-expert width
        return experts, per_tok, fields.positive_int("intermediate_size"), 0, tuple(range(layers))
    moe_layers = _qwen3_moe_layers(fields, layers)
    dense = fields.positive_int("intermediate_size") if len(moe_layers) < layers else 0
    return experts, per_tok, fields.positive_int("moe_intermediate_size"), dense, moe_layers


def _qwen3_moe_layers(fields: _Fields, layers: int) -> tuple[int, ...]:
    """transformers' rule: layer i is sparse iff it is not in mlp_only_layers and
    (i + 1) % decoder_sparse_step == 0."""
    dense_only = fields.data.get("mlp_only_layers") or []
    step = fields.optional_int("decoder_sparse_step") or 1
    if not isinstance(dense_only, list):
        raise ModelFormatError(f"{fields.source}: mlp_only_layers must be a list of layer indices")
    return tuple(i for i in range(layers) if i not in dense_only and (i + 1) % step == 0)


def _rope(data: Mapping[str, Any], source: str,
          default_theta: float) -> tuple[float, dict[str, Any] | None]:
    """(rope_theta, rope_scaling) from either spelling; non-default scaling is refused."""
    params = data.get("rope_parameters")
    params = params if isinstance(params, Mapping) else {}
    scaling = data.get("rope_scaling")
    theta = data.get("rope_theta", params.get("rope_theta", default_theta))
    if isinstance(theta, bool) or not isinstance(theta, (int, float)) or theta <= 0:
        raise ModelFormatError(f"{source}: rope_theta must be a positive number, got {theta!r}")
    for spec in (scaling, params):
        if isinstance(spec, Mapping):
            kind = spec.get("rope_type", spec.get("type", "default"))
            if kind not in (None, "default"):
                raise UnsupportedArchitecture(
                    f"{source}: rope scaling {kind!r} is not supported; only default RoPE "
                    "(remove rope_scaling to run within the native context length)"
                )
    return float(theta), dict(scaling) if isinstance(scaling, Mapping) else None


def _eos_ids(value: Any, source: str) -> tuple[int, ...]:
    if value is None:
        return ()
    values = value if isinstance(value, list) else [value]
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values):
        raise ModelFormatError(f"{source}: eos_token_id must be an int or a list of ints, "
                               f"got {value!r}")
    return tuple(int(v) for v in values)


class _GgufMeta:
    """Plain-value access to GGUF metadata fields."""

    def __init__(self, reader: Any) -> None:
        self.reader = reader
        self.source = str(getattr(reader, "path", "GGUF file"))

    def get(self, key: str, default: Any = None) -> Any:
        field = self.reader.fields.get(key)
        return default if field is None else field.contents()

    def length(self, key: str) -> int:
        """Number of items of an array field, without decoding them (49k token strings)."""
        field = self.reader.fields.get(key)
        return 0 if field is None else len(field.data)

    def count(self, key: str) -> int:
        value = self.get(key)
        if not _is_pos_int(value):
            raise ModelFormatError(f"{self.source}: GGUF metadata {key!r} is missing or invalid "
                                   f"({value!r}); the file is not a complete llama GGUF")
        return int(value)
