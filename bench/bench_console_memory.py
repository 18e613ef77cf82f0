"""Console data layer after one simulated hour at 2 s: memory stays bounded, recording small.

Feeds 1800 NPU samples (8 chips, with usages), host and engine snapshots through History,
the alert rules + AlertLog and a Recorder in a temporary file, then a second hour, and prints
the RSS growth of each hour (psutil) next to the recording's size and the size of the same
samples as plain JSON lines. Issue #6: "its memory after an hour of simulated samples
(bounded history)". No asserts on time.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import math
import tempfile
import time
from pathlib import Path

import psutil

from checks.policy import load_policy
from console.alerts import AlertLog, evaluate
from console.history import History
from console.recording import Player, Recorder
from console.snapshots import ChipSample, EngineSnapshot, HostSnapshot, NpuSnapshot, chip_key
from console.sources import add_history

INTERVAL_S = 2.0
SAMPLES_PER_HOUR = 1800
CHIPS = 8
T0 = 1_700_000_000.0


def npu_sample(i: int) -> NpuSnapshot:
    t = T0 + i * INTERVAL_S
    chips = tuple(
        ChipSample(
            npu_id=n, chip_id=0, name="910B4", health="OK",
            temperature_c=60 + int(30 * abs(math.sin(i / 200 + n))),  # crosses warn/fail
            power_w=round(90 + 60 * abs(math.sin(i / 50 + n)), 1),
            aicore_percent=int(100 * abs(math.sin(i / 30 + n))),
            hbm_used_mb=20000 + (i * 7 + n * 997) % 12700, hbm_total_mb=32768,
            hbm_bandwidth_percent=round(100 * abs(math.cos(i / 40 + n)), 1),
            key=chip_key(n, 0),
        )
        for n in range(CHIPS)
    )
    return NpuSnapshot(t, chips, (), True, None, 0.35)


def host_sample(i: int) -> HostSnapshot:
    return HostSnapshot(T0 + i * INTERVAL_S, 37.5, 51234.0, 257000.0, "/var/log/npu",
                        90000.0, 400000.0)


def engine_sample(i: int) -> EngineSnapshot:
    return EngineSnapshot(T0 + i * INTERVAL_S, "npu", "bfloat16", "qwen3_moe", "resident",
                          ("rms_norm", "rope"), 0.8, 900.0, 20.0 + (i % 300) / 10, 1 << 30,
                          i % 4096, 4096, "BSND", 512)


def raw_json_bytes(snapshots: list[NpuSnapshot | HostSnapshot | EngineSnapshot]) -> int:
    """The same samples as JSON lines with field names: what a naive log would write."""
    return sum(len(json.dumps(dataclasses.asdict(s))) + 1 for s in snapshots)


def run_hour(hour: int, history: History, log: AlertLog, recorder: Recorder) -> tuple[int, int]:
    policy = load_policy()
    raw = 0
    for j in range(SAMPLES_PER_HOUR):
        i = hour * SAMPLES_PER_HOUR + j
        npu, host, engine = npu_sample(i), host_sample(i), engine_sample(i)
        for snapshot in (npu, host, engine):
            add_history(history, snapshot)
        alerts = evaluate(npu, engine, policy, npu.taken_at, 3 * INTERVAL_S, 40.0)
        for alert in log.update(alerts):
            recorder.add(alert)
        for snapshot in (npu, host, engine):
            recorder.add(snapshot)
        raw += raw_json_bytes([npu, host, engine])
    return raw, len(alerts)


def rss_mb() -> float:
    gc.collect()
    return float(psutil.Process().memory_info().rss) / 1e6


def main() -> int:
    history, log = History(), AlertLog()
    with tempfile.TemporaryDirectory(prefix="bench-console-") as tmp:
        path = Path(tmp) / "recording.sqlite"
        recorder = Recorder(path)
        base = rss_mb()
        rows = []
        for hour in range(2):
            started = time.perf_counter()
            raw, _ = run_hour(hour, history, log, recorder)
            recorder.flush()
            rows.append((hour + 1, rss_mb(), raw, path.stat().st_size,
                         time.perf_counter() - started))
        recorder.close()
        samples = len(Player(path, speed=0))
        print(f"one hour = {SAMPLES_PER_HOUR} samples x {CHIPS} chips at {INTERVAL_S:g} s "
              "(NPU + host + engine snapshots, alerts evaluated each sample)")
        print(f"RSS before: {base:.1f} MB")
        print(f"{'hour':>4} {'RSS MB':>8} {'growth MB':>9} {'raw JSON MB':>11} "
              f"{'recording MB':>12} {'ratio':>6} {'wall s':>7}")
        previous = base
        raw_total = 0
        for hour, rss, raw, size, wall_s in rows:
            raw_total += raw
            print(f"{hour:>4} {rss:>8.1f} {rss - previous:>+9.1f} {raw_total / 1e6:>11.2f} "
                  f"{size / 1e6:>12.2f} {size / raw_total:>6.2f} {wall_s:>7.1f}")
            previous = rss
        print(f"history: {len(history)} points in {len(history.keys())} series "
              f"(maxlen {history.maxlen}); alert log: {len(log.entries)} entries "
              f"(max {log.entries.maxlen}); recording rows: {samples}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
