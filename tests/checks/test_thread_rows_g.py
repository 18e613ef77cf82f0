"""Rules from the fourth thread harvest, letter G (issue #25: triaged vLLM-Ascend threads of
the v0.14 .. v0.18 releases whose cause is stated): each fires on the thread's shape and on a
variant in its scope, and stays quiet on the healthy twin the thread names."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from serving_fixtures import QWEN3_5, QWEN3_5_MOE, QWEN3_MOE, model, served

from checks.builtin.serving_flags import serving_flags
from checks.model import Finding

GPT_OSS = model("gpt_oss", "GptOssForCausalLM")
# the original openai/gpt-oss checkpoints name their quantization in config.json
GPT_OSS_MXFP4 = {**GPT_OSS, "quantization_config": {"quant_method": "mxfp4"}}


def flags(tmp_path: Path, args: list[str], release: str, config: dict[str, Any],
          chip: str = "A3") -> Finding:
    with served(tmp_path, args, release=release, config=config, chip=chip) as ctx:
        return serving_flags(ctx)


def compilation(config: dict[str, Any]) -> list[str]:
    return ["--compilation-config", json.dumps(config)]


# -- vllm-project/vllm-ascend#12253, #12278 ------------------------------------------------------

ENABLE_SP = "qwen3-5-pass-config-enable-sp-0180"


def test_qwen3_5_with_pass_config_enable_sp_on_0_18_0_warns(tmp_path: Path) -> None:
    """The thread's shape (Qwen3.5-397B MoE, v0.18.0 A3 image), a dense Qwen3.5 on a later
    release with a graph mode beside the key; quiet on v0.17.0rc1 (the reporter's working
    release), without the key, with it off, and for another model family."""
    sp = compilation({"pass_config": {"enable_sp": True}})
    both = compilation({"cudagraph_mode": "FULL_DECODE_ONLY", "pass_config": {"enable_sp": True}})
    hit = flags(tmp_path / "a", ["-tp", "16", *sp], "0.18.0", QWEN3_5_MOE)
    dense_later = flags(tmp_path / "b", ["-tp", "4", *both], "0.19.0rc1", QWEN3_5, chip="A2")
    older = flags(tmp_path / "c", ["-tp", "16", *sp], "0.17.0rc1", QWEN3_5_MOE)
    dropped = flags(tmp_path / "d", ["-tp", "16"], "0.18.0", QWEN3_5_MOE)
    off = flags(tmp_path / "e", ["-tp", "16", *compilation({"pass_config": {"enable_sp": False}})],
                "0.18.0", QWEN3_5_MOE)
    other = flags(tmp_path / "f", ["-tp", "16", *sp], "0.18.0", QWEN3_MOE)
    assert hit.status == "warn" and "qwen3-5-pass-config-enable-sp-0180" in hit.rules
    assert "enable_sp" in hit.summary
    assert ENABLE_SP in dense_later.rules
    for quiet in (older, dropped, off, other):
        assert ENABLE_SP not in quiet.rules


# -- vllm-project/vllm-ascend#7131, #2228 --------------------------------------------------------

MXFP4 = "gpt-oss-mxfp4-a2-a3"


def test_gpt_oss_original_mxfp4_checkpoint_on_a2_a3_warns(tmp_path: Path) -> None:
    """The original MXFP4 checkpoint on A2 (the thread) and on A3 warns; the BF16 conversion
    the reporter served (no quantization_config) and Ascend 950 (MXFP4 compute) stay quiet."""
    hit = flags(tmp_path / "a", ["-tp", "8"], "0.16.0rc1", GPT_OSS_MXFP4, chip="A2")
    a3 = flags(tmp_path / "b", ["-tp", "8"], "0.18.0", GPT_OSS_MXFP4, chip="A3")
    bf16 = flags(tmp_path / "c", ["-tp", "8"], "0.16.0rc1", GPT_OSS, chip="A2")
    a5 = flags(tmp_path / "d", ["-tp", "8"], "0.18.0", GPT_OSS_MXFP4, chip="A5_950")
    assert hit.status == "warn" and "gpt-oss-mxfp4-a2-a3" in hit.rules
    assert "MXFP4" in hit.summary
    assert MXFP4 in a3.rules
    assert MXFP4 not in bf16.rules + a5.rules
