"""Known issues of measured misses whose cause earlier rows could not express (issue #25): a
stated tensor-parallel size (the feature `tp:<N>`) and the default graph mode (graphs on with
no cudagraph_mode: `graph` with `!graph:<mode>`). Each fires on the incident's shape and a
variant and stays quiet on the healthy twin the thread names."""

from __future__ import annotations

from pathlib import Path

from serving_fixtures import (
    DEEPSEEK_V4,
    QWEN2,
    QWEN3_5,
    QWEN3_MOE,
    QWEN3_NEXT,
    known,
    model,
    served,
)
from serving_fixtures import (
    support_finding as support,
)

from checks.builtin.serving_support import serving_support
from checks.model import Finding

MTP = ["--speculative-config", '{"method":"qwen3_5_mtp","num_speculative_tokens":1}']


def test_qwen3_next_at_tp8_on_0_11_0rc2_warns(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#4379: out of memory at TP 8; four cards start."""
    words = "Qwen3-Next at tensor parallel 8"
    hit = support(tmp_path / "a", ["--tensor-parallel-size", "8"], "0.11.0rc2", QWEN3_NEXT)
    short = support(tmp_path / "b", ["-tp", "8", "--max-model-len", "32768"], "0.11.0rc2",
                    QWEN3_NEXT)
    twin = support(tmp_path / "c", ["--tensor-parallel-size", "4"], "0.11.0rc2", QWEN3_NEXT)
    other_release = support(tmp_path / "d", ["-tp", "8"], "0.13.0rc1", QWEN3_NEXT)
    assert hit.status == "warn" and known(hit, words)
    assert known(short, words)
    assert words not in twin.summary and words not in other_release.summary


def test_qwen3_5_dense_at_tp8_on_0_17_0rc1_warns(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#8071 (TP 8 fails, TP 4 works, 0.18 serves) and #7360 (with MTP;
    DP 2 x TP 4 starts)."""
    words = "Qwen3.5 (dense) at tensor parallel 8"
    hit = support(tmp_path / "a", ["--tensor-parallel-size", "8"], "0.17.0rc1", QWEN3_5)
    with_mtp = support(tmp_path / "b", ["-tp", "8", *MTP], "0.17.0rc1", QWEN3_5)
    twin = support(tmp_path / "c", ["-tp", "4", "-dp", "2", *MTP], "0.17.0rc1", QWEN3_5)
    upgraded = support(tmp_path / "d", ["-tp", "8"], "0.18.0", QWEN3_5)
    assert hit.status == "warn" and known(hit, words)
    assert known(with_mtp, words)
    assert words not in twin.summary and words not in upgraded.summary


EP = ["--tensor-parallel-size", "8", "--enable-expert-parallel", "--quantization", "ascend"]


def test_deepseek_v4_in_the_default_piecewise_mode_on_0_20_2rc1_warns(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#9785: garbled answers under the default PIECEWISE graphs; eager
    or FULL_DECODE_ONLY answer correctly. The default mode is graphs without a cudagraph_mode."""
    words = "garbled text under the default graph mode"
    default = support(tmp_path / "a", EP, "0.20.2rc1", DEEPSEEK_V4)
    piecewise = support(tmp_path / "b", [*EP, "--compilation-config",
                                         '{"cudagraph_mode": "PIECEWISE"}'], "0.20.2rc1",
                        DEEPSEEK_V4)
    eager = support(tmp_path / "c", [*EP, "--enforce-eager"], "0.20.2rc1", DEEPSEEK_V4)
    decode_only = support(tmp_path / "d", [*EP, "--compilation-config",
                                           '{"cudagraph_mode": "FULL_DECODE_ONLY"}'],
                          "0.20.2rc1", DEEPSEEK_V4)
    assert known(default, words) and known(piecewise, words)
    assert words not in eager.summary and words not in decode_only.summary


# -- batch 12, measured once (0 / 5 by cause), then learnt from --------------------------------

QWEN3_6_DENSE = model("qwen3_5", "Qwen3_5ForConditionalGeneration")
MTP3 = ["--speculative-config", '{"method":"qwen3_5_mtp","num_speculative_tokens":3}']


def test_mtp_in_graph_mode_on_310p_fails_on_0_23_0rc1(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#12983: no free-mask operator in the 310P image; without MTP the
    service starts."""
    words = "MTP speculative decoding in graph mode fails"
    decode_only = ["--compilation-config", '{"cudagraph_mode":"FULL_DECODE_ONLY"}']

    def on_310p(path: Path, args: list[str], release: str = "0.23.0rc1") -> Finding:
        with served(path, ["-tp", "8", *args], release=release, config=QWEN3_6_DENSE,
                    chip="310P") as ctx:
            return serving_support(ctx)

    hit = on_310p(tmp_path / "a", [*MTP3, *decode_only])
    default_graphs = on_310p(tmp_path / "b", MTP3)
    twin = on_310p(tmp_path / "c", decode_only)
    eager = on_310p(tmp_path / "d", [*MTP3, "--enforce-eager"])
    assert hit.status == "fail" and known(hit, words)
    assert known(default_graphs, words)
    assert words not in twin.summary and words not in eager.summary


# -- batch 14, measured once (2 / 9 by cause), then learnt from --------------------------------

DEEPSEEK_V3_W8A8 = {"quant_model_description.json": {"model_quant_type": "W8A8"}}


def test_deepseek_w8a8_on_0_7_3rc1_warns_until_rc2(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#420: AscendQuantConfig without packed_modules_mapping; #391."""
    from serving_fixtures import DEEPSEEK_V3

    words = "'AscendQuantConfig' object has no attribute"

    def served_w8a8(path: Path, args: list[str], release: str) -> Finding:
        with served(path, args, release=release, config=DEEPSEEK_V3, chip="A2",
                    files=DEEPSEEK_V3_W8A8) as ctx:
            return serving_support(ctx)

    hit = served_w8a8(tmp_path / "a", ["-tp", "16"], "0.7.3rc1")
    flagged = served_w8a8(tmp_path / "b", ["-tp", "16", "--quantization", "ascend"], "0.7.3rc1")
    twin = served_w8a8(tmp_path / "c", ["-tp", "16"], "0.7.3rc2")
    assert known(hit, words) and known(flagged, words)
    assert words not in twin.summary


def test_qwen3_next_graph_capture_on_the_0_11_0_line_warns(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#5005, #5401, #3868: no aclgraph_support in the GDN builder."""
    words = "failing at graph capture on the v0.11.0 line"
    rc3 = support(tmp_path / "a", ["-tp", "8"], "0.11.0rc3", QWEN3_NEXT)
    final = support(tmp_path / "b", ["-tp", "8"], "0.11.0", QWEN3_NEXT)
    eager = support(tmp_path / "c", ["-tp", "8", "--enforce-eager"], "0.11.0rc3", QWEN3_NEXT)
    assert known(rc3, words) and known(final, words)
    assert words not in eager.summary


def test_pipeline_parallel_first_token_on_0_20_2rc1_warns(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#12060: PP 2 x TP 2 with chunked prefill; v0.22.1rc1 serves it."""
    words = "pipeline parallel with chunked prefill can return a wrong first token"
    args = ["--pipeline-parallel-size", "2", "-tp", "2"]
    hit = support(tmp_path / "a", args, "0.20.2rc1", QWEN2)
    short = support(tmp_path / "b", ["-pp", "2", "-tp", "2"], "0.20.2rc1", QWEN3_5)
    no_pp = support(tmp_path / "c", ["-tp", "4"], "0.20.2rc1", QWEN2)
    upgraded = support(tmp_path / "d", args, "0.22.1rc1", QWEN2)
    assert known(hit, words) and known(short, words)
    assert words not in no_pp.summary and words not in upgraded.summary


# -- batch 16, measured once (0 / 2 by cause), then learnt from --------------------------------

KIMI_K3 = model("kimi_k3", "KimiK3ForConditionalGeneration")


def test_kimi_k3_before_the_0_26_0rc1_line_fails(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#15086, #12950, #14766: Kimi-K3 first adapted for v0.26.0rc1."""
    args = ["--quantization", "ascend", "--trust-remote-code"]
    old = support(tmp_path / "a", args, "0.23.0", KIMI_K3, chip="A3")
    new = support(tmp_path / "b", args, "0.26.0rc1", KIMI_K3, chip="A3")
    assert old.status == "fail" and "unsupported" in old.rules
    assert "Kimi-K3" in old.summary
    assert "unsupported" not in new.rules and "model-restricted" not in new.summary


def test_dflash_on_0_19_1rc1_fails(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#9009 and #8819: the v0.19.1rc1 image has no DFlash."""
    dflash = ["--speculative-config",
              '{"num_speculative_tokens": 8, "method": "dflash", "model": "/d"}']
    hit = support(tmp_path / "a", ["-tp", "8", *dflash], "0.19.1rc1", QWEN3_5)
    twin = support(tmp_path / "b", ["-tp", "8"], "0.19.1rc1", QWEN3_5)
    assert hit.status == "fail" and "unsupported" in hit.rules and "DFlash" in hit.summary
    assert "DFlash" not in twin.summary


def test_dflash_from_the_0_20_2rc1_line_is_experimental(tmp_path: Path) -> None:
    """v0.20.2rc1's notes: merged graph support for DFlash workloads (#9074)."""
    dflash = ["--speculative-config", '{"num_speculative_tokens": 8, "method": "dflash"}']
    later = support(tmp_path, ["-tp", "2", *dflash], "0.20.2rc1", QWEN3_5)
    assert "unsupported" not in later.rules and "not-in-our-data" not in later.rules
    assert any("experimental" in e and "DFlash" in e for e in later.evidence)


# -- batch 17, measured once (1 / 2 by cause), then learnt from --------------------------------

MINIMAX_M2 = model("minimax_m2", "MiniMaxM2ForCausalLM")


def test_minimax_m2_with_expert_parallel_on_0_14_0rc1_warns(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#6710, vllm-project/vllm#35179: the MoE output reduced twice."""
    words = "reduced twice"
    ep = ["--tensor-parallel-size", "16", "--enable-expert-parallel"]
    hit = support(tmp_path / "a", ep, "0.14.0rc1", MINIMAX_M2, chip="A3")
    twin = support(tmp_path / "b", ["--tensor-parallel-size", "16"], "0.14.0rc1", MINIMAX_M2,
                   chip="A3")
    variant = support(tmp_path / "c", ["-tp", "8", "--enable-expert-parallel"], "0.14.0rc1",
                      MINIMAX_M2)
    assert known(hit, words) and known(variant, words) and words not in twin.summary


def test_the_batch_16_rows_fire_on_a_variant_too(tmp_path: Path) -> None:
    """Kimi-K3 on an earlier release and another chip; DFlash with another model."""
    kimi = support(tmp_path / "a", ["-tp", "16"], "0.22.1rc1", KIMI_K3)
    dflash = ["--speculative-config", '{"num_speculative_tokens": 4, "method": "dflash"}']
    qwen3 = support(tmp_path / "b", ["-tp", "2", *dflash], "0.19.1rc1", QWEN3_MOE)
    assert "unsupported" in kimi.rules and "Kimi-K3" in kimi.summary
    assert "unsupported" in qwen3.rules and "DFlash" in qwen3.summary
