"""Timing for bench/engine_vs_hf.py: one greedy run of the engine or of transformers' generate,
interleaved repeats, the machine's streaming-read bandwidth, the bytes a decode step reads,
and what else burned the CPU meanwhile.

Both sides are timed the same way, from outside: the wall time from the call to the first
new token is the prefill (prompt forward + first argmax); decode tokens/s is the later
tokens over the time from the first token to the last.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch


@dataclass(frozen=True)
class Run:
    prefill_ms: float
    decode_tps: float
    tokens: list[int]


def _run_from(start: float, stamps: list[float], tokens: list[int]) -> Run:
    decode_s = stamps[-1] - stamps[0]
    return Run((stamps[0] - start) * 1e3, (len(stamps) - 1) / decode_s if decode_s else 0.0,
               tokens)


def engine_run(engine: Any, ids: list[int], new_tokens: int) -> Run:
    from engine import GenerationConfig

    stamps: list[float] = []
    tokens: list[int] = []
    start = time.perf_counter()
    for event in engine.generate(ids, GenerationConfig(max_new_tokens=new_tokens)):
        stamps.append(time.perf_counter())
        tokens.append(event.token_id)
    return _run_from(start, stamps, tokens)


class _Stamps:
    """A generate() streamer that only notes when each new token arrives."""

    def __init__(self) -> None:
        self.stamps: list[float] = []
        self.tokens: list[int] = []
        self._prompt_seen = False

    def put(self, value: torch.Tensor) -> None:
        if not self._prompt_seen:  # generate() first puts the prompt
            self._prompt_seen = True
            return
        self.stamps.append(time.perf_counter())
        self.tokens.extend(int(t) for t in value.reshape(-1).tolist())

    def end(self) -> None:
        pass


def hf_run(model: Any, ids: list[int], new_tokens: int) -> Run:
    """transformers' generate(do_sample=False): default dynamic cache, no compile; eos off
    (as on our side) so both always decode `new_tokens`."""
    import copy

    config = copy.deepcopy(model.generation_config)
    config.eos_token_id = None
    config.pad_token_id = 0
    prompt = torch.tensor([ids])
    streamer = _Stamps()
    start = time.perf_counter()
    with torch.inference_mode():
        model.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=False,
                       max_new_tokens=new_tokens, generation_config=config, streamer=streamer)
    return _run_from(start, streamer.stamps, streamer.tokens)


@dataclass
class Side:
    warmup: Run
    runs: list[Run] = field(default_factory=list)

    @property
    def decode_tps(self) -> float:
        return statistics.median(r.decode_tps for r in self.runs)

    @property
    def prefill_ms(self) -> float:
        return statistics.median(r.prefill_ms for r in self.runs)


def interleave(sides: dict[str, Callable[[], Run]], runs: int) -> dict[str, Side]:
    """One warm-up each, then A B, B A, ... so drift on the shared machine hits both."""
    result = {name: Side(call()) for name, call in sides.items()}
    names = list(sides)
    for i in range(runs):
        for name in names if i % 2 == 0 else reversed(names):
            result[name].runs.append(sides[name]())
    return result


# --- the machine ---------------------------------------------------------------------------


def read_bandwidth_gbps(mib: int = 512, repeats: int = 5) -> float:
    """Best streaming read of `mib` MiB of float32, with torch's threads (a sum) and with
    two Python threads summing a half each on one torch thread (how decode reads)."""
    data = torch.ones(mib * 2**20 // 4)
    data.sum()
    best = 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        data.sum()
        best = max(best, data.numel() * 4 / (time.perf_counter() - start))
        best = max(best, _two_thread_read(data))
    return best / 1e9


def last_level_cache_bytes() -> int | None:
    """The largest CPU cache this machine reports (sysfs), or None where it says nothing. A
    decode step that reads less than this can run from the cache, above the read bound."""
    sizes = []
    for path in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        text = path.read_text().strip().upper()
        scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            sizes.append(int(digits) * scale)
    return max(sizes, default=None)


def _two_thread_read(data: torch.Tensor) -> float:
    halves = data.chunk(2)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        worker = threading.Thread(target=halves[1].sum)
        start = time.perf_counter()
        worker.start()
        halves[0].sum()
        worker.join()
        return data.numel() * 4 / (time.perf_counter() - start)
    finally:
        torch.set_num_threads(threads)


class CpuMeter:
    """CPU time the rest of the machine used while a block ran (cores busy, from /proc/stat
    minus this process), so a reader can see how noisy a number is."""

    def __enter__(self) -> CpuMeter:
        self._start = (_busy_jiffies(), _own_jiffies(), time.perf_counter())
        return self

    def __exit__(self, *exc: object) -> None:
        busy, own, wall = _busy_jiffies(), _own_jiffies(), time.perf_counter()
        ticks = os.sysconf("SC_CLK_TCK")
        other = (busy - self._start[0]) - (own - self._start[1])
        self.other_cores = max(0.0, other / ticks / max(wall - self._start[2], 1e-9))


def _busy_jiffies() -> int:
    try:
        with open("/proc/stat") as stat:
            fields = [int(v) for v in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return 0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields[:8]) - idle


def _own_jiffies() -> int:
    times = os.times()
    return int((times.user + times.system) * os.sysconf("SC_CLK_TCK"))


def load_average() -> str:
    try:
        return " ".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:
        return "unknown"


# --- bytes one decode step reads -----------------------------------------------------------


def nbytes(weight: Any) -> int:
    if weight is None:
        return 0
    if isinstance(weight, torch.Tensor):
        return weight.numel() * weight.element_size()
    return int(weight.nbytes)


def active_bytes_per_token(runner: Any, context: int) -> int:
    """Weights a decode step reads (the router's top-k experts only) plus the KV of `context`
    positions and the linear-attention state read and written back."""
    model = runner.model
    total = nbytes(model.lm_head) + nbytes(model.final_norm)
    total += model.embed.shape[-1] * model.embed.element_size()
    for block, cache in zip(model.blocks, runner.cache.layers, strict=True):
        total += nbytes(block.attn_norm) + nbytes(block.mlp_norm)
        total += _mixer_bytes(block, cache, context) + _ffn_bytes(block)
    return total


def _mixer_bytes(block: Any, cache: Any, context: int) -> int:
    if block.attn is not None:
        w = block.attn.w
        kv = sum(t[:, :context].numel() * t.element_size() for t in cache.tensors())
        return kv + sum(nbytes(getattr(w, n)) for n in (
            "q", "k", "v", "o", "q_bias", "k_bias", "v_bias", "o_bias", "q_norm", "k_norm"))
    net = block.linear
    projections = sum(nbytes(v) for name, v in vars(net.project).items()
                      if name != "stack")  # the stack reads the same weights, counted once
    weights = sum(nbytes(v) for v in vars(net.w).values())
    return projections + weights + 2 * sum(nbytes(t) for t in cache.tensors())


def _mlp_bytes(mlp: Any) -> int:
    return nbytes(mlp.gate) + nbytes(mlp.up) + nbytes(mlp.down)


def _ffn_bytes(block: Any) -> int:
    if block.mlp is not None:
        return _mlp_bytes(block.mlp)
    moe = block.moe
    total = nbytes(moe.w.router) + moe.top_k * _mlp_bytes(moe.w.experts[0])
    if moe.w.shared is not None:
        total += _mlp_bytes(moe.w.shared.mlp) + nbytes(moe.w.shared.gate)
    return total
