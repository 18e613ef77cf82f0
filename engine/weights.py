"""Load checkpoints (HF safetensors directories, llama GGUF files) into canonical tensor names.

The model code only ever sees these CANONICAL_NAMES (engine-internal, architecture-neutral):

    embed.weight                              [vocab, hidden]
    lm_head.weight                            [vocab, hidden]; tied -> the same object as embed
    norm.weight                               [hidden]
    layers.{i}.attn_norm.weight               [hidden]         HF input_layernorm
    layers.{i}.mlp_norm.weight                [hidden]         HF post_attention_layernorm
    layers.{i}.attn.{q,k,v,o}.weight          q [heads*head_dim, hidden], o [hidden, heads*head_dim]
    layers.{i}.attn.{q,k,v,o}.bias            only when config.attention_bias (o too, as in HF)
    layers.{i}.attn.{q,k}_norm.weight         [head_dim], only when config.qk_norm
    layers.{i}.mlp.{gate,up,down}.weight      dense layers
    layers.{i}.moe.router.weight              [num_experts, hidden]; Qwen3-MoE mlp.gate,
                                              Mixtral block_sparse_moe.gate
    layers.{i}.moe.experts.{e}.{gate,up,down}.weight
                                              Qwen3-MoE {gate,up,down}_proj, Mixtral w1/w3/w2

Values are tensors on the requested device, floating ones cast to the requested dtype, except
block-FP8 linears loaded with fp8="resident": those are `Fp8Weight` (FP8 bytes + scales).

Safetensors headers are validated before any tensor is read (shards present, header length
sane, offsets inside the file, index consistent), so a corrupt or hostile file gives one
ModelFormatError naming the shard and tensor instead of a crash or a giant allocation.
"""

from __future__ import annotations

import json
import math
import re
import struct
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

import numpy as np
import torch
from safetensors import safe_open

from engine.config import ModelConfig, config_from_gguf, load_config
from engine.errors import EngineError, ModelFormatError, UnsupportedArchitecture
from engine.fp8 import Fp8Weight, dequantize_block, scale_grid

Weight: TypeAlias = torch.Tensor | Fp8Weight
FP8_MODES = ("dequantize", "resident")
MAX_HEADER_BYTES = 100 * 1024 * 1024  # real headers are a few MB even for 37k tensors
SCALE_SUFFIX = "_scale_inv"
INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"

_DTYPE_BYTES = {
    "F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1,
    "U64": 8, "U32": 4, "U16": 2, "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1,
}


def load_checkpoint(
    path: Path | str,
    *,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.bfloat16,
    fp8: str = "dequantize",
) -> tuple[ModelConfig, dict[str, Weight]]:
    """Load a HF directory or a `.gguf` file -> (config, canonical name -> weight)."""
    path = Path(path)
    if fp8 not in FP8_MODES:
        raise EngineError(f"fp8={fp8!r} is not a mode; use one of {', '.join(FP8_MODES)}")
    if path.is_file() and path.suffix == ".gguf":
        return load_gguf(path, device=device, dtype=dtype)
    if not path.is_dir():
        raise ModelFormatError(f"{path}: no such model directory or .gguf file; check the path")
    config = load_config(path)
    weights = load_safetensors_dir(path, config, device=device, dtype=dtype, fp8=fp8)
    return config, weights


# --- names ---------------------------------------------------------------------------------

_PROJ = {"gate": "gate", "up": "up", "down": "down", "w1": "gate", "w3": "up", "w2": "down"}
_GLOBAL_NAMES = {
    "model.embed_tokens.weight": "embed.weight",
    "lm_head.weight": "lm_head.weight",
    "model.norm.weight": "norm.weight",
}
# (pattern, canonical template, kind); kind says which configs the tensor belongs to.
_LAYER_PATTERNS = [
    (r"input_layernorm\.weight", "attn_norm.weight", "any"),
    (r"post_attention_layernorm\.weight", "mlp_norm.weight", "any"),
    (r"self_attn\.(?P<p>[qkvo])_proj\.weight", "attn.{p}.weight", "any"),
    (r"self_attn\.(?P<p>[qkvo])_proj\.bias", "attn.{p}.bias", "bias"),
    (r"self_attn\.(?P<p>[qk])_norm\.weight", "attn.{p}_norm.weight", "qk_norm"),
    (r"mlp\.(?P<p>gate|up|down)_proj\.weight", "mlp.{p}.weight", "dense"),
    (r"(?:mlp|block_sparse_moe)\.gate\.weight", "moe.router.weight", "moe"),
    (r"mlp\.experts\.(?P<e>\d+)\.(?P<p>gate|up|down)_proj\.weight",
     "moe.experts.{e}.{p}.weight", "moe"),
    (r"block_sparse_moe\.experts\.(?P<e>\d+)\.(?P<p>w[123])\.weight",
     "moe.experts.{e}.{p}.weight", "moe"),
]
_LAYER_RE = [(re.compile(rf"model\.layers\.(?P<i>\d+)\.{pattern}"), template, kind)
             for pattern, template, kind in _LAYER_PATTERNS]


def hf_to_canonical(name: str, config: ModelConfig) -> str | None:
    """HF checkpoint name -> canonical name; None for tensors this config does not use."""
    if name in _GLOBAL_NAMES:
        return _GLOBAL_NAMES[name]
    for regex, template, kind in _LAYER_RE:
        match = regex.fullmatch(name)
        if match is None:
            continue
        groups = match.groupdict()
        layer = int(groups["i"])
        if layer >= config.num_layers or not _kind_applies(kind, layer, config):
            return None
        if groups.get("e") is not None and int(groups["e"]) >= config.num_experts:
            return None
        parts = {"p": _PROJ.get(groups.get("p") or "", groups.get("p")), "e": groups.get("e")}
        return f"layers.{layer}." + template.format(**parts)
    return None


def _kind_applies(kind: str, layer: int, config: ModelConfig) -> bool:
    if kind == "bias":
        return config.attention_bias
    if kind == "qk_norm":
        return config.qk_norm
    if kind == "dense":
        return not config.is_moe_layer(layer)
    if kind == "moe":
        return config.is_moe_layer(layer)
    return True


def expected_names(config: ModelConfig) -> list[str]:
    """Every canonical name a complete checkpoint for `config` provides."""
    names = ["embed.weight", "norm.weight", "lm_head.weight"]
    for i in range(config.num_layers):
        pre = f"layers.{i}."
        names += [pre + "attn_norm.weight", pre + "mlp_norm.weight"]
        names += [f"{pre}attn.{p}.weight" for p in "qkvo"]
        if config.attention_bias:
            names += [f"{pre}attn.{p}.bias" for p in "qkvo"]  # transformers biases o_proj too
        if config.qk_norm:
            names += [pre + "attn.q_norm.weight", pre + "attn.k_norm.weight"]
        if config.is_moe_layer(i):
            names.append(pre + "moe.router.weight")
            names += [f"{pre}moe.experts.{e}.{p}.weight"
                      for e in range(config.num_experts) for p in ("gate", "up", "down")]
        else:
            names += [f"{pre}mlp.{p}.weight" for p in ("gate", "up", "down")]
    return names


def expected_shape(name: str, config: ModelConfig) -> tuple[int, ...] | None:
    """The shape `name` must have under `config` (None for names without a fixed rule)."""
    hidden, q_rows = config.hidden_size, config.num_heads * config.head_dim
    kv_rows = config.num_kv_heads * config.head_dim
    tail = name.split(".", 2)[-1] if name.startswith("layers.") else name
    if name.startswith("layers.") and ".experts." in name:
        tail = "experts." + name.rsplit(".", 2)[-2]
    table: dict[str, tuple[int, ...]] = {
        "embed.weight": (config.vocab_size, hidden), "lm_head.weight": (config.vocab_size, hidden),
        "norm.weight": (hidden,), "attn_norm.weight": (hidden,), "mlp_norm.weight": (hidden,),
        "attn.q.weight": (q_rows, hidden), "attn.k.weight": (kv_rows, hidden),
        "attn.v.weight": (kv_rows, hidden), "attn.o.weight": (hidden, q_rows),
        "attn.q.bias": (q_rows,), "attn.k.bias": (kv_rows,), "attn.v.bias": (kv_rows,),
        "attn.o.bias": (hidden,),
        "attn.q_norm.weight": (config.head_dim,), "attn.k_norm.weight": (config.head_dim,),
        "mlp.gate.weight": (config.intermediate_size, hidden),
        "mlp.up.weight": (config.intermediate_size, hidden),
        "mlp.down.weight": (hidden, config.intermediate_size),
        "moe.router.weight": (config.num_experts, hidden),
        "experts.gate": (config.moe_intermediate_size, hidden),
        "experts.up": (config.moe_intermediate_size, hidden),
        "experts.down": (hidden, config.moe_intermediate_size),
    }
    return table.get(tail)


def _finish(weights: dict[str, Weight], config: ModelConfig, source: Path) -> dict[str, Weight]:
    """Tie lm_head, then refuse an incomplete checkpoint or one that disagrees with its config."""
    if config.tie_word_embeddings and "embed.weight" in weights:
        weights["lm_head.weight"] = weights["embed.weight"]
    missing = [name for name in expected_names(config) if name not in weights]
    if missing:
        raise ModelFormatError(
            f"{source}: checkpoint lacks {len(missing)} tensor(s) the config needs, first "
            f"{missing[0]!r}; the download is incomplete or config.json belongs to another model"
        )
    for name, weight in weights.items():
        want = expected_shape(name, config)
        if want is not None and tuple(weight.shape) != want:
            raise ModelFormatError(
                f"{source}: tensor {name!r} has shape {list(weight.shape)} but config.json "
                f"implies {list(want)}; config.json does not match these weights"
            )
    return weights


# --- safetensors: validation ---------------------------------------------------------------


@dataclass(frozen=True)
class TensorEntry:
    """One tensor as a validated safetensors header describes it."""

    shard: Path
    dtype: str
    shape: tuple[int, ...]


def shard_files(directory: Path) -> tuple[list[Path], dict[str, str]]:
    """(shard paths, index weight_map) for a directory; every listed shard must exist."""
    index_path = directory / INDEX_FILE
    if not index_path.exists():
        single = directory / SINGLE_FILE
        if not single.is_file():
            raise ModelFormatError(f"{directory}: neither {SINGLE_FILE} nor {INDEX_FILE} found; "
                                   "download the weights into this directory")
        return [single], {}
    weight_map = _read_index(index_path)
    shards: list[Path] = []
    for file in sorted(set(weight_map.values())):
        if Path(file).name != file:  # refuse "../x" and absolute paths in a hostile index
            raise ModelFormatError(f"{index_path}: shard name {file!r} is not a plain file name")
        shard = directory / file
        if not shard.is_file():
            raise ModelFormatError(f"{index_path}: shard {file} is missing; download it "
                                   "(the index lists it)")
        shards.append(shard)
    return shards, weight_map


def _read_index(index_path: Path) -> dict[str, str]:
    try:
        index = json.loads(index_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelFormatError(f"{index_path}: unreadable index ({exc}); re-download it") from None
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in weight_map.items()
    ):
        raise ModelFormatError(f"{index_path}: no weight_map of tensor name -> shard file; "
                               "re-download it")
    return weight_map


def read_header(shard: Path) -> dict[str, TensorEntry]:
    """Validate one shard's header against the file size; name -> entry."""
    file_bytes = shard.stat().st_size
    with shard.open("rb") as handle:
        prefix = handle.read(8)
        if len(prefix) < 8:
            raise ModelFormatError(f"{shard}: {file_bytes} bytes is too short for a safetensors "
                                   "file; re-download it")
        (header_bytes,) = struct.unpack("<Q", prefix)
        if header_bytes > MAX_HEADER_BYTES:
            raise ModelFormatError(f"{shard}: header length {header_bytes} bytes is implausible "
                                   f"(limit {MAX_HEADER_BYTES}); the file is corrupt")
        if 8 + header_bytes > file_bytes:
            raise ModelFormatError(f"{shard}: header runs past the end of the file; the file is "
                                   "truncated, re-download it")
        raw = handle.read(header_bytes)
    try:
        header = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ModelFormatError(f"{shard}: header is not valid JSON; the file is corrupt") from None
    if not isinstance(header, dict):
        raise ModelFormatError(f"{shard}: header is not a JSON object; the file is corrupt")
    data_bytes = file_bytes - 8 - header_bytes
    return {name: _entry(shard, name, meta, data_bytes)
            for name, meta in header.items() if name != "__metadata__"}


def _entry(shard: Path, name: str, meta: Any, data_bytes: int) -> TensorEntry:
    """Check one header entry: known dtype, sane shape, offsets inside the data section."""
    if not isinstance(meta, dict):
        raise ModelFormatError(f"{shard}: tensor {name!r} has a malformed header entry")
    dtype, shape, offsets = meta.get("dtype"), meta.get("shape"), meta.get("data_offsets")
    if dtype not in _DTYPE_BYTES:
        raise ModelFormatError(f"{shard}: tensor {name!r} has unknown dtype {dtype!r}")
    if not (isinstance(shape, list) and all(_is_count(d) for d in shape)):
        raise ModelFormatError(f"{shard}: tensor {name!r} has a malformed shape {shape!r}")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(map(_is_count, offsets))
            and offsets[0] <= offsets[1]):
        raise ModelFormatError(f"{shard}: tensor {name!r} has malformed data_offsets {offsets!r}")
    if offsets[1] > data_bytes:
        raise ModelFormatError(
            f"{shard}: tensor {name!r} claims bytes {offsets[0]}..{offsets[1]} but the file holds "
            f"{data_bytes} data bytes; the file is truncated or its header is corrupt"
        )
    if offsets[1] - offsets[0] != math.prod(shape) * _DTYPE_BYTES[dtype]:
        raise ModelFormatError(f"{shard}: tensor {name!r} byte range does not match its shape "
                               f"{shape} and dtype {dtype}; the header is corrupt")
    return TensorEntry(shard, dtype, tuple(shape))


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def index_checkpoint(directory: Path) -> dict[str, TensorEntry]:
    """All tensors of a directory, validated; the index must agree with the shard headers."""
    shards, weight_map = shard_files(directory)
    entries: dict[str, TensorEntry] = {}
    for shard in shards:
        entries.update(read_header(shard))
    for name, file in weight_map.items():
        entry = entries.get(name)
        if entry is None or entry.shard.name != file:
            raise ModelFormatError(f"{directory / file}: tensor {name!r} listed in {INDEX_FILE} "
                                   "is not in this shard; re-download the checkpoint")
    return entries


# --- safetensors: loading ------------------------------------------------------------------


def load_safetensors_dir(
    directory: Path,
    config: ModelConfig,
    *,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.bfloat16,
    fp8: str = "dequantize",
) -> dict[str, Weight]:
    """Validate every header first, then read tensor by tensor (mmap) and place each one."""
    entries = index_checkpoint(directory)
    weights: dict[str, Weight] = {}
    with ExitStack() as stack:
        handles = {shard: stack.enter_context(safe_open(str(shard), framework="pt"))
                   for shard in {entry.shard for entry in entries.values()}}

        def read(name: str) -> torch.Tensor:
            tensor: torch.Tensor = handles[entries[name].shard].get_tensor(name)
            return tensor

        for hf_name, canonical in _mapped(entries, config):
            weights[canonical] = _load_one(hf_name, canonical, entries, read, config,
                                           device, dtype, fp8)
    return _finish(weights, config, directory)


def _mapped(entries: Mapping[str, TensorEntry], config: ModelConfig) -> Iterator[tuple[str, str]]:
    for hf_name in entries:
        if hf_name.endswith(SCALE_SUFFIX):
            continue  # read together with its weight
        canonical = hf_to_canonical(hf_name, config)
        if canonical is not None:
            yield hf_name, canonical


def _load_one(
    hf_name: str, canonical: str, entries: Mapping[str, TensorEntry],
    read: Callable[[str], torch.Tensor],
    config: ModelConfig, device: torch.device | str, dtype: torch.dtype, fp8: str,
) -> Weight:
    entry = entries[hf_name]
    if entry.dtype == "F8_E5M2":
        raise UnsupportedArchitecture(f"{entry.shard}: tensor {hf_name!r} is float8_e5m2; only "
                                      "e4m3 block-FP8 checkpoints are supported")
    if entry.dtype != "F8_E4M3":
        return _place(read(hf_name), device, dtype)
    block = config.fp8.block_size if config.fp8 else (128, 128)
    _check_scale(hf_name, entries, block)
    weight, scale_inv = read(hf_name), read(hf_name + SCALE_SUFFIX)
    if fp8 == "resident" and _stays_fp8(hf_name, canonical, config):
        return Fp8Weight.from_tensors(weight, scale_inv, block, device)
    return dequantize_block(weight.to(device), scale_inv.to(device), block, dtype)


def _check_scale(hf_name: str, entries: Mapping[str, TensorEntry],
                 block: tuple[int, int]) -> None:
    """The `_scale_inv` companion of an FP8 weight, with its grid checked against the weight."""
    entry = entries[hf_name]
    scale = entries.get(hf_name + SCALE_SUFFIX)
    if scale is None:
        raise ModelFormatError(f"{entry.shard}: FP8 tensor {hf_name!r} has no "
                               f"{hf_name + SCALE_SUFFIX!r}; the checkpoint is incomplete")
    if len(entry.shape) != 2 or scale.shape != scale_grid((entry.shape[0], entry.shape[1]), block):
        raise ModelFormatError(
            f"{scale.shard}: {hf_name + SCALE_SUFFIX!r} has shape {list(scale.shape)}, expected "
            f"{list(scale_grid((entry.shape[0], entry.shape[-1]), block))} for weight "
            f"{list(entry.shape)} in {list(block)} blocks"
        )
    if scale.dtype not in ("BF16", "F16", "F32"):
        raise ModelFormatError(f"{scale.shard}: {hf_name + SCALE_SUFFIX!r} has dtype "
                               f"{scale.dtype}; expected BF16, F16 or F32")


def _stays_fp8(hf_name: str, canonical: str, config: ModelConfig) -> bool:
    """Resident mode keeps linears FP8, except skip-listed modules and the embedding
    (a lookup table, not a matmul)."""
    if canonical == "embed.weight":
        return False
    module = hf_name.removesuffix(".weight")
    skip = config.fp8.modules_to_not_convert if config.fp8 else ()
    return not any(module == name or module.startswith(name + ".") for name in skip)


def _place(tensor: torch.Tensor, device: torch.device | str, dtype: torch.dtype) -> torch.Tensor:
    """Floating tensors go to `dtype`; integer ones (token ids, counts) keep theirs."""
    if tensor.is_floating_point():
        return tensor.to(device=device, dtype=dtype)
    return tensor.to(device=device)


# --- GGUF ----------------------------------------------------------------------------------

_GGUF_GLOBAL = {"token_embd.weight": "embed.weight", "output_norm.weight": "norm.weight",
                "output.weight": "lm_head.weight"}
_GGUF_LAYER = {"attn_q": "attn.q", "attn_k": "attn.k", "attn_v": "attn.v", "attn_output": "attn.o",
               "ffn_gate": "mlp.gate", "ffn_up": "mlp.up", "ffn_down": "mlp.down",
               "attn_norm": "attn_norm", "ffn_norm": "mlp_norm"}
_GGUF_LAYER_RE = re.compile(r"blk\.(\d+)\.(\w+)\.(weight|bias)")


def gguf_to_canonical(name: str) -> str | None:
    """llama.cpp tensor name -> canonical name (None for tensors the engine does not use)."""
    if name in _GGUF_GLOBAL:
        return _GGUF_GLOBAL[name]
    match = _GGUF_LAYER_RE.fullmatch(name)
    if match is None or match.group(2) not in _GGUF_LAYER:
        return None
    return f"layers.{match.group(1)}.{_GGUF_LAYER[match.group(2)]}.{match.group(3)}"


def unpermute_rows(weight: torch.Tensor, heads: int) -> torch.Tensor:
    """Undo llama.cpp's Q/K row permutation: within each head rows are stored as interleaved
    pairs (for its interleaved RoPE); even rows become the first half, odd rows the second
    (HF rotate-half layout)."""
    rows, cols = weight.shape
    return weight.reshape(heads, rows // heads // 2, 2, cols).transpose(1, 2).reshape(rows, cols)


def load_gguf(
    path: Path, *, device: torch.device | str = "cpu", dtype: torch.dtype = torch.bfloat16
) -> tuple[ModelConfig, dict[str, Weight]]:
    """Read a llama GGUF with the `gguf` package, dequantising every tensor at load."""
    import gguf

    try:
        reader = gguf.GGUFReader(str(path))
    except Exception as exc:  # gguf raises ValueError, struct/IndexError... for damaged files
        raise ModelFormatError(f"{path}: not a readable GGUF file ({type(exc).__name__}: "
                               f"{exc}); re-download it") from None
    config = config_from_gguf(reader)
    weights: dict[str, Weight] = {}
    for tensor in reader.tensors:
        canonical = gguf_to_canonical(tensor.name)
        if canonical is None:
            continue
        values = _gguf_tensor(gguf, tensor, path)
        if canonical.endswith("attn.q.weight"):
            values = unpermute_rows(values, config.num_heads)
        elif canonical.endswith("attn.k.weight"):
            values = unpermute_rows(values, config.num_kv_heads)
        weights[canonical] = values.to(device=device, dtype=dtype)
    return config, _finish(weights, config, path)


def _gguf_tensor(gguf: Any, tensor: Any, path: Path) -> torch.Tensor:
    """Dequantise one GGUF tensor to float32 [out, in] (GGUF lists dims innermost first)."""
    shape = tuple(int(d) for d in reversed(tensor.shape))
    try:
        values = np.asarray(gguf.quants.dequantize(tensor.data, tensor.tensor_type))
        values = values.reshape(shape)
    except (NotImplementedError, ValueError) as exc:
        raise ModelFormatError(f"{path}: tensor {tensor.name!r} cannot be dequantised "
                               f"({exc}); use a GGUF with standard quant types") from None
    if not values.flags.writeable:  # unquantised tensors come back as views of the mmap
        values = values.copy()
    return torch.from_numpy(values.astype(np.float32, copy=False))
