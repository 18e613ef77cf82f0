"""A full doctor run without a model against the start-up of `python -c "import rich"`.

Target (issue #3): at most 3x, and torch/transformers are never imported. The terminal report
(what `ascend-doctor` prints) and `--json` are both timed, on this machine, interleaved with the
baseline (median of N), so a noisy machine affects all alike. A recorded A2 machine
(`--from demo-assets/a2-recorded`, built by `make assets`) is timed too when it is there: it
loads the npu-smi parsers that a machine without an NPU never needs. So is a run with
`--model demo-assets/smollm2-moe-fp8` (issue #11: within 3x of the run without a model; its
tokenizer ships a tokenizer.json, so transformers must not be imported either).
"""

from __future__ import annotations

import os
import select
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNS = 11
RECORDED = ROOT / "demo-assets" / "a2-recorded"
MODEL = ROOT / "demo-assets" / "smollm2-moe-fp8"


def doctor(*args: str) -> str:
    return (f"import sys, checks.cli as c; code = c.main({list(args)!r}); "
            "sys.stderr.write('heavy=' + ','.join(m for m in ('torch', 'transformers') "
            "if m in sys.modules) + '\\n'); sys.exit(code)")


# Bytecode as `pip install` leaves it: compiled. With PYTHONDONTWRITEBYTECODE set (some CI
# images set it) an edited module would be compiled again on every run, which is not start-up.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def timed(argv: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    out = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120, env=ENV)
    elapsed = time.perf_counter() - start
    if out.returncode not in (0, 1, 2):
        raise SystemExit(f"{argv[:3]} failed ({out.returncode}): {out.stderr.strip()[-300:]}")
    return elapsed, out.stderr


SERVER_PACKAGES = {"torch": "2.7.1", "torch_npu": "2.7.1.post1", "vllm": "0.11.0",
                   "vllm_ascend": "0.11.0", "transformers": "4.57.1", "tokenizers": "0.22.1"}
TARGET_ROWS: dict[str, tuple[str, ...]] = {"--pid (fake vllm serve)": ("--pid", "{pid}"),
                                           "discovers it (no --pid)": ()}


@contextmanager
def fake_server(where: Path) -> Iterator[int]:
    """`vllm serve /models/m -tp 2` until the block ends; yields its pid."""
    script = where / "bin" / "vllm"
    if not script.exists():
        script.parent.mkdir(parents=True)
        script.write_text(f"#!{sys.executable}\nimport time\nprint('ready', flush=True)\n"
                          "time.sleep(600)\n")
        script.chmod(0o755)
        for name, version in SERVER_PACKAGES.items():
            meta = where / "site" / f"{name}-{version}.dist-info" / "METADATA"
            meta.parent.mkdir(parents=True)
            meta.write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(where / "site"),
           "ASCEND_GLOBAL_LOG_LEVEL": "1"}
    proc = subprocess.Popen([str(script), "serve", "/models/m", "-tp", "2"], env=env,
                            stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        if not select.select([proc.stdout], [], [], 30)[0] or not proc.stdout.readline():
            raise SystemExit("the fake server did not start")
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


def target_rounds(where: Path) -> dict[str, float]:
    """One round of the target rows, each with a fresh server."""
    out: dict[str, float] = {}
    for name, args in TARGET_ROWS.items():
        with fake_server(where) as pid:
            argv = tuple(a.format(pid=pid) for a in args)
            out[name] = timed([sys.executable, "-c", doctor(*argv)])[0]
    return out


def main() -> int:
    runs: dict[str, tuple[str, ...]] = {"terminal report": (), "--json": ("--json",)}
    if RECORDED.is_dir():
        runs["recorded A2, terminal"] = ("--from", str(RECORDED))
    if MODEL.is_dir():
        runs["--model demo FP8, terminal"] = ("--model", str(MODEL))
        runs["--model, tokenizer checks only"] = (
            "--model", str(MODEL), "--only", "tokenizer.dtype,tokenizer.token-ids")
    rich_s: list[float] = []
    doctor_s: dict[str, list[float]] = {name: [] for name in runs}
    heavy: set[str] = set()
    target_s: dict[str, list[float]] = {name: [] for name in TARGET_ROWS}
    for args in runs.values():  # warm-up: writes bytecode, fills the page cache
        timed([sys.executable, "-c", doctor(*args)])
    with tempfile.TemporaryDirectory(prefix="bench-doctor-") as tmp:
        where = Path(tmp)
        target_rounds(where)
        for _ in range(RUNS):
            rich_s.append(timed([sys.executable, "-c", "import rich"])[0])
            for name, args in runs.items():
                elapsed, err = timed([sys.executable, "-c", doctor(*args)])
                doctor_s[name].append(elapsed)
                line = next((ln for ln in err.splitlines() if ln.startswith("heavy=")),
                            "heavy=?")
                heavy.update(m for m in line.removeprefix("heavy=").split(",") if m)
            for name, elapsed in target_rounds(where).items():
                target_s[name].append(elapsed)
    doctor_s.update(target_s)
    base = statistics.median(rich_s)
    print(f"{'python -c import rich':34s} median {base * 1000:7.1f} ms  (n={RUNS})")
    for name, times in doctor_s.items():
        med = statistics.median(times)
        print(f"{'ascend-doctor, ' + name:34s} median {med * 1000:7.1f} ms  "
              f"ratio {med / base:.2f}x  (target <= 3x)")
    if "--model demo FP8, terminal" in doctor_s:
        plain = statistics.median(doctor_s["terminal report"])
        model = statistics.median(doctor_s["--model demo FP8, terminal"])
        tokenizer = statistics.median(doctor_s["--model, tokenizer checks only"])
        print(f"{'--model run / run without a model':34s} ratio {model / plain:.2f}x  "
              "(target <= 3x)")
        print(f"{'tokenizer checks only / no model':34s} ratio {tokenizer / plain:.2f}x")
    print(f"heavy modules imported by the doctor: {', '.join(sorted(heavy)) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
