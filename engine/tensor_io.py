"""Tensor bytes out of validated safetensors shards, through a private memory map.

`probes.model.reader` has already checked every header (offsets inside the file, sizes equal
to shape x dtype, no overlap), so reading a tensor is a view of its byte range: nothing is
parsed twice and no second safetensors reader is needed. The map is copy-on-write (nothing
is ever written back) and pages are read only when a tensor is copied out.
"""

from __future__ import annotations

import mmap
from pathlib import Path

import torch

from engine.errors import ModelFormatError
from probes.model.reader import ModelDir, TensorInfo

TORCH_DTYPES: dict[str, torch.dtype] = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "F8_E4M3": torch.float8_e4m3fn, "F8_E5M2": torch.float8_e5m2, "I64": torch.int64,
    "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
    "BOOL": torch.bool,
}


class ShardReader:
    """Tensors of one model directory's shards, each shard mapped once."""

    def __init__(self, model: ModelDir) -> None:
        self.model = model
        self._maps: dict[str, mmap.mmap] = {}

    def _map(self, shard: str) -> mmap.mmap:
        if shard not in self._maps:
            path = Path(self.model.file(shard))
            try:
                with path.open("rb") as handle:
                    self._maps[shard] = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_COPY)
            except (OSError, ValueError) as exc:
                raise ModelFormatError(f"{path}: cannot map the shard ({exc}); check that it is "
                                       "readable and re-download it") from None
        return self._maps[shard]

    def read(self, info: TensorInfo) -> torch.Tensor:
        """The tensor on the CPU as a view of the map (copy it before the reader goes)."""
        dtype = TORCH_DTYPES.get(info.dtype)
        if dtype is None:
            raise ModelFormatError(f"{self.model.file(info.shard)}: tensor {info.name} has "
                                   f"dtype {info.dtype}, which this engine does not load")
        if info.numel == 0:
            return torch.empty(info.shape, dtype=dtype)
        shard = self.model.shard(info.shard)
        assert shard is not None
        start = 8 + shard.header_size + info.offset_begin
        flat = torch.frombuffer(self._map(info.shard), dtype=dtype, count=info.numel,
                                offset=start)
        return flat.view(info.shape)
