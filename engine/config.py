"""The engine's view of a model: one frozen `ModelConfig`, resolved from the facts that
`probes.model.config` read out of config.json (or GGUF metadata) -- this module reads no file
and parses no JSON itself.

Resolution is strict where reading was lenient: a malformed field, a field the family needs
that is missing, an architecture, RoPE scaling or quantisation this engine does not run, each
raise an `EngineError` naming the file and the field. What a family means (router style, q/k
norm, zero-centred norms, which layers) comes from its module in `engine.models`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from engine.errors import ModelFormatError, UnsupportedArchitecture
from engine.spec import DEFAULT_DTYPE, Fp8Config, ModelConfig
from probes.errors import HostError
from probes.model.config import ConfigFacts
from probes.model.config import parse_config as parse_facts
from probes.model.tensors import DeltaNetShape, deltanet_shape

# the data the resolution produces lives in engine.spec (the family modules name it from there)
__all__ = ["DEFAULT_DTYPE", "Fp8Config", "ModelConfig", "config_from_gguf", "fp8_config",
           "from_facts", "load_config", "parse_config"]


def parse_config(data: Mapping[str, Any], source: str = "config.json") -> ModelConfig:
    """A config.json document -> ModelConfig; errors name `source` and the field at fault."""
    if not isinstance(data, Mapping):
        raise ModelFormatError(f"{source}: expected a JSON object; re-download config.json")
    return from_facts(parse_facts(data, source))


def load_config(path: Path) -> ModelConfig:
    """`path/config.json` (or `path` itself when it is the file), read by probes.model.reader."""
    from probes.live import local_files
    from probes.model.reader import CheckpointError, read_json

    path = Path(path).absolute()
    file = path / "config.json" if path.is_dir() else path
    try:
        document = read_json(local_files(), str(file))
    except (CheckpointError, HostError) as exc:
        raise ModelFormatError(f"{exc}; point at a model directory with config.json") from None
    return parse_config(document, str(file))


def _check_heads(facts: ConfigFacts, source: str) -> None:
    """Grouped-query attention shares each key/value head among num_attention_heads //
    num_key_value_heads query heads (huggingface/transformers models/llama/modeling_llama.py,
    `num_key_value_groups`, `repeat_kv`): the one must divide the other, or the shapes meet
    only in a torch error."""
    heads, kv_heads = facts.num_attention_heads, facts.num_key_value_heads
    if heads and kv_heads and (kv_heads > heads or heads % kv_heads):
        raise ModelFormatError(f"{source}: num_attention_heads {heads} is not a multiple of "
                               f"num_key_value_heads {kv_heads}; fix config.json")


def from_facts(facts: ConfigFacts) -> ModelConfig:
    """Resolve the facts for this engine, or raise the one error that says why not."""
    from engine.models import family_for

    source = facts.source
    if facts.problems:
        problem = facts.problems[0]
        raise ModelFormatError(f"{source}: {problem.message}; re-download config.json or fix it")
    family = family_for(facts)
    need = _Required(facts, source)
    need.ints("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads")
    if facts.head_dim is None:
        raise ModelFormatError(f"{source}: hidden_size {facts.hidden_size} is not divisible by "
                               f"num_attention_heads {facts.num_attention_heads} and head_dim "
                               "is not given")
    _check_heads(facts, source)
    experts, per_tok, expert_width = _experts(facts, family.expert_width_field, need)
    layers = int(facts.num_hidden_layers or 0)
    dense = layers > facts.moe_layers() or not experts
    if dense and family.expert_width_field != "intermediate_size":
        need.ints("intermediate_size")
    _check_rope(facts, source)
    linear = _linear(facts, need) if family.linear_attention else None
    if family.shared_expert:
        need.ints("shared_expert_intermediate_size")
    return ModelConfig(
        architecture=family.name, vocab_size=int(facts.vocab_size or 0),
        hidden_size=int(facts.hidden_size or 0), num_layers=layers,
        num_heads=int(facts.num_attention_heads or 0),
        num_kv_heads=facts.num_key_value_heads or int(facts.num_attention_heads or 0),
        head_dim=facts.head_dim,
        intermediate_size=int(facts.intermediate_size or 0) if dense else 0,
        moe_intermediate_size=expert_width, num_experts=experts, num_experts_per_tok=per_tok,
        norm_topk_prob=family.always_norm_topk or bool(facts.norm_topk_prob),
        router=family.router if experts else "", qk_norm=family.qk_norm,
        attention_bias=facts.attention_bias, rope_theta=float(facts.rope_theta or 0),
        rope_scaling=dict(facts.rope_scaling) if facts.rope_scaling is not None else None,
        rms_norm_eps=float(facts.rms_norm_eps or 0),
        max_position_embeddings=int(facts.max_position_embeddings or 0),
        tie_word_embeddings=facts.tie_word_embeddings, bos_token_id=facts.bos_token_id,
        eos_token_ids=facts.eos_token_ids, torch_dtype=facts.dtype or DEFAULT_DTYPE,
        fp8=fp8_config(facts),
        shared_expert_intermediate_size=int(facts.shared_expert_intermediate_size or 0)
        if family.shared_expert else 0,
        norm_offset=family.norm_offset,
        attn_output_gate=family.attn_output_gate and facts.attn_output_gate is not False,
        rotary_dim=facts.rotary_dim or facts.head_dim, linear=linear,
        full_attention_layers=facts.full_attention_layers(),
        weight_prefix=facts.weight_prefix, facts=facts)


class _Required:
    """Required fields: a missing one is named in a ModelFormatError."""

    def __init__(self, facts: ConfigFacts, source: str) -> None:
        self.facts, self.source = facts, source

    def ints(self, *names: str, spelling: str = "") -> None:
        for name in names:
            if getattr(self.facts, name) is None:
                also = f" (or {spelling!r})" if spelling else ""
                raise ModelFormatError(f"{self.source}: required field {name!r}{also} is "
                                       "missing; re-download config.json or add it")


def _experts(facts: ConfigFacts, width_field: str, need: _Required) -> tuple[int, int, int]:
    """(num_experts, experts_per_tok, expert width) or zeros for a dense family."""
    if not width_field:
        return 0, 0, 0
    need.ints("num_experts", spelling="num_local_experts")
    need.ints("num_experts_per_tok", width_field)
    experts, per_tok = int(facts.num_experts or 0), int(facts.num_experts_per_tok or 0)
    if per_tok > experts:
        raise ModelFormatError(f"{facts.source}: num_experts_per_tok {per_tok} exceeds the "
                               f"{experts} experts (num_experts / num_local_experts)")
    return experts, per_tok, int(getattr(facts, width_field) or 0)


def _check_rope(facts: ConfigFacts, source: str) -> None:
    scaling = facts.rope_scaling or {}
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind not in (None, "default"):
        raise UnsupportedArchitecture(
            f"{source}: rope scaling {kind!r} is not supported; only default RoPE "
            "(remove rope_scaling to run within the native context length)")
    if facts.rope_theta is None:
        raise ModelFormatError(f"{source}: required field 'rope_theta' is missing")
    if facts.rms_norm_eps is None or facts.max_position_embeddings is None:
        raise ModelFormatError(f"{source}: required field 'rms_norm_eps' or "
                               "'max_position_embeddings' is missing")


def _linear(facts: ConfigFacts, need: _Required) -> DeltaNetShape:
    need.ints("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
              "linear_value_head_dim", "linear_conv_kernel_dim")
    shape = deltanet_shape(facts)
    if shape.value_heads % shape.key_heads:
        raise ModelFormatError(f"{facts.source}: linear_num_value_heads {shape.value_heads} is "
                               f"not a multiple of linear_num_key_heads {shape.key_heads}")
    return shape


def fp8_config(facts: ConfigFacts) -> Fp8Config | None:
    """The FP8 storage the loader must undo; UnsupportedArchitecture for other methods."""
    quant = facts.quant
    if quant.scheme == "none":
        return None
    if not quant.is_fp8:
        raise UnsupportedArchitecture(
            f"{facts.source}: quantization_config.quant_method {quant.method!r} is not "
            "supported; use a BF16 checkpoint or an FP8 one (quant_method 'fp8' or "
            "compressed-tensors float8)")
    if quant.fmt not in ("", "e4m3"):
        raise UnsupportedArchitecture(f"{facts.source}: FP8 fmt {quant.fmt!r} is not "
                                      "supported; only e4m3")
    return Fp8Config(block_size=quant.block_size or (0, 0),
                     modules_to_not_convert=quant.modules_to_not_convert,
                     activation_scheme=quant.activation_scheme or "dynamic",
                     scheme=quant.scheme, scale_suffix=quant.scale_suffix)


# --- GGUF ------------------------------------------------------------------------------------


def config_from_gguf(reader: Any) -> ModelConfig:
    """A ModelConfig from a `gguf.GGUFReader` of a llama-architecture file: its metadata is
    spelled as the config.json transformers would write, then resolved like one."""
    meta = _GgufMeta(reader)
    arch = meta.get("general.architecture")
    if arch != "llama":
        from engine.models import SUPPORTED_ARCHITECTURES

        raise UnsupportedArchitecture(
            f"{meta.source}: GGUF architecture {arch!r} is not supported; only 'llama' GGUF files "
            f"load here (use a safetensors checkpoint for {', '.join(SUPPORTED_ARCHITECTURES)})")
    hidden, heads = meta.count("llama.embedding_length"), meta.count("llama.attention.head_count")
    vocab = meta.get("llama.vocab_size") or meta.length("tokenizer.ggml.tokens")
    if not vocab:
        raise ModelFormatError(f"{meta.source}: no tokenizer.ggml.tokens and no llama.vocab_size")
    document = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": int(vocab),
        "hidden_size": hidden, "num_hidden_layers": meta.count("llama.block_count"),
        "num_attention_heads": heads,
        "num_key_value_heads": int(meta.get("llama.attention.head_count_kv") or heads),
        "head_dim": int(meta.get("llama.attention.key_length") or hidden // heads),
        "intermediate_size": meta.count("llama.feed_forward_length"),
        "rope_theta": float(meta.get("llama.rope.freq_base") or 10000.0),
        "rms_norm_eps": float(meta.get("llama.attention.layer_norm_rms_epsilon") or 1e-5),
        "max_position_embeddings": int(meta.get("llama.context_length") or 2048),
        "tie_word_embeddings": not any(t.name == "output.weight" for t in reader.tensors),
        "bos_token_id": meta.get("tokenizer.ggml.bos_token_id"),
        "eos_token_id": meta.get("tokenizer.ggml.eos_token_id"),
        "torch_dtype": "float32",  # GGUF tensors are dequantised to float32
    }
    return parse_config(document, meta.source)


class _GgufMeta:
    """Plain-value access to GGUF metadata fields."""

    def __init__(self, reader: Any) -> None:
        self.reader = reader
        self.source = str(getattr(reader, "path", "GGUF file"))

    def get(self, key: str, default: Any = None) -> Any:
        found = self.reader.fields.get(key)
        return default if found is None else found.contents()

    def length(self, key: str) -> int:
        """Number of items of an array field, without decoding them (49k token strings)."""
        found = self.reader.fields.get(key)
        return 0 if found is None else len(found.data)

    def count(self, key: str) -> int:
        value = self.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ModelFormatError(f"{self.source}: GGUF metadata {key!r} is missing or invalid "
                                   f"({value!r}); the file is not a complete llama GGUF")
        return int(value)
