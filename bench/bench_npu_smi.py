"""Time `parse_info` on the largest main-table samples against a naive split, side by side.

The baseline (`splitlines()` + `split('|')` of every line) is the least any table reader must
do, so the ratio says what the layout detection, pairing and checks cost on top of it.
Run: .venv/bin/python bench/bench_npu_smi.py  (a few seconds; prints, never asserts)
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from probes.npu_smi import parse_info  # noqa: E402  (the path is set just above)

CORPUS = ROOT / "tests" / "corpus" / "npu-smi"
SAMPLES = ("004", "039", "014", "065")  # 32 processes, 8 processes, 8 idle cards, A3 dies
BUDGET_S = 0.4  # per sample and per contender, so the whole run stays within a few seconds


def naive_split(text: str) -> int:
    return sum(len(line.split("|")) for line in text.splitlines())


def time_per_call_us(func: Callable[[str], object], text: str) -> float:
    """Mean microseconds per call, over as many calls as fit the budget (after a warm-up)."""
    for _ in range(20):
        func(text)
    calls = 0
    start = time.perf_counter()
    while time.perf_counter() - start < BUDGET_S:
        for _ in range(50):
            func(text)
        calls += 50
    return (time.perf_counter() - start) / calls * 1e6


def sample_text(number: str) -> tuple[str, str]:
    (path,) = CORPUS.glob(f"{number}-*.txt")
    return path.name, path.read_text(encoding="utf-8")


def main() -> None:
    print(f"{'sample':<50} {'lines':>5} {'parse_info us':>14} {'naive us':>9} {'ratio':>6}")
    for number in SAMPLES:
        name, text = sample_text(number)
        parse_us = time_per_call_us(parse_info, text)
        naive_us = time_per_call_us(naive_split, text)
        lines = len(text.splitlines())
        print(f"{name[:50]:<50} {lines:>5} {parse_us:>14.1f} {naive_us:>9.2f} "
              f"{parse_us / naive_us:>6.1f}")


if __name__ == "__main__":
    main()
