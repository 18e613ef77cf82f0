"""A full doctor run without a model against the start-up of `python -c "import rich"`.

Target (issue #3): at most 3x, and torch/transformers are never imported. Both are timed
side by side in this run (interleaved, median of N), so a noisy machine affects both alike.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNS = 7
DOCTOR = ("import sys, checks.cli as c; code = c.main(['--json']); "
          "sys.stderr.write('heavy=' + ','.join(m for m in ('torch', 'transformers') "
          "if m in sys.modules) + '\\n'); sys.exit(code)")


def timed(argv: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    out = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)
    elapsed = time.perf_counter() - start
    if out.returncode not in (0, 1, 2):
        raise SystemExit(f"{argv[:3]} failed ({out.returncode}): {out.stderr.strip()[-300:]}")
    return elapsed, out.stderr


def main() -> int:
    rich_s: list[float] = []
    doctor_s: list[float] = []
    heavy = ""
    for _ in range(RUNS):
        rich_s.append(timed([sys.executable, "-c", "import rich"])[0])
        elapsed, err = timed([sys.executable, "-c", DOCTOR])
        doctor_s.append(elapsed)
        heavy = next((ln for ln in err.splitlines() if ln.startswith("heavy=")), "heavy=?")
    base, doctor = statistics.median(rich_s), statistics.median(doctor_s)
    print(f"python -c 'import rich'      median {base * 1000:7.1f} ms  (n={RUNS})")
    print(f"ascend-doctor --json (no model) median {doctor * 1000:7.1f} ms  (n={RUNS})")
    print(f"ratio doctor / import rich: {doctor / base:.2f}x  (target <= 3x)")
    print(f"heavy modules imported by the doctor: {heavy.removeprefix('heavy=') or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
