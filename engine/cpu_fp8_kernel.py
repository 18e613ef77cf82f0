"""The CPU's compiled decode GEMVs (cpu_fp8_gemv.c: resident FP8, and bfloat16 where the CPU
has AVX512_BF16), compiled for this machine on first use.

torch has no CPU kernel that multiplies by an FP8 weight: the torch path dequantises each
weight to a buffer (four passes over it) and then reads the buffer again, which made resident
FP8 decode three times slower than dequantised weights. This kernel reads the bytes once and
dequantises in registers, to exactly the weight values the torch path produces (float32
product of the e4m3 value and its tile scale, rounded to bfloat16 when the engine runs in
bfloat16); only the order of the float32 sums differs from torch's GEMV.

It is compiled with the system C compiler (`cc`, or $CC) and `-march=native`, once per source
and machine, into the user's cache directory. Without a compiler, without AVX-512 or when
ASCEND_DOCTOR_FP8_KERNEL=0, `kernel()` is None and the engine keeps the torch path. Only the
CPU decode path (engine.cpu_decode) calls it; the NPU path never does.
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
from pathlib import Path
from typing import Any

import torch

from engine.fp8 import HALF_REBIAS, checked_bytes, has_nan_codes

SOURCE = Path(__file__).with_name("cpu_fp8_gemv.c")
FLAGS = ("-O3", "-march=native", "-shared", "-fPIC")
COMPILE_TIMEOUT_S = 60.0
_DISABLE = "ASCEND_DOCTOR_FP8_KERNEL"

_lock = threading.Lock()
_loaded: list[Fp8Gemv | None] = []  # [] until first asked; then the kernel or None
why_not = ""  # why kernel() is None, for the engine's stats


class Fp8Gemv:
    """The compiled kernel (one per process): one entry point per activation dtype."""

    def __init__(self, library: ctypes.CDLL) -> None:
        i64, ptr = ctypes.c_int64, ctypes.c_void_p
        self.by_dtype = {torch.float32: library.fp8_gemv_f32,
                         torch.bfloat16: library.fp8_gemv_bf16}
        self.dequantizers = {torch.float32: library.fp8_dequantize_f32,
                             torch.bfloat16: library.fp8_dequantize_bf16}
        for fn in self.by_dtype.values():  # weight, its scales and blocks, x, y, rows
            fn.argtypes = (ptr, i64, ptr, i64, i64, i64, ptr, ptr, i64, i64)
            fn.restype = None
        for fn in self.dequantizers.values():  # weight, its scales and blocks, out, rows
            fn.argtypes = (ptr, i64, ptr, i64, i64, i64, ptr, i64, i64)
            fn.restype = None
        # bfloat16 weights: only where the CPU has AVX512_BF16 (VDPBF16PS)
        self.bf16_gemv = library.bf16_gemv if library.bf16_gemv_simd() else None
        if self.bf16_gemv is not None:
            self.bf16_gemv.argtypes = (ptr, i64, ptr, ptr, i64, i64)  # w, cols, x, y, rows
            self.bf16_gemv.restype = None


class BoundWeight:
    """One weight bound to a compiled GEMV: y[r0:r1] = (W @ x)[r0:r1], float32 sums, y in x's
    dtype. A resident FP8 weight is dequantised exactly as engine.fp8 dequantises it to x's
    dtype (bfloat16 or float32); a bfloat16 one is multiplied as it is (VDPBF16PS: each product
    exact). ctypes releases the GIL during the call, so helper threads run row ranges of one
    weight at once."""

    __slots__ = ("_args", "_by_dtype", "_keep", "rows")

    def __init__(self, by_dtype: dict[torch.dtype, Any], rows: int, args: tuple[int, ...],
                 keep: tuple[torch.Tensor, ...]) -> None:
        self._by_dtype = by_dtype
        self.rows = rows
        self._args = args  # the weight's addresses and sizes, before x, y and the rows
        self._keep = keep  # kept alive: the kernel holds their addresses

    def into(self, x: torch.Tensor, y: torch.Tensor, r0: int, r1: int) -> None:
        """x [cols] and y [rows]: contiguous, of one dtype the kernel takes."""
        self._by_dtype[x.dtype](*self._args, x.data_ptr(), y.data_ptr(), r0, r1)


FUSED_DTYPES = (torch.bfloat16, torch.float32)


def _rebiased(scale_inv: torch.Tensor) -> torch.Tensor:
    """The tile scales as the kernel takes them: float32 times 2**8 (it decodes e4m3 to
    float16 times 2**-8), contiguous."""
    return (scale_inv.to(torch.float32) * HALF_REBIAS).contiguous()


def bf16_rows(weight: torch.Tensor) -> BoundWeight | None:
    """The weight bound to the bfloat16 GEMV; None without the kernel or AVX512_BF16, or for a
    weight that is not a contiguous 2-D bfloat16 CPU tensor."""
    gemv = kernel()
    if gemv is None or gemv.bf16_gemv is None or weight.dtype != torch.bfloat16 \
            or weight.dim() != 2 or weight.device.type != "cpu" or not weight.is_contiguous():
        return None
    return BoundWeight({torch.bfloat16: gemv.bf16_gemv}, int(weight.shape[0]),
                       (weight.data_ptr(), int(weight.shape[1])), (weight,))


def dequantized(weight_fp8: torch.Tensor, scale_inv: torch.Tensor, block: tuple[int, int],
                dtype: torch.dtype) -> torch.Tensor | None:
    """The weight dequantised in one pass, the same values as engine.fp8.dequantize_block; None
    when there is no kernel, the dtype is not one it writes, the bytes are not on the CPU or
    hold NaN codes (the torch path keeps them NaN). Raises ModelFormatError for a scale grid
    that does not fit the weight."""
    gemv = kernel()
    if gemv is None or dtype not in gemv.dequantizers or weight_fp8.device.type != "cpu":
        return None
    data = checked_bytes(weight_fp8, scale_inv, block).contiguous()
    if has_nan_codes(data):
        return None
    scale = _rebiased(scale_inv)
    out = torch.empty(tuple(data.shape), dtype=dtype)
    gemv.dequantizers[dtype](data.data_ptr(), int(data.shape[1]), scale.data_ptr(),
                             int(scale.shape[1]), block[0], block[1], out.data_ptr(), 0,
                             int(data.shape[0]))
    return out


def fused(data: torch.Tensor, scale_inv: torch.Tensor,
          block: tuple[int, int]) -> BoundWeight | None:
    """The resident FP8 weight bound to this machine's kernel; None when there is no kernel or
    the bytes are not a contiguous CPU tensor."""
    gemv = kernel()
    if gemv is None or data.device.type != "cpu" or not data.is_contiguous() \
            or data.dtype != torch.uint8:
        return None
    scale = _rebiased(scale_inv)
    return BoundWeight(gemv.by_dtype, int(data.shape[0]),
                       (data.data_ptr(), int(data.shape[1]), scale.data_ptr(),
                        int(scale.shape[1]), block[0], block[1]), (data, scale))


def kernel() -> Fp8Gemv | None:
    """The kernel for this machine, compiled on the first call; None when it cannot be had
    (`why_not` says why)."""
    if not _loaded:
        with _lock:
            if not _loaded:
                _loaded.append(_load())
    return _loaded[0]


def _load() -> Fp8Gemv | None:
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
        why_not = f"the FP8 kernel did not build: {exc}"
        return None
    if not library.fp8_gemv_simd():
        why_not = "this CPU has no AVX-512 (BW) / F16C"
        return None
    why_not = ""
    return Fp8Gemv(library)


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
    target = _cache_dir() / f"cpu_fp8_gemv-{key}.so"
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
