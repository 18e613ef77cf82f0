"""Where one decode step of our engine spends its time, for bench/engine_vs_hf.py --profile.

cProfile over a few decode steps on one thread (torch threads = 1, so no GEMV is cut and
every op runs on the profiled thread); the engine functions below never call each other
(except FP8 dequantisation, inside a projection), so their inclusive times add up; the rest
is the residual adds, the embedding, the MoE expert loop and Python. cProfile slows Python
down, so the shares are of the profiled time and the wall time is measured separately.

`kernel_share` looks at the real step instead (every core, no profiler): the step's wall time
against the same compiled-kernel GEMV calls replayed back to back, their difference being all
the rest (norms, rotary, attention, adds, the Python between them). A layer the kernel runs
whole (engine.cpu_decode.KernelLayer) hides its GEMVs from cProfile: its parts are listed with
their GEMVs, and the replay records them from a step with those layers on the torch path.
"""

from __future__ import annotations

import cProfile
import pstats
import statistics
import time
from typing import Any

import torch

PARTS: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    # (label, ((file suffix, function name), ...))
    ("projections (GEMV, incl. lm_head)", (("engine/layers.py", "linear"),
                                           ("engine/cpu_decode.py", "split"))),  # Stack.split
    ("  of which FP8 dequantisation", (("engine/fp8.py", "dequantize"),)),
    ("attention kernel (one query)", (("engine/cpu_decode.py", "decode_attention"),)),
    ("RoPE + KV write + attention (compiled)", (("engine/cpu_decode.py", "rope_attend"),)),
    ("kernel layers: attention half (incl. its GEMVs)", (("engine/cpu_decode.py", "attention"),)),
    ("kernel layers: MLP half (incl. its GEMVs)", (("engine/cpu_decode.py", "mlp"),)),
    ("attention kernel (SDPA)",
     (("~", "<built-in method torch._C._nn.scaled_dot_product_attention>"),)),
    ("KV cache write", (("engine/cache.py", "write"),)),
    ("KV cache read", (("engine/cache.py", "read"),)),
    ("RMSNorm", (("engine/layers.py", "rms_norm"), ("engine/cpu_kernel.py", "rms_norm"))),
    ("RMSNorm (zero-centred)", (("engine/layers.py", "offset_rms_norm"),)),
    ("rotary", (("engine/layers.py", "apply_rotary"),)),
    ("MoE routing", (("engine/moe.py", "route"),)),
    ("DeltaNet conv", (("engine/deltanet.py", "causal_conv"),)),
    ("DeltaNet recurrent rule", (("engine/deltanet.py", "recurrent_delta_rule"),)),
    ("DeltaNet gated norm", (("engine/deltanet.py", "gated_rms_norm"),)),
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


def kernel_share(engine: Any, prompt: list[int], pairs: int = 24) -> dict[str, float] | None:
    """{"step_ms", "gemv_ms", "calls"}: medians over interleaved decode steps and replays of
    one step's kernel GEMVs (same weights, inputs and threads); None where no decode GEMV
    goes to the compiled kernel (no kernel, another device)."""
    from engine.cpu_kernel import BoundStack, BoundWeight

    runner = engine.runner
    runner.prefill(prompt)
    _decode_steps(runner, 12)  # the engine has chosen its threads
    calls: list[tuple[Any, Any, torch.Tensor, torch.Tensor, int]] = []
    originals = {cls: cls.into for cls in (BoundWeight, BoundStack)}

    def recorder(into: Any) -> Any:
        def record(self: Any, x: torch.Tensor, y: torch.Tensor, parts: int = 1) -> None:
            calls.append((into, self, x.clone(), torch.empty_like(y), parts))
            into(self, x, y, parts)
        return record

    blocks = runner.model.blocks
    kernels = [block.kernel for block in blocks]  # their GEMVs run inside one C call each:
    try:  # record the same GEMVs through the torch path's calls
        for block in blocks:
            block.kernel = None
        for cls, into in originals.items():
            cls.into = recorder(into)  # type: ignore[method-assign]
        _decode_steps(runner, 1)
    finally:
        for cls, into in originals.items():
            cls.into = into  # type: ignore[method-assign]
        for block, kernel in zip(blocks, kernels, strict=True):
            block.kernel = kernel
    if not calls:
        return None
    steps, replays = [], []
    for _ in range(pairs):
        start = time.perf_counter()
        _decode_steps(runner, 1)
        steps.append(time.perf_counter() - start)
        start = time.perf_counter()
        for into, weight, x, y, parts in calls:
            into(weight, x, y, parts)
        replays.append(time.perf_counter() - start)
    return {"step_ms": statistics.median(steps) * 1e3,
            "gemv_ms": statistics.median(replays) * 1e3, "calls": len(calls)}


def _parts(stats: pstats.Stats, steps: int) -> list[tuple[str, float, float]]:
    table: dict[tuple[str, int, str], tuple[Any, ...]] = stats.stats  # type: ignore[attr-defined]
    total = max(stats.total_tt, 1e-9)  # type: ignore[attr-defined]
    rows, counted = [], 0.0
    for label, functions in PARTS:
        seconds = sum(value[3] for (path, _, function), value in table.items()
                      if any(function == name and path.endswith(suffix)
                             for suffix, name in functions))
        if seconds:
            rows.append((label, seconds * 1e3 / steps, seconds / total))
            counted += 0 if label.startswith("  ") else seconds
    rest = total - counted
    rows.append(("the rest (adds, embedding, expert loop, Python)", rest * 1e3 / steps,
                 rest / total))
    return rows


def print_kernel_share(share: dict[str, float] | None) -> None:
    if share is None:
        print("no decode GEMV goes to the compiled kernel here")
        return
    rest = share["step_ms"] - share["gemv_ms"]
    print(f"every core, no profiler: a decode step {share['step_ms']:.1f} ms; its "
          f"{share['calls']:.0f} kernel GEMVs replayed alone {share['gemv_ms']:.1f} ms; the rest "
          f"{rest:.1f} ms ({rest / share['step_ms']:.0%})")


def print_profile(name: str, dtype: str, found: dict[str, Any]) -> None:
    print(f"\n{name} {dtype}: one decode step on one thread, {found['wall_ms']:.1f} ms "
          "without the profiler")
    print("| part | ms (profiled) | share |")
    print("|---|---|---|")
    for label, ms, share in found["parts"]:
        print(f"| {label} | {ms:.2f} | {share:.0%} |")
