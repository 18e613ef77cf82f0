"""engine.config: real-world config.json shapes, both spellings, GGUF metadata, clear errors."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from engine.config import Fp8Config, config_from_gguf, load_config, parse_config
from engine.errors import EngineError, ModelFormatError, UnsupportedArchitecture

# Qwen/Qwen3-30B-A3B config.json (Hub spelling, transformers 4.51).
QWEN3_30B_A3B: dict[str, Any] = {
    "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 151643, "decoder_sparse_step": 1, "eos_token_id": 151645, "head_dim": 128,
    "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
    "intermediate_size": 6144, "max_position_embeddings": 40960, "max_window_layers": 48,
    "mlp_only_layers": [], "model_type": "qwen3_moe", "moe_intermediate_size": 768,
    "norm_topk_prob": True, "num_attention_heads": 32, "num_experts": 128,
    "num_experts_per_tok": 8, "num_hidden_layers": 48, "num_key_value_heads": 4,
    "output_router_logits": False, "rms_norm_eps": 1e-06, "rope_scaling": None,
    "rope_theta": 1000000.0, "router_aux_loss_coef": 0.001, "sliding_window": None,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
    "use_cache": True, "use_sliding_window": False, "vocab_size": 151936,
}

QWEN3_FP8_QUANT: dict[str, Any] = {
    "activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
    "weight_block_size": [128, 128],
    "modules_to_not_convert": ["lm_head", "model.layers.0.input_layernorm",
                               "model.layers.0.mlp.gate",
                               "model.layers.0.post_attention_layernorm"],
}

# mistralai/Mixtral-8x7B-v0.1 config.json.
MIXTRAL_8X7B: dict[str, Any] = {
    "architectures": ["MixtralForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 1,
    "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
    "intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mixtral",
    "num_attention_heads": 32, "num_experts_per_tok": 2, "num_hidden_layers": 32,
    "num_key_value_heads": 8, "num_local_experts": 8, "output_router_logits": False,
    "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "router_aux_loss_coef": 0.02,
    "sliding_window": None, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "transformers_version": "4.36.0.dev0", "use_cache": True, "vocab_size": 32000,
}

# HuggingFaceTB/SmolLM2-135M-Instruct config.json.
SMOLLM2_135M: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 576,
    "initializer_range": 0.041666666666666664, "intermediate_size": 1536,
    "is_llama_config": True, "max_position_embeddings": 8192, "model_type": "llama",
    "num_attention_heads": 9, "num_hidden_layers": 30, "num_key_value_heads": 3,
    "pad_token_id": 2, "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_interleaved": False,
    "rope_scaling": None, "rope_theta": 100000, "tie_word_embeddings": True,
    "torch_dtype": "bfloat16", "transformers_version": "4.42.3", "use_cache": True,
    "vocab_size": 49152,
}

# meta-llama/Meta-Llama-3-8B-Instruct config.json.
LLAMA3_8B_INSTRUCT: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"], "attention_bias": False, "bos_token_id": 128000,
    "eos_token_id": [128001, 128009], "hidden_act": "silu", "hidden_size": 4096,
    "intermediate_size": 14336, "max_position_embeddings": 8192, "model_type": "llama",
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
    "rms_norm_eps": 1e-05, "rope_scaling": None, "rope_theta": 500000.0,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": 128256,
}

# Qwen/Qwen3-0.6B config.json.
QWEN3_0_6B: dict[str, Any] = {
    "architectures": ["Qwen3ForCausalLM"], "attention_bias": False, "bos_token_id": 151643,
    "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 1024,
    "intermediate_size": 3072, "max_position_embeddings": 40960, "model_type": "qwen3",
    "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
    "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000, "sliding_window": None,
    "tie_word_embeddings": True, "torch_dtype": "bfloat16", "vocab_size": 151936,
}


def v5_spelling(config: dict[str, Any]) -> dict[str, Any]:
    """The same config as transformers 5 save_pretrained writes it."""
    out = dict(config)
    if "num_experts" in out:
        out["num_local_experts"] = out.pop("num_experts")
    out["rope_parameters"] = {"rope_type": "default", "rope_theta": out.pop("rope_theta")}
    out.pop("rope_scaling", None)
    out["dtype"] = out.pop("torch_dtype")
    return out


def test_qwen3_30b_a3b() -> None:
    cfg = parse_config(QWEN3_30B_A3B)
    assert cfg.architecture == "qwen3_moe"
    assert (cfg.num_layers, cfg.hidden_size, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim) == (
        48, 2048, 32, 4, 128)
    assert (cfg.num_experts, cfg.num_experts_per_tok, cfg.moe_intermediate_size) == (128, 8, 768)
    assert cfg.intermediate_size == 0  # every layer is MoE: no dense MLP
    assert cfg.moe_layers == tuple(range(48))
    assert cfg.router == "softmax_topk" and cfg.norm_topk_prob
    assert cfg.qk_norm and not cfg.attention_bias and not cfg.tie_word_embeddings
    assert cfg.rope_theta == 1e6 and cfg.rope_scaling is None
    assert cfg.vocab_size == 151936 and cfg.max_position_embeddings == 40960
    assert cfg.bos_token_id == 151643 and cfg.eos_token_ids == (151645,)
    assert cfg.rms_norm_eps == 1e-6 and cfg.torch_dtype == "bfloat16" and cfg.fp8 is None


def test_both_spellings_mean_the_same_model() -> None:
    for config in (QWEN3_30B_A3B, MIXTRAL_8X7B, SMOLLM2_135M, QWEN3_0_6B):
        assert parse_config(v5_spelling(config)) == parse_config(config)


def test_qwen3_fp8_quantization_config() -> None:
    cfg = parse_config({**QWEN3_30B_A3B, "quantization_config": QWEN3_FP8_QUANT})
    assert cfg.fp8 == Fp8Config((128, 128), tuple(QWEN3_FP8_QUANT["modules_to_not_convert"]),
                                "dynamic")
    ignored = {**QWEN3_FP8_QUANT, "ignored_layers": ["lm_head"], "weight_block_size": [64, 32]}
    del ignored["modules_to_not_convert"]
    cfg = parse_config({**QWEN3_30B_A3B, "quantization_config": ignored})
    assert cfg.fp8 is not None
    assert cfg.fp8.modules_to_not_convert == ("lm_head",) and cfg.fp8.block_size == (64, 32)


def test_mixtral() -> None:
    cfg = parse_config(MIXTRAL_8X7B)
    assert cfg.architecture == "mixtral" and cfg.router == "topk_softmax"
    assert (cfg.num_experts, cfg.num_experts_per_tok) == (8, 2)
    # Mixtral's intermediate_size is the expert width; there is no dense MLP.
    assert cfg.moe_intermediate_size == 14336 and cfg.intermediate_size == 0
    assert cfg.moe_layers == tuple(range(32)) and not cfg.qk_norm
    assert cfg.head_dim == 128 and cfg.rope_theta == 1e6


def test_mixtral_null_head_dim_as_transformers5_writes_it() -> None:
    cfg = parse_config({**v5_spelling(MIXTRAL_8X7B), "head_dim": None})
    assert cfg.head_dim == 4096 // 32


def test_smollm2_and_llama3() -> None:
    smol = parse_config(SMOLLM2_135M)
    assert smol.architecture == "llama" and smol.head_dim == 64 and smol.num_kv_heads == 3
    assert smol.tie_word_embeddings and smol.intermediate_size == 1536 and smol.num_experts == 0
    assert smol.moe_layers == () and not smol.qk_norm and smol.rope_theta == 100000.0
    llama3 = parse_config(LLAMA3_8B_INSTRUCT)
    assert llama3.eos_token_ids == (128001, 128009) and llama3.rope_theta == 500000.0


def test_qwen3_dense() -> None:
    cfg = parse_config(QWEN3_0_6B)
    assert cfg.architecture == "qwen3" and cfg.qk_norm and cfg.head_dim == 128
    assert cfg.num_heads * cfg.head_dim == 2048 != cfg.hidden_size


def test_qwen3_moe_mixed_dense_and_sparse_layers() -> None:
    cfg = parse_config({**QWEN3_30B_A3B, "num_hidden_layers": 6, "mlp_only_layers": [0],
                        "decoder_sparse_step": 2})
    assert cfg.moe_layers == (1, 3, 5)
    assert cfg.intermediate_size == 6144  # dense layers exist, so their width matters


def test_model_type_alone_is_enough() -> None:
    data = dict(SMOLLM2_135M)
    del data["architectures"]
    assert parse_config(data).architecture == "llama"


def test_defaults_follow_transformers() -> None:
    data = {k: v for k, v in MIXTRAL_8X7B.items()
            if k not in ("rope_theta", "rms_norm_eps", "num_key_value_heads", "torch_dtype")}
    cfg = parse_config(data)
    assert cfg.rope_theta == 1e6 and cfg.rms_norm_eps == 1e-5
    assert cfg.num_kv_heads == cfg.num_heads and cfg.torch_dtype == "float32"


def one_line(exc: pytest.ExceptionInfo[EngineError]) -> str:
    message = str(exc.value)
    assert "\n" not in message
    return message


def test_unknown_architecture_lists_supported() -> None:
    data = {**SMOLLM2_135M, "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2"}
    with pytest.raises(UnsupportedArchitecture) as exc:
        parse_config(data, "/m/config.json")
    message = one_line(exc)
    assert "gpt2" in message and "/m/config.json" in message
    for arch in ("llama", "qwen3", "qwen3_moe", "mixtral"):
        assert arch in message


MODELS = Path(__file__).resolve().parent.parent / "data" / "models"


def test_qwen3_5_moe_reads_its_text_config() -> None:
    cfg = load_config(MODELS / "Qwen3.5-35B-A3B")
    assert cfg.architecture == "qwen3_5_moe" and cfg.weight_prefix == "model.language_model."
    assert (cfg.num_layers, cfg.full_attention_layers, cfg.vocab_size) == (40, 10, 248320)
    assert [cfg.layer_kind(i) for i in range(4)] == ["linear_attention"] * 3 + ["full_attention"]
    assert (cfg.num_experts, cfg.num_experts_per_tok, cfg.shared_expert_intermediate_size) == (
        256, 8, 512)
    assert cfg.norm_topk_prob and cfg.norm_offset and cfg.attn_output_gate and cfg.qk_norm
    assert (cfg.head_dim, cfg.rotary_dim, cfg.rope_theta) == (256, 64, 1e7)
    assert cfg.linear is not None and (cfg.linear.conv_dim, cfg.linear.kernel) == (8192, 4)
    assert cfg.eos_token_ids == (248044,) and cfg.fp8 is None


def test_qwen3_next_derives_its_layer_types() -> None:
    cfg = load_config(MODELS / "Qwen3-Next-80B-A3B-Instruct")
    assert cfg.architecture == "qwen3_next" and cfg.weight_prefix == "model."
    assert cfg.full_attention_layers == 12 and cfg.layer_kind(47) == "full_attention"
    assert cfg.layer_kind(46) == "linear_attention" and cfg.rotary_dim == 64
    assert (cfg.num_experts, cfg.num_experts_per_tok) == (512, 10)
    fp8 = load_config(MODELS / "Qwen3.6-35B-A3B-FP8")
    assert fp8.fp8 == Fp8Config((128, 128), ("lm_head", "model.language_model.embed_tokens",
                                             "model.visual", "mtp"), "dynamic")


@pytest.mark.parametrize("field", ["hidden_size", "num_hidden_layers", "vocab_size",
                                   "num_attention_heads", "moe_intermediate_size",
                                   "num_experts_per_tok"])
def test_missing_required_field_is_named(field: str) -> None:
    data = dict(QWEN3_30B_A3B)
    del data[field]
    with pytest.raises(ModelFormatError) as exc:
        parse_config(data)
    assert repr(field) in one_line(exc)


def test_missing_experts_names_a_spelling() -> None:
    data = dict(MIXTRAL_8X7B)
    del data["num_local_experts"]
    with pytest.raises(ModelFormatError, match="num_local_experts"):
        parse_config(data)


@pytest.mark.parametrize(("field", "value"), [("hidden_size", "2048"), ("num_hidden_layers", -1),
                                              ("rms_norm_eps", "tiny"), ("hidden_size", True),
                                              ("eos_token_id", "x")])
def test_wrong_types_are_named(field: str, value: Any) -> None:
    with pytest.raises(ModelFormatError) as exc:
        parse_config({**QWEN3_30B_A3B, field: value})
    assert field in one_line(exc)


def test_no_architecture_at_all() -> None:
    with pytest.raises(ModelFormatError, match="model_type"):
        parse_config({"hidden_size": 8})
    with pytest.raises(ModelFormatError):
        parse_config([1, 2])  # type: ignore[arg-type]


def test_rope_scaling_other_than_default_is_refused() -> None:
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
    with pytest.raises(UnsupportedArchitecture, match="yarn"):
        parse_config({**QWEN3_30B_A3B, "rope_scaling": yarn})
    llama31 = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0}
    with pytest.raises(UnsupportedArchitecture, match="llama3"):
        parse_config({**v5_spelling(LLAMA3_8B_INSTRUCT), "rope_parameters": llama31})
    default = {"type": "default"}
    assert parse_config({**QWEN3_30B_A3B, "rope_scaling": default}).rope_scaling == default


def test_other_quantization_is_refused() -> None:
    with pytest.raises(UnsupportedArchitecture, match="gptq"):
        parse_config({**QWEN3_30B_A3B, "quantization_config": {"quant_method": "gptq"}})
    bad_block = {**QWEN3_FP8_QUANT, "weight_block_size": [128]}
    with pytest.raises(ModelFormatError, match="weight_block_size"):
        parse_config({**QWEN3_30B_A3B, "quantization_config": bad_block})


def test_load_config_from_directory(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(QWEN3_30B_A3B))
    assert load_config(tmp_path).architecture == "qwen3_moe"
    assert load_config(tmp_path / "config.json").num_layers == 48


def test_load_config_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(ModelFormatError) as exc:
        load_config(tmp_path)
    assert str(tmp_path / "config.json") in one_line(exc)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ModelFormatError, match="not valid JSON"):
        load_config(tmp_path)


class FakeField:
    def __init__(self, value: Any) -> None:
        self.value = value
        self.data = value if isinstance(value, list) else [0]

    def contents(self) -> Any:
        return self.value


def fake_reader(**overrides: Any) -> SimpleNamespace:
    fields = {
        "general.architecture": "llama", "llama.block_count": 30, "llama.context_length": 8192,
        "llama.embedding_length": 576, "llama.feed_forward_length": 1536,
        "llama.attention.head_count": 9, "llama.attention.head_count_kv": 3,
        "llama.rope.freq_base": 100000.0, "llama.attention.layer_norm_rms_epsilon": 1e-5,
        "tokenizer.ggml.tokens": ["t"] * 100, "tokenizer.ggml.bos_token_id": 1,
        "tokenizer.ggml.eos_token_id": 2,
    }
    fields.update(overrides)
    live = {k: FakeField(v) for k, v in fields.items() if v is not None}
    return SimpleNamespace(fields=live, tensors=[SimpleNamespace(name="token_embd.weight")],
                           path="model.gguf")


def test_config_from_gguf_metadata() -> None:
    cfg = config_from_gguf(fake_reader())
    assert cfg.architecture == "llama" and cfg.num_layers == 30 and cfg.hidden_size == 576
    assert (cfg.num_heads, cfg.num_kv_heads, cfg.head_dim) == (9, 3, 64)
    assert cfg.intermediate_size == 1536 and cfg.vocab_size == 100
    assert cfg.rope_theta == 100000.0 and cfg.max_position_embeddings == 8192
    assert cfg.tie_word_embeddings and cfg.bos_token_id == 1 and cfg.eos_token_ids == (2,)


def test_config_from_gguf_errors() -> None:
    with pytest.raises(UnsupportedArchitecture, match="qwen2"):
        config_from_gguf(fake_reader(**{"general.architecture": "qwen2"}))
    with pytest.raises(ModelFormatError, match=r"llama\.block_count"):
        config_from_gguf(fake_reader(**{"llama.block_count": None}))
