"""The CPU decode fast path: weight layouts the decode GEMVs read fastest, and one decode step
that uses every core. Only the CPU runner builds these weights and enters `DecodeStep`; the
NPU and CUDA paths never reach this module.

Measured with torch 2.13 (MKL, oneDNN) on 2-core AVX-512 VMs, batch 1 (bench/engine_vs_hf.py
reruns it side by side with transformers):
- where this machine has the compiled kernel (engine.cpu_kernel: AVX-512), every projection
  of one row decodes through it, as stored ([out, in]), its row blocks on every core through
  the kernel's own spinning workers: the vocabulary projection (512 x 151936 float32) read at
  19 GB/s against 9.7-12.8 for torch's best GEMV on the same VM, and a hand-off costs about a
  microsecond where a Python thread's took 50-130 us. Resident FP8 has no torch GEMV at all
  (dequantising per use cost three times the dequantised model's step); the kernel reads the
  bytes once and dequantises in registers, to the same weight values.
- without the kernel, torch's GEMVs: MKL reads a float32 weight stored [in, out] about twice
  as fast as [out, in] (25.3 against 10.8 GB/s for the vocabulary projection), so float32
  projections are stored transposed (`Transposed`); for bfloat16 / float16, oneDNN's GEMV
  reaches 6-15 GB/s and torch's own kernel (fp32 accumulation, taken when oneDNN is off)
  20-24 GB/s, so a decode step switches oneDNN off (prefill GEMMs keep it). MKL's GEMV runs
  on one core, so a large one is cut into column blocks on helper threads (aten releases the
  GIL), with torch's own threads set to 1 for the step. Each block is the GEMV it would be
  alone; MKL picks its kernel by shape, so against one call over every column the sums may
  be ordered differently (float32 rounding).
- whether cutting pays depends on the machine, so `DecodeSteps` measures it on each runner's
  first steps.
- a decode step's attention (RoPE on q and k, the KV cache write, one query over the cache)
  is one kernel call (`rope_attend`) where torch dispatched about forty ops: 30-40 against
  about 170 us a layer at 150 positions (SmolLM2, 2-core Xeon VM), a decode step 1.14x
  (float32) and 1.31x (bfloat16) as fast.
"""

from __future__ import annotations

import functools
import queue
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import torch

from engine import cpu_kernel
from engine.cache import LayerCache
from engine.cpu_kernel import (
    BoundLayer,
    BoundMoe,
    BoundStack,
    BoundWeight,
    LayerShape,
    bound_layer,
    bound_moe,
    fused,
    plain_rows,
    stacked,
)
from engine.fp8 import Fp8Weight

# torch's GEMVs: one smaller than this is not cut, a hand-off to a Python helper thread costs
# 10-130 us (measured: 576x576 float32, 1.3 MB, gains nothing).
SPLIT_MIN_BYTES = 2 << 20
# Resident FP8 on torch's path: dequantising costs several times the GEMV, so smaller weights
# are worth it.
FP8_SPLIT_MIN_BYTES = 256 << 10
# The compiled kernel: its hand-off costs about a microsecond, what 16 KiB take to stream.
KERNEL_SPLIT_MIN_BYTES = 64 << 10
MAX_PARTS = 8  # helper threads + the caller
ALIGN_COLUMNS = 64  # column blocks start on a 64-element boundary


class CpuLinear:
    """A projection weight held in the layout its CPU GEMV reads fastest."""

    def matmul(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def dense(self) -> torch.Tensor:
        """The weight as [out, in] (a view)."""
        raise NotImplementedError


@dataclass(frozen=True)
class Transposed(CpuLinear):
    """A float32 weight stored [in, out] (`kn`): `x @ kn`."""

    kn: torch.Tensor

    @classmethod
    def of(cls, weight: torch.Tensor) -> Transposed:
        return cls(weight.t().contiguous())

    @property
    def nbytes(self) -> int:
        return self.kn.numel() * self.kn.element_size()

    def dense(self) -> torch.Tensor:
        return self.kn.t()

    def matmul(self, x: torch.Tensor) -> torch.Tensor:
        if _splits(x, self.kn):
            return _split_gemv(x, self.kn)
        return x @ self.kn


@dataclass(frozen=True)
class Rows(CpuLinear):
    """A weight kept [out, in] (`nk`): a float32 one or a bfloat16 one (where the CPU has
    AVX512_BF16) decodes through the compiled kernel (`kernel`, engine.cpu_kernel); a
    reduced-precision one without it goes to torch's GEMV, which reads this layout best."""

    nk: torch.Tensor
    kernel: BoundWeight | None = field(default=None, compare=False, repr=False)

    @classmethod
    def of(cls, weight: torch.Tensor) -> Rows:
        return cls(weight, plain_rows(weight))

    @property
    def nbytes(self) -> int:
        return self.nk.numel() * self.nk.element_size()

    def dense(self) -> torch.Tensor:
        return self.nk

    def matmul(self, x: torch.Tensor) -> torch.Tensor:
        # Outside a decode step (a prefill's last-position logits) torch's GEMV runs, on its
        # OpenMP threads: the kernel's workers beside OpenMP threads still spinning from the
        # prefill's GEMMs took 1.7x as long (qwen3-moe float32, 2-core Xeon VM).
        if self.kernel is not None and x.numel() == x.shape[-1] and self.kernel.takes(x) \
                and _in_step():
            return _kernel_gemv(self.kernel, x)
        if _splits(x, self.nk):
            return _split_gemv(x, self.nk.t())
        return torch.nn.functional.linear(x, self.nk)


class ResidentFp8(Fp8Weight, CpuLinear):
    """A resident FP8 weight on the CPU. A decode GEMV goes to the compiled kernel
    (engine.cpu_kernel: the bytes read once, dequantised in registers) when this machine
    has one, its row blocks on all threads at once; otherwise the row blocks are dequantised
    and multiplied on all threads at once (the dequantisation, not the read, is the cost)."""

    _fused: BoundWeight | None = None

    @classmethod
    def of(cls, weight: Fp8Weight) -> ResidentFp8:
        made = cls(weight.data, weight.scale_inv, weight.block, nan_free=weight.nan_free,
                   bf16_scales=weight.bf16_scales)
        if weight.nan_free:  # the kernel, like the shift path, reads 0x7F as a number
            object.__setattr__(made, "_fused", fused(weight.data, weight.scale_inv,
                                                     weight.block))
        return made

    def dense(self) -> torch.Tensor:
        raise TypeError("a resident FP8 weight has no dense form; dequantize(dtype) it")

    def matmul(self, x: torch.Tensor) -> torch.Tensor:
        one_row = x.numel() == x.shape[-1]
        if self._fused is not None and one_row and self._fused.takes(x):
            return _kernel_gemv(self._fused, x)
        rows = int(self.data.shape[0])
        if (_parts() > 1 and one_row and rows >= 2 * self.block[0]
                and self.data.numel() >= FP8_SPLIT_MIN_BYTES):
            row = x.reshape(1, x.shape[-1])
            out = torch.empty((1, rows), dtype=x.dtype, device=x.device)
            _run_parts([(_fp8_rows_into, (row, self, a, b, out[:, a:b]))
                        for a, b in _bounds(rows, _parts(), self.block[0])])
            return out.view(*x.shape[:-1], rows)
        return torch.nn.functional.linear(x, self.dequantize(x.dtype))


@dataclass(frozen=True)
class Stack:
    """Projections of one input decoded as one kernel GEMV (q, k and v; gate and up) where
    each would take the kernel alone: one call and one hand-off to the workers instead of one
    per weight, each part's rows computed exactly as its own GEMV computes them (SmolLM2's
    float32 layers, two-core Xeon VM: 13.9 GB/s as separate calls, 15.9 stacked)."""

    bound: BoundStack
    anytime: bool  # resident FP8: the kernel serves every one-row GEMV, not only a step's

    def split(self, x: torch.Tensor) -> tuple[torch.Tensor, ...] | None:
        """Each projection of x [.., 1, in], or None where the parts' own GEMVs would not all
        take the kernel (then the caller runs them one by one)."""
        if x.numel() != x.shape[-1] or not self.bound.takes(x) \
                or not (self.anytime or _in_step()):
            return None
        return _kernel_gemv(self.bound, x).split(self.bound.splits, dim=-1)


def stack(weights: Sequence[Any]) -> Stack | None:
    """The projections as one Stack: all kernel-bound `Rows` (float32 or bfloat16) or all
    kernel-bound resident FP8, of one width; None otherwise (other devices included)."""
    if all(isinstance(w, Rows) for w in weights):
        bound = stacked([w.kernel for w in weights])
        return Stack(bound, False) if bound is not None else None
    if all(isinstance(w, ResidentFp8) for w in weights):
        bound = stacked([w._fused for w in weights])
        return Stack(bound, True) if bound is not None else None
    return None


def _kernel_gemv(weight: BoundWeight | BoundStack, x: torch.Tensor) -> torch.Tensor:
    """x [.., 1, in] @ W^T through the compiled kernel, its rows cut across the step's threads
    when the weight is large enough to pay for the hand-off."""
    row = x.reshape(-1).contiguous()
    y = torch.empty(weight.rows, dtype=x.dtype)
    weight.into(row, y, _parts() if weight.nbytes >= KERNEL_SPLIT_MIN_BYTES else 1)
    return y.view(*x.shape[:-1], weight.rows)


def _fp8_rows_into(row: torch.Tensor, weight: Fp8Weight, start: int, end: int,
                   out: torch.Tensor) -> None:
    torch.mm(row, weight.rows(start, end).dequantize(row.dtype).t(), out=out)


def prefer_layout(weight: Any, device: torch.device, dtype: torch.dtype) -> Any:
    """The CPU layout of a projection weight (plain floating or resident FP8); anything
    else, and every weight on other devices, unchanged."""
    if device.type != "cpu":
        return weight
    if isinstance(weight, Fp8Weight):
        return ResidentFp8.of(weight)
    if not isinstance(weight, torch.Tensor) or weight.dim() != 2:
        return weight
    if dtype == torch.float32:
        rows = Rows.of(weight)
        return rows if rows.kernel is not None else Transposed.of(weight)
    if dtype in (torch.bfloat16, torch.float16):
        return Rows.of(weight)
    return weight


# --- attention of one query ---------------------------------------------------------------

AttendFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, float], torch.Tensor]


def decode_attention(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
                     scale: float) -> torch.Tensor:
    """One query per sequence: q [B, 1, H, D], keys / values [B, T, KV heads, D] -> [B, 1, H,
    D] in q's dtype, scores, softmax and sum in float32. For bfloat16 on the CPU this is 4-7x
    faster than scaled_dot_product_attention's kernel (measured 33 against 144 us at 200
    positions, 108 against 753 at 1000, 9 heads / 3 KV heads x 64) and as accurate."""
    batch, _, heads, dim = q.shape
    kv_heads = keys.shape[2]
    grouped = q.reshape(batch, kv_heads, heads // kv_heads, dim).float()
    scores = torch.matmul(grouped, keys.float().permute(0, 2, 3, 1)) * scale
    out = torch.matmul(torch.softmax(scores, dim=-1), values.float().transpose(1, 2))
    return out.reshape(batch, 1, heads, dim).to(q.dtype)


def decode_attention_for(device: torch.device, dtype: torch.dtype) -> AttendFn | None:
    """The one-query attention for this device and dtype; None keeps the standard one (in
    float32 the CPU's SDPA kernel is as fast)."""
    if device.type == "cpu" and dtype in (torch.bfloat16, torch.float16):
        return decode_attention
    return None


RopeAttendFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor,
                         LayerCache, int, float], torch.Tensor | None]


def rope_attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cos: torch.Tensor,
                sin: torch.Tensor, cache: LayerCache, start: int,
                scale: float) -> torch.Tensor | None:
    """A decode step's RoPE, KV cache write and one-query attention in one compiled call
    (engine.cpu_kernel.rope_attend) instead of about forty torch ops: q [1, 1, H, D], k and v
    [1, 1, KV, D] before RoPE; the output [1, 1, H, D]. None where it does not apply (an int8
    cache, a batch, other dtypes): the caller keeps the standard path."""
    if type(cache) is not LayerCache:
        return None
    return cpu_kernel.rope_attend(q, k, v, cos, sin, cache.keys, cache.values, start, scale)


def rope_attend_for(device: torch.device) -> RopeAttendFn | None:
    """The compiled decode attention on a CPU that has the kernel; None elsewhere."""
    if device.type == "cpu" and cpu_kernel.kernel() is not None:
        return rope_attend
    return None


class KernelLayer:
    """A decoder layer's decode step for one token in compiled calls (engine.cpu_kernel
    BoundLayer, BoundMoe): the attention half, and the feed-forward half (a dense MLP, or a
    mixture of experts without a shared expert), one call each where Python dispatched about
    a hundred and fifty ops and function calls a layer (SmolLM2 on a 2-core Xeon VM: the step
    outside its GEMVs went from 11 to about 3 ms). Each op is computed as the torch path
    computes it, only float32 sums and exp in another order. It runs inside a decode step,
    for one sequence on a plain KV cache; elsewhere `attention` and `mlp` return False and
    the caller keeps the torch path."""

    def __init__(self, bound: BoundLayer, moe: BoundMoe | None = None) -> None:
        self.bound = bound
        self.moe = moe

    @property
    def whole(self) -> bool:
        """Both halves run in the kernel (a dense MLP or a mixture of experts bound)."""
        return self.moe is not None or self.bound.shape.intermediate > 0

    def _takes(self, h: torch.Tensor) -> bool:
        return _in_step() and h.dtype == self.bound.dtype and h.is_cpu \
            and h.numel() == self.bound.shape.hidden and h.is_contiguous()

    def attention(self, h: torch.Tensor, cache: Any, start: int, cos: torch.Tensor,
                  sin: torch.Tensor) -> bool:
        """h [1, 1, hidden] plus the attention half's output, in place; True if it ran."""
        return self._takes(h) and type(cache) is LayerCache and self.bound.attention(
            h, cos, sin, cache.keys, cache.values, start, _parts(), KERNEL_SPLIT_MIN_BYTES)

    def mlp(self, h: torch.Tensor) -> bool:
        """h plus the feed-forward half's output, in place; True if it ran."""
        if not self._takes(h):
            return False
        if self.moe is not None:
            return self.moe.run(h, _parts(), KERNEL_SPLIT_MIN_BYTES)
        return self.bound.mlp(h, _parts(), KERNEL_SPLIT_MIN_BYTES)


def kernel_layer(attn: Any, mlp: Any, moe: Any, norms: tuple[torch.Tensor, torch.Tensor],
                 eps: float, rotary_dim: int, dtype: torch.dtype) -> KernelLayer | None:
    """The layer's decode step bound to the kernel: `attn` an engine.layers.Attention, `mlp`
    its dense MlpWeights or None, `moe` its engine.moe.SparseMoe or None (one with a shared
    expert keeps Python for that half); None where the kernel cannot run the attention half
    (biases, an output gate, projections the kernel does not hold, shapes it does not
    take)."""
    w = attn.w
    o = _bound(w.o)
    if attn.output_gate or w.qkv is None or o is None \
            or any(b is not None for b in (w.q_bias, w.k_bias, w.v_bias, w.o_bias)):
        return None
    pair, intermediate = None, 0
    if mlp is not None:
        down = _bound(mlp.down)
        if mlp.gate_up is None or down is None:
            return None
        pair, intermediate = (mlp.gate_up.bound, down), mlp.gate_up.bound.splits[0]
    qk = (w.q_norm, w.k_norm) if w.q_norm is not None and w.k_norm is not None else None
    shape = LayerShape(hidden=int(norms[0].numel()), heads=attn.num_heads,
                       kv_heads=attn.num_kv_heads, head_dim=attn.head_dim,
                       rotary_dim=rotary_dim, intermediate=intermediate, eps=eps)
    bound = bound_layer(shape, dtype, norms, qk, w.qkv.bound, o, pair)
    if bound is None:
        return None
    return KernelLayer(bound, _kernel_moe(moe, norms[1], eps, dtype) if moe is not None
                       else None)


def _kernel_moe(moe: Any, norm: torch.Tensor, eps: float, dtype: torch.dtype) -> BoundMoe | None:
    router = _bound(moe.w.router)
    experts = [(e.gate_up.bound if e.gate_up is not None else None, _bound(e.down))
               for e in moe.w.experts]
    if moe.w.shared is not None or router is None \
            or any(gate_up is None or down is None for gate_up, down in experts):
        return None
    return bound_moe(dtype, norm, eps, router, experts, moe.top_k,  # type: ignore[arg-type]
                     moe.router_style, moe.norm_topk_prob)


def _bound(weight: Any) -> BoundWeight | None:
    if isinstance(weight, Rows):
        return weight.kernel
    if isinstance(weight, ResidentFp8):
        return weight._fused
    return None


# --- one decode step -----------------------------------------------------------------------

_step = threading.local()  # .parts: how many threads this thread's decode step uses


def _parts() -> int:
    return int(getattr(_step, "parts", 1))


def _in_step() -> bool:
    return hasattr(_step, "parts")


class DecodeStep:
    """Enter around one decode step on the CPU: with `max_parts` > 1, torch's threads drop to
    1 while large GEMVs are cut across that many threads (at most the thread count); oneDNN is
    off for reduced-precision GEMVs. Everything is restored on exit (prefill keeps oneDNN and
    torch's threads). `done(seconds)` is called with the step's wall time when it ends."""

    def __init__(self, dtype: torch.dtype, max_parts: int = MAX_PARTS,
                 done: Callable[[float], None] | None = None) -> None:
        self.reduced = dtype in (torch.bfloat16, torch.float16)
        self.max_parts = max_parts
        self._done = done
        self._saved: tuple[int, bool, int | None] = (1, True, None)
        self._began = 0.0

    def __enter__(self) -> DecodeStep:
        threads = torch.get_num_threads()
        self._saved = (threads, bool(torch.backends.mkldnn.enabled),
                       getattr(_step, "parts", None))
        parts = min(threads, self.max_parts, MAX_PARTS)
        if parts > 1:  # torch's GEMVs start their helper threads on first use
            torch.set_num_threads(1)
        _step.parts = parts
        if self.reduced:
            torch.backends.mkldnn.enabled = False  # type: ignore[assignment]
        self._began = time.perf_counter()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 trace: TracebackType | None) -> None:
        elapsed_s = time.perf_counter() - self._began
        threads, mkldnn, parts = self._saved
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
        torch.backends.mkldnn.enabled = mkldnn  # type: ignore[assignment]
        if parts is None:
            del _step.parts
        else:
            _step.parts = parts
        if self._done is not None and kind is None:
            self._done(elapsed_s)


class DecodeSteps:
    """A CPU runner's decode steps. Whether cutting GEMVs across threads pays is measured on
    this machine, not assumed: it depends on how fast a thread hand-off is and on whether the
    GEMVs scale with cores (with Python helper threads: 1.4-2x faster on a 2-core AMD VM,
    twice as slow on a 2-core Intel VM whose hand-off took 50-130 us). The first steps
    alternate between one thread and every core, TRIAL_STEPS each after one warm-up step;
    every core is kept when the median of the paired steps' time ratios says it is faster,
    and it is measured again every RECHECK_STEPS steps (machines drift)."""

    TRIAL_STEPS = 4
    RECHECK_STEPS = 512

    def __init__(self, dtype: torch.dtype) -> None:
        self.dtype = dtype
        self.chosen = 0  # parts in use once measured; 0 while measuring
        self._times: dict[int, list[float]] = {}
        self._since_choice = 0

    def __call__(self) -> DecodeStep:
        every = min(torch.get_num_threads(), MAX_PARTS)
        if every <= 1:
            return DecodeStep(self.dtype, 1)
        if self.chosen:
            self._since_choice += 1
            if self._since_choice < self.RECHECK_STEPS:
                return DecodeStep(self.dtype, self.chosen)
            self.chosen, self._times = 0, {}
        candidates = (1, every)
        counts = [len(self._times.get(c, ())) for c in candidates]
        parts = candidates[counts.index(min(counts))]
        return DecodeStep(self.dtype, parts, functools.partial(self._record, parts, candidates))

    def _record(self, parts: int, candidates: tuple[int, int], elapsed_s: float) -> None:
        self._times.setdefault(parts, []).append(elapsed_s)
        if all(len(self._times.get(c, ())) > self.TRIAL_STEPS for c in candidates):
            # The first step of each is a warm-up (helper threads start, caches fill). Steps
            # i of the two alternate, so a burst of load elsewhere slows both of a pair: the
            # median of the pairs' ratios reads through it where each side's own median did
            # not (on a VM losing half its CPU to the hypervisor it kept one thread though
            # every core won three pairs of four).
            one, every = (self._times[c][1:] for c in candidates)
            ratio = statistics.median(b / a for a, b in zip(one, every, strict=False))
            self.chosen = candidates[1] if ratio < 1.0 else candidates[0]
            self._since_choice = 0


def _splits(x: torch.Tensor, weight: torch.Tensor) -> bool:
    return (_parts() > 1 and x.numel() == x.shape[-1]
            and weight.numel() * weight.element_size() >= SPLIT_MIN_BYTES)


def _bounds(size: int, parts: int, align: int) -> list[tuple[int, int]]:
    """`parts` near-equal ranges of 0..size starting on multiples of `align`."""
    step = -(-size // parts)
    step = -(-step // align) * align
    return [(a, min(a + step, size)) for a in range(0, size, step)]


def _split_gemv(x: torch.Tensor, kn: torch.Tensor) -> torch.Tensor:
    """x [.., 1, in] @ kn [in, out] (any strides) with the column blocks on helper threads."""
    row = x.reshape(1, x.shape[-1])
    out = torch.empty((1, kn.shape[1]), dtype=torch.result_type(row, kn), device=row.device)
    blocks = _bounds(kn.shape[1], _parts(), ALIGN_COLUMNS)
    _run_parts([(_mm_into, (row, kn[:, a:b], out[:, a:b])) for a, b in blocks])
    return out.view(*x.shape[:-1], kn.shape[1])


def _mm_into(row: torch.Tensor, kn: torch.Tensor, out: torch.Tensor) -> None:
    torch.mm(row, kn, out=out)


def _run_parts(parts: list[tuple[Callable[..., None], tuple[Any, ...]]]) -> None:
    """The first part here, the others on helper threads at the same time."""
    replies = [helper.submit(fn, args) for helper, (fn, args)
               in zip(_helpers(len(parts) - 1), parts[1:], strict=False)]
    fn, args = parts[0]
    try:
        fn(*args)
    finally:
        errors = [reply.get() for reply in replies]
    for error in errors:
        if error is not None:
            raise error


# --- helper threads ------------------------------------------------------------------------

class _Helper:
    """A daemon thread running parts of decode steps (of any engine) under inference mode."""

    def __init__(self, index: int) -> None:
        self._tasks: queue.SimpleQueue[tuple[Callable[..., None], tuple[Any, ...],
                                             queue.SimpleQueue[BaseException | None]]]
        self._tasks = queue.SimpleQueue()
        ready = threading.Event()
        self._thread = threading.Thread(target=self._loop, args=(ready,),
                                        name=f"engine-decode-{index}", daemon=True)
        self._thread.start()
        ready.wait()  # its thread count is set before the caller sets or restores its own

    def _loop(self, ready: threading.Event) -> None:
        torch.set_num_threads(1)
        ready.set()
        with torch.inference_mode():
            while True:
                fn, args, reply = self._tasks.get()
                try:
                    fn(*args)
                    reply.put(None)
                except BaseException as exc:  # handed back to the caller, which raises it
                    reply.put(exc)

    def submit(self, fn: Callable[..., None],
               args: tuple[Any, ...]) -> queue.SimpleQueue[BaseException | None]:
        reply: queue.SimpleQueue[BaseException | None] = queue.SimpleQueue()
        self._tasks.put((fn, args, reply))
        return reply


_HELPERS: list[_Helper] = []
_HELPERS_LOCK = threading.Lock()


def _helpers(count: int) -> list[_Helper]:
    """At least `count` started helper threads (started once per process, on first use)."""
    if len(_HELPERS) < count:
        with _HELPERS_LOCK:
            while len(_HELPERS) < count:
                _HELPERS.append(_Helper(len(_HELPERS)))
    return _HELPERS
