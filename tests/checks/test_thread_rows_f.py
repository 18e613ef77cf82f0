"""Flag rules from triaged vLLM-Ascend threads of v0.11 .. v0.13 (issue #25, fourth thread
harvest F): each fires on the thread's shape and on a variant in its scope, and stays quiet on
the healthy twin the thread names (and outside the releases it names)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from serving_fixtures import (
    DEEPSEEK_V3,
    QWEN3_MOE,
)
from serving_fixtures import (
    flags_finding as flags,
)

from checks.model import Finding

MTP = ["--speculative-config", '{"method":"mtp","num_speculative_tokens":1}']


def test_mooncake_without_use_ascend_direct_on_0_11_0_warns(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#5635: 1P1D on one A2 machine, every transfer fails; the
    answer is use_ascend_direct true (and CANN newer than 8.3.RC1)."""
    def pd(path: Path, extra: dict[str, Any], role: str = "kv_producer",
           release: str = "0.11.0") -> Finding:
        config = {"kv_connector": "MooncakeConnectorV1", "kv_role": role,
                  "kv_port": "30000", "kv_connector_extra_config": extra}
        args = ["-tp", "1", "--kv-transfer-config", json.dumps(config)]
        return flags(path, args, release, QWEN3_MOE)

    producer = pd(tmp_path / "a", {})
    consumer = pd(tmp_path / "b", {"prefill": {"dp_size": 1, "tp_size": 1}}, role="kv_consumer")
    direct = pd(tmp_path / "c", {"use_ascend_direct": True})
    next_line = pd(tmp_path / "d", {}, release="0.12.0rc1")
    assert producer.status == "warn" and "mooncake-use-ascend-direct-0110" in producer.rules
    assert "mooncake-use-ascend-direct-0110" in consumer.rules
    assert "mooncake-use-ascend-direct-0110" not in direct.rules + next_line.rules


def test_deepseek_mtp_with_async_scheduling_and_ep_on_0_12_0rc1_warns(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#5046 (fixes #4986): MTP drafter metadata mismatch under async
    scheduling with large-scale EP."""
    rule = "dsv3-mtp-async-scheduling-ep-0120rc1"
    base = ["-dp", "4", "-tp", "4", "--enable-expert-parallel", "--quantization", "ascend"]
    hit = flags(tmp_path / "a", [*base, *MTP, "--async-scheduling"], "0.12.0rc1", DEEPSEEK_V3,
                chip="A3")
    deepseek_mtp = ["--speculative-config", '{"method":"deepseek_mtp","num_speculative_tokens":2}']
    variant = flags(tmp_path / "b", [*base, *deepseek_mtp, "--async-scheduling"], "0.12.0rc1",
                    DEEPSEEK_V3)
    synchronous = flags(tmp_path / "c", [*base, *MTP], "0.12.0rc1", DEEPSEEK_V3, chip="A3")
    no_ep = flags(tmp_path / "d", ["-tp", "16", *MTP, "--async-scheduling"], "0.12.0rc1",
                  DEEPSEEK_V3, chip="A3")
    fixed = flags(tmp_path / "e", [*base, *MTP, "--async-scheduling"], "0.13.0rc1", DEEPSEEK_V3,
                  chip="A3")
    other_model = flags(tmp_path / "f", [*base, *MTP, "--async-scheduling"], "0.12.0rc1",
                        QWEN3_MOE, chip="A3")
    assert hit.status == "warn" and "dsv3-mtp-async-scheduling-ep-0120rc1" in hit.rules
    assert "dsv3-mtp-async-scheduling-ep-0120rc1" in variant.rules
    for quiet in (synchronous, no_ep, fixed, other_model):
        assert rule not in quiet.rules
