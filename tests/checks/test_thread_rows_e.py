"""Rows and rules of the fourth thread harvest, block E (issue #25): triaged vLLM-Ascend threads
of v0.7 .. v0.10 whose maintainers (or the reporter's own A/B) state the cause. Each fires on
the thread's shape and on a variant in its scope, and stays quiet on the healthy twin the thread
names."""

from __future__ import annotations

from pathlib import Path

from serving_fixtures import (
    QWEN2,
    QWEN2_5_VL,
    known,
    model,
)
from serving_fixtures import (
    flags_finding as flags,
)
from serving_fixtures import (
    support_finding as support,
)

INTERNVL3 = model("internvl_chat", "InternVLChatModel")


# -- serving.support: known-issue rows ---------------------------------------------------------


def test_qwen2_5_vl_on_0_7_1rc1_warns_of_the_sdpa_accuracy_gap(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#118: Qwen2-VL vision code ran with torch SDPA only off GPU."""
    words = "getting image questions wrong"
    hit = support(tmp_path / "a", ["-tp", "4"], "0.7.1rc1", QWEN2_5_VL)
    eager = support(tmp_path / "b", ["--enforce-eager"], "0.7.1rc1", QWEN2_5_VL)
    later = support(tmp_path / "c", ["-tp", "4"], "0.7.3rc1", QWEN2_5_VL)
    text_model = support(tmp_path / "d", ["-tp", "4"], "0.7.1rc1", QWEN2)
    assert hit.status == "warn" and known(hit, words)
    assert known(eager, words)
    assert words not in later.summary and words not in text_model.summary


def test_qwen2_5_vl_on_0_8_4_warns_of_the_machine_restart(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#546 (v0.8.4rc1), #622 (v0.8.4rc2); v0.7.3rc2 served it."""
    words = "restart the whole server"
    hit = support(tmp_path / "a", ["-tp", "8"], "0.8.4rc1", QWEN2_5_VL)
    rc2 = support(tmp_path / "b", ["-tp", "4"], "0.8.4rc2", QWEN2_5_VL)
    twin = support(tmp_path / "c", ["-tp", "8"], "0.7.3rc2", QWEN2_5_VL)
    text_model = support(tmp_path / "d", ["-tp", "8"], "0.8.4rc1", QWEN2)
    assert hit.status == "warn" and known(hit, words)
    assert known(rc2, words)
    assert words not in twin.summary and words not in text_model.summary


def test_internvl3_on_0_9_2rc1_warns_in_eager_and_graph_mode(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#2064: the maintainers' model test fails both ways."""
    words = "InternVL3 (OpenGVLab/InternVL3-9B, remote code) fails to start"
    graph = support(tmp_path / "a", ["--trust-remote-code"], "0.9.2rc1", INTERNVL3)
    eager = support(tmp_path / "b", ["--trust-remote-code", "--enforce-eager"], "0.9.2rc1",
                    INTERNVL3)
    later = support(tmp_path / "c", ["--trust-remote-code"], "0.10.0rc1", INTERNVL3)
    assert graph.status == "warn" and known(graph, words)
    assert known(eager, words)
    assert words not in later.summary


# -- serving.flags: rules ------------------------------------------------------------------------


def test_qwen2_5_vl_in_float16_on_a2_before_0_7_3_warns(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#131 (v0.7.1rc1), #549 (0.7.3rc2), #562: bfloat16 answers."""
    rule = "qwen2-5-vl-float16-before-073"
    hit = flags(tmp_path / "a", ["--dtype", "float16", "-tp", "4"], "0.7.3rc2", QWEN2_5_VL)
    half = flags(tmp_path / "b", ["--dtype", "half"], "0.7.1rc1", QWEN2_5_VL)
    bf16 = flags(tmp_path / "c", ["--dtype", "bfloat16", "-tp", "4"], "0.7.3rc2", QWEN2_5_VL)
    default = flags(tmp_path / "d", ["-tp", "4"], "0.7.3rc2", QWEN2_5_VL)
    later = flags(tmp_path / "e", ["--dtype", "float16"], "0.8.4rc1", QWEN2_5_VL)
    text_model = flags(tmp_path / "f", ["--dtype", "float16"], "0.7.3rc2", QWEN2)
    assert hit.status == "warn" and "qwen2-5-vl-float16-before-073" in hit.rules
    assert rule in half.rules
    for quiet in (bf16, default, later, text_model):
        assert rule not in quiet.rules


def test_qwen2_5_vl_forced_onto_v1_before_0_9_0_warns(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#514, #644 (V0 passes, V1 fails), #736 (the V1 path)."""
    rule = "qwen2-5-vl-v1-engine-before-090"
    v1 = {"VLLM_USE_V1": "1"}
    hit = flags(tmp_path / "a", ["-tp", "4"], "0.7.3", QWEN2_5_VL, env=v1)
    rc = flags(tmp_path / "b", [], "0.8.5rc1", QWEN2_5_VL, env=v1)
    v0 = flags(tmp_path / "c", ["-tp", "4"], "0.7.3", QWEN2_5_VL, env={"VLLM_USE_V1": "0"})
    unset = flags(tmp_path / "d", ["-tp", "4"], "0.7.3", QWEN2_5_VL)
    later = flags(tmp_path / "e", [], "0.9.1", QWEN2_5_VL, env=v1)
    text_model = flags(tmp_path / "f", [], "0.7.3", QWEN2, env=v1)
    assert hit.status == "warn" and "qwen2-5-vl-v1-engine-before-090" in hit.rules
    assert rule in rc.rules
    for quiet in (v0, unset, later, text_model):
        assert rule not in quiet.rules
