"""The fleet model: pure judging and ranking, a thousand nodes, and the whole read against a
real Prometheus scraping fake NPU-Exporters and a node_exporter textfile with doctor results."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from checks.policy import load_policy
from console import fleet
from probes import prometheus_api as api
from probes.prometheus_api import Series
from tests.prometheus_fixture import (
    FakeExporter,
    PrometheusServer,
    prometheus_missing,
    scraped_fleet,
    send,
    stub_server,
    vector_body,
)

LIMITS = fleet.fleet_limits(load_policy())


def series(name: str, node: str, chip: int | None, value: float | None,
           **labels: str) -> Series:
    pairs = {"__name__": name, "instance": f"{node}:8082", "job": "npu", **labels}
    if chip is not None:
        pairs["id"] = str(chip)
    return Series(tuple(sorted(pairs.items())), value, 0.0)


def chip_fields(nodes: Mapping[str, Mapping[int, Mapping[str, float]]]) -> dict[str, list[Series]]:
    out: dict[str, list[Series]] = {name: [] for name in fleet.CHIP_METRICS}
    for node, chips in nodes.items():
        for chip, values in chips.items():
            for name, value in values.items():
                out[name].append(series(fleet.CHIP_METRICS[name][0], node, chip, value))
    return out


def normal_chip(temperature_c: float = 45.0, **changes: float) -> dict[str, float]:
    return {"health": 1, "temperature_c": temperature_c, "hbm_used_mb": 30000,
            "hbm_total_mb": 65536, "link_status": 1, **changes}


def judge(values: Mapping[str, float | None]) -> tuple[str, tuple[str, ...]]:
    return fleet.judge_chip(values, ("ok", ()), LIMITS.hbm)


# --- judging one chip --------------------------------------------------------------------------


def test_a_healthy_chip_is_ok() -> None:
    assert judge(normal_chip()) == ("ok", ())


def test_health_zero_fails_and_the_unknown_codes_warn() -> None:
    assert judge(normal_chip(health=0)) == ("fail", ("unhealthy (health status 0)",))
    # the exporter's code writes MaxInt32 for unknown health (collector_for_npu.go)
    assert judge(normal_chip(health=2147483647))[0] == "warn"


def test_what_is_not_exported_is_unknown_never_ok() -> None:
    values = normal_chip()
    del values["health"]
    assert judge(values) == ("unknown", ("health not exported",))


def test_hbm_use_against_the_console_policy() -> None:
    assert judge(normal_chip(hbm_used_mb=63000))[0] == "warn"  # 96 %
    assert judge(normal_chip(hbm_used_mb=65500))[0] == "fail"  # 99.9 %


def test_link_error_code_and_ecc_counters_warn() -> None:
    level, reasons = judge(normal_chip(link_status=0, error_code=0x80E01801,
                                       ecc_double_bit=3))
    assert level == "warn"
    assert reasons == ("link down", "error code 0x80E01801", "3 HBM double-bit ECC errors")


# --- the fleet ---------------------------------------------------------------------------------


def test_nodes_rank_by_their_worst_chip_and_a_vanished_node_comes_first() -> None:
    nodes = {
        "calm": {i: normal_chip(45 + i) for i in range(8)},
        "hot": {**{i: normal_chip(45) for i in range(8)}, 3: normal_chip(80)},
        "sick": {**{i: normal_chip(45) for i in range(8)}, 5: normal_chip(45, health=0)},
    }
    seen = [series("", name, None, 8) for name in ("calm", "hot", "sick", "lost")]
    built = fleet.build_fleet(chip_fields(nodes), seen, [], LIMITS, 1000.0)
    assert [(n.name, n.level) for n in built.nodes] == [
        ("lost", "gone"), ("sick", "fail"), ("hot", "warn"), ("calm", "ok")]
    hot = built.nodes[2]
    assert hot.chips[0].npu_id == 3 and "above" in hot.reasons[0]
    assert hot.chips[0].above_fleet_c == pytest.approx(80 - 45)
    assert built.counts()["gone"] == 1


def test_doctor_results_join_the_node_through_node_exporters_instance() -> None:
    nodes = {"10.0.0.5": {i: normal_chip() for i in range(2)}}
    doctor = [series("ascend_doctor_checks", "10.0.0.5", None, n, status=s,
                     instance="10.0.0.5:9100")
              for s, n in (("pass", 14), ("warn", 1), ("fail", 2), ("error", 0))]
    doctor.append(series("ascend_doctor_last_run_timestamp_seconds", "10.0.0.5", None, 880.0,
                         instance="10.0.0.5:9100"))
    [node] = fleet.build_fleet(chip_fields(nodes), [], doctor, LIMITS, 1000.0).nodes
    assert node.level == "fail" and node.reasons == ("doctor: 2 checks failed",)
    assert node.doctor is not None
    assert node.doctor.line(1000.0) == "doctor: 2 fail, 1 warn, 2 min ago"


def test_a_thousand_nodes_build_and_rank() -> None:
    nodes = {f"node-{n:04d}": {i: normal_chip(40 + (n * 7 + i) % 30) for i in range(8)}
             for n in range(1000)}
    nodes["node-0500"][2] = normal_chip(45, health=0)
    fields = chip_fields(nodes)
    started = time.perf_counter()
    built = fleet.build_fleet(fields, [], [], LIMITS, 0.0)
    print(f"1000 nodes x 8 chips: {time.perf_counter() - started:.3f} s")  # shown, not judged
    assert len(built.nodes) == 1000 and built.nodes[0].name == "node-0500"
    assert all(len(n.chips) == 8 for n in built.nodes)


def test_a_reader_remembers_a_node_past_the_seen_window() -> None:
    answers = iter([["a", "b"], ["a"], ["a"]])
    current: list[str] = []

    def reply(handler: object) -> None:
        query = handler.path  # type: ignore[attr-defined]
        names = current if "npu_chip_info_health_status" in query or "last_over" in query else []
        body = vector_body([({"node": n, "instance": f"{n}:8082", "id": "0"}, "1")
                            for n in names])
        send(handler, 200, body)  # type: ignore[arg-type]

    with stub_server(reply) as (url, _), api.client() as client:
        reader = fleet.FleetReader(client, url, LIMITS, clock=lambda: 0.0)
        levels = []
        for names in answers:
            current[:] = names
            levels.append({n.name: n.level for n in reader.read().nodes})
    assert levels[0] == {"a": "unknown", "b": "unknown"}  # no temperature exported
    assert levels[2] == {"a": "unknown", "b": "gone"}


def test_a_failed_read_keeps_the_last_nodes_and_says_why() -> None:
    with stub_server(lambda h: send(h, 503, b"overloaded")) as (url, _), api.client() as c:
        read = fleet.FleetReader(c, url, LIMITS).read()
    assert read.nodes == () and "HTTP 503" in read.error


def test_a_slow_prometheus_costs_one_deadline_per_read_not_one_per_query() -> None:
    def slow(handler: object) -> None:
        time.sleep(0.2)
        send(handler, 200, vector_body([]))  # type: ignore[arg-type]

    limits = api.Limits(deadline_s=0.5)
    with stub_server(slow) as (url, paths), api.client(limits) as c:
        read = fleet.FleetReader(c, url, LIMITS, limits).read()
    # the query that crosses the read's deadline stops there, or the next one is not sent
    assert "took longer than 0.5 s" in read.error or "no complete answer within" in read.error
    assert len(paths) < len(fleet.CHIP_METRICS)


# --- against a real Prometheus ----------------------------------------------------------------


def test_without_prometheus_the_real_server_tests_say_how_to_get_it(tmp_path: Path) -> None:
    assert "apt-get install -y prometheus" in prometheus_missing(str(tmp_path / "prometheus"))


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[tuple[PrometheusServer, dict[str, FakeExporter]]]:
    yield from scraped_fleet(tmp_path)


def test_the_fleet_through_a_real_prometheus(
        prometheus: tuple[PrometheusServer, dict[str, FakeExporter]]) -> None:
    server, exporters = prometheus
    url = server.url
    with api.client() as client:
        reader = fleet.FleetReader(client, url, LIMITS)
        first = reader.read()
        assert first.error == ""
        assert [(n.name, n.level) for n in first.nodes] == [
            ("node-c", "fail"), ("node-b", "warn"), ("node-a", "warn"), ("node-d", "ok")]
        node_b = first.nodes[1]
        assert node_b.chips[0].npu_id == 3 and node_b.hottest_c == 88.0
        assert first.nodes[0].chips[0].npu_id == 5
        assert first.nodes[2].doctor is not None
        assert first.nodes[2].reasons == ("doctor: 1 warning",)
        history = reader.history(node_b)
        assert history and history[3] and history[3][-1] == 88.0

        exporters["node-d"].stop()
        deadline = time.monotonic() + 30
        gone = first
        while time.monotonic() < deadline:
            gone = reader.read()
            if gone.nodes and gone.nodes[0].level == "gone":
                break
            time.sleep(0.5)
    assert (gone.nodes[0].name, gone.nodes[0].level) == ("node-d", "gone")
    assert {n.name for n in gone.nodes} == {"node-a", "node-b", "node-c", "node-d"}
