"""`ascend-doctor bundle` against a plain `ascend-doctor --json` on this machine.

Target (issue #4): a bundle takes under 3x the time of a doctor run. Both are timed side by
side in this run (interleaved subprocesses, median of N), so a noisy machine affects both
alike; the bundle's size is printed too (issue #4: under 2 MB without logs).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNS = 7


def timed(argv: list[str]) -> float:
    start = time.perf_counter()
    out = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300)
    elapsed = time.perf_counter() - start
    if out.returncode not in (0, 1, 2):
        raise SystemExit(f"{argv[2:5]} failed ({out.returncode}): {out.stderr.strip()[-300:]}")
    return elapsed


def main() -> int:
    doctor_s: list[float] = []
    bundle_s: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-bundle-") as tmp:
        out = Path(tmp) / "here.tar.gz"
        for i in range(RUNS):
            doctor_s.append(timed([sys.executable, "-m", "checks.cli", "--json"]))
            out.unlink(missing_ok=True)
            bundle_s.append(timed([sys.executable, "-m", "checks.cli", "bundle", "-o", str(out)]))
            if i == 0:
                size = out.stat().st_size
    doctor, bundle = statistics.median(doctor_s), statistics.median(bundle_s)
    print(f"ascend-doctor --json   median {doctor * 1000:7.1f} ms  (n={RUNS})")
    print(f"ascend-doctor bundle   median {bundle * 1000:7.1f} ms  (n={RUNS}), "
          f"{size / 1024:.0f} KiB")
    print(f"ratio bundle / doctor: {bundle / doctor:.2f}x  (target < 3x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
