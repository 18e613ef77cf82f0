"""The serving and NPU-Exporter sources over httpx.MockTransport, and their alerts
(corpus provenance: tests/corpus/serving/README.md, tests/corpus/npu-exporter/README.md)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from checks.policy import load_policy
from console import exporter, serving
from console.snapshots import NpuSnapshot
from console.source import Judging, Shown
from console.sources import judge
from probes import http
from probes.prometheus import parse

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
URL = "http://serving.test:8000/metrics"


def client(pages: dict[str, bytes | int]) -> httpx.Client:
    def handler(request: httpx.Request) -> httpx.Response:
        page = pages.get(str(request.url), 404)
        if isinstance(page, int):
            return httpx.Response(page, json={"detail": "Not Found"})
        return httpx.Response(200, content=page, headers={"content-type": "text/plain"})
    return http.client(5.0, httpx.MockTransport(handler))


def prom(name: str) -> bytes:
    return (CORPUS / "serving" / name).read_bytes()


def test_serving_rates_and_quantiles_come_from_deltas() -> None:
    tracker = serving.ServingTracker(URL, window_s=30)
    first = serving.sample(client({URL: prom("vllm_v1_names_a.prom")}), tracker, lambda: 100.0)
    assert first.ok and first.server == "vLLM" and first.window_s is None
    assert first.kv_cache_usage == pytest.approx(0.21) and first.running == 3
    assert first.ttft_p50_s is None and first.generation_tokens_per_s is None
    second = serving.sample(client({URL: prom("vllm_v1_names_b.prom")}), tracker, lambda: 110.0)
    assert second.window_s == 10
    # 10 requests x 50 tokens between the scrapes, 10 s apart
    assert second.generation_tokens_per_s == pytest.approx(50.0)
    assert second.prompt_tokens_per_s == pytest.approx(512.0)
    # the second round's TTFTs are 0.6 .. 1.5 s, its inter-token gaps 90 ms
    assert 0.75 <= second.ttft_p50_s <= 1.0  # type: ignore[operator]
    assert 1.0 < second.ttft_p95_s <= 2.5  # type: ignore[operator]
    assert 0.075 < second.itl_p50_s <= 0.1  # type: ignore[operator]
    assert second.preemptions_in_window == 3 and second.aborted_in_window == 1
    assert second.not_exported == ("failed_requests",)


def test_a_restarted_server_starts_the_window_again() -> None:
    tracker = serving.ServingTracker(URL)
    serving.sample(client({URL: prom("vllm_v0_names_b.prom")}), tracker, lambda: 1.0)
    after = serving.sample(client({URL: prom("vllm_v0_names_a.prom")}), tracker, lambda: 3.0)
    assert after.window_s is None and after.generation_tokens_per_s is None


def test_no_metrics_is_said_plainly() -> None:
    snap = serving.sample(client({}), serving.ServingTracker(URL), lambda: 1.0)
    assert not snap.ok and "HTTP 404" in (snap.error or "")
    assert serving.NOT_EXPORTED_NOTE in (snap.error or "")
    assert snap.answered  # a 404 is an answer: the server is up


def test_a_404_is_asked_again_ever_more_rarely() -> None:
    tracker = serving.ServingTracker(URL)
    asked = []
    for now in range(0, 200):  # a tick a second for 200 s
        if tracker.due(float(now)):
            asked.append(now)
            serving.sample(client({}), tracker, lambda now=now: float(now))
    assert asked == [0, 10, 40, 100]  # 10 s, 30 s, 60 s after each 404, not every tick
    serving.sample(client({URL: prom("vllm_v1_names_a.prom")}), tracker, lambda: 200.0)
    assert tracker.due(200.5)  # exported again: every interval


def test_no_answer_and_a_new_start_time_are_told_apart() -> None:
    tracker = serving.ServingTracker(URL)
    page = prom("vllm_v1_names_a.prom") + b"process_start_time_seconds 1000.0\n"
    first = serving.sample(client({URL: page}), tracker, lambda: 1.0)
    assert first.ok and first.restarted_at is None

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    down = serving.sample(http.client(5.0, httpx.MockTransport(refuse)), tracker, lambda: 2.0)
    assert not down.ok and not down.answered
    # same counters, a new process start time: a restart all the same
    again = serving.sample(client({URL: page.replace(b"1000.0", b"1500.0")}), tracker,
                           lambda: 3.0)
    assert again.ok and again.restarted_at == 3.0


def test_mindie_counts_failures_not_aborts() -> None:
    tracker = serving.ServingTracker(URL)
    serving.sample(client({URL: prom("mindie_a.prom")}), tracker, lambda: 0.0)
    snap = serving.sample(client({URL: prom("mindie_b.prom")}), tracker, lambda: 5.0)
    assert snap.server == "MindIE" and snap.kv_cache_usage == pytest.approx(0.45)
    assert snap.failed_in_window == 2 and snap.aborted_total is None
    assert "aborted_requests" in snap.not_exported


def test_quantile_edge_cases() -> None:
    assert serving.quantile(0.5, ()) is None
    assert serving.quantile(0.5, ((0.1, 0.0), (float("inf"), 0.0))) is None
    assert serving.quantile(0.99, ((0.1, 1.0), (float("inf"), 10.0))) == 0.1
    assert serving.quantile(0.5, ((1.0, 0.0), (2.0, 10.0), (float("inf"), 10.0))) == 1.5


# --- NPU-Exporter ----------------------------------------------------------------------------


def exporter_page(name: str) -> bytes:
    return (CORPUS / "npu-exporter" / name).read_bytes()


def test_exporter_chips_from_the_real_doc_sample() -> None:
    url = exporter.metrics_url("http://node-a:8082")
    snap = exporter.sample_exporter(
        client({url: exporter_page("npu_exporter_metrics_doc_sample_zh.prom")}), url,
        lambda: 5.0)
    assert snap.ok and snap.source == "node-a:8082"
    assert len(snap.chips) == 8 and snap.chips[0].key == "node-a:8082#0"
    assert snap.chips[0].name == "910A-Ascend-V1"
    assert snap.chips[0].temperature_c is None  # the excerpt elides it: shown as "–", never 0


def test_exporter_testdata_fills_every_field() -> None:
    snap = exporter.snapshot_from_exposition(
        parse(exporter_page("npu_exporter_testdata_prometheus_metrics.prom").decode()),
        "node-b:8082", 1.0, 0.01)
    chip = snap.chips[3]
    assert (chip.npu_id, chip.name, chip.health) == (3, "910Awn-Ascend-V1", "OK")
    assert chip.hbm_total_mb == 0 and chip.temperature_c == 0 and chip.power_w == 0.0


def test_an_unreachable_exporter_is_a_snapshot_error() -> None:
    snap = exporter.sample_exporter(http.client(2.0), "http://127.0.0.1:9/metrics",
                                    lambda: 1.0)
    assert not snap.ok and "connection refused" in (snap.error or "")
    assert snap.source == "127.0.0.1:9"


def test_alerts_name_the_host() -> None:
    page = exporter_page("npu_exporter_testdata_prometheus_metrics.prom").decode()
    sick = page.replace('npu_chip_info_health_status{container_name="",id="0",model_name='
                        '"910Awn-Ascend-V1",namespace="",pcie_bus_info="",pod_name="",vdie_id=""}'
                        ' 1', 'npu_chip_info_health_status{container_name="",id="0",model_name='
                        '"910Awn-Ascend-V1",namespace="",pcie_bus_info="",pod_name="",'
                        'vdie_id=""} 0')
    assert sick != page
    good = exporter.snapshot_from_exposition(parse(sick), "node-b:8082", 100.0, 0.01)
    alerts = judge({"npu": [Shown(good, good)]}, Judging(load_policy(), 200.0, 6.0, None))
    keys = {a.key for a in alerts}
    assert "stale:npu:node-b:8082" in keys and "health:node-b:8082#0" in keys
    stale = next(a for a in alerts if a.key.startswith("stale"))
    assert "node-b:8082" in stale.message


def test_serving_alerts_use_the_policy() -> None:
    tracker = serving.ServingTracker(URL)
    snap = serving.sample(client({URL: prom("vllm_v1_names_b.prom")}), tracker, lambda: 1.0)
    keys = {a.key for a in judge({"serving": [Shown(snap, snap)]},
                                 Judging(load_policy(), 1.0, 6.0, None))}
    assert keys == {"serving:waiting"}  # 2 waiting > 0; KV 87 % < the 90 % warn limit


def test_several_sources_are_judged_each() -> None:
    empty = NpuSnapshot(1.0, (), (), True, None, 0.0, "node-c:8082")
    shown = [Shown(empty, empty), Shown(empty, empty)]
    assert judge({"npu": shown}, Judging(load_policy(), 1.0, 6.0, None)) == []
