"""serving.flags on deployments rebuilt from public incidents and release notes: a real
`vllm serve` process with the user's command line and environment, their vllm_ascend release,
their model's config.json and their chip's npu-smi table; each rule beside its healthy twin."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from serving_fixtures import QWEN3_MOE, served

from checks.builtin.serving_flags import serving_flags
from checks.model import Finding

DEEPSEEK_V3 = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3"}
QWEN3 = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "torch_dtype": "bfloat16"}
QWEN3_NEXT = {"architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next"}
MODEL_LEN = ["--max-model-len", "16384"]  # the 310P guide sets it on every command
TORCHAIR = '{"ascend_scheduler_config":{"enabled":true},"torchair_graph_config":{"enabled":true}}'


def flags(tmp_path: Path, args: list[str], release: str | None = "0.11.0",
          config: dict[str, Any] | None = None, env: dict[str, str] | None = None,
          chip: str | None = "A2") -> Finding:
    with served(tmp_path, args, release=release, config=config, env=env, chip=chip) as ctx:
        return serving_flags(ctx)


def test_torchair_on_qwen3_moe_before_v0_10_1_fails(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#2266: Qwen3-235B-A22B on v0.10.0rc1 with EP, DP and
    --additional-config enabling the Ascend scheduler and torchair graph mode fails at start."""
    args = ["--enable-expert-parallel", "-tp", "4", "--additional-config", TORCHAIR]
    finding = flags(tmp_path, args, release="0.10.0rc1", config=QWEN3_MOE)
    assert finding.status == "fail" and finding.rules == ("torchair-deepseek-only",)
    assert any(e.startswith("rule torchair-deepseek-only:") and "#2266" in e
               for e in finding.evidence)


def test_torchair_on_deepseek_before_v0_10_1_is_quiet(tmp_path: Path) -> None:
    args = ["-tp", "8", "--additional-config", TORCHAIR]
    finding = flags(tmp_path, args, release="0.10.0rc1", config=DEEPSEEK_V3)
    assert finding.status == "pass", finding.summary


def test_torchair_and_the_ascend_scheduler_after_their_removal_fail(tmp_path: Path) -> None:
    """Release notes v0.12.0rc1: torchair graph mode and the Ascend scheduler are removed;
    their --additional-config keys no longer work."""
    args = ["-tp", "8", "--additional-config", TORCHAIR]
    finding = flags(tmp_path, args, release="0.13.0", config=DEEPSEEK_V3)
    assert finding.status == "fail"
    assert finding.rules == ("torchair-removed", "ascend-scheduler-removed")


def test_the_scheduler_key_disabled_is_quiet(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#6371: v0.13.0rc1 with `ascend_scheduler_config.enabled: false`
    and HCCL_OP_EXPANSION_MODE=AIV on A2/A3: neither is a problem there."""
    extra = '{"enable_cpu_binding": true, "ascend_scheduler_config": {"enabled": false}}'
    env = {"HCCL_OP_EXPANSION_MODE": "AIV", "TASK_QUEUE_ENABLE": "0", "CPU_AFFINITY_CONF": "2",
           "HCCL_DEBUG_NOTE": "token=abc123"}  # a variable no rule reads: its value not shown
    finding = flags(tmp_path, ["-tp", "4", "--additional-config", extra], release="0.13.0rc1",
                    config=QWEN3, env=env)
    assert finding.status == "pass", finding.summary
    assert ("environment: CPU_AFFINITY_CONF=2, HCCL_DEBUG_NOTE, HCCL_OP_EXPANSION_MODE=AIV, "
            "TASK_QUEUE_ENABLE=0") in finding.evidence
    assert "abc123" not in " ".join(finding.evidence)
    assert "--additional-config: keys enable_cpu_binding, ascend_scheduler_config" in \
        finding.evidence


def test_aiv_expansion_on_310p_warns(tmp_path: Path) -> None:
    """CANN 8.5.0 envref_07_0096: the Atlas 300I Duo supports AI_CPU and HOST only."""
    finding = flags(tmp_path, ["--enforce-eager"], release="0.15.0rc1", config=QWEN3,
                    env={"HCCL_OP_EXPANSION_MODE": "AIV"}, chip="310P")
    assert finding.status == "warn" and finding.rules == ("hccl-aiv-on-310p",)


def test_nz_on_a_float_model_in_v0_12_0rc1_warns_and_nz_off_is_quiet(tmp_path: Path) -> None:
    """Release notes v0.12.0rc1 (known issue: BF16/FP16 slow with NZ on by default);
    vllm-project/vllm-ascend#4960 (qwen3-vl-235B bf16 with VLLM_ASCEND_ENABLE_NZ=1 fails,
    NZ=0 fixes it)."""
    slow = flags(tmp_path / "a", ["-tp", "2"], release="0.12.0rc1", config=QWEN3,
                 env={"VLLM_ASCEND_ENABLE_NZ": "1"})
    off = flags(tmp_path / "b", ["-tp", "2"], release="0.12.0rc1", config=QWEN3,
                env={"VLLM_ASCEND_ENABLE_NZ": "0"})
    quantized = flags(tmp_path / "c", ["-tp", "2", "--quantization", "ascend"],
                      release="0.12.0rc1", config=QWEN3)
    assert slow.status == "warn" and slow.rules == ("nz-float-0120rc1",)
    assert off.status == "pass" and quantized.status == "pass", quantized.summary


def test_qwen3_next_ep_without_hccl_buffsize_warns(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#4051 (Qwen3-Next EP inference failure on the v0.11.0rc1 line);
    release notes v0.11.0rc1: set HCCL_BUFFSIZE, e.g. 1024, for Qwen3-Next with EP."""
    args = ["-tp", "4", "--enable-expert-parallel"]
    unset = flags(tmp_path / "a", args, release="0.11.0rc1", config=QWEN3_NEXT)
    raised = flags(tmp_path / "b", args, release="0.11.0rc1", config=QWEN3_NEXT,
                   env={"HCCL_BUFFSIZE": "1024"})
    assert unset.status == "warn" and unset.rules == ("hccl-buffsize-qwen3-next-ep",)
    assert raised.status == "pass", raised.summary


@dataclass(frozen=True)
class EnvCase:
    """A variable the release dropped or renamed, set in the service's environment."""

    rules: tuple[str, ...]
    env: dict[str, str]
    removed_in: str  # the first release without it
    before: str  # a release that still reads it


ENV_CASES = [
    EnvCase(rules=("env-topk-topp-removed",),
            env={"VLLM_ASCEND_ENABLE_TOPK_TOPP_OPTIMIZATION": "1"},
            removed_in="0.12.0rc1", before="0.11.0"),
    EnvCase(rules=("env-dense-optimize-removed",), env={"VLLM_ASCEND_ENABLE_DENSE_OPTIMIZE": "1"},
            removed_in="0.13.0rc1", before="0.12.0rc1"),
    EnvCase(rules=("env-fused-experts-allgather-removed",),
            env={"VLLM_ENABLE_FUSED_EXPERTS_ALLGATHER_EP": "1"},
            removed_in="0.13.0rc1", before="0.12.0rc1"),
    EnvCase(rules=("env-llmdd-rpc-port-renamed",), env={"VLLM_LLMDD_RPC_PORT": "5559"},
            removed_in="0.10.1rc1", before="0.10.0rc1"),
    EnvCase(rules=("env-moe-all2all-removed",), env={"VLLM_ASCEND_ENABLE_MOE_ALL2ALL_SEQ": "1"},
            removed_in="0.10.1rc1", before="0.10.0rc1"),
    # vllm-project/vllm-ascend#6371 sets VLLM_ASCEND_ENABLE_FLASHCOMM1=0 on v0.13.0rc1, where
    # it is still read
    EnvCase(rules=("env-flashcomm1-moved",), env={"VLLM_ASCEND_ENABLE_FLASHCOMM1": "0"},
            removed_in="0.20.2rc1", before="0.13.0rc1"),
    EnvCase(rules=("env-context-parallel-removed",),
            env={"VLLM_ASCEND_ENABLE_CONTEXT_PARALLEL": "1"},
            removed_in="0.21.0rc1", before="0.20.2rc1"),
    EnvCase(rules=("env-use-optimized-model-removed",), env={"USE_OPTIMIZED_MODEL": "1"},
            removed_in="0.15.0rc1", before="0.14.0rc1"),
]


@pytest.mark.parametrize("case", ENV_CASES, ids=[c.rules[0] for c in ENV_CASES])
def test_a_variable_the_release_no_longer_reads_warns(tmp_path: Path, case: EnvCase) -> None:
    """Release notes of the release named in each rule's source."""
    args = ["-tp", "2", "--quantization", "ascend"]  # a W8A8 model: the NZ rule stays quiet
    dropped = flags(tmp_path / "a", args, release=case.removed_in, env=case.env)
    still = flags(tmp_path / "b", args, release=case.before, env=case.env)
    assert dropped.status == "warn" and dropped.rules == case.rules
    assert still.status == "pass", still.summary


def test_the_renamed_port_with_its_new_name_is_quiet(tmp_path: Path) -> None:
    env = {"VLLM_LLMDD_RPC_PORT": "5559", "VLLM_ASCEND_LLMDD_RPC_PORT": "5559"}
    assert flags(tmp_path, ["-tp", "2"], release="0.11.0", env=env).status == "pass"


def test_a_compilation_level_number_is_read_not_flagged(tmp_path: Path) -> None:
    """vLLM takes `--compilation-config 0` (0-3) as the optimization level
    (an old-style serve line seen in the field); any other non-JSON text still warns."""
    level = flags(tmp_path / "a", ["-tp", "16", "--compilation_config", "0"], release="0.11.0")
    assert level.status == "pass", level.summary
    wrong = flags(tmp_path / "b", ["--compilation-config", "7"], release="0.11.0")
    assert wrong.status == "warn" and wrong.rules == ("json-unreadable",)


def test_additional_config_that_is_not_json_warns(tmp_path: Path) -> None:
    finding = flags(tmp_path, ["--additional-config", "{'torchair_graph_config': 1"],
                    release="0.11.0")
    assert finding.status == "warn" and finding.rules == ("json-unreadable",)
    assert "--additional-config not read: not JSON" in finding.summary


def test_a_rule_whose_scope_is_unknown_is_not_judged_and_said(tmp_path: Path) -> None:
    """The settings match torchair-removed, a rule of v0.12.0rc1 on: with no release read, the
    rule is not judged and the check warns, never passes."""
    finding = flags(tmp_path, ["--additional-config", TORCHAIR], release=None)
    assert finding.status == "warn" and finding.rules == ("release-unknown",)
    assert "torchair-removed" in finding.summary
    assert any(e.startswith("not judged: torchair-removed: no engine release")
               for e in finding.evidence)


def test_a_rule_on_the_model_without_a_model_is_not_judged(tmp_path: Path) -> None:
    with served(tmp_path, ["-tp", "2"], release="0.12.0rc1") as ctx:
        ctx.model_dir = None
        finding = serving_flags(ctx)
    assert finding.status == "pass"
    assert any(e.startswith("not judged: nz-float-0120rc1: model unknown")
               for e in finding.evidence)


def test_an_unreadable_environment_skips(tmp_path: Path) -> None:
    with served(tmp_path, ["-tp", "2"]) as ctx:
        ctx.target = replace(ctx.target, environment_error="permission denied (run as root)")
        finding = serving_flags(ctx)
    assert finding.status == "skip" and finding.rules == ("environment-unreadable",)
    assert "permission denied" in finding.summary


# -- issue 25: range rules (HCCL), the EP buffer floor, NZ on narrow weights, 310P graphs ------

QWEN3_5_MOE = {"architectures": ["Qwen3_5MoeForConditionalGeneration"],
               "model_type": "qwen3_5_moe", "torch_dtype": "bfloat16"}


@pytest.mark.parametrize(("value", "status"), [("60", "warn"), ("9000", "warn"), ("120", "pass"),
                                                ("1200", "pass"), ("7200", "pass"),
                                                ("soon", "pass")])
def test_hccl_connect_timeout_outside_its_documented_range_warns(
        tmp_path: Path, value: str, status: str) -> None:
    """CANN envref HCCL_CONNECT_TIMEOUT: an integer of seconds in [120, 7200]. The healthy
    values are those of vllm-project/vllm-ascend#10949's multi-node CI config (1200, 120); a
    value that is not a number is shown as seen, not judged."""
    env = {"HCCL_CONNECT_TIMEOUT": value}
    finding = flags(tmp_path, ["-tp", "8", "--enable-expert-parallel"], release="0.23.0",
                    config=QWEN3_MOE, env=env)
    assert finding.status == status, finding.summary
    if status == "warn":
        assert finding.rules == ("hccl-connect-timeout-range",)
        assert any(e.startswith("rule hccl-connect-timeout-range: https://www.hiascend.com/")
                   for e in finding.evidence)
    assert f"HCCL_CONNECT_TIMEOUT={value}" in " ".join(finding.evidence)


def test_hccl_if_base_port_outside_its_range_warns_on_mindie_too(tmp_path: Path) -> None:
    """CANN envref HCCL_IF_BASE_PORT: [1024, 65520]; the rule holds for any engine, so a
    process without vllm_ascend (no engine release) is judged as well."""
    low = flags(tmp_path / "a", ["-tp", "2"], release=None, env={"HCCL_IF_BASE_PORT": "80"})
    fine = flags(tmp_path / "b", ["-tp", "2"], release=None, env={"HCCL_IF_BASE_PORT": "50000"})
    assert low.status == "warn" and low.rules == ("hccl-if-base-port-range",)
    assert fine.status == "pass", fine.summary


def test_hccl_buffsize_below_the_default_with_expert_parallel_warns(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#2674: HCCL_BUFFSIZE=50 with EP 16 fails in MoE dispatch with
    'The DDR address of the MTE instruction is out of range'; the twin raises it to 1024, and
    the same small buffer without expert parallel is not this rule's business."""
    args = ["-tp", "16", "--enable-expert-parallel", "--quantization", "ascend"]
    small = flags(tmp_path / "a", args, release="0.9.1", config=QWEN3_MOE,
                  env={"HCCL_BUFFSIZE": "50"})
    raised = flags(tmp_path / "b", args, release="0.9.1", config=QWEN3_MOE,
                   env={"HCCL_BUFFSIZE": "1024"})
    no_ep = flags(tmp_path / "c", ["-tp", "16"], release="0.9.1", config=QWEN3_MOE,
                  env={"HCCL_BUFFSIZE": "50"})
    assert small.status == "warn" and small.rules == ("hccl-buffsize-below-default-ep",)
    assert raised.status == "pass" and no_ep.status == "pass", no_ep.summary


def test_nz_mode_2_on_an_unquantized_qwen3_5_moe_warns(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#10014 as #10287 explains it: Qwen3.5-35B-A3B (BF16, TP 4) with
    VLLM_ASCEND_ENABLE_NZ=2 fails to load (shared-expert gate [2048, 1] cannot be NZ). The
    default NZ=1 and a W8A8 checkpoint are quiet."""
    args = ["--tensor-parallel-size", "4", "--max-model-len", "32768"]
    nz2 = flags(tmp_path / "a", args, release="0.19.1rc1", config=QWEN3_5_MOE,
                env={"VLLM_ASCEND_ENABLE_NZ": "2"})
    nz1 = flags(tmp_path / "b", args, release="0.19.1rc1", config=QWEN3_5_MOE,
                env={"VLLM_ASCEND_ENABLE_NZ": "1"})
    w8a8 = flags(tmp_path / "c", [*args, "--quantization", "ascend"], release="0.19.1rc1",
                 config=QWEN3_5_MOE, env={"VLLM_ASCEND_ENABLE_NZ": "2"})
    assert nz2.status == "warn" and nz2.rules == ("nz-narrow-weights-qwen3-5-moe",)
    assert nz1.status == "pass" and w8a8.status == "pass", w8a8.summary


def test_full_decode_only_with_tp_above_one_on_310p_warns(tmp_path: Path) -> None:
    """vllm-ascend 310P guide (docs/source/tutorials/hardwares/310p.md): FULL_DECODE_ONLY with
    several TP ranks captures few graphs (Qwen3-32B: 2). The guide's own TP 4 command with
    six capture sizes warns; its TP 1 command is quiet, and so is the same TP 4 on A2."""
    graphs = '{"cudagraph_mode": "FULL_DECODE_ONLY", "cudagraph_capture_sizes": [1,2,4,8,16,32]}'
    tp4 = ["--tensor-parallel-size", "4", "--compilation-config", graphs, *MODEL_LEN]
    tp1 = ["--tensor-parallel-size", "1", "--compilation-config", graphs, *MODEL_LEN]
    on_310p = flags(tmp_path / "a", tp4, release="0.18.0rc1", config=QWEN3, chip="310P")
    single = flags(tmp_path / "b", tp1, release="0.18.0rc1", config=QWEN3, chip="310P")
    on_a2 = flags(tmp_path / "c", tp4, release="0.18.0rc1", config=QWEN3, chip="A2")
    short = flags(tmp_path / "d", ["-tp", "2", "--compilation-config", graphs, *MODEL_LEN],
                  release="0.18.0rc1", config=QWEN3, chip="310P")
    assert on_310p.status == "warn" and on_310p.rules == ("full-decode-only-tp-310p",)
    assert short.rules == ("full-decode-only-tp-310p",)  # vLLM's -tp spelling
    assert single.status == "pass" and on_a2.status == "pass", on_a2.summary


def test_ascend_scheduler_with_batched_tokens_below_model_len_fails(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#4365: the multi-node tutorial's DeepSeek-V3.1 W8A8 command
    (--max-model-len 32768, --max-num-batched-tokens 4096, Ascend scheduler on) stops with
    'Ascend scheduler is enabled without chunked prefill feature'. Twins: enough batched
    tokens, or the scheduler's own chunked prefill on."""
    def args(batched: str, scheduler: str) -> list[str]:
        return ["--tensor-parallel-size", "8", "--enable-expert-parallel", "--quantization",
                "ascend", "--max-model-len", "32768", "--max-num-batched-tokens", batched,
                "--additional-config", scheduler]

    plain = '{"ascend_scheduler_config": {"enabled": true}}'
    chunked = '{"ascend_scheduler_config": {"enabled": true, "enable_chunked_prefill": true}}'
    short = flags(tmp_path / "a", args("4096", plain), release="0.11.0", config=DEEPSEEK_V3)
    enough = flags(tmp_path / "b", args("32768", plain), release="0.11.0", config=DEEPSEEK_V3)
    chunking = flags(tmp_path / "c", args("4096", chunked), release="0.11.0", config=DEEPSEEK_V3)
    assert short.status == "fail" and short.rules == ("ascend-scheduler-batched-below-model-len",)
    assert "#4365" in " ".join(short.evidence)
    assert enough.status == "pass" and chunking.status == "pass", chunking.summary


# -- the tensor-parallel size against the model's attention heads -------------------------------

HEADS_64 = {**QWEN3_MOE, "num_attention_heads": 64, "num_key_value_heads": 4}


def test_a_tensor_parallel_size_that_does_not_divide_the_heads_fails(tmp_path: Path) -> None:
    """vLLM refuses -tp 5 for 64 attention heads ('must be divisible by tensor parallel
    size')."""
    finding = flags(tmp_path, ["--tensor-parallel-size", "5"], config=HEADS_64)
    assert finding.status == "fail" and finding.rules == ("tp-does-not-divide-heads",)
    assert any("verify_with_parallel_config" in e for e in finding.evidence)


@pytest.mark.parametrize("args", [["-tp", "8"], ["--tensor-parallel-size", "16"], []])
def test_a_dividing_or_absent_tensor_parallel_size_is_quiet(tmp_path: Path,
                                                           args: list[str]) -> None:
    """8 and 16 divide 64 (16 ranks over 4 KV heads replicate them, which vLLM allows); no
    flag is vLLM's default of 1."""
    finding = flags(tmp_path, args, config=HEADS_64)
    assert "tp-does-not-divide-heads" not in finding.rules


def test_a_config_without_a_head_count_is_not_judged(tmp_path: Path) -> None:
    finding = flags(tmp_path, ["-tp", "5"], config=QWEN3_MOE)
    assert "tp-does-not-divide-heads" not in finding.rules
    assert any("not judged: tp-does-not-divide-heads: config.json gives no "
               "model.num_attention_heads" in e for e in finding.evidence)


OVERRIDES = ('{"architectures": ["Qwen3ForSequenceClassification"], '
             '"classifier_from_token": ["no", "yes"], "is_original_qwen3_reranker": true}')


@pytest.mark.parametrize("spelling", ["--task", "--task="])
def test_an_original_qwen3_reranker_scored_without_overrides_warns(tmp_path: Path,
                                                                  spelling: str) -> None:
    """The Qwen3-Reranker tutorial of vLLM-Ascend: the original checkpoint (Qwen3ForCausalLM)
    is routed to Qwen3ForSequenceClassification with --hf-overrides when scored."""
    args = ["--task=score"] if spelling.endswith("=") else ["--task", "score"]
    finding = flags(tmp_path, args, release="0.12.0rc1", config=QWEN3,
                    env={"VLLM_ASCEND_ENABLE_NZ": "0"})
    assert finding.status == "warn", finding.summary
    assert finding.rules == ("qwen3-reranker-score-without-overrides",)


@pytest.mark.parametrize("args", [
    ["--task", "score", "--hf_overrides", OVERRIDES],  # the tutorial's line, either spelling
    ["--task", "score", "--hf-overrides", OVERRIDES],
    [],  # the same checkpoint served for generation
])
def test_a_qwen3_reranker_served_as_the_tutorial_says_is_quiet(tmp_path: Path,
                                                              args: list[str]) -> None:
    finding = flags(tmp_path, args, release="0.12.0rc1", config=QWEN3,
                    env={"VLLM_ASCEND_ENABLE_NZ": "0"})
    assert "qwen3-reranker-score-without-overrides" not in finding.rules, finding.summary


def test_a_converted_reranker_scored_without_overrides_is_quiet(tmp_path: Path) -> None:
    converted = {**QWEN3, "architectures": ["Qwen3ForSequenceClassification"]}
    finding = flags(tmp_path, ["--task", "score"], release="0.12.0rc1", config=converted,
                    env={"VLLM_ASCEND_ENABLE_NZ": "0"})
    assert "qwen3-reranker-score-without-overrides" not in finding.rules, finding.summary


# -- issue 25, second pass: FP8 KV cache, W8A8SC checkpoints, 310P context length -------------


@pytest.mark.parametrize("dtype", ["fp8", "fp8_e5m2", "fp8_e4m3"])
def test_an_fp8_kv_cache_on_a2_fails(tmp_path: Path, dtype: str) -> None:
    """vllm-project/vllm-ascend#8102: --kv-cache-dtype fp8 and fp8_e5m2 crash a 910B2; a
    maintainer: FP8 is not supported on A3. FP8 matmul inputs are listed for Ascend 950
    only (hicann/ops-nn aclnnQuantMatmulV5.md @ e5c3fa9327ea)."""
    finding = flags(tmp_path, ["-tp", "2", "--kv-cache-dtype", dtype], release="0.18.0rc1")
    assert finding.status == "fail" and finding.rules == ("kv-cache-fp8-without-fp8-compute",)
    assert any("#8102" in e for e in finding.evidence)


def test_an_fp8_kv_cache_on_a3_and_on_310p_fails(tmp_path: Path) -> None:
    args = ["--kv-cache-dtype", "fp8", *MODEL_LEN]
    on_a3 = flags(tmp_path / "a", args, release="0.18.0rc1", chip="A3")
    on_310p = flags(tmp_path / "b", args, release="0.18.0rc1", config=QWEN3, chip="310P")
    assert on_a3.rules == ("kv-cache-fp8-without-fp8-compute",)
    assert on_310p.rules == ("kv-cache-fp8-without-fp8-compute",)


@pytest.mark.parametrize(("args", "chip"), [
    (["--kv-cache-dtype", "fp8"], "A5_950"),  # the one family that computes FP8
    (["--kv-cache-dtype", "auto"], "A2"),  # vLLM's default: the model's dtype
    ([], "A2"),
])
def test_an_fp8_kv_cache_on_950_or_the_default_cache_is_quiet(tmp_path: Path, args: list[str],
                                                              chip: str) -> None:
    finding = flags(tmp_path, args, release="0.18.0rc1", chip=chip)
    assert "kv-cache-fp8-without-fp8-compute" not in finding.rules, finding.summary


W8A8SC_ARGS = ["--tensor-parallel-size", "1", "--quantization", "ascend", *MODEL_LEN]


def flags_with_files(tmp_path: Path, args: list[str], files: dict[str, Any], **kw: Any) -> Finding:
    """`flags`, with more files in the model directory (read when the check runs)."""
    with served(tmp_path, args, files=files, **kw) as ctx:
        return serving_flags(ctx)


W8A8SC = {"quant_model_description.json": {"model_quant_type": "W8A8SC"}}


def test_a_w8a8sc_checkpoint_without_sharded_state_fails(tmp_path: Path) -> None:
    """vllm-ascend 310P guide (docs/source/tutorials/hardwares/310p.md @ 00b03f831a24): the
    W8A8SC format needs `--load_format="sharded_state"`; its Qwen3-8B-w8a8sc command without
    that flag."""
    finding = flags_with_files(tmp_path, W8A8SC_ARGS, W8A8SC, release="0.18.0rc1",
                               config=QWEN3, chip="310P")
    assert finding.status == "fail" and finding.rules == ("w8a8sc-without-sharded-state",)
    assert any("310p.md @ 00b03f831a24" in e for e in finding.evidence)


@pytest.mark.parametrize(("extra", "description"), [
    (["--load_format=sharded_state"], W8A8SC),  # the guide's spelling
    (["--load-format", "sharded_state"], W8A8SC),
    ([], {"quant_model_description.json": {"model_quant_type": "W8A8S"}}),  # not compressed
])
def test_w8a8sc_with_sharded_state_or_a_w8a8s_checkpoint_is_quiet(
        tmp_path: Path, extra: list[str], description: dict[str, Any]) -> None:
    finding = flags_with_files(tmp_path, [*W8A8SC_ARGS, *extra], description,
                               release="0.18.0rc1", config=QWEN3, chip="310P")
    assert finding.status == "pass", finding.summary


QWEN3_40K = {**QWEN3, "max_position_embeddings": 40960}


def test_no_max_model_len_on_310p_warns(tmp_path: Path) -> None:
    """vllm-ascend 310P guide (docs/source/tutorials/hardwares/310p.md @ 00b03f831a24): do not
    omit --max-model-len on 310P: the attention mask is max_model_len squared, and Qwen3's
    config.json allows 40960 tokens."""
    finding = flags(tmp_path, ["-tp", "1"], release="0.18.0rc1", config=QWEN3_40K, chip="310P")
    assert finding.status == "warn" and finding.rules == ("max-model-len-unset-310p",)


@pytest.mark.parametrize(("args", "chip", "release", "config"), [
    (["-tp", "1", *MODEL_LEN], "310P", "0.18.0rc1", QWEN3_40K),
    (["-tp", "1", "--max_model_len=20480"], "310P", "0.18.0rc1", QWEN3_40K),
    (["-tp", "1"], "310P", "0.18.0rc1", {**QWEN3, "max_position_embeddings": 8192}),
    (["-tp", "1"], "A2", "0.18.0rc1", QWEN3_40K),  # other chips size the mask otherwise
    (["-tp", "1"], "310P", "0.15.0rc1", QWEN3_40K),  # before the release the guide speaks of
])
def test_a_max_model_len_a_short_model_or_another_chip_or_release_is_quiet(
        tmp_path: Path, args: list[str], chip: str, release: str,
        config: dict[str, Any]) -> None:
    finding = flags(tmp_path, args, release=release, config=config, chip=chip)
    assert "max-model-len-unset-310p" not in finding.rules, finding.summary


def test_a_model_without_a_context_length_is_not_judged_on_310p(tmp_path: Path) -> None:
    """A family the model reader knows gets Transformers' default context length (Qwen3:
    32768); an unknown one without max_position_embeddings is not judged."""
    unknown = {"architectures": ["NovelForCausalLM"], "model_type": "novel"}
    finding = flags(tmp_path, ["-tp", "1"], release="0.18.0rc1", config=unknown, chip="310P")
    assert finding.status == "pass"
    assert "not judged: max-model-len-unset-310p: config.json gives no " \
        "model.max_position_embeddings" in finding.evidence


QWEN3_5_MOE_A3B = {"architectures": ["Qwen3_5MoeForConditionalGeneration"],
                   "model_type": "qwen3_5_moe", "torch_dtype": "bfloat16"}
MTP = ["--speculative-config", '{"method": "qwen3_5_mtp", "num_speculative_tokens": 1}']
FC1 = {"VLLM_ASCEND_ENABLE_FLASHCOMM1": "1"}


def test_flashcomm1_with_mtp_on_qwen3_5_moe_on_a2_in_v0_18_0rc1_fails(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#7996: Qwen3.5-35B-A3B with MTP and
    VLLM_ASCEND_ENABLE_FLASHCOMM1=1 on 2 x 910B, v0.18.0rc1, stops in profile_run; fixed by
    #7683 (the MTP layer's shared expert on A2) and #8004 on the v0.18.0 branch."""
    args = ["-tp", "2", "--enable-expert-parallel", *MTP]
    finding = flags(tmp_path, args, release="0.18.0rc1", config=QWEN3_5_MOE_A3B, env=FC1)
    assert finding.status == "fail" and finding.rules == ("flashcomm1-mtp-qwen3-5-moe-a2",)
    assert any("#7996" in e for e in finding.evidence)


@pytest.mark.parametrize(("args", "env", "release", "chip"), [
    (["-tp", "2", *MTP], {}, "0.18.0rc1", "A2"),  # FlashComm1 off
    (["-tp", "2"], FC1, "0.18.0rc1", "A2"),  # no MTP
    (["-tp", "2", *MTP], FC1, "0.18.0rc1", "A3"),  # the shape error is A2's
    (["-tp", "2", *MTP], FC1, "0.18.0", "A2"),  # the release with the fix
])
def test_flashcomm1_without_mtp_or_off_a2_or_fixed_is_quiet(
        tmp_path: Path, args: list[str], env: dict[str, str], release: str, chip: str) -> None:
    finding = flags(tmp_path, args, release=release, config=QWEN3_5_MOE_A3B, env=env, chip=chip)
    assert "flashcomm1-mtp-qwen3-5-moe-a2" not in finding.rules, finding.summary


# -- the features the flag rules and the support rows read -------------------------------------


def command_features(args: list[str], env: dict[str, str] | None = None) -> list[str]:
    from checks.builtin.serving_features import command_features as read
    from checks.builtin.serving_inputs import JSON_FLAGS
    from probes.target.argv import json_flag

    found = {n: f for n in JSON_FLAGS if (f := json_flag(args, n)) is not None}
    return read(tuple(args), found, env or {})


@pytest.mark.parametrize(("mode", "expected"), [
    ("FULL_DECODE_ONLY", ["graph", "graph:full_decode_only"]),
    ("FULL", ["graph", "graph:full"]),
    ("PIECEWISE", ["graph", "graph:piecewise"]),
    ("FULL_AND_PIECEWISE", ["graph", "graph:full_and_piecewise"]),
    ("NONE", []),  # no graph captured
    ("SOMETHING_ELSE", ["graph"]),  # not a mode vLLM names: no mode feature
])
def test_the_cudagraph_mode_is_a_graph_feature(mode: str, expected: list[str]) -> None:
    """vllm-project/vllm vllm/config/compilation.py @ ee525ce4fc8c: the five CUDAGraphMode
    values."""
    found = command_features(["--compilation-config", f'{{"cudagraph_mode": "{mode}"}}'])
    assert [f for f in found if f.startswith("graph")] == expected


def test_enforce_eager_captures_no_graph_whatever_the_mode() -> None:
    found = command_features(["--enforce-eager", "--compilation-config",
                              '{"cudagraph_mode": "FULL"}'])
    assert not [f for f in found if f.startswith("graph")]


@pytest.mark.parametrize(("args", "env", "expected"), [
    (["--kv-cache-dtype", "fp8_e5m2"], {}, ["kv-cache:fp8_e5m2", "kv-cache:fp8"]),
    (["--kv-cache-dtype", "auto"], {}, []),
    (["-dcp", "2"], {}, ["context-parallel", "context-parallel:decode"]),
    (["--prefill-context-parallel-size", "2", "--decode-context-parallel-size", "1"], {},
     ["context-parallel", "context-parallel:prefill"]),
    ([], {"VLLM_ASCEND_ENABLE_CONTEXT_PARALLEL": "1"}, ["context-parallel"]),
    ([], {"VLLM_ASCEND_ENABLE_FLASHCOMM1": "1"}, ["flashcomm1"]),
    ([], {"VLLM_ASCEND_ENABLE_FLASHCOMM1": "0"}, []),
    (["--additional-config", '{"enable_flashcomm1": true}'], {}, ["flashcomm1"]),
    ([], {"VLLM_ASCEND_FLASHCOMM2_PARALLEL_SIZE": "1"}, ["flashcomm2"]),
    (["--enable-eplb"], {}, ["eplb"]),
    ([], {"DYNAMIC_EPLB": "true"}, ["eplb"]),
    (["--additional-config", '{"eplb_config": {"expert_map_path": "/m/map.json"}}'], {},
     ["eplb"]),
    (["--additional-config", '{"dynamic_eplb": false}'], {}, []),
    (["--kv-transfer-config", '{"kv_connector": "AscendStoreConnector"}'], {},
     ["pd-disaggregation", "kv-connector:AscendStoreConnector", "kv-pool"]),
    (["--kv-transfer-config", '{"kv_connector": "MultiConnector", "kv_connector_extra_config":'
      ' {"connectors": [{"kv_connector": "MooncakeConnectorV1"}]}}'], {},
     ["pd-disaggregation", "kv-connector:MultiConnector", "kv-connector:MooncakeConnectorV1"]),
])
def test_the_command_line_and_environment_features(args: list[str], env: dict[str, str],
                                                   expected: list[str]) -> None:
    """How vLLM and vLLM-Ascend spell them: vllm-project/vllm vllm/engine/arg_utils.py @
    99d7eb5d6a51 (--kv-cache-dtype, -dcp, --enable-eplb, --kv-transfer-config); vLLM-Ascend's
    additional-config migration table (v0.23.0rc1) and EPLB and KV-pool guides."""
    found = command_features(["--enforce-eager", *args], env)
    assert found == expected


def test_a_feature_and_the_model_s_towers_are_facts_of_the_deployment(tmp_path: Path) -> None:
    """`feature.NAME` and `model.multimodal` as flag rules read them."""
    from checks.builtin.serving_inputs import deployment

    vl = {"architectures": ["Qwen3VLForConditionalGeneration"], "model_type": "qwen3_vl",
          "vision_config": {"depth": 27}}
    with served(tmp_path / "a", ["--kv-cache-dtype", "fp8"], config=vl) as ctx:
        d = deployment(ctx)
        assert d.fact("feature.kv-cache:fp8") == "true" and d.fact("feature.eplb") is None
        assert d.fact("model.multimodal") is True
    with served(tmp_path / "b", [], config=QWEN3) as ctx:
        assert deployment(ctx).fact("model.multimodal") is False


@pytest.mark.parametrize("args", [[], ["-tp", "1"], ["--tensor-parallel-size=1"]])
def test_flashcomm1_on_a_single_tensor_parallel_rank_warns(tmp_path: Path,
                                                          args: list[str]) -> None:
    """vLLM-Ascend's sequence-parallelism guide (v0.30.0): FlashComm1 needs
    tensor_parallel_size > 1; vLLM's default size is 1."""
    finding = flags(tmp_path, args, release="0.18.0", config=QWEN3, env=FC1)
    assert finding.status == "warn", finding.summary
    assert finding.rules == ("flashcomm1-without-tensor-parallel",)


def test_flashcomm1_on_a_moe_model_without_expert_parallel_warns(tmp_path: Path) -> None:
    """The same guide: FlashComm1 on a MoE model needs --enable-expert-parallel."""
    moe = {**QWEN3_MOE, "num_experts": 128}
    extra = '{"enable_flashcomm1": true}'
    without = flags(tmp_path / "a", ["-tp", "4", "--additional-config", extra],
                    release="0.18.0", config=moe)
    with_ep = flags(tmp_path / "b", ["-tp", "4", "--enable-expert-parallel",
                                     "--additional-config", extra], release="0.18.0", config=moe)
    dense = flags(tmp_path / "c", ["-tp", "4", "--additional-config", extra],
                  release="0.18.0", config=QWEN3)
    assert without.status == "warn"
    assert without.rules == ("flashcomm1-moe-without-expert-parallel",)
    assert with_ep.status == "pass" and dense.status == "pass", dense.summary


def test_parallel_sizes_default_to_one_and_moe_is_read_from_the_experts(tmp_path: Path) -> None:
    from checks.builtin.serving_inputs import deployment

    deepseek = {**DEEPSEEK_V3, "n_routed_experts": 256}
    with served(tmp_path / "a", ["-dp", "2"], config=deepseek) as ctx:
        d = deployment(ctx)
        assert d.fact("parallel.tensor_parallel_size") == "1"
        assert d.fact("parallel.data_parallel_size") == "2" and d.fact("model.moe") is True
    with served(tmp_path / "b", ["-tp", "8"], config=QWEN3) as ctx:
        d = deployment(ctx)
        assert d.fact("parallel.tensor_parallel_size") == "8" and d.fact("model.moe") is False



def test_release_unknown_names_only_rules_for_this_model(tmp_path: Path) -> None:
    """Expert parallel with HCCL_BUFFSIZE unset and no release read: the Qwen3-Next rule of
    v0.11.0rc1 is named for a Qwen3-Next deployment, not for a DeepSeek one."""
    from serving_fixtures import DEEPSEEK_V3

    args = ["-tp", "16", "--enable-expert-parallel"]
    qwen3_next = {"architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next"}
    named = flags(tmp_path / "a", args, release=None, config=qwen3_next)
    other = flags(tmp_path / "b", args, release=None, config=DEEPSEEK_V3)
    assert named.status == "warn" and "hccl-buffsize-qwen3-next-ep" in named.summary
    assert "hccl-buffsize-qwen3-next-ep" not in " ".join(other.evidence)


def test_expert_tensor_parallel_size_above_one_warns(tmp_path: Path) -> None:
    """expert_tensor_parallel_size 16 or 4 (wrong answers reported; the maintainers say ETP is
    no longer supported); 1, or EP from --enable-expert-parallel alone, is quiet. The release
    does not scope the rule, so it is judged without one."""
    from serving_fixtures import DEEPSEEK_V3

    base = ["-tp", "16", "--enable-expert-parallel", "--additional-config"]
    etp16 = flags(tmp_path / "a", [*base, '{"expert_tensor_parallel_size":16}'], release=None,
                  config=DEEPSEEK_V3)
    etp4 = flags(tmp_path / "b", [*base, '{"expert_tensor_parallel_size":4}'],
                 config=DEEPSEEK_V3)
    etp1 = flags(tmp_path / "c", [*base, '{"expert_tensor_parallel_size":1}'], release=None,
                 config=DEEPSEEK_V3)
    assert etp16.status == "warn" and etp16.rules == ("expert-tensor-parallel-size",)
    assert "expert-tensor-parallel-size" in etp4.rules
    assert etp1.status == "pass", etp1.summary
