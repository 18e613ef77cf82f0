"""The Prometheus API client against loopback stub servers: good answers, and hostile ones
(huge, a million series, slow, redirecting, deeply nested, NaN) bounded to one-line errors."""

from __future__ import annotations

import gzip
import json
import time
from http.server import BaseHTTPRequestHandler

import pytest

from probes import prometheus_api as api
from tests.prometheus_fixture import send, stub_server, vector_body

SMALL = api.Limits(connect_s=2, read_s=5, deadline_s=5, max_bytes=1024 * 1024, max_series=100)


def ask(url: str, limits: api.Limits = SMALL, query: str = "up") -> api.Answer:
    with api.client(limits) as http_client:
        return api.instant(http_client, url, query, None, limits)


def failure(url: str, limits: api.Limits = SMALL) -> str:
    with pytest.raises(api.PromAPIError) as caught:
        ask(url, limits)
    message = str(caught.value)
    assert "\n" not in message and "/api/v1/query" in message
    return message


def test_an_instant_answer_becomes_series_with_labels_and_values() -> None:
    body = vector_body([({"__name__": "npu_chip_info_temperature", "id": "3",
                          "instance": "n1:8082"}, "61")])
    with stub_server(lambda h: send(h, 200, body)) as (url, paths):
        answer = ask(url, query='max by (id) (npu_chip_info_temperature)')
    [series] = answer.series
    assert series.label("id") == "3" and series.value == 61.0 and answer.dropped == 0
    assert paths[0].startswith("/api/v1/query?query=max+by")


def test_nan_and_infinities_are_no_value_not_a_number_to_rank() -> None:
    body = vector_body([({"id": "0"}, "NaN"), ({"id": "1"}, "+Inf"), ({"id": "2"}, "-Inf"),
                        ({"id": "3"}, "1.5")])
    with stub_server(lambda h: send(h, 200, body)) as (url, _):
        values = [s.value for s in ask(url).series]
    assert values == [None, None, None, 1.5]


def test_a_range_answer_keeps_points_in_order() -> None:
    body = json.dumps({"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"id": "0"}, "values": [[100, "40"], [130, "NaN"], [160, "42"]]}]}}).encode()
    with stub_server(lambda h: send(h, 200, body)) as (url, paths), api.client() as c:
        answer = api.range_query(c, url, "npu_chip_info_temperature", 100, 160, 30)
    assert answer.series[0].points == ((100.0, 40.0), (130.0, None), (160.0, 42.0))
    assert "step=30" in paths[0] and "/api/v1/query_range" in paths[0]


def test_more_series_than_the_cap_keeps_the_cap_and_counts_the_rest() -> None:
    body = vector_body([({"id": str(i)}, "1") for i in range(5000)])
    with stub_server(lambda h: send(h, 200, body)) as (url, _):
        answer = ask(url)
    assert len(answer.series) == 100 and answer.dropped == 4900


def _million_series(handler: BaseHTTPRequestHandler) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.end_headers()  # no length: streamed until the client hangs up
    handler.wfile.write(b'{"status":"success","data":{"resultType":"vector","result":[')
    for start in range(0, 1_000_000, 10_000):
        handler.wfile.write(b",".join(b'{"metric":{"id":"%d"},"value":[1,"1"]}' % i
                                      for i in range(start, start + 10_000)))


def test_a_million_series_stops_at_the_byte_cap() -> None:
    with stub_server(_million_series) as (url, _):
        message = failure(url)
    assert "larger than 1 MiB; not read" in message


def test_a_huge_answer_is_refused_at_the_cap() -> None:
    body = b'{"status":"success","data":{"resultType":"vector","result":[]},"pad":"' + \
        b"x" * (1024 * 1024) + b'"}'
    with stub_server(lambda h: send(h, 200, body)) as (url, _):
        message = failure(url, api.Limits(max_bytes=1024 * 1024))
    assert "larger than 1 MiB" in message


def _drip(handler: BaseHTTPRequestHandler) -> None:
    handler.send_response(200)
    handler.send_header("Content-Length", "100000")
    handler.end_headers()
    for _ in range(200):  # bounded: the stub itself never runs away
        handler.wfile.write(b" ")
        handler.wfile.flush()
        time.sleep(0.05)


def test_an_answer_that_drips_stops_at_the_deadline() -> None:
    limits = api.Limits(read_s=5, deadline_s=0.5)
    with stub_server(_drip) as (url, _):
        message = failure(url, limits)
    assert "no complete answer within 0.5 s" in message


def _silent(handler: BaseHTTPRequestHandler) -> None:
    time.sleep(2)


def test_a_server_that_never_answers_stops_at_the_read_timeout() -> None:
    with stub_server(_silent) as (url, _):
        message = failure(url, api.Limits(read_s=0.3))
    assert "stopped answering" in message


def test_a_redirect_is_named_not_followed() -> None:
    def redirect(handler: BaseHTTPRequestHandler) -> None:
        send(handler, 302, b"", {"Location": "http://elsewhere.invalid/api/v1/query"})

    with stub_server(redirect) as (url, paths):
        message = failure(url)
    assert "302" in message and "elsewhere.invalid" in message and len(paths) == 1


def test_a_gzip_answer_is_unpacked_and_a_gzip_bomb_stops_at_the_cap() -> None:
    packed = gzip.compress(vector_body([({"id": "0"}, "7")]))
    with stub_server(lambda h: send(h, 200, packed, {"Content-Encoding": "gzip"})) as (url, _):
        assert [s.value for s in ask(url).series] == [7.0]
    bomb = gzip.compress(b'{"pad":"' + b"0" * (8 * 1024 * 1024) + b'"}')
    assert len(bomb) < SMALL.max_bytes
    with stub_server(lambda h: send(h, 200, bomb, {"Content-Encoding": "gzip"})) as (url, _):
        assert "unpacks to more than 1 MiB" in failure(url)


def test_deeply_nested_json_is_refused_before_decoding() -> None:
    body = b"[" * 200_000 + b"]" * 200_000
    with stub_server(lambda h: send(h, 200, body)) as (url, _):
        message = failure(url)
    assert "nests deeper than 16" in message


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    assert api.nests_within(b'{"a": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\\"[[[["}', 2)
    assert not api.nests_within(b"[[[]]]", 2)
    assert api.nests_within(b"[[[]]]", 3)


def test_a_query_error_shows_the_servers_reason() -> None:
    body = json.dumps({"status": "error", "errorType": "bad_data",
                       "error": "1:5: parse error\nunexpected"}).encode()
    with stub_server(lambda h: send(h, 400, body)) as (url, _):
        message = failure(url)
    assert "HTTP 400" in message and "bad_data: 1:5: parse error" in message


def test_a_proxy_error_page_is_its_status() -> None:
    with stub_server(lambda h: send(h, 502, b"<html>Bad Gateway</html>")) as (url, _):
        assert "HTTP 502" in failure(url)


def test_a_page_that_is_not_prometheus_says_so() -> None:
    with stub_server(lambda h: send(h, 200, b"<html>Grafana</html>")) as (url, _):
        assert "not JSON" in failure(url)


def test_nothing_listening_names_the_url() -> None:
    with stub_server(lambda h: send(h, 200, b"")) as (url, _):
        pass  # closed: its port now refuses
    assert "cannot connect" in failure(url)


def test_a_url_that_cannot_name_a_server_is_one_line() -> None:
    with pytest.raises(api.PromAPIError, match="--prometheus 'prom:9090'"):
        api.base_url("prom:9090")
    assert api.base_url("http://prom:9090/api/v1/") == "http://prom:9090"
    assert api.base_url("http://h/prometheus") == "http://h/prometheus"


def test_instance_host() -> None:
    assert api.host_of("10.0.0.5:8082") == "10.0.0.5"
    assert api.host_of("[fe80::1]:9100") == "fe80::1"
    assert api.host_of("node-7") == "node-7"
    assert api.host_of("[bold]x:1") == "[bold]x:1"


