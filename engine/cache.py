"""The KV cache: one aligned buffer allocated at load, BSND per layer, written in place.

Layout per layer: keys and values `[batch, max_seq, kv_heads, head_dim]`. With int8 KV each
(token, head) row keeps a float32 scale (`[batch, max_seq, kv_heads, 1]`) so that
`value ~= int8 * scale`. Nothing here allocates after `KVCache.allocate` except the
dequantised read of an int8 cache (a temporary, not cache storage).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

KV_LAYOUT = "BSND"
TARGET_ALIGNMENT_BYTES = 512
ALIGNMENT_REPORT_CAP_BYTES = 4096
INT8_SCALE_DTYPE = torch.float32


@dataclass(frozen=True)
class CacheShape:
    num_layers: int
    batch: int
    max_seq_len: int
    kv_heads: int
    head_dim: int

    @property
    def layer_elements(self) -> int:
        return self.batch * self.max_seq_len * self.kv_heads * self.head_dim

    @property
    def layer_rows(self) -> int:
        return self.batch * self.max_seq_len * self.kv_heads


def element_bytes(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def kv_cache_bytes(shape: CacheShape, dtype: torch.dtype, int8: bool) -> int:
    """Bytes the cache will hold (keys + values, plus scales for int8), before padding."""
    if int8:
        scale_bytes = element_bytes(INT8_SCALE_DTYPE)
        return 2 * shape.num_layers * (shape.layer_elements + shape.layer_rows * scale_bytes)
    return 2 * shape.num_layers * shape.layer_elements * element_bytes(dtype)


def alignment_of(address: int, cap: int = ALIGNMENT_REPORT_CAP_BYTES) -> int:
    """Largest power of two dividing `address`, capped (0 counts as the cap)."""
    if address == 0:
        return cap
    return min(address & -address, cap)


def aligned_empty(count: int, dtype: torch.dtype, device: torch.device,
                  alignment: int = TARGET_ALIGNMENT_BYTES) -> torch.Tensor:
    """A 1-D tensor of `count` elements whose first byte is `alignment`-aligned."""
    nbytes = count * element_bytes(dtype)
    raw = torch.empty(nbytes + alignment, dtype=torch.uint8, device=device)
    offset = (-raw.data_ptr()) % alignment
    return raw[offset:offset + nbytes].view(dtype)


class LayerCache:
    """One layer's keys and values (views into the shared buffer)."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor) -> None:
        self.keys, self.values = keys, values

    def tensors(self) -> tuple[torch.Tensor, ...]:
        return self.keys, self.values

    def write(self, start: int, k: torch.Tensor, v: torch.Tensor) -> None:
        """Store k, v [B, T, kv_heads, head_dim] at positions start..start+T-1."""
        end = start + k.shape[1]
        self.keys[:, start:end].copy_(k)
        self.values[:, start:end].copy_(v)

    def read(self, end: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values for positions 0..end-1 (views, no copy)."""
        return self.keys[:, :end], self.values[:, :end]


class Int8LayerCache(LayerCache):
    """int8 keys and values with one float32 scale per (token, head) row."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, key_scales: torch.Tensor,
                 value_scales: torch.Tensor, dtype: torch.dtype) -> None:
        super().__init__(keys, values)
        self.key_scales, self.value_scales = key_scales, value_scales
        self.dtype = dtype

    def tensors(self) -> tuple[torch.Tensor, ...]:
        return self.keys, self.values, self.key_scales, self.value_scales

    def write(self, start: int, k: torch.Tensor, v: torch.Tensor) -> None:
        end = start + k.shape[1]
        _quantize_into(k, self.keys[:, start:end], self.key_scales[:, start:end])
        _quantize_into(v, self.values[:, start:end], self.value_scales[:, start:end])

    def read(self, end: int) -> tuple[torch.Tensor, torch.Tensor]:
        keys = self.keys[:, :end].to(self.dtype) * self.key_scales[:, :end].to(self.dtype)
        values = self.values[:, :end].to(self.dtype) * self.value_scales[:, :end].to(self.dtype)
        return keys, values


def _quantize_into(x: torch.Tensor, q_out: torch.Tensor, scale_out: torch.Tensor) -> None:
    scale = x.float().abs().amax(dim=-1, keepdim=True).clamp_min(1e-8) / 127.0
    scale_out.copy_(scale)
    q_out.copy_(torch.round(x.float() / scale).clamp_(-127, 127))


class KVCache:
    """All layers' caches in one aligned allocation; `tokens_used` is the filled length."""

    def __init__(self, shape: CacheShape, layers: list[LayerCache], buffers: list[torch.Tensor],
                 dtype: torch.dtype, int8: bool) -> None:
        self.shape, self.layers, self.buffers = shape, layers, buffers
        self.dtype, self.int8 = dtype, int8
        self.tokens_used = 0

    @classmethod
    def allocate(cls, shape: CacheShape, dtype: torch.dtype, device: torch.device,
                 int8: bool = False) -> KVCache:
        storage_dtype = torch.int8 if int8 else dtype
        data = aligned_empty(2 * shape.num_layers * shape.layer_elements, storage_dtype, device)
        data.zero_()
        per_layer = data.view(shape.num_layers, 2, shape.batch, shape.max_seq_len,
                              shape.kv_heads, shape.head_dim)
        if not int8:
            layers = [LayerCache(per_layer[i, 0], per_layer[i, 1])
                      for i in range(shape.num_layers)]
            return cls(shape, layers, [data], dtype, int8=False)
        scales = aligned_empty(2 * shape.num_layers * shape.layer_rows, INT8_SCALE_DTYPE, device)
        scales.zero_()
        per_scale = scales.view(shape.num_layers, 2, shape.batch, shape.max_seq_len,
                                shape.kv_heads, 1)
        int8_layers: list[LayerCache] = [
            Int8LayerCache(per_layer[i, 0], per_layer[i, 1], per_scale[i, 0], per_scale[i, 1],
                           dtype)
            for i in range(shape.num_layers)]
        return cls(shape, int8_layers, [data, scales], dtype, int8=True)

    @property
    def nbytes(self) -> int:
        return sum(b.numel() * b.element_size() for b in self.buffers)

    @property
    def base_alignment_bytes(self) -> int:
        return min(alignment_of(b.data_ptr()) for b in self.buffers)

    @property
    def storage_dtype(self) -> torch.dtype:
        return self.buffers[0].dtype

    def reset(self) -> None:
        """Forget the contents (the memory stays); stale rows are never read past tokens_used."""
        self.tokens_used = 0
