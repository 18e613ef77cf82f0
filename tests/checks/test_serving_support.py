"""serving.support on deployments rebuilt from public incidents: a real `vllm serve` process
with the user's command line, their vllm_ascend release, their model's config.json and their
chip's npu-smi table; each incident beside its healthy twin."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import FakeRoot
from serving_fixtures import (
    GLM5,
    QWEN3_MOE,
    model,
    npu_reading,
    served,
    write_model,
)

from checks.builtin.compat import dev_base
from checks.builtin.serving_support import serving_support
from checks.context import Context
from checks.model import Finding
from checks.policy import load_policy
from checks.registry import all_checks
from probes.live import LiveHost

QWEN3_5_MOE = {"architectures": ["Qwen3_5MoeForConditionalGeneration"],
               "model_type": "qwen3_5_moe", "torch_dtype": "bfloat16"}
QWEN3_NEXT = {"architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next",
              "torch_dtype": "bfloat16"}


def support(tmp_path: Path, args: list[str], release: str | None = "0.11.0",
            config: dict[str, Any] | None = None, env: dict[str, str] | None = None,
            chip: str | None = "A2") -> Finding:
    with served(tmp_path, args, release=release, config=config, env=env, chip=chip) as ctx:
        return serving_support(ctx)


def test_qwen3_5_on_a_release_before_its_support_fails(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#8409: Qwen3.5-397B-A17B W8A8 on vllm-ascend 0.13.0 refused
    (qwen3_5_moe unknown); a maintainer: Qwen3.5 from 0.17.0rc1."""
    finding = support(tmp_path, ["--quantization", "ascend", "-tp", "16"], release="0.13.0",
                      config=QWEN3_5_MOE)
    assert finding.status == "fail" and finding.rules == ("unsupported",)
    assert "does not support model type qwen3_5_moe" in finding.summary
    assert any("qwen3-5-before-0170rc1" in e and "#8409" in e for e in finding.evidence)


def test_qwen3_5_on_a_release_that_supports_it_passes(tmp_path: Path) -> None:
    """The healthy twin of #8409: the same deployment on 0.18.0, where the user succeeded."""
    finding = support(tmp_path, ["--quantization", "ascend", "-tp", "16"], release="0.18.0",
                      config=QWEN3_5_MOE)
    assert finding.status == "pass", finding.summary
    assert "chips: 8 x 910B4 (910B/A2)" in finding.evidence
    assert "features: quantization:ascend, graph, tp:16" in finding.evidence


def test_ascend_950_before_its_first_release_fails(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#13086: vllm-ascend 0.14.0rc1 on a 950 (A5): Unsupported
    soc_version."""
    finding = support(tmp_path, ["-tp", "4"], release="0.14.0rc1", chip="A5_950")
    assert finding.status == "fail" and finding.rules == ("unsupported",)
    assert "chip family 950" in finding.summary


def test_ascend_950_from_its_first_release_passes(tmp_path: Path) -> None:
    finding = support(tmp_path, ["-tp", "4"], release="0.17.0rc1", chip="A5_950")
    assert finding.status == "pass", finding.summary


def test_a_first_generation_910_fails(tmp_path: Path) -> None:
    """vLLM-Ascend FAQ 1 (docs/source/faqs.md): Ascend 910 / 910 Pro B unplanned."""
    finding = support(tmp_path, ["-tp", "8"], release="0.8.5rc1", chip="A1_910")
    assert finding.status == "fail" and finding.rules == ("unsupported",)
    assert "chip family 910 (first generation)" in finding.summary


def test_a_moe_model_on_310p_before_v0_15_fails_and_from_it_passes(tmp_path: Path) -> None:
    """Release notes v0.14.0rc1 (310P back: dense and VL models only, eager mode) and
    v0.15.0rc1 (310P MoE and W8A8, experimental)."""
    before = support(tmp_path / "a", ["--enforce-eager"], release="0.14.0rc1", chip="310P")
    after = support(tmp_path / "b", ["--enforce-eager"], release="0.15.0rc1", chip="310P")
    assert before.status == "fail" and "unsupported" in before.rules
    assert "on 310P, v0.14.0rc1 supports only dense and VL models" in before.summary
    assert "unsupported" not in after.rules and "supports only dense" not in after.summary


def test_310p_in_v0_10_0rc1_is_experimental_and_the_v0_11_line_is_not_supported(
        tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#3479: Qwen3-4B on a 300I Duo with v0.11.0rc0 failed to start;
    the v0.11.0-dev FAQ names v0.10.0rc1 as the stable release for 310P, and the maintainers
    said in vllm-project/vllm-ascend#4874 that the v0.11 line did not run on it."""
    dense = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3"}
    stable = support(tmp_path / "a", ["--enforce-eager"], release="0.10.0rc1", config=dense,
                     chip="310P")
    later = support(tmp_path / "b", ["--enforce-eager"], release="0.11.0rc0", config=dense,
                    chip="310P")
    assert stable.status == "pass", stable.summary
    assert any(e.startswith("support row vllm-ascend-310p-0100rc1:") for e in stable.evidence)
    assert later.status == "fail" and later.rules == ("unsupported",)
    assert "chip family 310P" in later.summary
    assert any("vllm-ascend-310p-011x" in e for e in later.evidence)
    between = support(tmp_path / "c", ["--enforce-eager"], release="0.10.2rc1", config=dense,
                      chip="310P")
    assert between.status == "fail" and between.rules == ("unsupported",)
    assert any("vllm-ascend-310p-0101-0102" in e for e in between.evidence)


def test_graph_mode_on_310p_in_v0_14_warns(tmp_path: Path) -> None:
    dense = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3"}
    graph = support(tmp_path / "a", ["-tp", "1"], release="0.14.0rc1", config=dense,
                    chip="310P")
    eager = support(tmp_path / "b", ["--enforce-eager"], release="0.14.0rc1", config=dense,
                    chip="310P")
    assert graph.status == "warn" and graph.rules == ("known-issue",)
    assert any("eager-only-310p-0140rc1" in e for e in graph.evidence)
    assert not any("eager-only-310p-0140rc1" in e for e in eager.evidence), eager.summary


def test_qwen3_6_with_mtp_in_v0_20_2_fails_on_its_known_issue(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#9956: Qwen3.6-35B-A3B shuts down with MTP enabled
    (numAcceptedTokens exceeds varlen segment length); listed in v0.20.2rc1/v0.21.0rc1."""
    mtp = ["-tp", "2", "--speculative-config", '{"method": "qwen3_5_mtp", '
           '"num_speculative_tokens": 3}']
    crashed = support(tmp_path / "a", mtp, release="0.20.2rc1", config=QWEN3_5_MOE)
    plain = support(tmp_path / "b", ["-tp", "2"], release="0.20.2rc1", config=QWEN3_5_MOE)
    assert crashed.status == "fail" and "known-issue" in crashed.rules
    assert "Qwen3.6-35B-A3B may shut down" in crashed.summary
    assert plain.status == "pass", plain.summary


def test_a_known_issue_of_the_release_fails_its_combination(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#4051 (Qwen3-Next EP inference failure); the v0.11.0 release
    notes: Qwen3-Next does not support expert parallel."""
    finding = support(tmp_path, ["-tp", "4", "--enable-expert-parallel"], release="0.11.0",
                      config=QWEN3_NEXT)
    assert finding.status == "fail" and finding.rules == ("known-issue",)
    assert "Qwen3-Next does not support expert parallel" in finding.summary


def test_the_same_model_without_the_feature_is_quiet(tmp_path: Path) -> None:
    # eager: the v0.11.0 line also has a graph-capture issue with Qwen3-Next (#5005)
    finding = support(tmp_path, ["-tp", "4", "--enforce-eager"], release="0.11.0",
                      config=QWEN3_NEXT)
    assert finding.status == "pass", finding.summary
    assert any("experimental" in e for e in finding.evidence)


def test_a_model_type_no_row_speaks_of_is_not_in_our_data(tmp_path: Path) -> None:
    # DeepSeek V2.5 is "Need test" on every supported-models page: no row, so no verdict
    config = {"architectures": ["DeepseekV2ForCausalLM"], "model_type": "deepseek_v2"}
    finding = support(tmp_path, ["-tp", "8"], release="0.11.0", config=config)
    assert finding.status == "warn" and finding.rules == ("not-in-our-data",)
    assert "model type deepseek_v2 on vllm-ascend 0.11.0: not in our data" in finding.summary


def test_the_supported_models_pages_judge_families_beyond_qwen(tmp_path: Path) -> None:
    """A family a release's supported-models page marks ❌ fails, one it marks ✅ passes, and
    a release before the first page that lists it stays "not in our data"."""
    whisper = {"architectures": ["WhisperForConditionalGeneration"], "model_type": "whisper"}
    gemma3 = {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3"}
    refused = support(tmp_path / "a", ["--enforce-eager"], release="0.10.0rc1", config=whisper)
    old_gemma = support(tmp_path / "b", ["--enforce-eager"], release="0.9.1", config=gemma3)
    new_gemma = support(tmp_path / "c", ["--enforce-eager"], release="0.10.0rc1", config=gemma3)
    # v0.9.2rc1 now refuses Whisper too (vllm-project/vllm-ascend#2262): v0.9.1 is before both
    unknown = support(tmp_path / "d", ["--enforce-eager"], release="0.9.1", config=whisper)
    assert refused.status == "fail" and "unsupported" in refused.rules, refused.summary
    assert "support row whisper-no" in "\n".join(refused.evidence)
    assert old_gemma.status == "fail" and "unsupported" in old_gemma.rules, old_gemma.summary
    assert new_gemma.status == "pass", new_gemma.summary
    assert unknown.status == "warn" and unknown.rules == ("not-in-our-data",), unknown.summary


def test_qwen3_moe_on_a2_passes(tmp_path: Path) -> None:
    finding = support(tmp_path, ["-tp", "2", "--reasoning-parser", "qwen3"], release="0.11.0",
                      config=QWEN3_MOE)
    assert finding.status == "pass", finding.summary
    assert "features: reasoning-parser:qwen3, graph, tp:2" in finding.evidence  # shown, not judged


def test_no_engine_no_model_no_npu_skip_with_the_reason(tmp_path: Path) -> None:
    no_engine = support(tmp_path / "a", [], release=None)
    no_npu = support(tmp_path / "b", [], chip=None)
    assert no_engine.status == "skip" and no_engine.rules == ("no-engine",)
    assert "holds no vllm_ascend" in no_engine.summary
    assert no_npu.status == "skip" and no_npu.rules == ("no-npu",)
    with served(tmp_path / "c", []) as ctx:
        ctx.model_dir = None
        no_model = serving_support(ctx)
    assert no_model.status == "skip" and no_model.rules == ("no-model",)


def test_registered() -> None:
    ids = {c.id for c in all_checks()}
    assert {"serving.support", "serving.flags"} <= ids


def mindie(tmp_path: Path, version: str, config: dict[str, Any], chip: str = "A2") -> Finding:
    """A MindIE install as MindIE writes its version.info (`Ascend-mindie : MindIE 2.1.RC2.B080`),
    the user's config.json and their chip's npu-smi table; no vLLM process."""
    root = FakeRoot(tmp_path / "root")
    root.file("/usr/local/Ascend/mindie/latest/version.info",
              f"Ascend-mindie : MindIE {version}\n")
    write_model(root.path / "models" / "m", config)
    ctx = Context(LiveHost(root=str(root.path), env={}), load_policy(None),
                  model_dir=Path("/models/m"))
    ctx.know("npu", npu_reading(chip))
    return serving_support(ctx)


QWEN3_VL_MOE = {"architectures": ["Qwen3VLMoeForConditionalGeneration"],
                "model_type": "qwen3_vl_moe", "torch_dtype": "bfloat16"}


def test_mindie_2_1_rc2_with_qwen3_moe_passes_from_its_rows(tmp_path: Path) -> None:
    """gpustack/gpustack#3119: Qwen3-30B-A3B on MindIE 2.1.rc2 (910B), verified after the fix."""
    finding = mindie(tmp_path, "2.1.RC2.B080", QWEN3_MOE)
    assert finding.status == "pass", finding.summary
    assert "ok: model type qwen3_moe: experimental" in " ".join(finding.evidence)
    assert any(e.startswith("support row mindie-qwen3-21:") and "#3119" in e
               for e in finding.evidence)
    assert any(e.startswith("support row mindie-a2-310p:") for e in finding.evidence)


def test_mindie_2_0_rc2_with_qwen3_moe_is_not_in_our_data(tmp_path: Path) -> None:
    """gpustack/gpustack#2726: Qwen3-235B-A22B-Instruct-2507 on MindIE 2.0.RC2 would not start;
    no source says 2.0.RC2 supports it, so the doctor warns instead of passing."""
    finding = mindie(tmp_path, "2.0.RC2", QWEN3_MOE)
    assert finding.status == "warn" and finding.rules == ("not-in-our-data",)
    assert "model type qwen3_moe on mindie 2.0.RC2: not in our data" in finding.summary


@pytest.mark.parametrize("model", [QWEN3_NEXT, QWEN3_5_MOE])
def test_mindie_3_1_with_qwen3_next_or_qwen3_5_fails(tmp_path: Path,
                                                    model: dict[str, Any]) -> None:
    """MindIE 3.1.0 lists neither and takes no new models (its release notes)."""
    finding = mindie(tmp_path, "3.1.0", model)
    assert finding.status == "fail" and finding.rules == ("unsupported",)
    assert f"does not support model type {model['model_type']}" in finding.summary
    assert any("mindie-no-qwen3-next-qwen3-5" in e and "MindIE-LLM" in e
               for e in finding.evidence)


def test_mindie_3_1_qwen3_vl_moe_on_a3_is_not_in_our_data_but_on_310p_passes(
        tmp_path: Path) -> None:
    """MindIE 3.1.0's list has Qwen3-VL-30B-A3B on 800I A2 and 300I Duo, no A3 entry."""
    on_a3 = mindie(tmp_path / "a", "3.1.0", QWEN3_VL_MOE, chip="A3")
    on_310p = mindie(tmp_path / "b", "3.1.0", QWEN3_VL_MOE, chip="310P")
    assert on_a3.status == "warn" and on_a3.rules == ("not-in-our-data",)
    assert "model type qwen3_vl_moe on mindie 3.1.0: not in our data" in on_a3.summary
    assert on_310p.status == "pass", on_310p.summary


def test_qwen3_x_with_pd_disaggregation_in_v0_18_0_warns(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#8421: Qwen3.x accuracy issue with PD disaggregation
    (v0.18.0 known issues); the same model without --kv-transfer-config is quiet."""
    kv = ["--kv-transfer-config", '{"kv_connector": "MooncakeConnectorV1", "kv_role": '
          '"kv_producer"}']
    pd = support(tmp_path / "a", ["-tp", "2", *kv], release="0.18.0", config=QWEN3_5_MOE)
    plain = support(tmp_path / "b", ["-tp", "2"], release="0.18.0", config=QWEN3_5_MOE)
    assert pd.status == "warn" and pd.rules == ("known-issue",)
    assert "accuracy issue with prefill/decode disaggregation" in pd.summary
    assert plain.status == "pass", plain.summary


KNOWN = [  # (release, model, shape, its healthy twin, the row): from each release's notes
    ("0.9.1rc2", QWEN3_MOE, ["-tp", "4", "--enable-expert-parallel"],
     ["-tp", "4", "--enable-expert-parallel", "--enforce-eager"], "qwen3-moe-aclgraph-ep"),
    ("0.9.1", QWEN3_MOE, ["-tp", "4", "-pp", "2"], ["-tp", "8"], "pipeline-parallel-091"),
    ("0.9.2rc1", QWEN3_MOE, ["-pp", "2", "--distributed-executor-backend", "ray"],
     ["-pp", "2", "--distributed-executor-backend", "ray", "--enforce-eager"],
     "pipeline-parallel-ray-graph"),
    ("0.9.1rc3", QWEN3_MOE, ["--compilation-config", '{"full_cuda_graph": true}'],
     ["--compilation-config", '{"full_cuda_graph": false}'], "full-cuda-graph-a2"),
    ("0.12.0rc1", {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3"},
     ["--compilation-config", '{"cudagraph_mode": "FULL_DECODE_ONLY"}'], ["-tp", "1"],
     "full-decode-only-0120rc1"),
]


# -- the checkpoint's own quantization, the chip without a model, transformers, dev builds ------

QWEN2 = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "torch_dtype": "bfloat16"}
QWEN3_VL = {"architectures": ["Qwen3VLForConditionalGeneration"], "model_type": "qwen3_vl",
            "torch_dtype": "bfloat16"}


def support_with(tmp_path: Path, args: list[str], release: str, config: dict[str, Any],
                 files: dict[str, Any] | None = None, packages: dict[str, str] | None = None,
                 chip: str = "A2", no_model: bool = False) -> Finding:
    """`support`, with more files in the model directory and more packages in the judged
    interpreter (both read when the check runs, after the process started)."""
    with served(tmp_path, args, release=release, config=config, chip=chip,
                files=files) as ctx:
        for name, version in (packages or {}).items():
            meta = tmp_path / "site" / f"{name}-{version}.dist-info" / "METADATA"
            meta.parent.mkdir(parents=True)
            meta.write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        if no_model:
            ctx.model_dir = None
        return serving_support(ctx)


MODELSLIM_W8A8 = {"quant_model_description.json": {"model_quant_type": "W8A8"}}


def test_an_msmodelslim_checkpoint_without_the_flag_is_judged_as_ascend_quantization(
        tmp_path: Path) -> None:
    """A W8A8 checkpoint served on 0.7.3.post1 with no --quantization: the description makes it
    `quantization:ascend`, which came in v0.8.4rc2 (release notes)."""
    finding = support_with(tmp_path, [], "0.7.3.post1", QWEN2, MODELSLIM_W8A8)
    assert finding.status == "fail" and "unsupported" in finding.rules
    assert "feature quantization:ascend" in finding.summary
    assert any("quantization-ascend-before-0084rc2" in e for e in finding.evidence)


def test_the_same_checkpoint_on_a_release_with_ascend_quantization_passes_it(
        tmp_path: Path) -> None:
    """The description's type is a feature of its own (`quantization:ascend:W8A8`); with no
    row about that type it is shown, and `quantization:ascend` carries the verdict."""
    finding = support_with(tmp_path, [], "0.9.0rc2", QWEN2, MODELSLIM_W8A8)
    assert "feature quantization:ascend" not in finding.summary
    assert "features: quantization:ascend, quantization:ascend:W8A8, graph" in finding.evidence
    assert "quantization:ascend:W8A8 on" not in " ".join(finding.evidence)


@pytest.mark.parametrize(("args", "expected"), [
    (["--runner", "pooling"], "pooling"),
    (["--task", "embed"], "pooling"),
    (["--task", "score"], "pooling"),
    (["--enable-lora"], "lora"),
    (["--enable-prefix-caching"], "prefix-caching"),
    (["--speculative-config", '{"method": "eagle3", "num_speculative_tokens": 2}'],
     "speculative:eagle3"),
    (["--speculative-config", '{"method": "ngram", "num_speculative_tokens": 3}'],
     "speculative:ngram"),
    (["--speculative-config", '{"method": "suffix"}'], "speculative:suffix"),
    (["--speculative-config", '{"method": "qwen3_next_mtp", "num_speculative_tokens": 1}'],
     "mtp"),
    (["--speculative-model", "/m/draft", "--num-speculative-tokens", "4"], "speculative"),
    (["--additional-config", '{"torchair_graph_config": {"enabled": true}}'],
     "graph:torchair"),
    (["--additional-config", '{"ascend_scheduler_config": {"enabled": true}}'],
     "ascend-scheduler"),
])
def test_the_command_line_yields_the_feature(tmp_path: Path, args: list[str],
                                             expected: str) -> None:
    finding = support(tmp_path, args, release="0.11.0", config=QWEN3_MOE)
    line = next(e for e in finding.evidence if e.startswith("features: "))
    assert expected in line.removeprefix("features: ").split(", "), line


@pytest.mark.parametrize("args", [
    ["--no-enable-prefix-caching"], ["--runner", "generate"], ["--task", "generate"],
    ["--additional-config", '{"torchair_graph_config": {"enabled": false}}'],
    ["--additional-config", '{"ascend_scheduler_config": {}}'],
])
def test_a_feature_switched_off_or_absent_is_not_read(tmp_path: Path, args: list[str]) -> None:
    finding = support(tmp_path, args, release="0.11.0", config=QWEN3_MOE)
    line = next(e for e in finding.evidence if e.startswith("features: "))
    assert line == "features: graph"


def test_config_json_quant_method_is_the_feature_when_the_command_line_names_none(
        tmp_path: Path) -> None:
    awq = {**QWEN3_MOE, "quantization_config": {"quant_method": "awq", "bits": 4}}
    finding = support_with(tmp_path / "awq", [], "0.8.5rc1", awq)
    assert finding.status == "fail" and "feature quantization:awq" in finding.summary
    plain = support_with(tmp_path / "plain", [], "0.8.5rc1", QWEN3_MOE)
    assert "quantization" not in " ".join(plain.evidence)


def test_the_command_line_method_wins_over_the_checkpoint(tmp_path: Path) -> None:
    awq = {**QWEN3_MOE, "quantization_config": {"quant_method": "awq"}}
    finding = support_with(tmp_path, ["--quantization", "ascend"], "0.11.0", awq)
    assert "features: quantization:ascend, graph" in finding.evidence


def test_the_chip_is_judged_without_a_model(tmp_path: Path) -> None:
    """An offline script names its model inside: 0.7.3 on a 300I Duo still fails on the chip
    (310P first came in v0.9.1rc1); on 910B the same run skips, the model not judged."""
    on_310p = support_with(tmp_path / "a", [], "0.7.3", QWEN2, chip="310P", no_model=True)
    assert on_310p.status == "fail" and on_310p.rules == ("unsupported",)
    assert "chip family 310P" in on_310p.summary
    assert "model: not judged (no model" in " ".join(on_310p.evidence)
    on_a2 = support_with(tmp_path / "b", [], "0.7.3", QWEN2, no_model=True)
    assert on_a2.status == "skip" and on_a2.rules == ("no-model",)
    assert "ok: chip family 910B/A2: supported" in " ".join(on_a2.evidence)


def test_transformers_older_than_the_model_type_fails(tmp_path: Path) -> None:
    """qwen3_vl is known to transformers from 4.57.0: 4.56.2 refuses config.json."""
    finding = support_with(tmp_path, [], "0.11.0rc0", QWEN3_VL,
                           packages={"transformers": "4.56.2"})
    assert finding.status == "fail" and "unsupported" in finding.rules
    assert "transformers 4.56.2 does not know model type qwen3_vl" in finding.summary
    assert any("transformers-qwen3-next-vl" in e and "v4.57.0" in e for e in finding.evidence)


def test_transformers_that_knows_the_model_type_is_quiet(tmp_path: Path) -> None:
    finding = support_with(tmp_path, [], "0.11.0rc0", QWEN3_VL,
                           packages={"transformers": "4.57.1"})
    assert "transformers" not in finding.summary
    assert "ok: transformers 4.57.1 knows model type qwen3_vl" in finding.evidence


def test_a_development_build_is_judged_as_its_release_and_says_so(tmp_path: Path) -> None:
    """0.11.0rc1.dev0 comes before 0.11.0rc1 (PEP 440): it takes that release's rows (Qwen3-MoE
    supported, and its known issue) and warns that no row declares the build itself."""
    finding = support_with(tmp_path, ["-tp", "2"], "0.11.0rc1.dev0+g1a2b3c", QWEN3_MOE)
    assert finding.status == "warn"
    assert finding.rules == ("not-in-our-data", "known-issue")
    assert "known issue of vllm-ascend 0.11.0rc1.dev0+g1a2b3c" in finding.summary
    assert "development build before 0.11.0rc1" in finding.summary
    assert "ok: model type qwen3_moe: supported" in " ".join(finding.evidence)


@pytest.mark.parametrize(("version", "base"), [("0.11.0rc1.dev0+g1a2b", "0.11.0rc1"),
                                               ("0.11.0rc2.dev123", "0.11.0rc2"),
                                               ("0.11.0.dev3", "0.11.0"), ("0.11.0rc1", None),
                                               ("1.0.post1.dev2", None), ("junk", None)])
def test_dev_base_is_the_release_a_dev_build_precedes(version: str, base: str | None) -> None:
    assert dev_base(version) == base


QWEN3 = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "torch_dtype": "bfloat16"}


def test_lora_on_the_release_that_broke_it_fails_and_its_twin_passes(tmp_path: Path) -> None:
    """Release notes v0.10.2rc1 known issues (LoRA broken, #2941); v0.11.0rc0 brings it back."""
    broken = support(tmp_path / "a", ["--enable-lora"], release="0.10.2rc1", config=QWEN3)
    fixed = support(tmp_path / "b", ["--enable-lora"], release="0.11.0", config=QWEN3)
    assert broken.status == "fail" and "known-issue" in broken.rules
    assert "LoRA does not work" in broken.summary and "fixed in v0.11.0rc0" in broken.summary
    assert "LoRA" not in fixed.summary
    assert any("lora-v1-0090rc2" in e for e in fixed.evidence)


def test_eagle3_on_the_v0_9_1_final_release_fails(tmp_path: Path) -> None:
    """v0.9.1rc1's release page: EAGLE-3 is not in the v0.9.1-dev branch (v0.9.1 final)."""
    spec = ["--speculative-config", '{"method": "eagle3", "num_speculative_tokens": 2}']
    final = support(tmp_path / "a", spec, release="0.9.1", config=QWEN3)
    back = support(tmp_path / "b", spec, release="0.11.0", config=QWEN3)
    assert final.status == "fail" and "feature speculative:eagle3" in final.summary
    assert "feature speculative:eagle3" not in back.summary


def test_the_pooling_runner_on_310p_in_v0_14_0rc1_fails(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#6471: v0.14.0rc1 on 310P refuses runner_type 'pooling'; the
    same command on an A2 is not judged for pooling (no row speaks of it there: listed as not
    judged)."""
    args = ["--runner", "pooling", "--enforce-eager"]
    on_310p = support(tmp_path / "a", args, release="0.14.0rc1", config=QWEN3, chip="310P")
    on_a2 = support(tmp_path / "b", args, release="0.14.0rc1", config=QWEN3)
    assert on_310p.status == "fail" and "feature pooling" in on_310p.summary
    assert "unsupported" not in on_a2.rules and "feature pooling" not in on_a2.summary


W8A8_DYNAMIC = {"quant_model_description.json": {"model_quant_type": "W8A8_DYNAMIC"}}


def test_a_quantization_type_on_950_before_its_release_fails(tmp_path: Path) -> None:
    """v0.22.1rc1's release page adds W8A8/W4A8 dynamic quantization on Ascend 950."""
    before = support_with(tmp_path / "a", [], "0.18.0", QWEN3, W8A8_DYNAMIC, chip="A5_950")
    after = support_with(tmp_path / "b", [], "0.22.1rc1", QWEN3, W8A8_DYNAMIC, chip="A5_950")
    on_a2 = support_with(tmp_path / "c", [], "0.18.0", QWEN3, W8A8_DYNAMIC)
    assert before.status == "fail"
    assert "feature quantization:ascend:W8A8_DYNAMIC" in before.summary
    assert "feature quantization:ascend:W8A8_DYNAMIC" not in after.summary + on_a2.summary


# -- the release notes v0.13.0rc2 .. v0.26.0rc1 (issue 25, sixth pass) ---------------------------


NEW_MODELS = [  # (config, the last release before the note, the release the note adds it in)
    (model("longcat_flash", "LongcatFlashForCausalLM"), "0.13.0rc1", "0.13.0rc2"),
    (model("minimax_m2", "MiniMaxM2ForCausalLM"), "0.12.0rc1", "0.13.0"),
    (model("deepseek_v4", "DeepseekV4ForCausalLM"), "0.19.1rc1", "0.20.2rc1"),
    (model("gemma4", "Gemma4ForConditionalGeneration"), "0.22.1rc1", "0.23.0rc1"),
    # the GLM-5 tutorial: first in v0.17.0rc1; the v0.15.0rc1 notes add Kimi-K2.5
    (model("glm_moe_dsa", "GlmMoeDsaForCausalLM"), "0.16.0rc1", "0.17.0rc1"),
    (model("kimi_k25", "KimiK25ForConditionalGeneration"), "0.14.0rc1", "0.15.0rc1"),
]


@pytest.mark.parametrize("config, before, since", NEW_MODELS,
                         ids=[m[0]["model_type"] for m in NEW_MODELS])
def test_a_model_a_release_note_adds_fails_before_it_and_passes_from_it(
        tmp_path: Path, config: dict[str, Any], before: str, since: str) -> None:
    early = support(tmp_path / "a", ["-tp", "8"], release=before, config=config)
    added = support(tmp_path / "b", ["-tp", "8"], release=since, config=config)
    assert early.status == "fail" and early.rules == ("unsupported",), early.summary
    assert f"does not support model type {config['model_type']}" in early.summary
    assert "unsupported" not in added.rules and "not in our data" not in added.summary


DEEPSEEK_V3 = model("deepseek_v3", "DeepseekV3ForCausalLM")


def test_deepseek_on_950_waits_for_v0_18_0rc1(tmp_path: Path) -> None:
    """v0.18.0rc1: DeepSeek models supported on A5 (950); v0.17.0rc1 has the chip, not them."""
    early = support(tmp_path / "a", ["-tp", "16"], release="0.17.0rc1", config=DEEPSEEK_V3,
                    chip="A5_950")
    added = support(tmp_path / "b", ["-tp", "16"], release="0.18.0rc1", config=DEEPSEEK_V3,
                    chip="A5_950")
    on_a2 = support(tmp_path / "c", ["-tp", "16"], release="0.17.0rc1", config=DEEPSEEK_V3)
    assert early.status == "fail" and "deepseek-v3-950-before-0180rc1" in " ".join(early.evidence)
    assert "unsupported" not in added.rules and "unsupported" not in on_a2.rules


def test_310p_in_the_v0_13_line_fails_and_v0_14_0rc1_brings_it_back(tmp_path: Path) -> None:
    """v0.14.0rc1: "310P support is back now"."""
    gone = support(tmp_path / "a", ["--enforce-eager"], release="0.13.0", config=QWEN3,
                   chip="310P")
    back = support(tmp_path / "b", ["--enforce-eager"], release="0.14.0rc1", config=QWEN3,
                   chip="310P")
    assert gone.status == "fail" and "chip family 310P" in gone.summary
    assert "chip family 310P" not in back.summary


TORCHAIR = ["--additional-config", '{"torchair_graph_config": {"enabled": true}}']


def test_torchair_graph_after_its_removal_fails_and_before_it_is_not_judged(
        tmp_path: Path) -> None:
    """v0.12.0rc1 removes torchair graph mode (announced in v0.11.0)."""
    removed = support(tmp_path / "a", TORCHAIR, release="0.13.0", config=DEEPSEEK_V3)
    before = support(tmp_path / "b", TORCHAIR, release="0.11.0", config=DEEPSEEK_V3)
    assert removed.status == "fail" and "feature graph:torchair" in removed.summary
    assert "feature graph:torchair" not in before.summary


QWEN3_5 = model("qwen3_5", "Qwen3_5ForConditionalGeneration")


def test_lora_on_qwen3_5_dense_before_v0_20_2rc1_fails(tmp_path: Path) -> None:
    """v0.20.2rc1: "Added LoRA support for Qwen3.5 dense models"; Qwen3 LoRA is older."""
    early = support(tmp_path / "a", ["--enable-lora"], release="0.18.0", config=QWEN3_5)
    qwen3 = support(tmp_path / "b", ["--enable-lora"], release="0.18.0", config=QWEN3)
    added = support(tmp_path / "c", ["--enable-lora"], release="0.20.2rc1", config=QWEN3_5)
    assert early.status == "fail" and "feature lora" in early.summary
    assert "feature lora" not in qwen3.summary and "feature lora" not in added.summary


def test_the_pooling_runner_on_310p_is_refused_up_to_v0_20_2rc1(tmp_path: Path) -> None:
    """v0.20.2rc1 known issues (#9593): 310P still refuses runner_type 'pooling'; main
    supports it after that release."""
    args = ["--runner", "pooling", "--enforce-eager"]
    late = support(tmp_path / "a", args, release="0.20.2rc1", config=QWEN3, chip="310P")
    after = support(tmp_path / "b", args, release="0.21.0rc1", config=QWEN3, chip="310P")
    assert late.status == "fail" and "feature pooling" in late.summary
    assert "feature pooling" not in after.summary


def test_a_release_that_validates_few_models_warns_for_the_others(tmp_path: Path) -> None:
    """v0.26.0rc1's release page: model-restricted; GLM-5.2 and DeepSeek V4 validated."""
    other = support(tmp_path / "a", ["-tp", "4"], release="0.26.0rc1", config=QWEN3_MOE)
    named = support(tmp_path / "b", ["-tp", "16"], release="0.26.0rc1",
                    config=model("deepseek_v4", "DeepseekV4ForCausalLM"))
    assert "known-issue" in other.rules and "model-restricted release" in other.summary
    assert not any(e.startswith("known issue model-restricted") for e in named.evidence)


KV = ["--kv-transfer-config", '{"kv_connector": "MooncakeConnectorV1", "kv_role": "kv_both"}']
NEW_KNOWN = [  # (release, model, shape, its healthy twin, the row)
    ("0.12.0rc1", QWEN3, ["--speculative-config", '{"method": "suffix"}'], ["-tp", "1"],
     "suffix-broken-0120rc1"),
    ("0.17.0rc1", QWEN3_5, ["--enable-prefix-caching", "-tp", "2"], ["-tp", "2"],
     "hybrid-prefix-cache-block"),
    ("0.18.0rc1", model("minimax_m2", "MiniMaxM2ForCausalLM"), ["-tp", "8", *KV], ["-tp", "8"],
     "minimax-pd-accuracy"),
    ("0.23.0", QWEN3_5, ["--enable-lora", "-tp", "4"], ["-tp", "4"], "qwen3-5-lora-sgmv-expand"),
]


@pytest.mark.parametrize("release, config, shape, twin, row", KNOWN + NEW_KNOWN,
                         ids=[k[4] for k in KNOWN + NEW_KNOWN])
def test_a_known_issue_row_fires_on_its_shape_and_not_on_its_twin(
        tmp_path: Path, release: str, config: dict[str, Any], shape: list[str],
        twin: list[str], row: str) -> None:
    hit = support(tmp_path / "a", shape, release=release, config=config)
    quiet = support(tmp_path / "b", twin, release=release, config=config)
    assert hit.status in ("warn", "fail") and "known-issue" in hit.rules
    assert any(e.startswith(f"known issue {row}") for e in hit.evidence), hit.evidence
    assert not any(e.startswith(f"known issue {row}") for e in quiet.evidence)


# -- issue 25, second pass: rows scoped by chip, by release pair and by msModelSlim type --------

FULL_DECODE = ["--compilation-config", '{"cudagraph_mode": "FULL_DECODE_ONLY"}']
PIECEWISE = ["--compilation-config", '{"cudagraph_mode": "PIECEWISE"}']
DSV4 = model("deepseek_v4", "DeepseekV4ForCausalLM")
EP16 = ["-tp", "16", "--enable-expert-parallel"]
Shape = tuple[str, dict[str, Any], list[str], str]  # release, config.json, command line, chip
SECOND_PASS: list[tuple[Shape, Shape, str]] = [  # (the incident's shape, its twin, the row)
    # v0.21.0rc1 notes (#9503): EP with the full decode graph; PIECEWISE is the workaround
    (("0.19.1rc1", GLM5, [*EP16, *FULL_DECODE], "A3"),
     ("0.19.1rc1", GLM5, [*EP16, *PIECEWISE], "A3"), "glm5-ep-full-decode-graph"),
    # #15985: DeepSeek V4 PD hang on A3; the same layout on A2 is not named
    (("0.26.0rc1", DSV4, [*EP16, *KV], "A3"), ("0.26.0rc1", DSV4, [*EP16, *KV], "A2"),
     "dsv4-pd-hang-a3-0260rc1"),
    # v0.23.0rc1 notes (#12339): Ascend 950 only
    (("0.23.0rc1", QWEN3_5_MOE, ["-tp", "16", *KV], "A5_950"),
     ("0.23.0rc1", QWEN3_5_MOE, ["-tp", "16", *KV], "A3"), "qwen35-950-pd-flapping-0230rc1"),
    # v0.23.0rc1 notes (#12359): any model with a KV connector; without one it is quiet
    (("0.23.0rc1", QWEN3, ["-tp", "2", *KV], "A2"), ("0.23.0rc1", QWEN3, ["-tp", "2"], "A2"),
     "kv-transfer-reformat-precision-0230rc1"),
    # #8213 with the v0.18.0 checklist: fails on v0.17.0rc1, solved in v0.18.0
    (("0.17.0rc1", model("minimax_m2", "MiniMaxM2ForCausalLM"), ["-tp", "8"], "A3"),
     ("0.18.0", model("minimax_m2", "MiniMaxM2ForCausalLM"), ["-tp", "8"], "A3"),
     "minimax-m27-start-0170rc1-0180rc1"),
    # #6853 with the v0.16.0rc1 checklist
    (("0.14.0rc1", model("qwen2_5_vl", "Qwen2_5_VLForConditionalGeneration"), ["-tp", "4"], "A2"),
     ("0.16.0rc1", model("qwen2_5_vl", "Qwen2_5_VLForConditionalGeneration"), ["-tp", "4"], "A2"),
     "qwen25-vl-processor-0140rc1"),
    # #6398: fails on v0.14.0rc1, the reporter's rollback to v0.13.0rc1 ran
    (("0.14.0rc1", model("deepseek_v32", "DeepseekV32ForCausalLM"), EP16, "A2"),
     ("0.13.0rc1", model("deepseek_v32", "DeepseekV32ForCausalLM"), EP16, "A2"),
     "dsv32-a2-multinode-dispatch-0140rc1"),
    # #6949 in the v0.16.0rc1 checklist: the Mooncake connector on v0.15.0rc1
    (("0.15.0rc1", QWEN3, ["-tp", "2", *KV], "A2"), ("0.16.0rc1", QWEN3, ["-tp", "2", *KV], "A2"),
     "mooncake-connector-start-0150rc1"),
]


def test_a_known_issue_of_one_msmodelslim_type_spares_the_others(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#7443 (v0.17.0rc1, DeepSeek-V3.1 W8A8 dynamic: the float16
    weight scale fails aclnnQuantMatmulWeightNz with 161002): the row names the type
    W8A8_DYNAMIC, so a static W8A8 checkpoint of the same model is not flagged by it."""
    dsv3 = model("deepseek_v3", "DeepseekV3ForCausalLM")
    dynamic = {"quant_model_description.json": {"model_quant_type": "W8A8_DYNAMIC"}}
    hit = support_with(tmp_path / "a", EP16, "0.17.0rc1", dsv3, dynamic)
    quiet = support_with(tmp_path / "b", EP16, "0.17.0rc1", dsv3, MODELSLIM_W8A8)
    row = "known issue w8a8-dynamic-fp16-scale-0170rc1"
    assert "known-issue" in hit.rules and "161002" in hit.summary
    assert any(e.startswith(row) for e in hit.evidence), hit.evidence
    assert not any(e.startswith(row) for e in quiet.evidence)


def test_glm5_on_950_waits_for_v0_23_0rc1(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#12452 (GLM-5 tutorial): on Ascend 950 from v0.23.0rc1, while
    A2/A3 run it from v0.17.0rc1."""
    early = support(tmp_path / "a", EP16, release="0.22.1rc1", config=GLM5, chip="A5_950")
    on_a3 = support(tmp_path / "b", EP16, release="0.22.1rc1", config=GLM5, chip="A3")
    added = support(tmp_path / "c", EP16, release="0.23.0rc1", config=GLM5, chip="A5_950")
    assert early.status == "fail" and "glm5-950-before-0230rc1" in " ".join(early.evidence)
    assert "unsupported" not in on_a3.rules and "unsupported" not in added.rules


# -- issue 25, third thread harvest: rows from release checklists and maintainers' causes --------

DSV32 = model("deepseek_v32", "DeepseekV32ForCausalLM")
GEMMA4 = model("gemma4", "Gemma4ForConditionalGeneration")
KIMI_K25 = model("kimi_k25", "KimiK25ForConditionalGeneration")
TP8 = ["-tp", "8"]
THIRD_PASS: list[tuple[Shape, Shape, str]] = [  # (the incident's shape, its twin, the row)
    # #8270 in the v0.19.0rc1 checklist: decode context parallel 2 on A2; without it, quiet
    (("0.18.0rc1", DSV32, [*EP16, "-dcp", "2"], "A2"), ("0.18.0rc1", DSV32, EP16, "A2"),
     "dsv32-dcp-latency-a2-0180rc1"),
    # #8370: the FULL_DECODE_ONLY graph; PIECEWISE is the way round it
    (("0.18.0rc1", GEMMA4, ["-tp", "4", *FULL_DECODE], "A2"),
     ("0.18.0rc1", GEMMA4, ["-tp", "4", *PIECEWISE], "A2"), "gemma4-full-decode-graph-0180rc1"),
    # #7991 with the v0.18.0 checklist (#8186 solved): 310P on v0.18.0rc1, not on v0.18.0
    (("0.18.0rc1", QWEN3, ["--enforce-eager"], "310P"),
     ("0.18.0", QWEN3, ["--enforce-eager"], "310P"), "triton-310p-target-0180rc1"),
    # #12459 / #12706: PCP/DCP is DeepSeek-V3.1 only; DeepSeek-V4 without it is quiet
    (("0.23.0rc1", DSV4, [*EP16, "-pcp", "2"], "A3"), ("0.23.0rc1", DSV4, EP16, "A3"),
     "dsv4-no-context-parallel"),
    # #14757: 0.24 and 0.25 are silent releases; v0.26.0rc1 is not
    (("0.25.1rc1", QWEN3, TP8, "A2"), ("0.26.0rc1", QWEN3, TP8, "A2"),
     "silent-releases-0240-0250"),
    # #8415: Kimi-K2.5 on v0.18.0rc1; another model on the same release is quiet
    (("0.18.0rc1", KIMI_K25, EP16, "A3"), ("0.18.0rc1", DSV32, EP16, "A3"),
     "kimi-k25-tool-call-markers-0180rc1"),
    # #10522: GLM-5.1 prefill node in PD disaggregation on v0.20.2rc1; co-located is quiet
    (("0.20.2rc1", GLM5, [*EP16, *KV], "A3"), ("0.20.2rc1", GLM5, EP16, "A3"),
     "glm51-pd-prefill-crash-0202rc1"),
]


MINIMAX = model("minimax_m2", "MiniMaxM2ForCausalLM")
EAGLE3 = ["--speculative-config",
          '{"method": "eagle3", "model": "/d", "num_speculative_tokens": 3}']
MTP1 = ["--speculative-config", '{"method": "mtp", "num_speculative_tokens": 1}']
NOTES_PASS: list[tuple[Shape, Shape, str]] = [  # (the shape a note names, its twin, the row)
    # v0.18.0 notes (#8341): EPLB with minimax_m2; the same layout without EPLB is quiet
    (("0.18.0", MINIMAX, [*EP16, "--enable-eplb"], "A3"), ("0.18.0", MINIMAX, EP16, "A3"),
     "eplb-minimax-m2-0180"),
    # v0.18.0 notes (#8402): PCP with eagle3; eagle3 without PCP is quiet
    (("0.18.0", QWEN3, ["-tp", "4", "-pcp", "2", *EAGLE3], "A2"),
     ("0.18.0", QWEN3, ["-tp", "4", *EAGLE3], "A2"), "pcp-eagle3-0180"),
    # v0.23.0rc1 notes: PP with PCP; PP alone is quiet
    (("0.23.0", QWEN3, ["-tp", "4", "-pp", "2", "-pcp", "2"], "A2"),
     ("0.23.0", QWEN3, ["-tp", "4", "-pp", "2"], "A2"), "pp-pcp-0230"),
    # v0.23.0.post1 (#14336): MTP on 310P in v0.23.0; the post release is quiet
    (("0.23.0", QWEN3_5, ["-tp", "2", *MTP1], "310P"),
     ("0.23.0.post1", QWEN3_5, ["-tp", "2", *MTP1], "310P"), "mtp-prefix-cache-310p-0230"),
    # v0.23.0.post1 (#15362): data parallel in v0.23.0; the post release is quiet
    (("0.23.0", QWEN3, ["-tp", "4", "-dp", "2"], "A2"),
     ("0.23.0.post1", QWEN3, ["-tp", "4", "-dp", "2"], "A2"), "dp-dummy-run-stale-kv-0230"),
    # #7452: the pooling runner with prefix caching; without the switch it is quiet
    (("0.17.0rc1", QWEN3, ["--runner", "pooling", "--enable-prefix-caching"], "A2"),
     ("0.17.0rc1", QWEN3, ["--runner", "pooling"], "A2"), "pooling-prefix-cache-mismatch-0170rc1"),
]


def test_eplb_with_a_w4a8_checkpoint_fails_on_v0_18_0_and_w8a8_does_not(tmp_path: Path) -> None:
    """v0.18.0 notes (vllm-project/vllm-ascend#8341): EPLB cannot support W4A8; the row names
    the msModelSlim type, so a W8A8 checkpoint with EPLB is not flagged by it."""
    w4a8 = {"quant_model_description.json": {"model_quant_type": "W4A8_DYNAMIC"}}
    hit = support_with(tmp_path / "a", [*EP16, "--enable-eplb"], "0.18.0", DSV32, w4a8,
                       chip="A3")
    quiet = support_with(tmp_path / "b", [*EP16, "--enable-eplb"], "0.18.0", DSV32,
                         MODELSLIM_W8A8, chip="A3")
    row = "known issue eplb-w4a8-0180"
    assert hit.status == "fail" and any(e.startswith(row) for e in hit.evidence), hit.evidence
    assert not any(e.startswith(row) for e in quiet.evidence)


DSV3 = model("deepseek_v3", "DeepseekV3ForCausalLM")
STORE = ["--kv-transfer-config", '{"kv_connector": "AscendStoreConnector", "kv_role": "kv_both"}']
FC1 = ["--additional-config", '{"enable_flashcomm1": true}']
CP_PASS: list[tuple[Shape, Shape, str]] = [  # known issues naming PCP/DCP, FlashComm1, KV pool
    # #9975: DeepSeek-V4 with the KV pool; a plain Mooncake connector is quiet
    (("0.21.0rc1", DSV4, [*EP16, *STORE], "A3"), ("0.21.0rc1", DSV4, [*EP16, *KV], "A3"),
     "dsv4-kv-pool-hybrid-manager-0202rc1"),
    # #9959: MiniMax with DCP and eagle3; eagle3 alone is quiet
    (("0.20.2rc1", MINIMAX, ["-tp", "8", "-dcp", "2", *EAGLE3], "A3"),
     ("0.20.2rc1", MINIMAX, ["-tp", "8", *EAGLE3], "A3"), "minimax-cp-eagle3-accuracy-0202rc1"),
    # #8844: GLM-5 PD with DP on the decode node; PD without DP is quiet
    (("0.18.0", GLM5, [*EP16, "-dp", "2", *KV], "A3"), ("0.18.0", GLM5, [*EP16, *KV], "A3"),
     "glm5-pd-dp-accuracy-0180"),
    # #7489: DeepSeek-R1 with MTP and the KV pool; the pool without MTP is quiet
    (("0.18.0rc1", DSV3, [*EP16, *MTP1, *STORE], "A3"), ("0.18.0rc1", DSV3, [*EP16, *STORE], "A3"),
     "dsr1-mtp-kv-pool-counter-0180rc1"),
    # v0.16.0rc1 notes: DeepSeek-V3.2 DCP with FlashComm1; DCP alone is quiet
    (("0.16.0rc1", DSV32, [*EP16, "-dcp", "2", *FC1], "A3"),
     ("0.16.0rc1", DSV32, [*EP16, "-dcp", "2"], "A3"), "dsv32-cp-flashcomm1-0160rc1"),
    # v0.16.0rc1 notes: the 4-node PD hang is named for A3
    (("0.16.0rc1", DSV32, [*EP16, *KV], "A3"), ("0.16.0rc1", DSV32, [*EP16, *KV], "A2"),
     "dsv32-pd-a3-prefill-hang-0160rc1"),
    # v0.17.0rc1 notes: GLM-5 two-node hang, fixed after the release
    (("0.17.0rc1", GLM5, EP16, "A3"), ("0.18.0rc1", GLM5, EP16, "A3"),
     "glm5-two-node-hang-0170rc1"),
    # v0.22.1rc1 notes (#10964): multi-level pooling with DeepSeek-V4; Mooncake alone is quiet
    (("0.22.1rc1", DSV4, [*EP16, *STORE], "A3"), ("0.22.1rc1", DSV4, [*EP16, *KV], "A3"),
     "dsv4-multilevel-pool-0221rc1"),
    # #7290: eagle3 with FULL_DECODE_ONLY on v0.17.0rc1; PIECEWISE is quiet
    (("0.17.0rc1", QWEN3, ["-tp", "4", *EAGLE3, *FULL_DECODE], "A2"),
     ("0.17.0rc1", QWEN3, ["-tp", "4", *EAGLE3, *PIECEWISE], "A2"),
     "eagle3-full-decode-crash-0170rc1"),
    # #5750: Qwen3-Next on v0.13.0rc1; the release the maintainers recommend is quiet
    (("0.13.0rc1", QWEN3_NEXT, ["-tp", "4"], "A2"), ("0.14.0rc1", QWEN3_NEXT, ["-tp", "4"], "A2"),
     "qwen3-next-triton-package-0130rc1"),
]

SHAPED = SECOND_PASS + THIRD_PASS + NOTES_PASS + CP_PASS


@pytest.mark.parametrize("shape, twin, row", SHAPED, ids=[k[2] for k in SHAPED])
def test_a_row_fires_on_its_shape_and_not_on_its_twin(
        tmp_path: Path, shape: Shape, twin: Shape, row: str) -> None:
    """The twin differs in the one thing the thread or note names: the chip, the release that
    fixed it (or the one the reporter rolled back to), the feature or switch, or the model."""
    hit = support(tmp_path / "a", shape[2], release=shape[0], config=shape[1], chip=shape[3])
    quiet = support(tmp_path / "b", twin[2], release=twin[0], config=twin[1], chip=twin[3])
    assert hit.status in ("warn", "fail") and "known-issue" in hit.rules
    assert any(e.startswith(f"known issue {row}") for e in hit.evidence), hit.evidence
    assert not any(e.startswith(f"known issue {row}") for e in quiet.evidence), quiet.evidence


def test_glm5_w4a8_with_mtp_and_flashcomm1_warns_and_without_flashcomm1_does_not(
        tmp_path: Path) -> None:
    """v0.21.0rc1 notes (vllm-project/vllm-ascend#9803): GLM-5 W4A8 + MTP + FlashComm1."""
    w4a8 = {"quant_model_description.json": {"model_quant_type": "W4A8_DYNAMIC"}}
    mtp3 = ["--speculative-config", '{"method": "deepseek_mtp", "num_speculative_tokens": 3}']
    hit = support_with(tmp_path / "a", [*EP16, *mtp3, *FC1], "0.21.0rc1", GLM5, w4a8, chip="A3")
    quiet = support_with(tmp_path / "b", [*EP16, *mtp3], "0.21.0rc1", GLM5, w4a8, chip="A3")
    row = "known issue glm5-w4a8-mtp-flashcomm-0202rc1"
    assert any(e.startswith(row) for e in hit.evidence), hit.evidence
    assert not any(e.startswith(row) for e in quiet.evidence)


def test_kimi_k25_is_refused_before_v0_15_0rc1_and_warned_on_it(tmp_path: Path) -> None:
    """v0.15.0rc1 notes: Kimi-K2.5 is added there, with a known issue of vLLM 0.15.0."""
    before = support(tmp_path / "a", EP16, release="0.14.0rc1", config=KIMI_K25, chip="A3")
    added = support(tmp_path / "b", EP16, release="0.15.0rc1", config=KIMI_K25, chip="A3")
    later = support(tmp_path / "c", EP16, release="0.17.0rc1", config=KIMI_K25, chip="A3")
    row = "known issue kimi-k25-vllm-0150-0150rc1"
    assert before.status == "fail" and "kimi-k25-before-0150rc1" in " ".join(before.evidence)
    assert "unsupported" not in added.rules and any(e.startswith(row) for e in added.evidence)
    assert not any(e.startswith(row) for e in later.evidence)


# -- the architectures the judged interpreter's vLLM and vLLM-Ascend register ------------------

REGISTRY_TEXT = '''
logger = init_logger(__name__)

_TEXT_GENERATION_MODELS = {{
    "Qwen3ForCausalLM": ("qwen3", "Qwen3ForCausalLM"),
{entries}}}

_MULTIMODAL_MODELS = {{
    "Qwen3VLForConditionalGeneration": ("qwen3_vl", "Qwen3VLForConditionalGeneration"),
}}

_VLLM_MODELS = {{
    **_TEXT_GENERATION_MODELS,
    **_MULTIMODAL_MODELS,
}}

_PREVIOUSLY_SUPPORTED_MODELS = {{"Phi3SmallForCausalLM": "0.9.2"}}
'''
ASCEND_TEXT = '''from vllm import ModelRegistry


def register_model():
    ModelRegistry.register_model(
        "{name}", "vllm_ascend.models.x:AscendX")
'''


def registered(tmp_path: Path, args: list[str], config: dict[str, Any], *,
               vllm: list[str] | None = None, registry: str | None = None,
               ascend: str | None = None, release: str = "0.18.0",
               packages: dict[str, str] | None = None) -> Finding:
    """serving.support with vLLM's registry.py registering `vllm` (or holding `registry` as
    written; neither: only vllm's dist-info) and vllm_ascend/models/__init__.py registering
    `ascend`, planted in the judged interpreter's site-packages."""
    site = tmp_path / "site"
    if vllm is not None:
        entries = "".join(f'    "{n}": ("m", "{n}"),\n' for n in vllm)
        registry = REGISTRY_TEXT.format(entries=entries)
    if registry is not None:
        path = site / "vllm" / "model_executor" / "models" / "registry.py"
        path.parent.mkdir(parents=True)
        path.write_text(registry)
    if ascend is not None:
        path = site / "vllm_ascend" / "models" / "__init__.py"
        path.parent.mkdir(parents=True)
        path.write_text(ASCEND_TEXT.format(name=ascend))
    return support_with(tmp_path, args, release, config, packages=packages)


def test_an_architecture_the_installed_vllm_does_not_register_warns(tmp_path: Path) -> None:
    """Qwen3.5 on a vLLM older than the model: the support rows know nothing against the
    release, the installed registry does not hold Qwen3_5MoeForConditionalGeneration."""
    finding = registered(tmp_path, [], QWEN3_5_MOE, vllm=["Qwen3MoeForCausalLM"],
                         packages={"transformers": "4.57.1"})
    assert finding.status == "warn" and finding.rules == ("architecture-not-registered",)
    assert ("vllm 0.11.0 registers none of the architectures config.json names "
            "(Qwen3_5MoeForConditionalGeneration), nor does vllm-ascend 0.18.0"
            ) in finding.summary
    assert "Transformers backend" in finding.summary
    assert "transformers 4.57.1 in the judged interpreter" in finding.summary
    assert any("3 architectures registered in" in e and "registry.py" in e
               for e in finding.evidence), finding.evidence


def test_an_architecture_the_installed_vllm_registers_passes(tmp_path: Path) -> None:
    finding = registered(tmp_path, [], QWEN3_5_MOE,
                         vllm=["Qwen3_5MoeForConditionalGeneration"])
    assert finding.status == "pass", finding.summary
    assert "ok: vllm 0.11.0 registers Qwen3_5MoeForConditionalGeneration" in finding.evidence


def test_an_architecture_vllm_ascend_registers_passes(tmp_path: Path) -> None:
    finding = registered(tmp_path, [], QWEN3_5_MOE, vllm=["Qwen3MoeForCausalLM"],
                         ascend="Qwen3_5MoeForConditionalGeneration")
    assert finding.status == "pass", finding.summary
    assert "ok: vllm-ascend 0.18.0 registers Qwen3_5MoeForConditionalGeneration" in \
        finding.evidence


def test_a_task_suffix_swap_to_a_registered_base_passes(tmp_path: Path) -> None:
    """vLLM serves Qwen3ForSequenceClassification as its registered Qwen3ForCausalLM."""
    config = {**QWEN3_MOE, "architectures": ["Qwen3ForSequenceClassification"]}
    finding = registered(tmp_path, [], config, vllm=[], release="0.11.0")
    assert "architecture-not-registered" not in finding.rules
    assert ("ok: vllm 0.11.0 serves Qwen3ForSequenceClassification as its registered "
            "Qwen3ForCausalLM") in finding.evidence


def test_only_vllms_dist_info_is_not_judged_and_changes_nothing(tmp_path: Path) -> None:
    finding = registered(tmp_path, [], QWEN3_5_MOE)
    assert finding.status == "pass", finding.summary
    line = next(e for e in finding.evidence if e.startswith("not judged: the engine's model"))
    assert "registry.py: no such file or directory" in line


def test_a_registry_that_does_not_parse_is_not_judged_with_the_reason(tmp_path: Path) -> None:
    finding = registered(tmp_path, [], QWEN3_5_MOE,
                         registry='_TEXT_GENERATION_MODELS = {\n    "Qwen3_5Moe": (\n')
    assert finding.status == "pass", finding.summary
    line = next(e for e in finding.evidence if e.startswith("not judged: the engine's model"))
    assert "registry.py, line" in line and "not Python the doctor can parse" in line


def test_a_registry_without_models_tables_is_not_judged(tmp_path: Path) -> None:
    finding = registered(tmp_path, [], QWEN3_5_MOE, registry="MODELS = {}\n")
    assert finding.status == "pass"
    assert any("no module-level *_MODELS dict" in e for e in finding.evidence)


def test_the_hf_overrides_architecture_is_the_one_judged(tmp_path: Path) -> None:
    """vLLM applies --hf-overrides to config.json before the lookup: an override naming a
    registered class passes a checkpoint whose own name is not registered, and the reverse
    warns, naming the override."""
    config = {**QWEN3_MOE, "architectures": ["NewModel"]}
    override = ["--hf-overrides", '{"architectures": ["Qwen3MoeForCausalLM"]}']
    served = registered(tmp_path / "a", override, config, vllm=["Qwen3MoeForCausalLM"],
                        release="0.11.0")
    assert "architecture-not-registered" not in served.rules
    assert "ok: vllm 0.11.0 registers Qwen3MoeForCausalLM" in served.evidence
    wrong = ["--hf-overrides", '{"architectures": ["GteNewModel"]}']
    refused = registered(tmp_path / "b", wrong, QWEN3_MOE, vllm=["Qwen3MoeForCausalLM"],
                         release="0.11.0")
    assert "architecture-not-registered" in refused.rules
    assert "the architectures --hf-overrides names (GteNewModel)" in refused.summary


def test_transformers_that_does_not_know_the_type_makes_it_fail_with_both_reasons(
        tmp_path: Path) -> None:
    config = {**QWEN3_VL, "architectures": ["Qwen3VLMoeForConditionalGeneration"]}
    finding = registered(tmp_path, [], config, vllm=[], release="0.11.0rc0",
                         packages={"transformers": "4.56.2"})
    assert finding.status == "fail"
    assert finding.rules == ("unsupported", "architecture-not-registered")
    assert ("registers none of the architectures config.json names "
            "(Qwen3VLMoeForConditionalGeneration)") in finding.summary
    assert "transformers 4.56.2 does not know model type qwen3_vl, so the Transformers " \
        "backend cannot serve it" in finding.summary


def test_model_impl_vllm_fails_and_model_impl_transformers_is_not_judged(
        tmp_path: Path) -> None:
    native = registered(tmp_path / "a", ["--model-impl", "vllm"], QWEN3_5_MOE,
                        vllm=["Qwen3MoeForCausalLM"])
    assert native.status == "fail" and native.rules == ("architecture-not-registered",)
    assert "--model-impl vllm rules out the Transformers backend" in native.summary
    backend = registered(tmp_path / "b", ["--model-impl", "transformers"], QWEN3_5_MOE,
                         vllm=["Qwen3MoeForCausalLM"])
    assert backend.status == "pass", backend.summary
    assert ("not judged: the engine's model registry: --model-impl transformers serves the "
            "model through the Transformers backend") in backend.evidence


def test_an_architecture_vllm_dropped_says_the_last_release(tmp_path: Path) -> None:
    config = {**QWEN3_MOE, "architectures": ["Phi3SmallForCausalLM"]}
    finding = registered(tmp_path, [], config, vllm=[], release="0.11.0")
    assert "architecture-not-registered" in finding.rules
    assert "vLLM served Phi3SmallForCausalLM until 0.9.2" in finding.summary


def test_the_stated_tensor_parallel_size_is_a_feature_in_either_spelling(tmp_path: Path) -> None:
    long = support(tmp_path / "a", ["--tensor-parallel-size", "8"], config=QWEN3_MOE)
    short = support(tmp_path / "b", ["-tp", "4"], config=QWEN3_MOE)
    unstated = support(tmp_path / "c", ["--enforce-eager"], config=QWEN3_MOE)
    assert any(line.startswith("features:") and line.endswith(", tp:8") for line in long.evidence)
    assert any(line.startswith("features:") and "tp:4" in line for line in short.evidence)
    assert "tp:" not in " ".join(unstated.evidence)  # vLLM's default of 1 is not stated


def test_one_remedy_names_the_releases_that_list_the_fixes(tmp_path: Path) -> None:
    """v0.10.2rc1 with Qwen3-Next, MTP, EP and LoRA: the MTP issue is fixed in v0.13.0rc1,
    LoRA's in v0.11.0rc0, and the EP issue has no listed fix."""
    qwen3_next = model("qwen3_next", "Qwen3NextForCausalLM")
    mtp = ["--speculative-config", '{"method":"qwen3_next_mtp","num_speculative_tokens":1}']
    args = ["-tp", "4", "--enable-expert-parallel", "--enable-lora", *mtp]
    every = support(tmp_path / "a", args, release="0.10.2rc1", config=qwen3_next)
    assert every.remedy.endswith("Move to v0.13.0rc1 or later: the fixes are listed in v0.11.0rc0, "
                            "v0.13.0rc1. For the others, avoid the combination in this release "
                            "or move to another release (see the source).")
    lora = support(tmp_path / "b", ["--enable-lora"], release="0.10.2rc1", config=QWEN3_MOE)
    assert lora.remedy.endswith("Move to v0.11.0rc0 or later: its notes list the fix.")
    ep = support(tmp_path / "c", ["--enable-expert-parallel"], release="0.10.2rc1",
                 config=qwen3_next)
    assert "avoid the combination in this release" in ep.remedy


def test_a_speculative_method_no_row_speaks_of_is_not_in_our_data(tmp_path: Path) -> None:
    """EAGLE (the first one) on a release no row speaks of warns instead of passing; an MTP
    method is judged once, as `mtp`."""
    eagle = ["--speculative-config", '{"method": "eagle", "num_speculative_tokens": 2}']
    mtp = ["--speculative-config", '{"method": "qwen3_next_mtp", "num_speculative_tokens": 1}']
    unknown = support(tmp_path / "a", ["-tp", "2", *eagle], release="0.21.0rc1",
                      config=QWEN3_MOE)
    assert unknown.status == "warn" and "not-in-our-data" in unknown.rules
    assert "feature speculative:eagle on" in unknown.summary
    judged_once = support(tmp_path / "b", ["-tp", "2", *mtp], release="0.21.0rc1",
                          config=QWEN3_MOE)
    assert "speculative:qwen3_next_mtp" not in judged_once.summary


def test_a_pass_names_what_it_judged_and_lists_what_it_did_not(tmp_path: Path) -> None:
    """The pass summary claims support only for the judged features; the others are listed."""
    found = support(tmp_path, ["-tp", "2", "--enable-expert-parallel", "--reasoning-parser",
                               "qwen3"], release="0.11.0", config=QWEN3_MOE)
    assert found.status == "pass", found.summary
    assert "with expert-parallel;" in found.summary
    assert "not judged (no row speaks of them): reasoning-parser:qwen3, graph" in found.summary
    assert "tp:2" not in found.summary
