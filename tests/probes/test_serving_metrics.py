"""Prometheus text parsing and the serving-metric name map, on the corpus (tests/corpus/serving,
tests/corpus/npu-exporter; provenance in their READMEs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from probes.prometheus import parse
from probes.serving_metrics import REQUIRED, read_serving

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
SERVING = CORPUS / "serving"
EXPORTER = CORPUS / "npu-exporter"


def text(name: str) -> str:
    return (SERVING / name).read_text()


def without_deprecated(body: str) -> str:
    """A newer vLLM that hides the deprecated names (only the renamed ones remain)."""
    gone = ("vllm:gpu_cache_usage_perc", "vllm:time_per_output_token_seconds")
    return "\n".join(line for line in body.splitlines() if not any(g in line for g in gone))


def test_the_exporter_doc_sample_parses_around_its_elision_lines() -> None:
    expo = parse((EXPORTER / "npu_exporter_metrics_doc_sample_zh.prom").read_text())
    assert expo.problems and all("not a Prometheus sample: ..." in p for p in expo.problems)
    [npus] = expo.named("machine_npu_nums")
    assert npus.value == 8
    freq = expo.named("npu_chip_info_aicore_current_freq")
    assert len(freq) == 8 and freq[0].timestamp_s == pytest.approx(1723621883.587)
    assert freq[0].label("pcie_bus_info") == "0000:61:00.0"
    assert expo.type_of("npu_chip_info_aicore_current_freq") == "gauge"


def test_the_exporter_testdata_fixture_parses_whole() -> None:
    expo = parse((EXPORTER / "npu_exporter_testdata_prometheus_metrics.prom").read_text())
    assert not expo.problems
    assert len(expo.named("npu_chip_info_hbm_total_memory")) == 8


@pytest.mark.parametrize(("name", "kv", "itl"), [
    ("vllm_v0_names_b.prom", "vllm:gpu_cache_usage_perc", "vllm:time_per_output_token_seconds"),
    ("vllm_v1_names_b.prom", "vllm:kv_cache_usage_perc", "vllm:inter_token_latency_seconds"),
])
def test_vllm_old_and_new_names(name: str, kv: str, itl: str) -> None:
    reading = read_serving(parse(text(name)))
    assert reading.server == "vLLM"
    assert reading.names["kv_cache_usage"] == kv and reading.names["itl"] == itl
    assert reading.gauges["kv_cache_usage"] == pytest.approx(0.87)
    assert reading.gauges["running"] == 8 and reading.gauges["waiting"] == 2
    assert reading.counters["aborted_requests"] == 2  # one abort per scripted round
    assert reading.counters["preemptions"] == 3
    assert set(REQUIRED) <= set(reading.names)
    assert reading.missing == ("failed_requests",)


def test_a_vllm_that_hides_the_deprecated_names() -> None:
    reading = read_serving(parse(without_deprecated(text("vllm_v1_names_b.prom"))))
    assert reading.names["kv_cache_usage"] == "vllm:kv_cache_usage_perc"
    assert reading.names["itl"] == "vllm:inter_token_latency_seconds"


def test_mindie_names_and_its_percent_cache_usage() -> None:
    reading = read_serving(parse(text("mindie_a.prom")))
    assert reading.server == "MindIE"
    assert reading.names["kv_cache_usage"] == "npu_cache_usage_perc"
    assert reading.gauges["kv_cache_usage"] == pytest.approx(0.30)  # published as 30
    assert reading.names["itl"] == "time_per_output_token_seconds"
    assert "aborted_requests" in reading.missing and "failed_requests" in reading.names


def test_a_server_without_serving_metrics() -> None:
    reading = read_serving(parse("python_info{version=\"3.11\"} 1\n"))
    assert reading.server == "unknown" and set(reading.missing) >= set(REQUIRED)


def test_a_ratio_gauge_is_the_fullest_engine_and_counts_are_summed() -> None:
    text = "".join(
        f'vllm:kv_cache_usage_perc{{engine="{e}",model_name="q"}} {kv}\n'
        f'vllm:num_requests_running{{engine="{e}",model_name="q"}} {running}\n'
        for e, kv, running in (("0", 0.48, 3), ("1", 0.47, 2)))
    reading = read_serving(parse(text))
    assert reading.gauges["kv_cache_usage"] == 0.48  # never 0.95
    assert reading.engines["kv_cache_usage"] == (("0", 0.48), ("1", 0.47))
    assert reading.gauges["running"] == 5  # requests are counts: summed over engines
