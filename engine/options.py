"""The engine's choices every command line offers (torch-free: CLIs import it at start-up)."""

from __future__ import annotations

from probes.model.formats import FP8_MODES

__all__ = ["DEVICES", "DTYPES", "FP8_MODES", "KV_CACHE_MODES", "TRACE_DEVICES"]

DEVICES: tuple[str, ...] = ("auto", "npu", "cuda", "cpu")  # auto: npu, then cuda, then cpu
TRACE_DEVICES: tuple[str, ...] = ("npu", "cpu", "cuda")  # devices whose kernels can be asked about
DTYPES: tuple[str, ...] = ("bfloat16", "float16", "float32")
KV_CACHE_MODES: tuple[str, ...] = ("auto", "int8")
