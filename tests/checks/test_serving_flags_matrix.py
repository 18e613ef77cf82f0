"""serving.flags rules from vLLM-Ascend's feature x feature table (docs/source/user_guide/
support_matrix/feature_matrix.md @ 0a1d5fd733e0): each pair the table marks "no compatibility"
warns, and each half alone stays quiet; and the rules learnt from held-out batch 13 (the
maintainers' stated causes), each with the thread's healthy twin."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from serving_fixtures import QWEN3_5_MOE, QWEN3_MOE, QWEN3_VL, served

from checks.builtin.serving_flags import serving_flags
from checks.model import Finding

POOL = ["--kv-transfer-config", json.dumps({"kv_connector": "AscendStoreConnector",
                                             "kv_role": "kv_both"})]
W4A8 = {"quant_model_description.json": {"model_quant_type": "W4A8_DYNAMIC"}}
W8A8 = {"quant_model_description.json": {"model_quant_type": "W8A8_DYNAMIC"}}
EPLB = ["--additional-config", '{"eplb_config": {"dynamic_eplb": true}}']
FLASHCOMM1 = {"VLLM_ASCEND_ENABLE_FLASHCOMM1": "1"}


def flags(tmp_path: Path, args: list[str], config: dict[str, Any],
          files: dict[str, Any] | None = None, env: dict[str, str] | None = None) -> Finding:
    with served(tmp_path, ["-tp", "8", *args], release="0.18.0", config=config, env=env,
                files=files, chip="A3") as ctx:
        return serving_flags(ctx)


def test_the_kv_pool_with_a_multimodal_model_warns(tmp_path: Path) -> None:
    vl = flags(tmp_path / "a", POOL, QWEN3_VL)
    text = flags(tmp_path / "b", POOL, QWEN3_MOE)
    unpooled = flags(tmp_path / "c", [], QWEN3_VL)
    assert vl.status == "warn" and "kv-pool-multimodal" in vl.rules
    assert "kv-pool-multimodal" not in text.rules + unpooled.rules


def test_eplb_with_a_w4a8_checkpoint_warns(tmp_path: Path) -> None:
    args = ["--enable-expert-parallel", "--quantization", "ascend"]
    w4a8 = flags(tmp_path / "a", [*args, *EPLB], QWEN3_MOE, files=W4A8)
    vllm_switch = flags(tmp_path / "b", [*args, "--enable-eplb"], QWEN3_5_MOE, files=W4A8)
    w8a8 = flags(tmp_path / "c", [*args, *EPLB], QWEN3_MOE, files=W8A8)
    no_eplb = flags(tmp_path / "d", args, QWEN3_MOE, files=W4A8)
    assert w4a8.status == "warn" and "eplb-w4a8" in w4a8.rules
    assert "eplb-w4a8" in vllm_switch.rules
    assert "eplb-w4a8" not in w8a8.rules + no_eplb.rules


def test_flashcomm1_with_lm_head_tensor_parallel_warns(tmp_path: Path) -> None:
    def lm_head(size: int) -> list[str]:
        tp = {"finegrained_tp_config": {"lmhead_tensor_parallel_size": size}}
        return ["--additional-config", json.dumps(tp)]

    lmhead, off = lm_head(8), lm_head(0)
    both = flags(tmp_path / "a", lmhead, QWEN3_MOE, env=FLASHCOMM1)
    lmhead_only = flags(tmp_path / "b", lmhead, QWEN3_MOE)
    zero = flags(tmp_path / "c", off, QWEN3_MOE, env=FLASHCOMM1)
    assert both.status == "warn" and "flashcomm1-lmhead-tp" in both.rules
    assert "flashcomm1-lmhead-tp" not in lmhead_only.rules + zero.rules


# -- learnt from held-out batch 13 after its measure ---------------------------------------------

DEEPSEEK_V4 = {"architectures": ["DeepseekV4ForCausalLM"], "model_type": "deepseek_v4"}


def test_mooncake_without_use_ascend_direct_on_0_11_0rc2_warns(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#4866: the v0.11.0rc2 connector needs use_ascend_direct."""
    from serving_fixtures import DEEPSEEK_V3

    def pd(path: Path, extra: dict[str, Any], release: str = "0.11.0rc2") -> Finding:
        config = {"kv_connector": "MooncakeConnectorV1", "kv_role": "kv_producer",
                  "kv_connector_extra_config": {"prefill": {"dp_size": 2, "tp_size": 8},
                                                **extra}}
        args = ["-tp", "8", "-dp", "2", "--kv-transfer-config", json.dumps(config)]
        with served(path, args, release=release, config=DEEPSEEK_V3, chip="A2") as ctx:
            return serving_flags(ctx)

    missing = pd(tmp_path / "a", {})
    direct = pd(tmp_path / "b", {"use_ascend_direct": True})
    earlier = pd(tmp_path / "c", {}, release="0.11.0rc1")
    assert missing.status == "warn" and "mooncake-use-ascend-direct-0110" in missing.rules
    assert "mooncake-use-ascend-direct-0110" not in direct.rules + earlier.rules


def test_deepseek_v4_prefix_caching_at_block_size_128_warns(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#10710: 16k-token shortest cacheable prefix at block size 128."""
    def v4(path: Path, block: str, *more: str) -> Finding:
        args = ["-dp", "2", "-tp", "4", "--enable-expert-parallel", "--block-size", block, *more]
        with served(path, args, release="0.20.2rc1", config=DEEPSEEK_V4, chip="A3") as ctx:
            return serving_flags(ctx)

    hit = v4(tmp_path / "a", "128", "--enable-prefix-caching")
    twin = v4(tmp_path / "b", "32", "--enable-prefix-caching")
    uncached = v4(tmp_path / "c", "128")
    assert hit.status == "warn" and "dsv4-prefix-cache-block-128" in hit.rules
    assert "dsv4-prefix-cache-block-128" not in twin.rules + uncached.rules


GLM5 = {"architectures": ["GlmMoeDsaForCausalLM"], "model_type": "glm_moe_dsa"}


def test_sparse_sfa_c8_in_pd_disaggregation_on_0_23_0_warns(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#14378: the project's advisory for GLM-5.2 W4A8C8 in P/D."""
    def glm(path: Path, extra: dict[str, Any], pd: bool = True, release: str = "0.23.0") -> Finding:
        kv = {"kv_connector": "MooncakeConnectorV1", "kv_role": "kv_producer"}
        args = ["-tp", "16", "--quantization", "ascend", "--additional-config", json.dumps(extra),
                *(["--kv-transfer-config", json.dumps(kv)] if pd else [])]
        with served(path, args, release=release, config=GLM5, chip="A3") as ctx:
            return serving_flags(ctx)

    hit = glm(tmp_path / "a", {"enable_sparse_sfa_c8": True})
    twin = glm(tmp_path / "b", {})
    mixed = glm(tmp_path / "c", {"enable_sparse_sfa_c8": True}, pd=False)
    earlier = glm(tmp_path / "d", {"enable_sparse_sfa_c8": True}, release="0.22.1rc1")
    assert hit.status == "warn" and "sparse-sfa-c8-pd-0230" in hit.rules
    assert "sparse-sfa-c8-pd-0230" not in twin.rules + mixed.rules + earlier.rules


def test_mooncake_decode_node_in_full_decode_only_on_0_19_1rc1_warns(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#8992: the reporter's A/B, PIECEWISE or eager avoids the crash."""
    def decode(path: Path, role: str, *graph: str) -> Finding:
        kv = {"kv_connector": "MooncakeConnectorV1", "kv_role": role,
              "kv_connector_extra_config": {"use_ascend_direct": True}}
        args = ["-tp", "16", "--kv-transfer-config", json.dumps(kv), *graph]
        with served(path, args, release="0.19.1rc1", config=GLM5, chip="A3") as ctx:
            return serving_flags(ctx)

    full = ["--compilation-config", '{"cudagraph_mode": "FULL_DECODE_ONLY"}']
    piecewise = ["--compilation-config", '{"cudagraph_mode": "PIECEWISE"}']
    hit = decode(tmp_path / "a", "kv_consumer", *full)
    twin = decode(tmp_path / "b", "kv_consumer", *piecewise)
    eager = decode(tmp_path / "c", "kv_consumer", "--enforce-eager")
    prefill = decode(tmp_path / "d", "kv_producer", *full)
    assert hit.status == "warn" and "mooncake-decode-full-decode-only-0191rc1" in hit.rules
    quiet = twin.rules + eager.rules + prefill.rules
    assert "mooncake-decode-full-decode-only-0191rc1" not in quiet


def test_the_batch_13_to_15_rules_fire_on_a_variant_too(tmp_path: Path) -> None:
    """A variant in each rule's scope: DeepSeek-V4 at block size 128 on a later release, sfa_c8
    on a decode node, and a Qwen3-MoE decode node (the rule names no model)."""
    v4_args = ["-tp", "8", "--block-size", "128", "--enable-prefix-caching"]
    with served(tmp_path / "a", v4_args, release="0.23.0", config=DEEPSEEK_V4,
                chip="A3") as ctx:
        later_v4 = serving_flags(ctx)
    decode_kv = {"kv_connector": "MooncakeConnectorV1", "kv_role": "kv_consumer"}
    sfa = ["-tp", "16", "--additional-config", '{"enable_sparse_sfa_c8": true}',
           "--kv-transfer-config", json.dumps(decode_kv)]
    with served(tmp_path / "b", sfa, release="0.23.0", config=GLM5, chip="A3") as ctx:
        sfa_decode = serving_flags(ctx)
    full = ["--kv-transfer-config", json.dumps(decode_kv), "--compilation-config",
            '{"cudagraph_mode": "FULL_DECODE_ONLY"}']
    with served(tmp_path / "c", full, release="0.19.1rc1", config=QWEN3_MOE, chip="A2") as ctx:
        other_model = serving_flags(ctx)
    assert "dsv4-prefix-cache-block-128" in later_v4.rules
    assert "sparse-sfa-c8-pd-0230" in sfa_decode.rules
    assert "mooncake-decode-full-decode-only-0191rc1" in other_model.rules
