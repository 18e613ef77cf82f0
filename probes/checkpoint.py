"""Read a model directory through a Host: config.json, the shard index, safetensors headers.

Only headers and the byte ranges of tensors a caller asks for are read, never whole shards:
a 31 GB FP8 checkpoint is judged from a few MB. Every read goes through the Host, so a
recording of the box answers the same questions later.

safetensors layout: 8-byte little-endian header length N, N bytes of JSON
({name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}), then the data;
data_offsets are relative to the first byte after the header.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

from probes.errors import HostError, NotRecorded, ProbeError
from probes.host import Host

INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"
# The Rust safetensors reader refuses headers over 100 MB (MAX_HEADER_SIZE); so do we, before
# reading them, so a corrupt length cannot make us allocate gigabytes.
MAX_HEADER_BYTES = 100_000_000

# bytes per element of every dtype the safetensors format names
DTYPE_BYTES: Mapping[str, int] = {
    "F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1,
    "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U64": 8, "U32": 4, "U16": 2, "U8": 1, "BOOL": 1,
}


E4M3_MAX = 448.0  # largest finite float8_e4m3fn value
E4M3_MIN_SUBNORMAL = 2.0**-9  # smallest positive float8_e4m3fn value


class CheckpointError(ProbeError):
    """A model file cannot be used; the message is one line naming the file."""


# -- facts --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelConfig:
    architecture: str  # architectures[0], e.g. Qwen3MoeForCausalLM; "" when absent
    model_type: str
    dtype: str  # torch_dtype (v4) or dtype (v5), e.g. bfloat16
    quantization: Mapping[str, Any] | None
    vocab_size: int | None = None
    num_hidden_layers: int | None = None
    hidden_size: int | None = None
    num_attention_heads: int | None = None
    num_key_value_heads: int | None = None
    head_dim: int | None = None
    num_experts: int | None = None  # num_experts (Hub) or num_local_experts (v5, Mixtral)
    layer_types: tuple[str, ...] = ()  # hybrids: linear_attention / full_attention per layer
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def quant_method(self) -> str:
        return str((self.quantization or {}).get("quant_method", "") or "")

    @property
    def weight_block_size(self) -> tuple[int, int] | None:
        block = (self.quantization or {}).get("weight_block_size")
        if isinstance(block, list) and len(block) == 2 and all(isinstance(b, int) for b in block):
            return (block[0], block[1])
        return None

    @property
    def modules_to_not_convert(self) -> tuple[str, ...]:
        quant = self.quantization or {}
        names = quant.get("modules_to_not_convert") or quant.get("ignored_layers") or []
        return tuple(str(n) for n in names) if isinstance(names, list) else ()


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dtype: str
    shape: tuple[int, ...]
    shard: str  # file name inside the model directory
    offset_begin: int  # relative to the end of the header, as in data_offsets
    offset_end: int

    @property
    def nbytes(self) -> int:
        return self.offset_end - self.offset_begin


@dataclass(frozen=True)
class ShardInfo:
    name: str
    header_size: int
    data_end: int  # the largest data_offsets end
    size_bytes: int  # the file's size (host.file_size)
    metadata: Mapping[str, str] = field(default_factory=dict)

    @property
    def expected_bytes(self) -> int:
        return 8 + self.header_size + self.data_end

    @property
    def size_ok(self) -> bool:
        return self.size_bytes == self.expected_bytes


@dataclass(frozen=True)
class ModelDir:
    path: str
    config: ModelConfig
    tensors: Mapping[str, TensorInfo]
    shards: tuple[ShardInfo, ...]
    missing_shards: tuple[str, ...] = ()
    header_errors: tuple[str, ...] = ()  # one line per unreadable shard, naming it
    unreadable_shards: tuple[str, ...] = ()  # the names of those shards
    weight_map: Mapping[str, str] = field(default_factory=dict)  # from the index; {} without

    def shard(self, name: str) -> ShardInfo | None:
        return next((s for s in self.shards if s.name == name), None)

    def file(self, shard: str) -> str:
        return join(self.path, shard)

    @property
    def total_bytes(self) -> int:
        return sum(s.size_bytes for s in self.shards)


# -- reading ------------------------------------------------------------------------------


def join(directory: str, name: str) -> str:
    return directory.rstrip("/") + "/" + name


def read_json(host: Host, path: str) -> Any:
    try:
        return json.loads(host.read_text(path))
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None


def _int(data: Mapping[str, Any], key: str) -> int | None:
    value = data.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def parse_config(data: Any, path: str = "config.json") -> ModelConfig:
    if not isinstance(data, dict):
        raise CheckpointError(f"{path}: expected a JSON object, got {type(data).__name__}")
    # Qwen3.5/3.6 keep the language model's fields in text_config; top level wins when both.
    nested = data.get("text_config")
    text: dict[str, Any] = nested if isinstance(nested, dict) else {}
    merged = {**text, **data}
    archs = data.get("architectures")
    experts = _int(merged, "num_experts")
    layer_types = merged.get("layer_types")
    quant = data.get("quantization_config")
    return ModelConfig(
        architecture=str(archs[0]) if isinstance(archs, list) and archs else "",
        model_type=str(data.get("model_type", "") or ""),
        dtype=str(merged.get("torch_dtype") or merged.get("dtype") or ""),
        quantization=quant if isinstance(quant, dict) else None,
        vocab_size=_int(merged, "vocab_size"),
        num_hidden_layers=_int(merged, "num_hidden_layers"),
        hidden_size=_int(merged, "hidden_size"),
        num_attention_heads=_int(merged, "num_attention_heads"),
        num_key_value_heads=_int(merged, "num_key_value_heads"),
        head_dim=_int(merged, "head_dim"),
        num_experts=experts if experts is not None else _int(merged, "num_local_experts"),
        layer_types=tuple(str(t) for t in layer_types) if isinstance(layer_types, list) else (),
        raw=data,
    )


def read_header(host: Host, path: str) -> tuple[int, dict[str, Any]]:
    """(header length, parsed header JSON) of one safetensors file, reading only the header."""
    head = host.read_bytes(path, 0, 8)
    if len(head) < 8:
        raise CheckpointError(f"{path}: header truncated (file is {len(head)} bytes)")
    (size,) = struct.unpack("<Q", head)
    if size > MAX_HEADER_BYTES:
        raise CheckpointError(f"{path}: header length {size} bytes is over the 100 MB limit "
                              "(not a safetensors file, or corrupt)")
    raw = host.read_bytes(path, 8, size)
    if len(raw) < size:
        raise CheckpointError(f"{path}: header truncated ({len(raw)} of {size} bytes)")
    try:
        header = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{path}: header is not valid JSON ({exc})") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{path}: header is not a JSON object")
    return size, header


def _tensor(name: str, entry: Any, shard: str, path: str) -> TensorInfo:
    if not isinstance(entry, dict):
        raise CheckpointError(f"{path}: tensor {name} has no dtype/shape/data_offsets")
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if (not isinstance(dtype, str) or not isinstance(shape, list)
            or not all(isinstance(d, int) and d >= 0 for d in shape)
            or not isinstance(offsets, list) or len(offsets) != 2
            or not all(isinstance(o, int) for o in offsets) or not 0 <= offsets[0] <= offsets[1]):
        raise CheckpointError(f"{path}: tensor {name} has a malformed entry {entry!r:.120}")
    info = TensorInfo(name, dtype, tuple(shape), shard, offsets[0], offsets[1])
    itemsize = DTYPE_BYTES.get(dtype)
    if itemsize is not None and info.nbytes != math.prod(info.shape) * itemsize:
        raise CheckpointError(f"{path}: tensor {name} spans {info.nbytes} bytes but "
                              f"{dtype}{list(shape)} needs {math.prod(shape) * itemsize}")
    return info


def read_shard(host: Host, directory: str, shard: str) -> tuple[ShardInfo, list[TensorInfo]]:
    path = join(directory, shard)
    size, header = read_header(host, path)
    meta = header.pop("__metadata__", None) or {}
    tensors = [_tensor(name, entry, shard, path) for name, entry in header.items()]
    data_end = max((t.offset_end for t in tensors), default=0)
    actual = host.file_size(path)
    metadata = {str(k): str(v) for k, v in meta.items()} if isinstance(meta, dict) else {}
    return ShardInfo(shard, size, data_end, actual, metadata), tensors


def _shard_names(host: Host, path: str) -> tuple[list[str], dict[str, str]]:
    """Shard file names and the index's weight_map ({} without an index)."""
    index_path = join(path, INDEX_FILE)
    if host.exists(index_path):
        index = read_json(host, index_path)
        weight_map = index.get("weight_map") if isinstance(index, dict) else None
        if not isinstance(weight_map, dict) or not weight_map:
            raise CheckpointError(f"{index_path}: no weight_map")
        mapping = {str(k): str(v) for k, v in weight_map.items()}
        return sorted(set(mapping.values())), mapping
    if host.exists(join(path, SINGLE_FILE)):
        return [SINGLE_FILE], {}
    found = [n for n in host.list_dir(path) if n.endswith(".safetensors")]
    if not found:
        raise CheckpointError(f"{path}: no {INDEX_FILE}, {SINGLE_FILE} or *.safetensors files")
    return found, {}


def read_model_dir(host: Host, path: str) -> ModelDir:
    """Everything the headers say about a model directory. Raises CheckpointError/HostError.

    A missing or unreadable shard does not raise: it is listed in missing_shards or
    header_errors so one report can name every broken file.
    """
    config_path = join(path, "config.json")
    config = parse_config(read_json(host, config_path), config_path)
    names, weight_map = _shard_names(host, path)
    shards: list[ShardInfo] = []
    tensors: dict[str, TensorInfo] = {}
    missing: list[str] = []
    errors: list[str] = []
    unreadable: list[str] = []
    for name in names:
        if not host.exists(join(path, name)):
            missing.append(name)
            continue
        try:
            shard, found = read_shard(host, path, name)
        except NotRecorded:
            raise
        except (CheckpointError, HostError) as exc:
            errors.append(str(exc))
            unreadable.append(name)
            continue
        shards.append(shard)
        tensors.update((t.name, t) for t in found)
    return ModelDir(path, config, tensors, tuple(shards), tuple(missing), tuple(errors),
                    tuple(unreadable), weight_map)


def read_tensor(host: Host, shard_path: str, header_size: int, entry: TensorInfo) -> np.ndarray:
    from probes.tensor_decode import decode

    """One tensor's values (small floats widened to float32), reading only its bytes."""
    begin = 8 + header_size + entry.offset_begin
    raw = host.read_bytes(shard_path, begin, entry.nbytes)
    if len(raw) < entry.nbytes:
        raise CheckpointError(f"{shard_path}: tensor {entry.name} truncated "
                              f"({len(raw)} of {entry.nbytes} bytes)")
    return decode(raw, entry.dtype).reshape(entry.shape)


def load_tensor(host: Host, model: ModelDir, name: str) -> np.ndarray:
    """read_tensor for a tensor of `model` by name. Raises KeyError when it is not there."""
    entry = model.tensors[name]
    shard = model.shard(entry.shard)
    if shard is None:
        raise KeyError(name)
    return read_tensor(host, model.file(entry.shard), shard.header_size, entry)
