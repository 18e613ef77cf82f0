"""Validate a safetensors header the way the format's own reader does, before anything is read.

Layout: 8-byte little-endian header length N, N bytes of JSON starting with `{`
(`{name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {str: str}}`), then the
data; offsets count from the first byte after the header. The Rust reader (safetensors 0.8,
`SafeTensors::validate`) refuses a header over 100 MB, an unknown dtype, a byte range that
does not match shape x dtype, and ranges that overlap or leave gaps; a shard it refuses is
refused here too, with one line naming the shard and the tensor.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from probes.errors import ProbeError
from probes.textsafe import one_line

# safetensors' MAX_HEADER_SIZE: a corrupt length never makes us allocate more than this.
MAX_HEADER_BYTES = 100_000_000

# bytes per element of every whole-byte dtype the safetensors format names
DTYPE_BYTES: Mapping[str, int] = {
    "F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1,
    "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U64": 8, "U32": 4, "U16": 2, "U8": 1, "BOOL": 1,
    "C64": 8,
}
# the FP8 dtypes a checkpoint stores quantised weights in (F8_E8M0 holds scales)
FP8_DTYPES = ("F8_E4M3", "F8_E5M2")


class CheckpointError(ProbeError):
    """A model file cannot be used; the message is one line naming the file."""


@dataclass(frozen=True)
class TensorInfo:
    """One tensor of a safetensors header: dtype, shape and where its bytes are."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    shard: str  # file name inside the model directory
    offset_begin: int  # relative to the end of the header, as in data_offsets
    offset_end: int

    @property
    def nbytes(self) -> int:
        return self.offset_end - self.offset_begin

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class Header:
    """A validated safetensors header: its length, tensors and metadata."""

    size: int  # N, the JSON's length in bytes
    tensors: tuple[TensorInfo, ...]
    metadata: Mapping[str, str] = field(default_factory=dict)

    @property
    def data_end(self) -> int:
        """The largest data_offsets end (0 without tensors)."""
        return max((t.offset_end for t in self.tensors), default=0)


def shown(name: str, limit: int = 120) -> str:
    """A tensor or file name from outside, safe on one line and of bounded length."""
    text = one_line(name)
    return text if len(text) <= limit else text[:limit] + "..."


def header_length(prefix: bytes, path: str) -> int:
    """N from the first 8 bytes, refused when the file is too short or N is implausible."""
    if len(prefix) < 8:
        raise CheckpointError(f"{path}: header truncated (file is {len(prefix)} bytes); "
                              "re-download it")
    (size,) = struct.unpack("<Q", prefix[:8])
    if size > MAX_HEADER_BYTES:
        raise CheckpointError(f"{path}: header length {size} bytes is over the 100 MB limit "
                              "(not a safetensors file, or corrupt)")
    return int(size)


def parse_header(raw: bytes, shard: str, path: str) -> Header:
    """The N header bytes -> Header; CheckpointError (one line) for anything malformed."""
    if not raw.startswith(b"{"):
        raise CheckpointError(f"{path}: header does not start with '{{' (not a safetensors "
                              "file, or corrupt)")
    try:
        document = json.loads(raw)
    except RecursionError:
        raise CheckpointError(f"{path}: header JSON is nested too deeply; the file is "
                              "corrupt") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise CheckpointError(f"{path}: header is not valid JSON ({str(exc)[:80]}); the file "
                              "is corrupt") from None
    if not isinstance(document, dict):
        raise CheckpointError(f"{path}: header is not a JSON object; the file is corrupt")
    meta = document.pop("__metadata__", None)
    tensors = tuple(_tensor(name, entry, shard, path) for name, entry in document.items())
    _check_layout(tensors, path)
    return Header(len(raw), tensors, _metadata(meta, path))


def _metadata(meta: Any, path: str) -> dict[str, str]:
    if meta is None:
        return {}
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise CheckpointError(f"{path}: __metadata__ must map strings to strings")
    return dict(meta)


def _is_count(value: Any) -> bool:
    """A dimension or an offset: the format stores them as unsigned 64-bit integers
    (huggingface/safetensors, safetensors/src/tensor.rs: `shape: Vec<usize>`,
    `data_offsets: (usize, usize)`)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**64


def _tensor(name: str, entry: Any, shard: str, path: str) -> TensorInfo:
    """One entry: known dtype, a shape of counts, offsets whose span is shape x dtype."""
    if not isinstance(entry, dict):
        raise CheckpointError(f"{path}: tensor {shown(name)} has no dtype/shape/data_offsets")
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if dtype not in DTYPE_BYTES:
        raise CheckpointError(f"{path}: tensor {shown(name)} has unknown dtype "
                              f"{one_line(repr(dtype))[:40]}")
    if not (isinstance(shape, list) and all(_is_count(d) for d in shape)):
        raise CheckpointError(f"{path}: tensor {shown(name)} has a malformed shape "
                              f"{one_line(repr(shape))[:80]}")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(map(_is_count, offsets))
            and offsets[0] <= offsets[1]):
        raise CheckpointError(f"{path}: tensor {shown(name)} has malformed data_offsets "
                              f"{one_line(repr(offsets))[:80]}")
    needed = math.prod(shape) * DTYPE_BYTES[str(dtype)]
    if offsets[1] - offsets[0] != needed:
        raise CheckpointError(f"{path}: tensor {shown(name)} spans {offsets[1] - offsets[0]} "
                              f"bytes but {dtype}{str(shape)[:60]} needs {needed}; the header is "
                              "corrupt")
    return TensorInfo(name, str(dtype), tuple(shape), shard, offsets[0], offsets[1])


def _check_layout(tensors: tuple[TensorInfo, ...], path: str) -> None:
    """Byte ranges sorted by start must tile the data section from 0: no overlap, no gap."""
    expected, previous = 0, None
    for tensor in sorted(tensors, key=lambda t: (t.offset_begin, t.offset_end)):
        if tensor.offset_begin < expected and previous is not None:
            raise CheckpointError(f"{path}: tensors {shown(previous.name)} and "
                                  f"{shown(tensor.name)} claim the same bytes; the header is "
                                  "corrupt")
        if tensor.offset_begin > expected:
            raise CheckpointError(f"{path}: a gap of {tensor.offset_begin - expected} bytes "
                                  f"before tensor {shown(tensor.name)}; the header is corrupt")
        expected, previous = tensor.offset_end, tensor
