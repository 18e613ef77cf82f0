"""Where one decode step of our engine spends its time, for bench/engine_vs_hf.py --profile.

cProfile over a few decode steps on one thread (torch threads = 1, so no GEMV is cut and
every op runs on the profiled thread); the engine functions below never call each other
(except FP8 dequantisation, inside a projection), so their inclusive times add up; the rest
is the residual adds, the embedding, the MoE expert loop and Python. cProfile slows Python
down, so the shares are of the profiled time and the wall time is measured separately.
"""

from __future__ import annotations

import cProfile
import pstats
import time
from typing import Any

import torch

PARTS: tuple[tuple[str, str, str], ...] = (
    # (label, file suffix, function name)
    ("projections (GEMV, incl. lm_head)", "engine/layers.py", "linear"),
    ("  of which FP8 dequantisation", "engine/fp8.py", "dequantize"),
    ("attention kernel (one query)", "engine/cpu_decode.py", "decode_attention"),
    ("attention kernel (SDPA)", "~", "<built-in method torch._C._nn.scaled_dot_product_attention>"),
    ("KV cache write", "engine/cache.py", "write"),
    ("KV cache read", "engine/cache.py", "read"),
    ("RMSNorm", "engine/layers.py", "rms_norm"),
    ("RMSNorm (zero-centred)", "engine/layers.py", "offset_rms_norm"),
    ("rotary", "engine/layers.py", "apply_rotary"),
    ("MoE routing", "engine/moe.py", "route"),
    ("DeltaNet conv", "engine/deltanet.py", "causal_conv"),
    ("DeltaNet recurrent rule", "engine/deltanet.py", "recurrent_delta_rule"),
    ("DeltaNet gated norm", "engine/deltanet.py", "gated_rms_norm"),
)


def _decode_steps(runner: Any, steps: int) -> None:
    for i in range(steps):
        runner.decode(1000 + i)


def profile_decode(engine: Any, prompt: list[int], steps: int = 16) -> dict[str, Any]:
    """{"wall_ms": per step without the profiler, "parts": [(label, ms, share)]}."""
    runner = engine.runner
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        runner.prefill(prompt)
        _decode_steps(runner, 4)
        start = time.perf_counter()
        _decode_steps(runner, steps)
        wall_ms = (time.perf_counter() - start) * 1e3 / steps
        profiler = cProfile.Profile()
        profiler.enable()
        _decode_steps(runner, steps)
        profiler.disable()
    finally:
        torch.set_num_threads(threads)
    return {"wall_ms": wall_ms, "parts": _parts(pstats.Stats(profiler), steps)}


def _parts(stats: pstats.Stats, steps: int) -> list[tuple[str, float, float]]:
    table: dict[tuple[str, int, str], tuple[Any, ...]] = stats.stats  # type: ignore[attr-defined]
    total = max(stats.total_tt, 1e-9)  # type: ignore[attr-defined]
    rows, counted = [], 0.0
    for label, suffix, name in PARTS:
        seconds = sum(value[3] for (path, _, function), value in table.items()
                      if function == name and path.endswith(suffix))
        if seconds:
            rows.append((label, seconds * 1e3 / steps, seconds / total))
            counted += 0 if label.startswith("  ") else seconds
    rest = total - counted
    rows.append(("the rest (adds, embedding, expert loop, Python)", rest * 1e3 / steps,
                 rest / total))
    return rows


def print_profile(name: str, dtype: str, found: dict[str, Any]) -> None:
    print(f"\n{name} {dtype}: one decode step on one thread, {found['wall_ms']:.1f} ms "
          "without the profiler")
    print("| part | ms (profiled) | share |")
    print("|---|---|---|")
    for label, ms, share in found["parts"]:
        print(f"| {label} | {ms:.2f} | {share:.0%} |")
