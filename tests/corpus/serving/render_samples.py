"""Renders the serving /metrics fixtures of this folder (see README.md: what they are and are
not). Run from the repository root: python tests/corpus/serving/render_samples.py

Each server's metrics are declared here with the names, types, labels and bucket bounds its
source declares, then fed a scripted workload and rendered by prometheus_client (the library
vLLM itself exports with): a `*_a.prom` scrape, more traffic, a `*_b.prom` scrape.
"""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

HERE = Path(__file__).resolve().parent
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5,
                5.0, 7.5, 10.0)
TPOT_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5)


def vllm(version: str) -> tuple[CollectorRegistry, dict[str, object]]:
    """vLLM's OpenAI server: V0 names (0.6) or V1 names with the deprecated ones (0.10)."""
    reg = CollectorRegistry()
    v1 = version == "v1"
    labels = ["engine", "model_name"] if v1 else ["model_name"]
    m: dict[str, object] = {
        "running": Gauge("vllm:num_requests_running",
                         "Number of requests in model execution batches.", labels, registry=reg),
        "waiting": Gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.",
                         labels, registry=reg),
        "gpu_cache": Gauge("vllm:gpu_cache_usage_perc",
                           "GPU KV-cache usage. 1 means 100 percent usage."
                           + (" DEPRECATED: Use vllm:kv_cache_usage_perc instead." if v1 else ""),
                           labels, registry=reg),
        "preempt": Counter("vllm:num_preemptions", "Cumulative number of preemption from the "
                           "engine.", labels, registry=reg),
        "prompt": Counter("vllm:prompt_tokens", "Number of prefill tokens processed.", labels,
                          registry=reg),
        "gen": Counter("vllm:generation_tokens", "Number of generation tokens processed.", labels,
                       registry=reg),
        "success": Counter("vllm:request_success", "Count of successfully processed requests.",
                           [*labels, "finished_reason"], registry=reg),
        "ttft": Histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token "
                          "in seconds.", labels, buckets=TTFT_BUCKETS, registry=reg),
        "tpot": Histogram("vllm:time_per_output_token_seconds", "Histogram of time per output "
                          "token in seconds."
                          + (" DEPRECATED: Use vllm:inter_token_latency_seconds instead."
                             if v1 else ""), labels, buckets=TPOT_BUCKETS, registry=reg),
    }
    if v1:
        m["kv"] = Gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.",
                        labels, registry=reg)
        m["itl"] = Histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token "
                             "latency in seconds.", labels, buckets=TPOT_BUCKETS, registry=reg)
    else:
        m["swapped"] = Gauge("vllm:num_requests_swapped", "Number of requests swapped to CPU.",
                             labels, registry=reg)
    return reg, m


def vllm_traffic(m: dict[str, object], v1: bool, step: int) -> None:
    lv = ("0", "Qwen/Qwen3-30B-A3B") if v1 else ("Qwen/Qwen3-30B-A3B",)
    running, waiting = (3, 0) if step == 0 else (8, 2)
    m["running"].labels(*lv).set(running)  # type: ignore[attr-defined]
    m["waiting"].labels(*lv).set(waiting)  # type: ignore[attr-defined]
    usage = 0.21 if step == 0 else 0.87
    m["gpu_cache"].labels(*lv).set(usage)  # type: ignore[attr-defined]
    if "kv" in m:
        m["kv"].labels(*lv).set(usage)  # type: ignore[attr-defined]
    requests = 20 if step == 0 else 10
    for i in range(requests):
        m["ttft"].labels(*lv).observe(0.18 + 0.02 * i if step == 0 else 0.6 + 0.1 * i)  # type: ignore[attr-defined]
        for _ in range(50):
            gap = 0.04 if step == 0 else 0.09
            m["tpot"].labels(*lv).observe(gap)  # type: ignore[attr-defined]
            if "itl" in m:
                m["itl"].labels(*lv).observe(gap)  # type: ignore[attr-defined]
    m["prompt"].labels(*lv).inc(requests * 512)  # type: ignore[attr-defined]
    m["gen"].labels(*lv).inc(requests * 50)  # type: ignore[attr-defined]
    m["success"].labels(*lv, "stop").inc(requests - 1)  # type: ignore[attr-defined]
    m["success"].labels(*lv, "abort").inc(1)  # type: ignore[attr-defined]
    m["preempt"].labels(*lv).inc(0 if step == 0 else 3)  # type: ignore[attr-defined]


def mindie() -> tuple[CollectorRegistry, dict[str, object]]:
    """MindIE Service's management-port names: no prefix, npu_cache_usage_perc in percent."""
    reg = CollectorRegistry()
    m: dict[str, object] = {
        "received": Counter("request_received", "Number of requests received so far.",
                            registry=reg),
        "success": Counter("request_success", "Number of requests proceeded successfully so "
                           "far.", registry=reg),
        "failed": Counter("request_failed", "Number of requests failed so far.", registry=reg),
        "running": Gauge("num_requests_running", "Number of requests currently running on NPU.",
                         registry=reg),
        "waiting": Gauge("num_requests_waiting", "Number of requests waiting to be processed.",
                         registry=reg),
        "npu_cache": Gauge("npu_cache_usage_perc", "NPU KV-cache usage. 1 means 100 percent "
                           "usage.", registry=reg),
        "preempt": Counter("num_preemptions", "Cumulative number of preemption from the engine.",
                           registry=reg),
        "prompt": Counter("prompt_tokens", "Number of prefill tokens processed.", registry=reg),
        "gen": Counter("generation_tokens", "Number of generation tokens processed.",
                       registry=reg),
        "ttft": Histogram("time_to_first_token_seconds", "Histogram of time to first token in "
                          "seconds.", buckets=TTFT_BUCKETS, registry=reg),
        "tpot": Histogram("time_per_output_token_seconds", "Histogram of time per output token "
                          "in seconds.", buckets=TPOT_BUCKETS, registry=reg),
    }
    return reg, m


def mindie_traffic(m: dict[str, object], step: int) -> None:
    requests = 12
    m["received"].inc(requests)  # type: ignore[attr-defined]
    m["success"].inc(requests - 2)  # type: ignore[attr-defined]
    m["failed"].inc(2 if step else 0)  # type: ignore[attr-defined]
    m["running"].set(4 if step == 0 else 6)  # type: ignore[attr-defined]
    m["waiting"].set(0)  # type: ignore[attr-defined]
    m["npu_cache"].set(30 if step == 0 else 45)  # type: ignore[attr-defined]
    for i in range(requests):
        m["ttft"].observe(0.3 + 0.05 * i)  # type: ignore[attr-defined]
        for _ in range(40):
            m["tpot"].observe(0.035)  # type: ignore[attr-defined]
    m["prompt"].inc(requests * 1024)  # type: ignore[attr-defined]
    m["gen"].inc(requests * 40)  # type: ignore[attr-defined]


def main() -> None:
    for version in ("v0", "v1"):
        reg, metrics = vllm(version)
        for step, suffix in ((0, "a"), (1, "b")):
            vllm_traffic(metrics, version == "v1", step)
            name = {"v0": "vllm_v0_names", "v1": "vllm_v1_names"}[version]
            (HERE / f"{name}_{suffix}.prom").write_bytes(generate_latest(reg))
    reg, metrics = mindie()
    for step, suffix in ((0, "a"), (1, "b")):
        mindie_traffic(metrics, step)
        (HERE / f"mindie_{suffix}.prom").write_bytes(generate_latest(reg))


if __name__ == "__main__":
    main()
