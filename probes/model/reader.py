"""The one reader of a model directory, through a Host: where the model is, config.json, the
shard index, every safetensors header (validated once), generation_config.json and which
tokenizer files are there. The doctor's checks and the engine's loader both read through it.

Only headers and the byte ranges a caller asks for are read, never whole shards: a 31 GB FP8
checkpoint is judged from a few MB. Every file is read only when it is a regular file of
bounded size (a config.json linked to /dev/zero or a FIFO is refused in one line, it never
hangs or fills memory), and every read goes through the Host, so a recording of the box
answers the same questions later.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from probes.errors import HostError, NotRecorded
from probes.host import Host, read_ranges
from probes.model.config import ConfigFacts, FieldProblem, QuantFormat, parse_config
from probes.model.formats import TOKENIZER_FILES
from probes.model.safetensors_header import (
    DTYPE_BYTES,
    MAX_HEADER_BYTES,
    CheckpointError,
    TensorInfo,
    header_length,
    parse_header,
    shown,
)

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "DTYPE_BYTES",
    "MAX_HEADER_BYTES",
    "CheckpointError",
    "ConfigFacts",
    "FieldProblem",
    "ModelDir",
    "ModelLocation",
    "QuantFormat",
    "ShardInfo",
    "TensorInfo",
    "load_floats",
    "load_tensor",
    "locate_model",
    "parse_config",
    "read_header",
    "read_json",
    "read_model_dir",
    "read_tensor",
]

CONFIG_FILE = "config.json"
GENERATION_CONFIG_FILE = "generation_config.json"
INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"
# Real config.json files are a few KB (Qwen3.5-FP8's skip list makes ~100 KB); indexes of
# 37k tensors are ~4 MB. Anything far larger is not a model file.
MAX_JSON_BYTES = 16 * 2**20
MAX_INDEX_BYTES = 128 * 2**20

E4M3_MAX = 448.0  # largest finite float8_e4m3fn value
E4M3_MIN_SUBNORMAL = 2.0**-9  # smallest positive float8_e4m3fn value


# -- where the model is -----------------------------------------------------------------------

KIND_WORDS = {"dir": "a directory", "file": "a file", "char_device": "a character device",
              "block_device": "a block device", "other": "a FIFO, socket or other special file",
              "missing": "missing"}


@dataclass(frozen=True)
class ModelLocation:
    """The answer to "is the model on this machine, and what is it?" (one Host question)."""

    path: str
    kind: str  # "directory" | "gguf" | "missing" | "other"
    detail: str = ""  # what else is there, for "other"

    @property
    def problem(self) -> str | None:
        """One line saying why this is not a model to load, or None."""
        if self.kind == "missing":
            return f"{self.path}: no such model directory or .gguf file; check the path"
        if self.kind == "other":
            return (f"{self.path}: {self.detail}, not a model directory or .gguf file; point "
                    "at the folder holding config.json")
        return None


def locate_model(host: Host, path: str) -> ModelLocation:
    """A model directory, a .gguf file, or why neither (host.kind follows links)."""
    try:
        kind = host.kind(path)
    except NotRecorded:
        raise  # a recording that never saw the path: the caller says so
    except HostError as exc:
        return ModelLocation(path, "other", f"unreadable ({exc.reason})")
    if kind == "dir":
        return ModelLocation(path, "directory")
    if kind == "file" and path.endswith(".gguf"):
        return ModelLocation(path, "gguf")
    if kind == "missing":
        return ModelLocation(path, "missing")
    return ModelLocation(path, "other", KIND_WORDS.get(kind, kind))


# -- facts ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ShardInfo:
    """One safetensors shard as its header describes it, and its size on disk."""

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
    """A model directory: its config, every tensor, the shards and what is missing."""

    path: str
    config: ConfigFacts
    tensors: Mapping[str, TensorInfo]
    shards: tuple[ShardInfo, ...]
    missing_shards: tuple[str, ...] = ()
    header_errors: tuple[str, ...] = ()  # one line per unreadable shard, naming it
    unreadable_shards: tuple[str, ...] = ()  # the names of those shards
    weight_map: Mapping[str, str] = field(default_factory=dict)  # from the index; {} without
    index_total_size: int | None = None  # metadata.total_size of the index
    generation_config: Mapping[str, Any] = field(default_factory=dict)
    tokenizer_files: tuple[str, ...] = ()  # which of TOKENIZER_FILES are present

    def shard(self, name: str) -> ShardInfo | None:
        return next((s for s in self.shards if s.name == name), None)

    def file(self, shard: str) -> str:
        return join(self.path, shard)

    @property
    def total_bytes(self) -> int:
        return sum(s.size_bytes for s in self.shards)

    def problems(self) -> list[str]:
        """Why a loader could not read every tensor, one line each (empty when it can)."""
        found = [f"{self.file(name)}: shard is missing; download it (the index lists it)"
                 for name in self.missing_shards]
        found += list(self.header_errors)
        for shard in self.shards:
            if not shard.size_ok:
                how = "truncated" if shard.size_bytes < shard.expected_bytes else "longer"
                found.append(f"{self.file(shard.name)}: {shard.size_bytes} bytes, the header "
                             f"says {shard.expected_bytes}; the file is {how} than its header "
                             "says, re-download it")
        broken = set(self.missing_shards) | set(self.unreadable_shards)
        for name, file in self.weight_map.items():
            entry = self.tensors.get(name)
            if file not in broken and (entry is None or entry.shard != file):
                found.append(f"{self.file(file)}: tensor {shown(name)} listed in {INDEX_FILE} "
                             "is not in this shard; re-download the checkpoint")
                break
        return found


# -- reading ----------------------------------------------------------------------------------


def join(directory: str, name: str) -> str:
    return directory.rstrip("/") + "/" + name


def read_limited(host: Host, path: str, limit: int) -> bytes:
    """A regular file's bytes, refused when it is something else or larger than `limit`."""
    kind = host.kind(path)
    if kind == "missing":
        raise CheckpointError(f"{path}: no such file")
    if kind != "file":
        raise CheckpointError(f"{path}: is {KIND_WORDS.get(kind, kind)}, not a regular file; "
                              "replace it with the real file")
    size = host.file_size(path)
    if size > limit:
        raise CheckpointError(f"{path}: {size:,} bytes is over the {limit:,}-byte limit for "
                              "this file; it is not the file a model directory holds")
    data = host.read_bytes(path, 0, limit + 1)
    if len(data) > limit:  # it grew since it was measured
        raise CheckpointError(f"{path}: over the {limit:,}-byte limit for this file")
    return data


def read_json(host: Host, path: str, limit: int = MAX_JSON_BYTES) -> Any:
    """A bounded JSON file; CheckpointError names the file for every way it can be bad."""
    raw = read_limited(host, path, limit)
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise CheckpointError(f"{path}: not UTF-8 text; re-download it") from None
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except RecursionError:
        raise CheckpointError(f"{path}: JSON nested too deeply; re-download it") from None
    except ValueError as exc:  # e.g. an integer of more than 4300 digits
        raise CheckpointError(f"{path}: unreadable JSON value ({str(exc)[:80]})") from None


def read_config(host: Host, directory: str) -> ConfigFacts:
    """config.json of a model directory as facts (malformed fields listed in `problems`)."""
    path = join(directory, CONFIG_FILE)
    document = read_json(host, path)
    if not isinstance(document, dict):
        raise CheckpointError(f"{path}: expected a JSON object, got {type(document).__name__}")
    return parse_config(document, path)


def read_header(host: Host, path: str) -> tuple[int, dict[str, Any]]:
    """(N, header JSON) of one safetensors file, reading only the header (kept for callers
    that want the raw document; read_shard validates it)."""
    size = header_length(host.read_bytes(path, 0, 8), path)
    raw = host.read_bytes(path, 8, size)
    if len(raw) < size:
        raise CheckpointError(f"{path}: header truncated ({len(raw)} of {size} bytes)")
    header = parse_header(raw, posixpath.basename(path), path)
    document: dict[str, Any] = {t.name: {"dtype": t.dtype, "shape": list(t.shape),
                                         "data_offsets": [t.offset_begin, t.offset_end]}
                                for t in header.tensors}
    if header.metadata:
        document["__metadata__"] = dict(header.metadata)
    return size, document


def read_shard(host: Host, directory: str, shard: str) -> tuple[ShardInfo, list[TensorInfo]]:
    """One shard's validated header and its size on disk."""
    path = join(directory, shard)
    kind = host.kind(path)
    if kind != "file":
        raise CheckpointError(f"{path}: is {KIND_WORDS.get(kind, kind)}, not a regular file")
    actual = host.file_size(path)
    size = header_length(host.read_bytes(path, 0, 8), path)
    if 8 + size > actual:
        raise CheckpointError(f"{path}: header truncated ({actual - 8} of {size} bytes); "
                              "re-download it")
    raw = host.read_bytes(path, 8, size)
    if len(raw) < size:
        raise CheckpointError(f"{path}: header truncated ({len(raw)} of {size} bytes)")
    header = parse_header(raw, shard, path)
    info = ShardInfo(shard, size, header.data_end, actual, dict(header.metadata))
    return info, list(header.tensors)


def _plain_name(name: str, index_path: str) -> str:
    if posixpath.basename(name) != name or name in ("", ".", ".."):
        raise CheckpointError(f"{index_path}: shard name {shown(name)} is not a plain file "
                              "name in the model directory")
    return name


def read_index(host: Host, path: str) -> tuple[dict[str, str], int | None]:
    """(weight_map, metadata.total_size) of a model.safetensors.index.json."""
    index = read_json(host, path, MAX_INDEX_BYTES)
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not weight_map or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in weight_map.items()):
        raise CheckpointError(f"{path}: no weight_map of tensor name -> shard file; "
                              "re-download it")
    mapping = {k: _plain_name(v, path) for k, v in weight_map.items()}
    meta = index.get("metadata")
    total = meta.get("total_size") if isinstance(meta, dict) else None
    return mapping, total if isinstance(total, int) and not isinstance(total, bool) \
        and total >= 0 else None


def _shard_names(host: Host, path: str) -> tuple[list[str], dict[str, str], int | None]:
    """Shard file names, the index's weight_map ({} without an index) and its total_size."""
    index_path = join(path, INDEX_FILE)
    if host.exists(index_path):
        mapping, total = read_index(host, index_path)
        return sorted(set(mapping.values())), mapping, total
    if host.exists(join(path, SINGLE_FILE)):
        return [SINGLE_FILE], {}, None
    found = [n for n in host.list_dir(path) if n.endswith(".safetensors")]
    if not found:
        raise CheckpointError(f"{path}: no {INDEX_FILE}, {SINGLE_FILE} or *.safetensors files; "
                              "download the weights into this directory")
    return found, {}, None


def _generation_config(host: Host, path: str) -> dict[str, Any]:
    """generation_config.json when present and readable ({} otherwise: it is optional)."""
    file = join(path, GENERATION_CONFIG_FILE)
    if not host.exists(file):
        return {}
    try:
        document = read_json(host, file)
    except (CheckpointError, HostError):
        return {}
    return document if isinstance(document, dict) else {}


def _read_shards(host: Host, path: str, names: list[str]) -> tuple[
        list[ShardInfo], dict[str, TensorInfo], list[str], list[str], list[str]]:
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
    return shards, tensors, missing, errors, unreadable


def read_model_dir(host: Host, path: str) -> ModelDir:
    """Everything the files say about a model directory. Raises CheckpointError/HostError.

    A missing or unreadable shard does not raise: it is listed in missing_shards or
    header_errors so one report can name every broken file (`ModelDir.problems()`).
    """
    config = read_config(host, path)
    names, weight_map, total = _shard_names(host, path)
    shards, tensors, missing, errors, unreadable = _read_shards(host, path, names)
    try:
        present = set(host.list_dir(path))
    except HostError:
        present = set()
    return ModelDir(path, config, tensors, tuple(shards), tuple(missing), tuple(errors),
                    tuple(unreadable), weight_map, total, _generation_config(host, path),
                    tuple(n for n in TOKENIZER_FILES if n in present))


def read_tensor(host: Host, shard_path: str, header_size: int, entry: TensorInfo) -> np.ndarray:
    """One tensor's values (small floats widened to float32), reading only its bytes."""
    from probes.model.tensor_decode import decode

    raw = _tensor_bytes(host, shard_path, header_size, entry)
    return decode(raw, entry.dtype).reshape(entry.shape)


def load_tensor(host: Host, model: ModelDir, name: str) -> np.ndarray:
    """read_tensor for a tensor of `model` by name. Raises KeyError when it is not there."""
    entry, header_size = _located(model, name)
    return read_tensor(host, model.file(entry.shard), header_size, entry)


def load_floats(host: Host, model: ModelDir, name: str) -> list[float]:
    """A float tensor's values (F64, F32, F16, BF16) as Python floats, flat, without numpy
    (probes.model.float_values). Raises KeyError when it is not there, ValueError for another
    dtype, CheckpointError when its bytes are cut short."""
    entry, header_size = _located(model, name)
    shard_path = model.file(entry.shard)
    raw = host.read_bytes(shard_path, _data_start(header_size, entry), entry.nbytes)
    return _floats(shard_path, entry, raw)


def read_raw(host: Host, model: ModelDir, names: Sequence[str]) -> dict[str, bytes]:
    """The stored bytes of each named tensor, as load_floats reads them, shard by shard
    (probes.host.read_ranges: a live machine opens each shard once, not once per tensor).
    A tensor cut short by its shard's end comes back short: floats_of says so. Raises
    KeyError for a name that is not there, HostError when a shard cannot be read."""
    wanted: dict[str, list[tuple[str, TensorInfo, int]]] = {}
    for name in names:
        entry, header_size = _located(model, name)
        wanted.setdefault(entry.shard, []).append((name, entry, header_size))
    out: dict[str, bytes] = {}
    for shard, tensors in wanted.items():
        ranges = [(_data_start(size, entry), entry.nbytes) for _, entry, size in tensors]
        for (name, _, _), raw in zip(tensors, read_ranges(host, model.file(shard), ranges),
                                   strict=True):
            out[name] = raw
    return out


def floats_of(model: ModelDir, name: str, raw: bytes) -> list[float]:
    """load_floats of bytes read_raw read. Raises as load_floats does."""
    entry = model.tensors[name]
    return _floats(model.file(entry.shard), entry, raw)


def _floats(shard_path: str, entry: TensorInfo, raw: bytes) -> list[float]:
    from probes.model.float_values import floats

    return floats(_whole(shard_path, entry, raw), entry.dtype)


def _located(model: ModelDir, name: str) -> tuple[TensorInfo, int]:
    entry = model.tensors[name]
    shard = model.shard(entry.shard)
    if shard is None:
        raise KeyError(name)
    return entry, shard.header_size


def _data_start(header_size: int, entry: TensorInfo) -> int:
    return 8 + header_size + entry.offset_begin


def _tensor_bytes(host: Host, shard_path: str, header_size: int, entry: TensorInfo) -> bytes:
    raw = host.read_bytes(shard_path, _data_start(header_size, entry), entry.nbytes)
    return _whole(shard_path, entry, raw)


def _whole(shard_path: str, entry: TensorInfo, raw: bytes) -> bytes:
    """`raw`, unless the shard ended before the tensor did."""
    if len(raw) < entry.nbytes:
        raise CheckpointError(f"{shard_path}: tensor {shown(entry.name)} truncated "
                              f"({len(raw)} of {entry.nbytes} bytes)")
    return raw
