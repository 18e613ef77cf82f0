"""A real Prometheus server (Debian's `prometheus` package) on loopback, scraping fake
NPU-Exporters that replay the recorded exporter output with per-node changes.

The recorded output is Ascend/mind-cluster @ 22bb3d98 `component/npu-exporter/collector/
testdata/prometheus_metrics` (tests/corpus/npu-exporter/). Its samples
carry fixed 2020 timestamps, which Prometheus would refuse as too old: the scrape
configuration sets `honor_timestamps: false` so each sample takes its scrape's time.

Everything is bounded: the server start, the wait for targets and every HTTP call have
timeouts, and `stop()` ends the server and the exporters (kill after a grace period).
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

CORPUS_NAME = "npu_exporter_testdata_prometheus_metrics.prom"
PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
START_WAIT_S = 60.0
_SAMPLE = re.compile(r'^(?P<name>[a-z_]+)\{(?P<labels>[^}]*)\}\s+(?P<value>\S+)(?P<rest>.*)$')


def prometheus_missing(binary: str = PROMETHEUS) -> str:
    """Why the real-server tests cannot run here ("" when they can)."""
    if not Path(binary).is_file():
        return ("prometheus is not installed (apt-get install -y prometheus; .ci/run does "
                "it)")
    return ""


def recorded_text() -> str:
    path = Path(__file__).parent / "corpus" / "npu-exporter" / CORPUS_NAME
    return path.read_text(encoding="utf-8")


def exporter_text(base: str, values: Mapping[tuple[str, int], float],
                  defaults: Mapping[str, float] | None = None) -> str:
    """The recorded output with `values[(metric, chip id)]` (then `defaults[metric]`) in place
    of the recorded values; lines, labels and order kept."""
    defaults = defaults or {}
    out = []
    for line in base.splitlines():
        match = _SAMPLE.match(line)
        chip = re.search(r'(?:^|,)id="(\d+)"', match["labels"]) if match else None
        if match and chip:
            key = (match["name"], int(chip[1]))
            value = values.get(key, defaults.get(match["name"]))
            if value is not None:
                line = f"{match['name']}{{{match['labels']}}} {value:g}{match['rest']}"
        out.append(line)
    return "\n".join(out) + "\n"


class _Handler(BaseHTTPRequestHandler):
    server: _ExporterServer

    def do_GET(self) -> None:
        body = self.server.text.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


class _ExporterServer(ThreadingHTTPServer):
    daemon_threads = True
    text = ""


@dataclass
class FakeExporter:
    """One node's /metrics on 127.0.0.1; `stop()` makes the node vanish."""

    name: str
    text: str
    server: _ExporterServer = field(init=False)

    def __post_init__(self) -> None:
        self.server = _ExporterServer(("127.0.0.1", 0), _Handler)
        self.server.text = self.text
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.1}, daemon=True)
        self.thread.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        if self.thread.is_alive():
            self.server.shutdown()
            self.server.server_close()
            self.thread.join(5)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def scrape_config(jobs: Mapping[str, list[FakeExporter]]) -> str:
    """A Prometheus configuration scraping every exporter each second, with its `node` label."""
    lines = ["global:", "  scrape_interval: 1s", "  evaluation_interval: 1s", "scrape_configs:"]
    for job, exporters in jobs.items():
        lines += [f"  - job_name: {job}", "    honor_timestamps: false",
                  "    scrape_timeout: 900ms", "    static_configs:"]
        for exporter in exporters:
            lines += [f"      - targets: ['{exporter.address}']",
                      f"        labels: {{node: {exporter.name}}}"]
    return "\n".join(lines) + "\n"


@dataclass
class PrometheusServer:
    workdir: Path
    jobs: dict[str, list[FakeExporter]]
    process: subprocess.Popen[bytes] | None = None
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, attempts: int = 3) -> None:
        config = self.workdir / "prometheus.yml"
        config.write_text(scrape_config(self.jobs), encoding="utf-8")
        count = sum(len(e) for e in self.jobs.values())
        for attempt in range(attempts):  # the free port may be taken before prometheus binds it
            self._spawn(config)
            try:
                self.wait_for(lambda: self.targets_up() >= count, "every target up")
                return
            except AssertionError:
                if attempt + 1 == attempts or "address already in use" not in self.log_tail():
                    raise
                self.stop_server()

    def _spawn(self, config: Path) -> None:
        self.port = free_port()
        log = (self.workdir / "prometheus.log").open("wb")
        self.process = subprocess.Popen(
            [PROMETHEUS, f"--config.file={config}",
             f"--storage.tsdb.path={self.workdir / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()

    def wait_for(self, condition: object, what: str, limit_s: float = START_WAIT_S) -> None:
        """Poll `condition` (bounded) until it holds; AssertionError with the log's tail."""
        assert callable(condition)
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise AssertionError(f"prometheus exited: {self.log_tail()}")
            with contextlib.suppress(OSError, ValueError):
                if condition():
                    return
            time.sleep(0.25)
        raise AssertionError(f"prometheus: not {what} within {limit_s:g} s: {self.log_tail()}")

    def get_json(self, path: str) -> dict[str, object]:
        with urllib.request.urlopen(self.url + path, timeout=5) as response:
            doc: dict[str, object] = json.loads(response.read(4 * 1024 * 1024))
            return doc

    def targets_up(self) -> int:
        data = self.get_json("/api/v1/targets?state=active").get("data")
        active = data.get("activeTargets", []) if isinstance(data, dict) else []
        return sum(1 for t in active if isinstance(t, dict) and t.get("health") == "up")

    def log_tail(self) -> str:
        path = self.workdir / "prometheus.log"
        return path.read_text(errors="replace")[-600:] if path.is_file() else "(no log)"

    def stop_server(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)

    def stop(self) -> None:
        self.stop_server()
        for exporters in self.jobs.values():
            for exporter in exporters:
                exporter.stop()


@contextlib.contextmanager
def running(workdir: Path, jobs: dict[str, list[FakeExporter]]) -> Iterator[PrometheusServer]:
    server = PrometheusServer(workdir, jobs)
    try:
        server.start()
        yield server
    finally:
        server.stop()


Reply = Callable[[BaseHTTPRequestHandler], None]


class _StubHandler(BaseHTTPRequestHandler):
    server: _StubServer

    def do_GET(self) -> None:
        self.server.paths.append(self.path)
        with contextlib.suppress(OSError):  # the client may hang up on a hostile answer
            self.server.reply(self)

    def log_message(self, format: str, *args: object) -> None:
        pass


class _StubServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, reply: Reply) -> None:
        super().__init__(("127.0.0.1", 0), _StubHandler)
        self.reply = reply
        self.paths: list[str] = []


@contextlib.contextmanager
def stub_server(reply: Reply) -> Iterator[tuple[str, list[str]]]:
    """A loopback HTTP server answering every GET with `reply(handler)`: its URL and the paths
    it was asked for."""
    server = _StubServer(reply)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", server.paths
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def send(handler: BaseHTTPRequestHandler, status: int, body: bytes,
         headers: Mapping[str, str] | None = None) -> None:
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(body)


def vector_body(series: list[tuple[dict[str, str], str]], now_s: float = 1.7e9) -> bytes:
    """A Prometheus instant-query answer holding `series` (labels, value text)."""
    result = [{"metric": labels, "value": [now_s, value]} for labels, value in series]
    return json.dumps({"status": "success",
                       "data": {"resultType": "vector", "result": result}}).encode()


# the fleet the tests scrape: a calm node with a doctor warning (node-a), a hot chip (node-b),
# an unhealthy chip (node-c) and a node the tests stop (node-d)
NORMAL = {"npu_chip_info_health_status": 1, "npu_chip_info_hbm_total_memory": 65536,
          "npu_chip_info_hbm_used_memory": 30000, "npu_chip_info_link_status": 1,
          "npu_chip_info_network_status": 1, "npu_chip_info_utilization": 40}


def doctor_text(statuses: Mapping[str, str]) -> str:
    """What `ascend-doctor --prometheus FILE` writes for checks ending in `statuses`."""
    from checks.model import Result
    from checks.prom import to_prometheus
    from checks.runner import Run

    results = tuple(Result(cid, cid, "npu", status, "x", (), "", cid, 1.0)  # type: ignore[arg-type]
                    for cid, status in statuses.items())
    return to_prometheus(Run(results, 10.0), now_s=time.time())


def scraped_fleet(workdir: Path) -> Iterator[tuple[PrometheusServer, dict[str, FakeExporter]]]:
    """For a pytest fixture: the real Prometheus scraping that fleet (skips without one)."""
    import pytest

    if prometheus_missing():
        pytest.skip(prometheus_missing())
    base = recorded_text()
    temps = {("npu_chip_info_temperature", i): 44.0 + i for i in range(8)}
    exporters = {
        "node-a": FakeExporter("node-a", exporter_text(base, temps, NORMAL)),
        "node-b": FakeExporter("node-b", exporter_text(
            base, {**temps, ("npu_chip_info_temperature", 3): 88.0}, NORMAL)),
        "node-c": FakeExporter("node-c", exporter_text(
            base, {**temps, ("npu_chip_info_health_status", 5): 0}, NORMAL)),
        "node-d": FakeExporter("node-d", exporter_text(base, temps, NORMAL)),
    }
    textfile = FakeExporter("node-a", doctor_text({"npu.health": "pass",
                                                   "versions.parity": "warn"}))
    with running(workdir, {"npu": list(exporters.values()), "node": [textfile]}) as server:
        yield server, exporters
