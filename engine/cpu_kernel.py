"""The CPU's compiled decode GEMVs (cpu_kernel.c: float32, bfloat16 where the CPU has
AVX512_BF16, resident FP8; one weight or a stack of them), a one-row RMSNorm, a decode step's
attention (RoPE, KV cache write, one query over the cache), and the one-pass
FP8 copy and dequantisation for loads, compiled for this machine on first use, the GEMVs and
load passes run on every core through the kernel's own thread pool.

Why compiled: measured on a 2-core AVX-512 VM, one core streams about half what two do (9.7
against 19 GB/s), and torch's GEMVs either stay on one core (MKL) or hand blocks to OpenMP
threads at a cost; a Python thread hand-off took 50-130 us there. The kernel cuts each GEMV
into row blocks on spinning C workers (no GIL) and reached the two-core read speed on the
vocabulary projection. torch also has no CPU kernel that multiplies by an FP8 weight: the
torch path dequantises each weight to a buffer (four passes) and reads it again; this kernel
reads the bytes once and dequantises in registers, to exactly the weight values the torch
path produces (float32 product of the e4m3 value and its tile scale, rounded to bfloat16
when the engine runs in bfloat16). Only the order of the float32 sums differs from torch's
GEMV, and it does not depend on how the rows are cut.

It is compiled with the system C compiler (`cc`, or $CC) and `-march=native`, once per source
and machine, into the user's cache directory. Without a compiler, without AVX-512 or when
ASCEND_DOCTOR_CPU_KERNEL=0, `kernel()` is None and the engine keeps torch's GEMVs. Only the
CPU decode path (engine.cpu_decode) and CPU loads (engine.weights) call it; the NPU path never
does.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from engine.fp8 import HALF_REBIAS, checked_bytes

SOURCE = Path(__file__).with_name("cpu_kernel.c")
FLAGS = ("-O3", "-march=native", "-ffp-contract=off", "-shared", "-fPIC", "-pthread")
COMPILE_TIMEOUT_S = 60.0
_DISABLE = "ASCEND_DOCTOR_CPU_KERNEL"

_lock = threading.Lock()
_loaded: list[Kernels | None] = []  # [] until first asked; then the kernel or None
why_not = ""  # why kernel() is None, for the engine's stats


# The kinds cpu_rows takes (the enum at the top of cpu_kernel.c).
FP8_F32, FP8_BF16, BF16, F32, DEQUANTIZE_F32, DEQUANTIZE_BF16, COPY_FP8 = range(7)
ALIGN_ROWS = 64  # row blocks start on a multiple of this
# The norm runs on the calling thread: larger inputs (a prefill's) keep torch's, on every core.
NORM_MAX_ELEMENTS = 1 << 16
ATTEND_MAX_DIM = 512  # cpu_kernel.c's widest head


class Kernels:
    """The compiled library (one per process), through its one entry point `cpu_rows`."""

    def __init__(self, library: ctypes.CDLL) -> None:
        i64, ptr = ctypes.c_int64, ctypes.c_void_p
        self.rows = library.cpu_rows
        # kind, weight, cols, scales, grid cols, block rows, block cols, x, y, r0, r1, parts,
        # align
        self.rows.argtypes = (ctypes.c_int, ptr, i64, ptr, i64, i64, i64, ptr, ptr, i64, i64,
                              i64, i64)
        self.rows.restype = ctypes.c_int64
        self.stack = library.cpu_stack
        # kind, segments, segment count, cols, x, y, parts, align
        self.stack.argtypes = (ctypes.c_int, ptr, i64, i64, ptr, ptr, i64, i64)
        self.stack.restype = i64
        self.norm = library.cpu_rms_norm  # kind, x, weight, y, rows, cols, eps
        self.norm.argtypes = (ctypes.c_int, ptr, ptr, ptr, i64, i64, ctypes.c_float)
        self.norm.restype = i64
        self.attend = library.cpu_rope_attend
        # kind, q, k, v, cos, sin, rotary dims, heads, kv heads, head dim, keys, values,
        # position, scale, out
        self.attend.argtypes = (ctypes.c_int, ptr, ptr, ptr, ptr, ptr, i64, i64, i64, i64, ptr,
                                ptr, i64, ctypes.c_float, ptr)
        self.attend.restype = i64
        self.layer_attention = library.cpu_layer_attention
        # layer, h, cos, sin, keys, values, position, parts, min split bytes, align
        self.layer_attention.argtypes = (ptr, ptr, ptr, ptr, ptr, ptr, i64, i64, i64, i64)
        self.layer_attention.restype = i64
        self.layer_mlp = library.cpu_layer_mlp  # layer, h, parts, min split bytes, align
        self.layer_mlp.argtypes = (ptr, ptr, i64, i64, i64)
        self.layer_mlp.restype = i64
        self.layer_moe = library.cpu_layer_moe  # moe, h, parts, min split bytes, align
        self.layer_moe.argtypes = (ptr, ptr, i64, i64, i64)
        self.layer_moe.restype = i64
        self.load_passes = library.cpu_load_passes  # passes, count, parts, align
        self.load_passes.argtypes = (ptr, i64, i64, i64)
        self.load_passes.restype = i64
        self.bf16 = library.cpu_kernel_simd() >= 2  # AVX512_BF16 (VDPBF16PS)


class BoundWeight:
    """One weight bound to a compiled GEMV: y = W @ x, float32 sums, y in x's dtype. A resident
    FP8 weight is dequantised exactly as engine.fp8 dequantises it to x's dtype (bfloat16 or
    float32); a float32 or bfloat16 one is multiplied as it is (bfloat16 through VDPBF16PS:
    each product exact). ctypes releases the GIL during the call."""

    __slots__ = ("_args", "_call", "_keep", "_kinds", "nbytes", "rows")

    def __init__(self, call: Any, kinds: dict[torch.dtype, int], rows: int,
                 args: tuple[int, ...], keep: tuple[torch.Tensor, ...]) -> None:
        self._call = call
        self._kinds = kinds  # x's dtype -> the kernel's kind
        self.rows = rows
        self._args = args  # the weight's address, columns, scales and blocks
        self._keep = keep  # kept alive: the kernel holds their addresses
        self.nbytes = keep[0].numel() * keep[0].element_size()

    def takes(self, x: torch.Tensor) -> bool:
        return x.dtype in self._kinds

    def into(self, x: torch.Tensor, y: torch.Tensor, parts: int = 1) -> None:
        """x [cols] and y [rows]: contiguous, of one dtype the kernel takes; the rows cut into
        `parts` blocks on as many threads."""
        self._call(self._kinds[x.dtype], *self._args, x.data_ptr(), y.data_ptr(), 0,
                   self.rows, parts, ALIGN_ROWS)


class _Segment(ctypes.Structure):
    """seg_t in cpu_kernel.c: one weight of a stack."""

    _fields_ = [("w", ctypes.c_void_p), ("scale", ctypes.c_void_p), ("grid_cols", ctypes.c_int64),
                ("bo", ctypes.c_int64), ("bi", ctypes.c_int64), ("rows", ctypes.c_int64)]


class BoundStack:
    """Weights of one kind and width bound as one GEMV: y = [W1; W2; ...] @ x without copying
    them into one tensor. Each output row is computed exactly as its own weight's GEMV computes
    it; one call (one hand-off to the workers) instead of one per weight."""

    __slots__ = ("_call", "_kinds", "_members", "_segments", "nbytes", "rows", "splits")

    def __init__(self, call: Any, members: list[BoundWeight]) -> None:
        self._call = call
        self._kinds = members[0]._kinds
        self._members = members  # kept alive: the segments hold their addresses
        self.splits = tuple(m.rows for m in members)
        self.rows = sum(self.splits)
        self.nbytes = sum(m.nbytes for m in members)
        self._segments = (_Segment * len(members))(*(
            _Segment(m._args[0], m._args[2], *m._args[3:], m.rows) for m in members))

    def takes(self, x: torch.Tensor) -> bool:
        return x.dtype in self._kinds

    def into(self, x: torch.Tensor, y: torch.Tensor, parts: int = 1) -> None:
        """x [cols] and y [rows]: as BoundWeight.into; the weights' outputs one after another."""
        self._call(self._kinds[x.dtype], ctypes.addressof(self._segments), len(self.splits),
                   self._members[0]._args[1], x.data_ptr(), y.data_ptr(), parts, ALIGN_ROWS)


def stacked(members: list[BoundWeight | None]) -> BoundStack | None:
    """The bound weights as one stack; None unless there are two or more, all bound, of the
    same kinds and width."""
    gemv = kernel()
    bound = [m for m in members if m is not None]
    if gemv is None or len(members) < 2 or len(bound) != len(members):
        return None
    first = bound[0]
    if any(m._kinds != first._kinds or m._args[1] != first._args[1] for m in bound):
        return None
    return BoundStack(gemv.stack, bound)


class _Gemv(ctypes.Structure):
    """gemv_t in cpu_kernel.c: one GEMV of a layer (a weight or a stack)."""

    _fields_ = [("kind", ctypes.c_int), ("segs", ctypes.c_void_p), ("n_segs", ctypes.c_int64),
                ("rows", ctypes.c_int64), ("cols", ctypes.c_int64), ("nbytes", ctypes.c_int64)]


class _Layer(ctypes.Structure):
    """layer_t in cpu_kernel.c: one dense decoder layer as the kernel runs its decode step."""

    _fields_ = [("bf16", ctypes.c_int), ("hidden", ctypes.c_int64), ("heads", ctypes.c_int64),
                ("kv_heads", ctypes.c_int64), ("dim", ctypes.c_int64), ("rot", ctypes.c_int64),
                ("inter", ctypes.c_int64), ("eps", ctypes.c_float), ("scale", ctypes.c_float),
                ("attn_norm", ctypes.c_void_p), ("mlp_norm", ctypes.c_void_p),
                ("q_norm", ctypes.c_void_p), ("k_norm", ctypes.c_void_p), ("qkv", _Gemv),
                ("o", _Gemv), ("gate_up", _Gemv), ("down", _Gemv)]


@dataclass(frozen=True)
class LayerShape:
    """A dense decoder layer's sizes, as engine.layers.Attention and the MLP hold them."""

    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    rotary_dim: int
    intermediate: int
    eps: float


class BoundLayer:
    """One decoder layer's decode step bound to the kernel (cpu_layer_attention and
    cpu_layer_mlp): engine.model's torch path for one token, op for op, in two calls. The
    hidden state is updated in place. Built by `bound_layer`."""

    __slots__ = ("_attention", "_keep", "_layer", "_mlp", "_pointer", "dtype", "shape")

    def __init__(self, gemv: Kernels, layer: _Layer, dtype: torch.dtype, shape: LayerShape,
                 keep: tuple[Any, ...]) -> None:
        self._attention, self._mlp = gemv.layer_attention, gemv.layer_mlp
        self._layer = layer
        self._pointer = ctypes.addressof(layer)
        self._keep = keep  # the weights, stacks and norms whose addresses the layer holds
        self.dtype, self.shape = dtype, shape

    def attention(self, h: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                  keys: torch.Tensor, values: torch.Tensor, position: int, parts: int,
                  min_split_bytes: int) -> bool:
        """The attention half on h [hidden] (contiguous, this layer's dtype) in place, k and
        v into row `position` of keys / values [1, positions, kv_heads, head_dim]; False
        (nothing written) where these tensors are not what the kernel takes."""
        if keys.dtype != self.dtype or values.dtype != self.dtype or cos.dtype != self.dtype \
                or sin.dtype != self.dtype or not keys.is_contiguous() \
                or not values.is_contiguous() or keys.shape != values.shape \
                or keys.shape[2:] != (self.shape.kv_heads, self.shape.head_dim) \
                or not 0 <= position < keys.shape[1] or cos.shape[-1] != self.shape.rotary_dim:
            return False
        return self._attention(self._pointer, h.data_ptr(), cos.data_ptr(), sin.data_ptr(),
                               keys.data_ptr(), values.data_ptr(), position, parts,
                               min_split_bytes, ALIGN_ROWS) == 0

    def mlp(self, h: torch.Tensor, parts: int, min_split_bytes: int) -> bool:
        """The MLP half on h [hidden] in place; False (nothing written) where the layer has
        no dense MLP bound."""
        return self.shape.intermediate > 0 and self._mlp(
            self._pointer, h.data_ptr(), parts, min_split_bytes, ALIGN_ROWS) == 0


def _gemv_struct(weight: BoundWeight | BoundStack, kind: int) -> tuple[_Gemv, Any]:
    """The gemv_t for a bound weight or stack, and what must stay alive with it."""
    if isinstance(weight, BoundStack):
        return _Gemv(kind, ctypes.addressof(weight._segments), len(weight.splits), weight.rows,
                     weight._members[0]._args[1], weight.nbytes), weight
    segment = (_Segment * 1)(_Segment(weight._args[0], weight._args[2], *weight._args[3:],
                                      weight.rows))
    return _Gemv(kind, ctypes.addressof(segment), 1, weight.rows, weight._args[1],
                 weight.nbytes), (weight, segment)


def bound_layer(shape: LayerShape, dtype: torch.dtype, norms: tuple[torch.Tensor, ...],
                qk_norms: tuple[torch.Tensor, torch.Tensor] | None,
                qkv: BoundStack, o: BoundWeight,
                mlp: tuple[BoundStack, BoundWeight] | None) -> BoundLayer | None:
    """A layer bound to the kernel's decode step: `norms` the attention and MLP norm
    weights, `qk_norms` the per-head q and k norm weights or None, `mlp` gate/up and down or
    None (a mixture of experts: only the attention half is bound; shape.intermediate 0).
    None where the kernel
    does not take it (no kernel, another dtype, a head width it does not tile, a GEMV that
    does not take `dtype` or whose sizes do not fit the shape, a norm of another dtype or
    size)."""
    gemv = kernel()
    kinds = {torch.float32: 0, torch.bfloat16: 1}
    s = shape
    q_rows, kv_rows = s.heads * s.head_dim, s.kv_heads * s.head_dim
    sizes: list[tuple[BoundWeight | BoundStack, int, int]] = [
        (qkv, q_rows + 2 * kv_rows, s.hidden), (o, s.hidden, q_rows)]
    if mlp is not None:
        sizes += [(mlp[0], 2 * s.intermediate, s.hidden), (mlp[1], s.hidden, s.intermediate)]
    all_norms = norms + (qk_norms or ())
    if gemv is None or dtype not in kinds \
            or any(dtype not in w._kinds or w.rows != rows or _cols(w) != cols
                   for w, rows, cols in sizes) \
            or any(n.dtype != dtype or not n.is_contiguous() or n.device.type != "cpu"
                   for n in all_norms) \
            or [n.numel() for n in norms] != [s.hidden, s.hidden] \
            or (qk_norms is not None and [n.numel() for n in qk_norms] != [s.head_dim] * 2) \
            or s.head_dim % 16 or not 16 <= s.head_dim <= ATTEND_MAX_DIM \
            or s.rotary_dim % 2 or not 0 <= s.rotary_dim <= s.head_dim \
            or s.heads % s.kv_heads or (mlp is None) != (s.intermediate == 0):
        return None
    if dtype == torch.bfloat16 and not gemv.bf16:
        return None
    structs = [_gemv_struct(w, w._kinds[dtype]) for w, _, _ in sizes]
    structs += [(_Gemv(), None)] * (4 - len(structs))  # no MLP: zeros, never run
    q_norm, k_norm = qk_norms if qk_norms is not None else (None, None)
    layer = _Layer(kinds[dtype], s.hidden, s.heads, s.kv_heads, s.head_dim, s.rotary_dim,
                   s.intermediate, s.eps, s.head_dim ** -0.5, norms[0].data_ptr(),
                   norms[1].data_ptr(), q_norm.data_ptr() if q_norm is not None else None,
                   k_norm.data_ptr() if k_norm is not None else None,
                   *(struct for struct, _ in structs))
    return BoundLayer(gemv, layer, dtype, shape,
                      (all_norms, tuple(keep for _, keep in structs)))


class _Moe(ctypes.Structure):
    """moe_t in cpu_kernel.c: a mixture of experts as the kernel runs its decode step."""

    _fields_ = [("bf16", ctypes.c_int), ("topk_softmax", ctypes.c_int),
                ("norm_topk", ctypes.c_int), ("hidden", ctypes.c_int64),
                ("experts", ctypes.c_int64), ("top_k", ctypes.c_int64),
                ("inter", ctypes.c_int64), ("eps", ctypes.c_float), ("norm", ctypes.c_void_p),
                ("router", _Gemv), ("gate_up", ctypes.c_void_p), ("down", ctypes.c_void_p)]


MOE_MAX_EXPERTS, MOE_MAX_TOP_K = 1024, 64  # cpu_kernel.c's bounds


class BoundMoe:
    """A mixture of experts (no shared expert) bound to the kernel's decode step
    (cpu_layer_moe): engine.moe's torch path for one token, RMSNorm and residual add
    included, in one call; the hidden state is updated in place. Built by `bound_moe`."""

    __slots__ = ("_call", "_keep", "_moe", "_pointer")

    def __init__(self, gemv: Kernels, moe: _Moe, keep: tuple[Any, ...]) -> None:
        self._call = gemv.layer_moe
        self._moe = moe
        self._pointer = ctypes.addressof(moe)
        self._keep = keep

    def run(self, h: torch.Tensor, parts: int, min_split_bytes: int) -> bool:
        return self._call(self._pointer, h.data_ptr(), parts, min_split_bytes, ALIGN_ROWS) == 0


def bound_moe(dtype: torch.dtype, norm: torch.Tensor, eps: float, router: BoundWeight,
              experts: list[tuple[BoundStack, BoundWeight]], top_k: int, style: str,
              norm_topk: bool) -> BoundMoe | None:
    """Experts (gate/up stack, down) and their router bound to the kernel; None where it
    does not take them (no kernel, another dtype or router style, sizes that disagree, more
    experts or picks than its bounds)."""
    gemv = kernel()
    kinds = {torch.float32: 0, torch.bfloat16: 1}
    hidden = int(norm.numel())
    inter = experts[0][0].splits[0] if experts else 0
    sizes: list[tuple[BoundWeight | BoundStack, int, int]] = [(router, len(experts), hidden)]
    for gate_up, down in experts:
        sizes += [(gate_up, 2 * inter, hidden), (down, hidden, inter)]
    if gemv is None or dtype not in kinds or (dtype == torch.bfloat16 and not gemv.bf16) \
            or style not in ("softmax_topk", "topk_softmax") or not experts \
            or not 1 <= top_k <= min(len(experts), MOE_MAX_TOP_K) \
            or len(experts) > MOE_MAX_EXPERTS or norm.dtype != dtype \
            or not norm.is_contiguous() or norm.device.type != "cpu" \
            or any(dtype not in w._kinds or w.rows != rows or _cols(w) != cols
                   for w, rows, cols in sizes):
        return None
    structs = [_gemv_struct(w, w._kinds[dtype]) for w, _, _ in sizes]
    gate_ups = (_Gemv * len(experts))(*(struct for struct, _ in structs[1::2]))
    downs = (_Gemv * len(experts))(*(struct for struct, _ in structs[2::2]))
    moe = _Moe(kinds[dtype], style == "topk_softmax", norm_topk, hidden, len(experts), top_k,
               inter, eps, norm.data_ptr(), structs[0][0], ctypes.addressof(gate_ups),
               ctypes.addressof(downs))
    return BoundMoe(gemv, moe, (norm, gate_ups, downs, tuple(keep for _, keep in structs)))


def _cols(weight: BoundWeight | BoundStack) -> int:
    return int(weight._members[0]._args[1] if isinstance(weight, BoundStack) else weight._args[1])


def _rebiased(scale_inv: torch.Tensor) -> torch.Tensor:
    """The tile scales as the kernel takes them: float32 times 2**8 (it decodes e4m3 to
    float16 times 2**-8), contiguous."""
    return (scale_inv.to(torch.float32) * HALF_REBIAS).contiguous()


def plain_rows(weight: torch.Tensor) -> BoundWeight | None:
    """A float32 or bfloat16 weight [out, in] bound to its GEMV (x of the weight's dtype);
    None without the kernel (or, for bfloat16, without AVX512_BF16), or for a weight that is
    not a contiguous 2-D CPU tensor of those dtypes."""
    kinds = {torch.float32: F32, torch.bfloat16: BF16}
    gemv = kernel()
    if gemv is None or weight.dtype not in kinds or weight.dim() != 2 \
            or weight.device.type != "cpu" or not weight.is_contiguous() \
            or (weight.dtype == torch.bfloat16 and not gemv.bf16):
        return None
    return BoundWeight(gemv.rows, {weight.dtype: kinds[weight.dtype]}, int(weight.shape[0]),
                       (weight.data_ptr(), int(weight.shape[1]), 0, 0, 1, 1), (weight,))


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor | None:
    """engine.layers.rms_norm over x's last dim in one compiled pass (float32 math, rounded to
    x's dtype, times the weight); None where the kernel does not take these tensors
    (another dtype or device, a weight of another dtype or size, a large x)."""
    kinds = {torch.float32: F32, torch.bfloat16: BF16}
    gemv = kernel()
    if gemv is None or x.dtype not in kinds or weight.dtype != x.dtype \
            or x.device.type != "cpu" or weight.device.type != "cpu" or x.dim() == 0 \
            or weight.dim() != 1 or weight.shape[0] != x.shape[-1] \
            or x.numel() > NORM_MAX_ELEMENTS:
        return None
    x, weight = x.contiguous(), weight.contiguous()
    # Fresh strides: a view such as h[:, -1:] keeps its parent's stride on a size-1 dim, and
    # oneDNN's bfloat16 GEMV took 60x as long (972 against 16 ms, the 151,936 x 512
    # vocabulary projection) on an input that carried one.
    y = torch.empty(tuple(x.shape), dtype=x.dtype)
    cols = int(x.shape[-1])
    gemv.norm(kinds[x.dtype], x.data_ptr(), weight.data_ptr(), y.data_ptr(),
              x.numel() // max(cols, 1), cols, eps)
    return y


_ATTEND_KINDS = {torch.float32: F32, torch.bfloat16: BF16}


def _attend_shapes(q: torch.Size, k: torch.Size, v: torch.Size, keys: torch.Size,
                   values: torch.Size) -> bool:
    """q [1, 1, H, D], k and v [1, 1, KV, D], keys and values [1, positions, KV, D]."""
    return len(q) == 4 and q[0] == 1 and q[1] == 1 and k == v and len(k) == 4 \
        and k[0] == 1 and k[1] == 1 and k[3] == q[3] and keys == values and len(keys) == 4 \
        and keys[0] == 1 and keys[2:] == k[2:]


def rope_attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cos: torch.Tensor,
                sin: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, position: int,
                scale: float) -> torch.Tensor | None:
    """One sequence's decode-step attention in one compiled call: engine.layers.apply_rotary
    on q [1, 1, heads, dim] and k [1, 1, kv_heads, dim] (each product and sum rounded as torch
    rounds them), k and v written to row `position` of keys / values [1, positions, kv_heads,
    dim], then softmax(q.K * scale).V over positions 0..position in float32, as
    engine.cpu_decode.decode_attention computes it; the output [1, 1, heads, dim]. None where
    the kernel does not take these tensors (another dtype or device, a batch or a length
    above 1, a non-contiguous one, a position outside the cache)."""
    gemv, kind = kernel(), _ATTEND_KINDS.get(q.dtype)
    if gemv is None or kind is None or not _attend_shapes(q.shape, k.shape, v.shape,
                                                          keys.shape, values.shape) \
            or not 0 <= position < keys.shape[1]:
        return None
    for t in (q, k, v, cos, sin, keys, values):
        if t.dtype != q.dtype or not t.is_cpu or not t.is_contiguous():
            return None
    heads, dim = int(q.shape[2]), int(q.shape[3])
    out = torch.empty((1, 1, heads, dim), dtype=q.dtype)
    done = gemv.attend(kind, q.data_ptr(), k.data_ptr(), v.data_ptr(), cos.data_ptr(),
                       sin.data_ptr(), int(cos.shape[-1]), heads, int(k.shape[2]), dim,
                       keys.data_ptr(), values.data_ptr(), position, scale, out.data_ptr())
    return out if done == 0 else None


class _LoadPass(ctypes.Structure):
    """load_pass_t in cpu_kernel.c."""

    _fields_ = [("kind", ctypes.c_int), ("w", ctypes.c_void_p), ("cols", ctypes.c_int64),
                ("scale", ctypes.c_void_p), ("grid_cols", ctypes.c_int64),
                ("bo", ctypes.c_int64), ("bi", ctypes.c_int64), ("y", ctypes.c_void_p),
                ("rows", ctypes.c_int64), ("found", ctypes.c_int64)]


@dataclass(frozen=True)
class LoadPass:
    """One copy or dequantisation of a load, for `run_load_passes`, which fills `out`."""

    kind: int
    source: torch.Tensor  # contiguous CPU bytes, kept alive until the run
    scale: torch.Tensor | None  # rebiased tile scales (a dequantisation)
    block: tuple[int, int]
    out: torch.Tensor

    @property
    def copies(self) -> bool:
        """A byte copy: bound by the page faults of `out`, not by arithmetic."""
        return self.kind == COPY_FP8

    def _struct(self) -> _LoadPass:
        if self.scale is not None:  # rows of FP8 bytes and their tile scales
            rows, cols = int(self.source.shape[0]), int(self.source.shape[1])
            return _LoadPass(self.kind, self.source.data_ptr(), cols, self.scale.data_ptr(),
                             int(self.scale.shape[1]), self.block[0], self.block[1],
                             self.out.data_ptr(), rows, 0)
        rows = int(self.source.shape[0]) if self.source.dim() >= 2 else 1
        nbytes = self.source.numel() * self.source.element_size()
        return _LoadPass(self.kind, self.source.data_ptr(), nbytes // max(rows, 1), 0, 0, 1, 1,
                         self.out.data_ptr(), rows if nbytes else 0, 0)


def dequantize_pass(weight_fp8: torch.Tensor, scale_inv: torch.Tensor, block: tuple[int, int],
                    dtype: torch.dtype) -> LoadPass | None:
    """The pass that dequantises the weight to `dtype` (the values engine.fp8.dequantize_block
    gives); None when there is no kernel, the dtype is not one it writes or the bytes are not
    on the CPU. Raises ModelFormatError for a scale grid that does not fit the weight."""
    kinds = {torch.float32: DEQUANTIZE_F32, torch.bfloat16: DEQUANTIZE_BF16}
    if kernel() is None or dtype not in kinds or weight_fp8.device.type != "cpu":
        return None
    data = checked_bytes(weight_fp8, scale_inv, block).contiguous()
    return LoadPass(kinds[dtype], data, _rebiased(scale_inv), block,
                    torch.empty(tuple(data.shape), dtype=dtype))


def copy_pass(tensor: torch.Tensor) -> LoadPass | None:
    """The pass that copies a CPU tensor byte for byte (its NaN count means something only
    for FP8 bytes); None without the kernel or for a tensor not on the CPU."""
    if kernel() is None or tensor.device.type != "cpu":
        return None
    source = tensor.contiguous()
    return LoadPass(COPY_FP8, source, None, (1, 1),
                    torch.empty(tuple(source.shape), dtype=source.dtype))


def run_load_passes(passes: list[LoadPass], parts: int = 1) -> list[int]:
    """Every pass in one compiled call, each cut across `parts` threads (ctypes releases the
    GIL for the whole run); the NaN codes each pass met."""
    gemv = kernel()
    if not passes:
        return []
    if gemv is None:  # the passes came from the kernel: it was loaded
        raise RuntimeError("run_load_passes without the CPU kernel")
    structs = (_LoadPass * len(passes))(*(p._struct() for p in passes))
    if gemv.load_passes(ctypes.addressof(structs), len(passes), parts, ALIGN_ROWS) != 0:
        raise RuntimeError("cpu_load_passes refused a pass")
    return [int(struct.found) for struct in structs]


def fused(data: torch.Tensor, scale_inv: torch.Tensor,
          block: tuple[int, int]) -> BoundWeight | None:
    """The resident FP8 weight bound to this machine's kernel (x float32 or bfloat16); None
    when there is no kernel or the bytes are not a contiguous CPU tensor."""
    gemv = kernel()
    if gemv is None or data.device.type != "cpu" or not data.is_contiguous() \
            or data.dtype != torch.uint8:
        return None
    scale = _rebiased(scale_inv)
    return BoundWeight(gemv.rows, {torch.float32: FP8_F32, torch.bfloat16: FP8_BF16},
                       int(data.shape[0]),
                       (data.data_ptr(), int(data.shape[1]), scale.data_ptr(),
                        int(scale.shape[1]), block[0], block[1]), (data, scale))


def kernel() -> Kernels | None:
    """The kernel for this machine, compiled on the first call; None when it cannot be had
    (`why_not` says why)."""
    if not _loaded:
        with _lock:
            if not _loaded:
                _loaded.append(_load())
    return _loaded[0]


def _load() -> Kernels | None:
    global why_not
    if os.environ.get(_DISABLE, "1") == "0":
        why_not = f"{_DISABLE}=0"
        return None
    if platform.machine() not in ("x86_64", "AMD64"):
        why_not = f"no AVX-512 kernel for {platform.machine()}"
        return None
    try:
        library = ctypes.CDLL(str(_built()))
    except (OSError, subprocess.SubprocessError) as exc:
        why_not = f"the CPU kernel did not build: {exc}"
        return None
    if not library.cpu_kernel_simd():
        why_not = "this CPU has no AVX-512 (BW, VL) / F16C"
        return None
    why_not = ""
    return Kernels(library)


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ascend-doctor" / "kernels"


def _cpu_flags() -> bytes:
    """What -march=native compiles for: a library built on another CPU is not reused."""
    try:
        with open("/proc/cpuinfo", "rb") as info:
            return next((line for line in info if line.startswith(b"flags")), b"")
    except OSError:
        return platform.processor().encode()


def _built() -> Path:
    """The shared library for this source and these flags, compiled once into the cache."""
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not compiler:
        raise OSError("no C compiler (cc, gcc or $CC) on PATH")
    key = hashlib.sha256(SOURCE.read_bytes() + " ".join((compiler, *FLAGS)).encode()
                         + _cpu_flags()).hexdigest()[:16]
    target = _cache_dir() / f"cpu_kernel-{key}.so"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        built = Path(tmp) / target.name
        done = subprocess.run([compiler, *FLAGS, "-o", str(built), str(SOURCE)],
                              capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
        if done.returncode != 0:
            first = (done.stderr.strip().splitlines() or ["no output"])[0][:200]
            raise OSError(f"{compiler} exited {done.returncode}: {first}")
        os.replace(built, target)  # atomic: a concurrent build loses nothing
    return target
