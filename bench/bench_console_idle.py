"""The console's CPU use while idle with live panels, side by side with idle baselines.

Three apps run headless (App.run_test, 160x50) in turn for the same wall time:
  bare Textual      a Static and a Footer: what any Textual app costs doing nothing
  console, no data  ascend-console with the fake engine and no telemetry timers
  console, live     ascend-console sampling a fake npu-smi (an 8-chip A2 from the corpus,
                    `info` + `-t usages` per card) and psutil every --interval seconds
CPU = this process's user+system time plus its reaped children's (the fake npu-smi runs),
per wall second, as % of one core; the target for "console, live" is under 5 %.
Then an hour of 2 s samples (1800 x 8 chips) is fed through the app's handlers, to show that
the history and the alert log stay bounded (RSS and points held before and after).

Run: .venv/bin/python bench/bench_console_idle.py [--seconds 20] [--interval 2]
(about 3 x --seconds plus the simulated hour; prints, never asserts)
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from textual.app import App, ComposeResult  # noqa: E402  (the path is set just above)
from textual.widgets import Footer, Static  # noqa: E402

from console.options import ConsoleOptions  # noqa: E402
from console.snapshots import ChipSample, NpuSnapshot  # noqa: E402
from console.ui.app import ConsoleApp  # noqa: E402
from probes.live import LiveHost  # noqa: E402
from tests.console.fakes import fake_backend  # noqa: E402

CORPUS = ROOT / "tests" / "corpus" / "npu-smi"
TABLE = CORPUS / "014-info-25.0.rc1.1-910B4-8cards-noproc.txt"
USAGES = CORPUS / "012-info-t-usages-910-DDR-HBM.txt"
SIZE = (160, 50)


class BareApp(App[None]):
    def compose(self) -> ComposeResult:
        yield Static("idle")
        yield Footer()


def fake_root(base: Path) -> LiveHost:
    script = base / "usr" / "local" / "bin" / "npu-smi"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n"
                      f'if [ "$1 $2" = "info -t" ]; then cat "{USAGES}"; exit 0; fi\n'
                      f'cat "{TABLE}"\n')
    script.chmod(0o755)
    return LiveHost(root=str(base), env={"PATH": "/usr/local/bin:/usr/bin:/bin"})


def cpu_s() -> float:
    times = psutil.Process().cpu_times()
    return times.user + times.system + times.children_user + times.children_system


async def idle_cpu_percent(make_app: Callable[[], App[Any]], seconds: float) -> float:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(1.0)  # start-up (imports, first layout) is not idle time
        cpu0, wall0 = cpu_s(), time.perf_counter()
        await asyncio.sleep(seconds)
        cpu1, wall1 = cpu_s(), time.perf_counter()
    return 100.0 * (cpu1 - cpu0) / (wall1 - wall0)


def chip(npu_id: int, t: int) -> ChipSample:
    return ChipSample(npu_id, 0, "910B4", "OK", 40 + (t + npu_id) % 50, 90.0, t % 100,
                      3000 + t % 1000, 32768, float(t % 100), f"{npu_id}/0")


async def simulated_hour(host: LiveHost, interval_s: float) -> tuple[float, float, int, int]:
    samples = int(3600 / interval_s)
    app = ConsoleApp(ConsoleOptions(interval_s=3600, log_dir=None, sample_live=False),
                     backend=fake_backend(), host=host)
    rss = psutil.Process().memory_info().rss
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        t0 = time.time() - 3600
        before = rss / 2**20
        for i in range(samples):
            chips = tuple(chip(n, i) for n in range(8))
            app.telemetry.take(NpuSnapshot(t0 + i * interval_s, chips, (), True, None, 0.05))
            if i % 100 == 0:
                await pilot.pause()
        after = psutil.Process().memory_info().rss / 2**20
        return before, after, len(app.telemetry.history), len(app.telemetry.alert_log.entries)


async def main(seconds: float, interval_s: float) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        host = fake_root(Path(tmp))
        contenders: list[tuple[str, Callable[[], App[Any]]]] = [
            ("bare Textual", BareApp),
            ("console, no data", lambda: ConsoleApp(
                ConsoleOptions(interval_s=interval_s, log_dir=None, sample_live=False),
                backend=fake_backend(), host=host)),
            ("console, live", lambda: ConsoleApp(
                ConsoleOptions(interval_s=interval_s, log_dir="/tmp"),
                backend=fake_backend(), host=host)),
        ]
        print(f"idle CPU over {seconds:g} s, panels every {interval_s:g} s "
              f"(% of one core; target for 'console, live' < 5 %)")
        for name, make in contenders:
            percent = await idle_cpu_percent(make, seconds)
            print(f"  {name:<18} {percent:6.2f} %")
        before, after, points, alerts = await simulated_hour(host, interval_s)
        print(f"an hour of {interval_s:g} s samples x 8 chips: RSS {before:.0f} -> {after:.0f} MiB,"
              f" history {points} points (bounded), alert log {alerts} entries")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--interval", type=float, default=2.0)
    args = parser.parse_args()
    asyncio.run(main(args.seconds, args.interval))
