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
# PYTHONPATH is left out so that each tree timed (`--base`) imports its own code.
ENV = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}


# A run that judged a serving process which then exited is spoiled (exit 3): on a machine
# where other serving processes come and go, it is timed again.
SPOILED = "exited during the run"


def timed(argv: list[str], cwd: Path = ROOT) -> tuple[float, str]:
    for _ in range(5):
        start = time.perf_counter()
        out = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=120,
                             env=ENV)
        elapsed = time.perf_counter() - start
        if out.returncode != 3 or SPOILED not in out.stderr:
            break
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


def target_rounds(where: Path, cwd: Path = ROOT) -> dict[str, float]:
    """One round of the target rows, each with a fresh server."""
    out: dict[str, float] = {}
    for name, args in TARGET_ROWS.items():
        with fake_server(where) as pid:
            argv = tuple(a.format(pid=pid) for a in args)
            out[name] = timed([sys.executable, "-c", doctor(*argv)], cwd)[0]
    return out


def rows() -> dict[str, tuple[str, ...]]:
    runs: dict[str, tuple[str, ...]] = {"terminal report": (), "--json": ("--json",)}
    if RECORDED.is_dir():
        runs["recorded A2, terminal"] = ("--from", str(RECORDED))
    if MODEL.is_dir():
        runs["--model demo FP8, terminal"] = ("--model", str(MODEL))
        runs["--model, tokenizer checks only"] = (
            "--model", str(MODEL), "--only", "tokenizer.dtype,tokenizer.token-ids")
    return runs


def one_round(cwd: Path, runs: dict[str, tuple[str, ...]], where: Path,
              doctor_s: dict[str, list[float]], heavy: set[str]) -> None:
    for name, args in runs.items():
        elapsed, err = timed([sys.executable, "-c", doctor(*args)], cwd)
        doctor_s[name].append(elapsed)
        line = next((ln for ln in err.splitlines() if ln.startswith("heavy=")), "heavy=?")
        heavy.update(m for m in line.removeprefix("heavy=").split(",") if m)
    for name, elapsed in target_rounds(where, cwd).items():
        doctor_s[name].append(elapsed)


def report(label: str, base: float, doctor_s: dict[str, list[float]], heavy: set[str]) -> None:
    print(label)
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


def main(argv: list[str]) -> int:
    """`--base DIR`: time another checkout of the project too (a worktree of the commit to
    compare with), round by round in alternating order, so load on a shared machine falls on
    both alike. `--runs N`: rounds (default RUNS)."""
    trees = [ROOT]
    if "--base" in argv:
        trees.append(Path(argv[argv.index("--base") + 1]).resolve())
    runs_n = int(argv[argv.index("--runs") + 1]) if "--runs" in argv else RUNS
    runs = rows()
    rich_s: list[float] = []
    doctor_s: list[dict[str, list[float]]] = [{name: [] for name in (*runs, *TARGET_ROWS)}
                                              for _ in trees]
    heavy: list[set[str]] = [set() for _ in trees]
    for tree in trees:  # warm-up: writes bytecode, fills the page cache
        for args in runs.values():
            timed([sys.executable, "-c", doctor(*args)], tree)
    load = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory(prefix="bench-doctor-") as tmp:
        where = Path(tmp)
        target_rounds(where)
        for n in range(runs_n):
            rich_s.append(timed([sys.executable, "-c", "import rich"])[0])
            order = list(range(len(trees)))
            for i in order if n % 2 == 0 else order[::-1]:
                one_round(trees[i], runs, where, doctor_s[i], heavy[i])
            load.append(os.getloadavg()[0])
    base = statistics.median(rich_s)
    print(f"{'python -c import rich':34s} median {base * 1000:7.1f} ms  (n={runs_n})")
    print(f"load average (1 min) during the runs: {min(load):.2f} to {max(load):.2f}")
    for tree, times, seen in zip(trees, doctor_s, heavy, strict=True):
        report(f"-- {tree}", base, times, seen)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
