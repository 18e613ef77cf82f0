"""The cache: aligned buffers allocated once at load, written in place.

Full-attention layers keep keys and values `[batch, max_seq, kv_heads, head_dim]` (BSND)
views of one buffer. With int8 KV each (token, head) row keeps a float32 scale
(`[batch, max_seq, kv_heads, 1]`) so that `value ~= int8 * scale`. Linear-attention (Gated
DeltaNet) layers keep a fixed-size `LinearState` instead: the causal conv's last inputs
`[batch, conv_dim, kernel - 1]` (compute dtype) and the recurrent state
`[batch, value_heads, key_dim, value_dim]` (float32), views of two more buffers. `layers`
lists one entry per decoder layer, in order. Nothing here allocates after `KVCache.allocate`
except the dequantised read of an int8 cache (a temporary, not cache storage). How many bytes
these buffers hold is probes.model.memory.kv_state_size's arithmetic, which the runner plans
with before allocating (tests/engine/test_cache.py holds the two equal).
"""

from __future__ import annotations

import mmap
from collections.abc import Sequence
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


@dataclass(frozen=True)
class StateShape:
    """The linear-attention layers' state: conv inputs and float32 recurrent state."""

    layers: int
    batch: int
    conv_dim: int
    conv_width: int  # kernel - 1 inputs kept
    value_heads: int
    key_dim: int
    value_dim: int

    @property
    def conv_elements(self) -> int:
        return self.batch * self.conv_dim * self.conv_width

    @property
    def recurrent_elements(self) -> int:
        return self.batch * self.value_heads * self.key_dim * self.value_dim


RECURRENT_DTYPE = torch.float32


def element_bytes(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


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


def aligned_zeros(count: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """`aligned_empty`, zeroed. On the CPU the memory is an anonymous mapping: the system hands
    it out zeroed and faults each page in on its first write, so a cache sized for
    max_seq_len costs no time at load (zeroing 94 MB took 28 ms on a 2-core VM) and resident
    memory only as the sequence grows."""
    nbytes = count * element_bytes(dtype)
    if device.type != "cpu" or nbytes == 0:
        return aligned_empty(count, dtype, device).zero_()
    mapping = mmap.mmap(-1, nbytes)  # page-aligned; torch keeps it alive with the tensor
    return torch.frombuffer(mapping, dtype=torch.uint8).view(dtype)


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


class LinearState:
    """One linear-attention layer's conv inputs and recurrent state (views, updated in place)."""

    def __init__(self, conv: torch.Tensor, recurrent: torch.Tensor) -> None:
        self.conv, self.recurrent = conv, recurrent

    def tensors(self) -> tuple[torch.Tensor, ...]:
        return self.conv, self.recurrent


CacheLayer = LayerCache | LinearState


def _kv_layers(shape: CacheShape, dtype: torch.dtype, device: torch.device,
               int8: bool) -> tuple[list[LayerCache], list[torch.Tensor]]:
    storage_dtype = torch.int8 if int8 else dtype
    data = aligned_zeros(2 * shape.num_layers * shape.layer_elements, storage_dtype, device)
    per_layer = data.view(shape.num_layers, 2, shape.batch, shape.max_seq_len,
                          shape.kv_heads, shape.head_dim)
    if not int8:
        return [LayerCache(per_layer[i, 0], per_layer[i, 1])
                for i in range(shape.num_layers)], [data]
    scales = aligned_zeros(2 * shape.num_layers * shape.layer_rows, INT8_SCALE_DTYPE, device)
    per_scale = scales.view(shape.num_layers, 2, shape.batch, shape.max_seq_len,
                            shape.kv_heads, 1)
    return [Int8LayerCache(per_layer[i, 0], per_layer[i, 1], per_scale[i, 0], per_scale[i, 1],
                           dtype) for i in range(shape.num_layers)], [data, scales]


def _linear_states(shape: StateShape, dtype: torch.dtype,
                   device: torch.device) -> tuple[list[LinearState], list[torch.Tensor]]:
    conv = aligned_empty(shape.layers * shape.conv_elements, dtype, device)
    recurrent = aligned_empty(shape.layers * shape.recurrent_elements, RECURRENT_DTYPE, device)
    convs = conv.view(shape.layers, shape.batch, shape.conv_dim, shape.conv_width)
    states = recurrent.view(shape.layers, shape.batch, shape.value_heads, shape.key_dim,
                            shape.value_dim)
    return [LinearState(convs[i], states[i]) for i in range(shape.layers)], [conv, recurrent]


class KVCache:
    """Every layer's cache, allocated once and aligned; `tokens_used` is the filled length.

    `layers[i]` is the LayerCache (KV, BSND) of a full-attention layer or the LinearState of a
    linear-attention layer."""

    def __init__(self, shape: CacheShape, layers: Sequence[CacheLayer],
                 buffers: list[torch.Tensor], dtype: torch.dtype, int8: bool,
                 state_shape: StateShape | None = None, state_buffers: int = 0) -> None:
        self.shape, self.layers, self.buffers = shape, list(layers), buffers
        self.dtype, self.int8 = dtype, int8
        self.state_shape = state_shape
        self._state_buffers = state_buffers  # the last N buffers hold the linear states
        self.tokens_used = 0

    @classmethod
    def allocate(cls, shape: CacheShape, dtype: torch.dtype, device: torch.device,
                 int8: bool = False, state: StateShape | None = None,
                 kinds: Sequence[bool] | None = None) -> KVCache:
        """`kinds[i]` is True where decoder layer i keeps KV (default: every layer)."""
        kv_layers, buffers = _kv_layers(shape, dtype, device, int8)
        if state is None:
            return cls(shape, kv_layers, buffers, dtype, int8)
        linear, state_buffers = _linear_states(state, dtype, device)
        kv_iter, linear_iter = iter(kv_layers), iter(linear)
        kinds = kinds if kinds is not None else [True] * len(kv_layers)
        layers: list[CacheLayer] = [next(kv_iter) if is_kv else next(linear_iter)
                                    for is_kv in kinds]
        cache = cls(shape, layers, buffers + state_buffers, dtype, int8, state,
                    len(state_buffers))
        cache.reset()
        return cache

    @property
    def nbytes(self) -> int:
        return sum(b.numel() * b.element_size() for b in self.buffers)

    @property
    def state_bytes(self) -> int:
        """Bytes of the linear-attention states (0 without linear layers)."""
        held = self.buffers[len(self.buffers) - self._state_buffers:] if self._state_buffers \
            else []
        return sum(b.numel() * b.element_size() for b in held)

    @property
    def kv_bytes(self) -> int:
        return self.nbytes - self.state_bytes

    @property
    def kv_layers(self) -> int:
        return self.shape.num_layers

    @property
    def linear_layers(self) -> int:
        return 0 if self.state_shape is None else self.state_shape.layers

    @property
    def base_alignment_bytes(self) -> int:
        return min(alignment_of(b.data_ptr()) for b in self.buffers)

    @property
    def storage_dtype(self) -> torch.dtype:
        return self.buffers[0].dtype

    def reset(self) -> None:
        """Forget the contents (the memory stays): stale KV rows are never read past
        tokens_used; linear states are zeroed, as a new sequence starts from none."""
        self.tokens_used = 0
        for layer in self.layers:
            if isinstance(layer, LinearState):
                layer.conv.zero_()
                layer.recurrent.zero_()
