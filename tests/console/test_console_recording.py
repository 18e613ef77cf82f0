from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from console.recording import SCHEMA, Player, Recorder, RecordingError, Snapshot
from console.snapshots import (
    Alert,
    ChipSample,
    EngineSnapshot,
    HostSnapshot,
    NpuSnapshot,
    ProcessSample,
    chip_key,
)

T0 = 1_700_000_000.0


def npu_at(t: float, chips: int = 8) -> NpuSnapshot:
    return NpuSnapshot(
        taken_at=t,
        chips=tuple(
            ChipSample(i, 0, "910B4", "OK", 40 + i, 90.5, 12, 2654 + i, 32768, 7.5, chip_key(i, 0))
            for i in range(chips)
        ),
        processes=(ProcessSample(1, 0, 4242, "python", 7746),),
        processes_known=True,
        error=None,
        sample_duration_s=0.31,
    )


def host_at(t: float) -> HostSnapshot:
    return HostSnapshot(t, 12.5, 4096.0, 16384.0, "/var/log/npu", 1000.0, 2000.0)


def engine_at(t: float) -> EngineSnapshot:
    return EngineSnapshot(t, "cpu", "float32", "mixtral", "dequantise-at-load", ("rms_norm",),
                          0.42, 310.0, 18.5, 1 << 24, 77, 2048, "BSND", 64)


def test_round_trip_in_time_order(tmp_path: Path) -> None:
    path = tmp_path / "rec.sqlite"
    written: list[Snapshot] = [host_at(T0 + 2), npu_at(T0), engine_at(T0 + 1),
               NpuSnapshot(T0 + 3, (), (), False, "`npu-smi info` timed out after 5 s", 5.0),
               Alert(T0 + 4, "temperature:0/0", "warn", "hot", "86 °C")]
    with Recorder(path, clock=lambda: T0) as recorder:
        recorder.add_many(written)
    player = Player(path, speed=0)
    assert player.meta["schema"] == SCHEMA == "ascend-console-recording/1"
    assert player.meta["hostname"] and float(player.meta["created_at"]) == T0
    assert (player.start_t, player.end_t, len(player), player.duration_s) == (T0, T0 + 4, 5, 4.0)
    replayed = list(player)
    assert replayed == sorted(written, key=lambda s: s.raised_at if isinstance(s, Alert)
                              else s.taken_at)
    assert [type(s) for s in player.play(kinds=["npu"])] == [NpuSnapshot, NpuSnapshot]


def test_speed_factor_with_injected_sleep(tmp_path: Path) -> None:
    path = tmp_path / "rec.sqlite"
    with Recorder(path) as recorder:
        for i in range(4):
            recorder.add(npu_at(T0 + 2 * i, chips=1))
    slept: list[float] = []
    assert len(list(Player(path, speed=1.0, sleep=slept.append))) == 4
    assert slept == [2.0, 2.0, 2.0]
    slept.clear()
    list(Player(path, speed=4.0, sleep=slept.append))
    assert slept == [0.5, 0.5, 0.5]
    slept.clear()
    list(Player(path, speed=0, sleep=slept.append))
    assert slept == []
    with pytest.raises(ValueError):
        Player(path, speed=-1)


def test_appends_to_an_existing_recording(tmp_path: Path) -> None:
    path = tmp_path / "rec.sqlite"
    with Recorder(path, clock=lambda: T0) as recorder:
        recorder.add(host_at(T0))
    with Recorder(path, clock=lambda: T0 + 99) as recorder:
        recorder.add(host_at(T0 + 2))
    player = Player(path, speed=0)
    assert len(player) == 2 and float(player.meta["created_at"]) == T0


def test_prunes_by_age(tmp_path: Path) -> None:
    path = tmp_path / "rec.sqlite"
    with Recorder(path, max_age_s=60) as recorder:
        for i in range(600):  # 20 minutes at 2 s
            recorder.add(host_at(T0 + 2 * i))
    player = Player(path, speed=0)
    assert player.end_t == T0 + 1198
    assert player.start_t is not None and player.start_t >= T0 + 1198 - 60
    assert len(player) == 31


def test_prunes_by_rows_and_stays_small_after_hours(tmp_path: Path) -> None:
    path = tmp_path / "rec.sqlite"
    rows = 3000
    with Recorder(path, max_rows=rows) as recorder:
        for i in range(5 * 1800):  # five simulated hours at 2 s, 8 chips each
            recorder.add(npu_at(T0 + 2 * i))
            if i == rows:
                recorder.flush()
                size_at_limit = path.stat().st_size
        assert recorder.row_count() <= rows + 256  # pruned every 256 inserts
    assert len(Player(path, speed=0)) == rows
    size = path.stat().st_size
    # freed pages are reused: the file stops growing once the row limit is reached
    assert size <= size_at_limit * 1.2
    assert size < 4 * 1024 * 1024


def test_a_few_hours_at_default_bounds_stay_small(tmp_path: Path) -> None:
    path = tmp_path / "rec.sqlite"
    with Recorder(path) as recorder:
        for i in range(3 * 1800):  # three hours at 2 s: NPU (8 chips) + host + engine
            t = T0 + 2 * i
            recorder.add(npu_at(t))
            recorder.add(host_at(t))
            recorder.add(engine_at(t))
    size_mb = path.stat().st_size / 1e6
    assert size_mb < 20, f"{size_mb:.1f} MB for three hours"
    assert len(Player(path, speed=0)) == 3 * 1800 * 3


def test_thread_safe_writes(tmp_path: Path) -> None:
    path = tmp_path / "rec.sqlite"
    recorder = Recorder(path)

    def write(offset: int) -> None:
        for i in range(200):
            recorder.add(host_at(T0 + offset + i * 10))

    threads = [threading.Thread(target=write, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    recorder.close()
    times = [s.taken_at for s in Player(path, speed=0) if isinstance(s, HostSnapshot)]
    assert len(times) == 800 and times == sorted(times)


def test_corrupt_file_names_it(tmp_path: Path) -> None:
    path = tmp_path / "garbage.sqlite"
    path.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(RecordingError, match=r"garbage\.sqlite: not an ascend-console recording"):
        Player(path)
    with pytest.raises(RecordingError, match=r"garbage\.sqlite"):
        Recorder(path)


def test_other_sqlite_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE meta (key TEXT, value TEXT)")
        conn.execute("INSERT INTO meta VALUES ('schema', 'something-else/9')")
    conn.close()
    with pytest.raises(RecordingError, match=r"other\.db: not an ascend-console recording "
                                             r"\(schema 'something-else/9'"):
        Player(path)
    with pytest.raises(RecordingError, match=r"other\.db"):
        Recorder(path)


def test_missing_file_and_bad_payload(tmp_path: Path) -> None:
    with pytest.raises(RecordingError, match=r"nope\.sqlite: no such recording file"):
        Player(tmp_path / "nope.sqlite")
    path = tmp_path / "rec.sqlite"
    with Recorder(path) as recorder:
        recorder.add(host_at(T0))
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE samples SET payload = '[1, 2'")
    conn.close()
    player = Player(path, speed=0)
    assert list(player) == [] and player.skipped_rows == 1  # skipped and counted


def test_newer_files_with_extra_columns_still_play(tmp_path: Path) -> None:
    path = tmp_path / "rec.sqlite"
    with Recorder(path) as recorder:
        recorder.add(npu_at(T0, chips=1))
    with sqlite3.connect(path) as conn:
        columns = conn.execute("SELECT value FROM meta WHERE key='npu_chip_columns'").fetchone()[0]
        conn.execute("UPDATE meta SET value=? WHERE key='npu_chip_columns'",
                     (columns.replace(']', ',"future_field"]'),))
        payload = conn.execute("SELECT payload FROM samples").fetchone()[0]
        conn.execute("UPDATE samples SET payload=?", (payload.replace('"BSND"', '"x"')
                                                      .replace('7.5,"0/0",null,null,null,null',
                                                               '7.5,"0/0",1,2,null,null,99'),))
    conn.close()
    [snap] = list(Player(path, speed=0))
    assert isinstance(snap, NpuSnapshot) and snap.chips[0].key == "0/0"


def test_a_live_sample_is_readable_before_close(tmp_path: Path) -> None:
    path = tmp_path / "rec.sqlite"
    recorder = Recorder(path)
    recorder.add(host_at(T0))
    assert len(Player(path, speed=0)) == 1  # bundles and --replay see it while recording
    recorder.close()


def test_engine_snapshot_from_real_stats_round_trips(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from engine.generate import EngineStats

    class Config:
        architecture = "qwen3_moe"

    stats = EngineStats(device="cpu", dtype="float32", fp8_mode="none", max_seq_len=2048,
                        kv_cache_bytes=4096, kv_cache_dtype="float32", kv_layout="BSND",
                        kv_alignment_bytes=64, kv_tokens_used=512, weight_bytes=1,
                        fused_ops=("rms_norm",), ttft_s=0.25, prefill_tokens=10,
                        prefill_tokens_per_s=40.0, decode_tokens=5, decode_tokens_per_s=12.5)
    snap = EngineSnapshot.from_stats(stats, Config(), taken_at=T0)  # type: ignore[arg-type]
    assert snap.architecture == "qwen3_moe" and snap.kv_occupancy == 0.25
    assert (snap.ttft_s, snap.decode_tokens_per_s, snap.fused_ops) == (0.25, 12.5, ("rms_norm",))
    path = tmp_path / "rec.sqlite"
    with Recorder(path) as recorder:
        recorder.add(snap)
    assert list(Player(path, speed=0)) == [snap]


# --- the default place of recordings -----------------------------------------------------------


def test_the_console_names_the_one_default_place() -> None:
    """console.recording re-exports the default place from probes.recordings (tested there)."""
    import console.recording
    import probes.recordings

    for name in ("default_recordings_dir", "new_recording_path", "newest_first_key"):
        assert getattr(console.recording, name) is getattr(probes.recordings, name)


def test_serving_samples_and_npu_sources_round_trip(tmp_path: Path) -> None:
    from console.snapshots import ServingSnapshot

    serving = ServingSnapshot(5.0, "http://node:8000/metrics", "vLLM", None, 0.02, running=3,
                              waiting=0, kv_cache_usage=0.21, ttft_p50_s=0.2, window_s=10.0,
                              not_exported=("failed_requests",),
                              read_from=(("kv_cache_usage", "vllm:kv_cache_usage_perc"),))
    remote = NpuSnapshot(6.0, (), (), False, "connection refused", 0.01, "node-b:8082")
    with Recorder(tmp_path / "r.db") as recorder:
        recorder.add(serving)
        recorder.add(remote)
    played = list(Player(tmp_path / "r.db", speed=0))
    assert played == [serving, remote]


def test_fault_codes_round_trip(tmp_path: Path) -> None:
    import dataclasses

    base = npu_at(T0, chips=3)
    chips = (dataclasses.replace(base.chips[0], fault_codes=()),
             dataclasses.replace(base.chips[1], health="Alarm", fault_codes=("80E00209",)),
             dataclasses.replace(base.chips[2], health="Warning",
                                 codes_unread="health Warning, npu-smi timed out"))
    snapshot = dataclasses.replace(base, chips=chips)
    path = tmp_path / "rec.sqlite"
    with Recorder(path) as recorder:
        recorder.add(snapshot)
    player = Player(path, speed=0)
    assert list(player) == [snapshot] and player.skipped_rows == 0
