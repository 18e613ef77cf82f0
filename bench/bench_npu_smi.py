"""Time the npu-smi parsers, side by side, and print ratios.

1. `parse_info` on the largest main-table samples against a naive split: the baseline
   (`splitlines()` + `split('|')` of every line) is the least any table reader must do, so the
   ratio says what the layout detection, pairing and checks cost on top of it.
2. Big pasted inputs (issue #16) through `probes.inventory.parse_output`, the path of
   `ascend-doctor npu --from-file`: junk, key/value and `watch` rows at N and 10 N lines. A
   ratio near 10 is linear time; the million-line input is refused by the size limits.
Run: .venv/bin/python bench/bench_npu_smi.py  (under a minute; prints, never asserts)
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from probes.errors import ParseError  # noqa: E402  (the path is set just above)
from probes.inventory import parse_output  # noqa: E402
from probes.npu_smi import parse_info  # noqa: E402

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


def big_input(kind: str, lines: int) -> str:
    if kind == "junk":
        return "".join(f"junk line {i} lorem ipsum\n" for i in range(lines))
    if kind == "key/value":
        return "".join(f"\t{f'Field {i % 50}':<30} : {i}\n" for i in range(lines))
    header = "NpuID(Idx)  ChipId(Idx) Pwr(W)      Temp(C)     AI Core(%)\n"
    rows = "".join(f"{i % 8:<12}{0:<12}{90.1:<12.1f}{40:<12}{3:<12}\n" for i in range(lines - 1))
    return header + rows


def time_once_s(text: str) -> float:
    start = time.perf_counter()
    # junk is refused after every detector has looked at every line
    with contextlib.suppress(ParseError):
        parse_output(text)
    return time.perf_counter() - start


def big_inputs() -> None:
    small, large = 4_000, 40_000
    print(f"\n{'pasted input':<12} {f'{small} lines s':>14} {f'{large} lines s':>15} "
          f"{'ratio':>6} {'us/line':>8}")
    for kind in ("junk", "key/value", "watch"):
        small_s = time_once_s(big_input(kind, small))
        large_s = time_once_s(big_input(kind, large))
        print(f"{kind:<12} {small_s:>14.3f} {large_s:>15.3f} {large_s / small_s:>6.1f} "
              f"{large_s / large * 1e6:>8.1f}")
    refused_s = time_once_s("x\n" * 1_000_000)
    print(f"a million lines: refused in {refused_s:.3f} s")


def main() -> None:
    print(f"{'sample':<50} {'lines':>5} {'parse_info us':>14} {'naive us':>9} {'ratio':>6}")
    for number in SAMPLES:
        name, text = sample_text(number)
        parse_us = time_per_call_us(parse_info, text)
        naive_us = time_per_call_us(naive_split, text)
        lines = len(text.splitlines())
        print(f"{name[:50]:<50} {lines:>5} {parse_us:>14.1f} {naive_us:>9.2f} "
              f"{parse_us / naive_us:>6.1f}")
    big_inputs()


if __name__ == "__main__":
    main()
