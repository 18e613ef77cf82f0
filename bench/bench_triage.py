"""Triage of generated mixed logs: speed, linearity and peak memory.

Targets (issue #26): 100 MB in at most 5 s on this 2-core machine, 10x the input in at most
11x the time, peak memory below 200 MB. The logs mix vLLM service lines, CANN plog lines
([INFO]/[ERROR] with timestamps and error codes), Python traceback lines and a little Chinese;
about one line in a hundred is an error line. Each size is triaged in a fresh interpreter
(`triage_paths` on one file), which reports its own wall and CPU seconds and peak RSS, so the
numbers are the triage's and not the generator's. The CPU time is printed beside the wall
time: on a machine shared with other work the wall time measures the others too. Printed,
not asserted: run `PYTHONPATH=. python bench/bench_triage.py [MB]` (default 100; the
linearity pair is MB/10 and MB).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MIB = 1024 * 1024
TEMPLATES = (
    "INFO 12-07 10:11:{s:02d} [loggers.py:{n}] Engine 000: Avg prompt throughput: {n}.3 tokens/s,"
    " Avg generation throughput: {m}.1 tokens/s, Running: {k} reqs, Waiting: 0 reqs",
    "[INFO] ASCENDCL({n},python):2026-12-07-10:11:{s:02d}.{n:03d}.{m:03d} [acl.cpp:{m}]{n} "
    "aclrtMallocAlign32 size {m}{n} ok",
    "DEBUG 12-07 10:11:{s:02d} [scheduler.py:{n}] scheduled {k} sequences, kv usage {m}%",
    "[INFO] HCCL({n},python):2026-12-07-10:11:{s:02d}.{n:03d}.{m:03d} [op_base.cc:{m}] rank {k} "
    "AllReduce tag {n}_{m} done",
    "(EngineCore_DP0 pid={n}) INFO 12-07 10:11:{s:02d} [model_runner.py:{m}] 加载模型权重 {k}/64",
    '  File "/usr/local/lib/python3.11/site-packages/vllm/v1/worker/gpu_model_runner.py", '
    "line {n}, in execute_model",
)
ERRORS = (
    "[ERROR] RUNTIME({n},python):2026-12-07-10:12:{s:02d}.{n:03d}.{m:03d} [stream.cc:{m}] "
    "stream sync failed, error code is 5070{k:02d}",
    "EZ1001: [PID: {n}] 2026-12-07-10:12:{s:02d} Parameter validation failed.",
    "[ERROR] ASCENDCL({n},python):2026-12-07-10:12:{s:02d}.{n:03d}.{m:03d} [tensor.cpp:{m}] "
    "there is an aivec error, ret=507035",
    "RuntimeError: NPU out of memory. Tried to allocate {k}.00 MiB (NPU 0; 60.96 GiB total)",
)


def generate(path: Path, size_bytes: int, seed: int = 26) -> None:
    """Write about `size_bytes` of mixed log lines, streaming (bounded memory)."""
    rng = random.Random(seed)
    written = 0
    with path.open("w", encoding="utf-8") as out:
        while written < size_bytes:
            lines = []
            for i in range(2000):
                pool = ERRORS if rng.random() < 0.01 else TEMPLATES
                lines.append(rng.choice(pool).format(s=i % 60, n=rng.randrange(1000),
                                                     m=rng.randrange(1000), k=rng.randrange(40)))
            text = "\n".join(lines) + "\n"
            out.write(text)
            written += len(text.encode("utf-8"))


CHILD = """
import json, os, resource, sys, time
from pathlib import Path
from checks.triage import triage_paths
began, cpu = time.perf_counter(), os.times()
report = triage_paths([Path(sys.argv[1])])
seconds = time.perf_counter() - began
after = os.times()
cpu_s = after.user + after.system - cpu.user - cpu.system
print(json.dumps({"seconds": seconds, "cpu_s": cpu_s, "peak_mb": resource.getrusage(
    resource.RUSAGE_SELF).ru_maxrss / 1024, "bytes": report.read.bytes,
    "lines": report.read.lines, "findings": len(report.findings)}))
"""


def measure(path: Path) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", CHILD, str(path)], cwd=ROOT, check=True,
                          capture_output=True, text=True, timeout=600,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    return json.loads(done.stdout)


def main() -> int:
    size_mb = float(sys.argv[1]) if len(sys.argv) > 1 else 100.0
    with tempfile.TemporaryDirectory() as tmp:
        small, large = Path(tmp) / "small.log", Path(tmp) / "large.log"
        generate(small, int(size_mb / 10 * MIB))
        generate(large, int(size_mb * MIB))
        first, second = measure(small), measure(large)
    mb = second["bytes"] / MIB
    print(f"triage of {mb:.0f} MB ({second['lines']:.0f} lines, {second['findings']:.0f} "
          f"findings): {second['seconds']:.2f} s, {mb / second['seconds']:.0f} MB/s "
          f"(target: 100 MB in <= 5 s); CPU {second['cpu_s']:.2f} s, "
          f"{mb / second['cpu_s']:.0f} MB/s of CPU time (what a busy machine does not show)")
    load = os.getloadavg()[0]
    print(f"load average {load:.1f} on {os.cpu_count()} cores while measuring")
    ratio = second["cpu_s"] / first["cpu_s"]
    size_ratio = second["bytes"] / first["bytes"]
    print(f"linearity: {size_ratio:.1f}x the input took {ratio:.1f}x the CPU time "
          f"({first['cpu_s']:.2f} s for {first['bytes'] / MIB:.0f} MB; target <= 11x); wall "
          f"{second['seconds'] / first['seconds']:.1f}x")
    print(f"peak RSS: {second['peak_mb']:.0f} MB at {mb:.0f} MB, {first['peak_mb']:.0f} MB at "
          f"{first['bytes'] / MIB:.0f} MB (target < 200 MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
