"""Known-issue rows from the fix lists of the vLLM-Ascend release notes v0.7.1rc1 .. v0.10.2rc1
(issue #25, fifth harvest A): each row warns on the release before the note that lists the fix,
on a realistic command line and on a variant in its scope (another spelling, another model of
the family), and stays quiet on its healthy twins (the fixing release, or the feature off)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from serving_fixtures import (
    DEEPSEEK_V3,
    GLM4_MOE,
    QWEN2,
    QWEN3,
    QWEN3_MOE,
    described,
    model,
    support_finding,
)

from checks.model import Finding

DEEPSEEK_V2 = model("deepseek_v2", "DeepseekV2ForCausalLM")
GEMMA3 = model("gemma3", "Gemma3ForConditionalGeneration")
GEMMA3_TEXT = model("gemma3_text", "Gemma3ForCausalLM")
QWEN2_AUDIO = model("qwen2_audio", "Qwen2AudioForConditionalGeneration")
MINICPM = model("minicpm", "MiniCPMForCausalLM")


def additional(**config: Any) -> list[str]:
    return ["--additional-config", json.dumps(config)]


def speculative(method: str, tokens: int = 1, **more: Any) -> list[str]:
    return ["--speculative-config",
            json.dumps({"method": method, "num_speculative_tokens": tokens, **more})]


def pd(role: str = "kv_producer") -> list[str]:
    return ["--kv-transfer-config",
            json.dumps({"kv_connector": "LLMDataDistCMgrConnector", "kv_role": role})]


TORCHAIR = additional(torchair_graph_config={"enabled": True})
SCHEDULER = additional(ascend_scheduler_config={"enabled": True})
TORCHAIR_SCHEDULER = additional(torchair_graph_config={"enabled": True},
                                ascend_scheduler_config={"enabled": True,
                                                         "enable_chunked_prefill": True})
STATIC_EPLB = additional(expert_map_path="/models/expert_map.json")
MTP = speculative("deepseek_mtp")
RAY = ["--distributed-executor-backend", "ray"]
EAGER = ["--enforce-eager"]


@dataclass(frozen=True)
class Deploy:
    """One `vllm serve` on an A2 node (unless `chip` says otherwise)."""

    config: dict[str, Any]
    args: list[str]
    release: str
    chip: str = "A2"
    quant_type: str = ""
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Case:
    """A row: the words of its symptom, where it fires, and where it stays quiet."""

    row: str
    words: str
    hit: Deploy
    variant: Deploy
    twins: tuple[Deploy, ...]


def judge(tmp_path: Path, d: Deploy) -> Finding:
    return support_finding(tmp_path, d.args, d.release, d.config, d.chip, d.env or None,
                           described(d.quant_type))


CASES = [
    # -- v0.10.2rc1's fixes, on v0.10.1rc1
    Case("spec-graph-streams-fix-0102rc1", "for want of NPU stream resources",
         Deploy(QWEN3, ["-tp", "4", *speculative("ngram", 3, prompt_lookup_max=4)],
                "0.10.1rc1"),
         Deploy(QWEN3, speculative("eagle3", 2, model="/models/eagle3"), "0.10.1rc1"),
         (Deploy(QWEN3, ["-tp", "4", *speculative("ngram", 3), *EAGER], "0.10.1rc1"),
          Deploy(QWEN3, ["-tp", "4", *speculative("ngram", 3)], "0.10.2rc1"))),
    Case("qwen3-moe-dp-graph-streams-fix-0102rc1", "DP takes an extra NPU stream",
         Deploy(QWEN3_MOE, ["-dp", "2", "-tp", "4", "--enable-expert-parallel"], "0.10.1rc1"),
         Deploy(QWEN3_MOE, ["--data-parallel-size=4"], "0.10.1rc1", chip="A3"),
         (Deploy(QWEN3_MOE, ["-dp", "2", "-tp", "4", *EAGER], "0.10.1rc1"),
          Deploy(QWEN3_MOE, ["-dp", "2", "-tp", "4"], "0.10.2rc1"),
          Deploy(QWEN3, ["-dp", "2", "-tp", "4"], "0.10.1rc1"))),
    Case("deepseek-torchair-batch-sizes-fix-0102rc1", "graph_batch_sizes is set",
         Deploy(DEEPSEEK_V3, ["-tp", "16", *additional(torchair_graph_config={
             "enabled": True, "graph_batch_sizes": [8, 16]})], "0.10.1rc1", chip="A3"),
         Deploy(DEEPSEEK_V2, ["-tp", "2", *TORCHAIR], "0.10.1rc1"),
         (Deploy(DEEPSEEK_V3, ["-tp", "16", *TORCHAIR], "0.10.2rc1", chip="A3"),
          Deploy(DEEPSEEK_V3, ["-tp", "16"], "0.10.1rc1", chip="A3"))),
    Case("gemma3-swa-prefill-fix-0102rc1", "sliding-window attention goes wrong in the prefill",
         Deploy(GEMMA3, ["-tp", "2", "--max-model-len", "32768"], "0.10.1rc1"),
         Deploy(GEMMA3_TEXT, [*SCHEDULER], "0.10.1rc1"),
         (Deploy(GEMMA3, ["-tp", "2"], "0.10.2rc1"), Deploy(QWEN3, ["-tp", "2"], "0.10.1rc1"))),
    # -- v0.10.1rc1's fixes, on v0.10.0rc1
    Case("glm45-partial-rope-accuracy-fix-0101rc1", "rotary dimension differs from the head",
         Deploy(GLM4_MOE, ["-tp", "16"], "0.10.0rc1", chip="A3"),
         Deploy(GLM4_MOE, ["-dp", "2", "-tp", "8", "--enable-expert-parallel", *EAGER],
                "0.10.0rc1"),
         (Deploy(GLM4_MOE, ["-tp", "16"], "0.10.1rc1", chip="A3"),)),
    # -- v0.10.0rc1's fixes, on v0.9.2rc1
    Case("qwen3-moe-dp-accuracy-fix-0100rc1", "served with data parallel gives garbled",
         Deploy(QWEN3_MOE, ["-tp", "2", "-dp", "2", "--enable-expert-parallel"], "0.9.2rc1"),
         Deploy(QWEN3_MOE, ["--data-parallel-size", "4", *EAGER], "0.9.2rc1"),
         (Deploy(QWEN3_MOE, ["-tp", "2", "-dp", "2"], "0.10.0rc1"),
          Deploy(QWEN3_MOE, ["-tp", "4"], "0.9.2rc1"))),
    Case("qwen2-audio-graph-fix-0100rc1", "such as Qwen2-Audio do not work in aclgraph",
         Deploy(QWEN2_AUDIO, ["--max-model-len", "8192"], "0.9.2rc1"),
         Deploy(QWEN2_AUDIO, ["--tensor-parallel-size", "2"], "0.9.2rc1"),
         (Deploy(QWEN2_AUDIO, EAGER, "0.9.2rc1"), Deploy(QWEN2_AUDIO, [], "0.10.0rc1"))),
    # -- v0.9.2rc1's fixes (and v0.9.1rc2's on its branch), on v0.9.1rc1
    Case("deepseek-torchair-long-seq-fix-0092rc1", "loses accuracy on long-sequence",
         Deploy(DEEPSEEK_V3, ["-tp", "16", *TORCHAIR], "0.9.1rc1", chip="A3"),
         Deploy(DEEPSEEK_V3, ["-dp", "2", "-tp", "8", "--quantization", "ascend",
                              *TORCHAIR_SCHEDULER], "0.9.1rc1", quant_type="W8A8"),
         (Deploy(DEEPSEEK_V3, ["-tp", "16", *TORCHAIR], "0.9.2rc1", chip="A3"),
          Deploy(DEEPSEEK_V3, ["-tp", "16", *EAGER], "0.9.1rc1", chip="A3"))),
    Case("data-parallel-fixes-0092rc1", "data parallel deployments meet a batch of bugs",
         Deploy(QWEN3_MOE, ["-dp", "2", "-tp", "4"], "0.9.1rc1"),
         Deploy(DEEPSEEK_V3, ["--data-parallel-size", "4", "--enable-expert-parallel"],
                "0.9.1rc1", chip="A3"),
         (Deploy(QWEN3_MOE, ["-dp", "2", "-tp", "4"], "0.9.2rc1"),
          Deploy(QWEN3_MOE, ["-dp", "1", "-tp", "4"], "0.9.1rc1"))),
    Case("deepseek-prefix-cache-fix-0092rc1", "DeepSeek does not work with prefix caching",
         Deploy(DEEPSEEK_V3, ["-tp", "16", "--enable-prefix-caching"], "0.9.1rc1", chip="A3"),
         Deploy(DEEPSEEK_V2, ["--enable-prefix-caching", *EAGER], "0.9.1rc1"),
         (Deploy(DEEPSEEK_V3, ["-tp", "16", "--enable-prefix-caching"], "0.9.2rc1", chip="A3"),
          Deploy(QWEN3, ["--enable-prefix-caching"], "0.9.1rc1"))),
    Case("ascend-scheduler-prefix-cache-fix-0092rc1",
         "prefix caching does not work with the Ascend scheduler",
         Deploy(QWEN3, ["--enable-prefix-caching", *SCHEDULER], "0.9.1rc1"),
         Deploy(QWEN2, ["--enable-prefix-caching", *additional(ascend_scheduler_config={
             "enabled": True, "enable_chunked_prefill": False})], "0.9.1rc1"),
         (Deploy(QWEN3, ["--enable-prefix-caching", *SCHEDULER], "0.9.2rc1"),
          Deploy(QWEN3, ["--enable-prefix-caching"], "0.9.1rc1"))),
    Case("prefix-cache-accuracy-fix-0091rc2", "prefix caching can give wrong answers",
         Deploy(QWEN3, ["-tp", "2", "--enable-prefix-caching"], "0.9.1rc1"),
         Deploy(QWEN3_MOE, ["--enable-prefix-caching", *SCHEDULER], "0.9.1rc1"),
         (Deploy(QWEN3, ["-tp", "2", "--enable-prefix-caching"], "0.9.1rc2"),
          Deploy(QWEN3, ["-tp", "2"], "0.9.1rc1"))),
    Case("torchair-dp-fix-0091rc2", "torchair graph mode has a bug with data parallel",
         Deploy(DEEPSEEK_V3, ["-dp", "2", "-tp", "8", "--enable-expert-parallel", *TORCHAIR],
                "0.9.1rc1", chip="A3"),
         Deploy(DEEPSEEK_V2, ["--data-parallel-size=4", *TORCHAIR_SCHEDULER], "0.9.1rc1"),
         (Deploy(DEEPSEEK_V3, ["-dp", "2", "-tp", "8", *TORCHAIR], "0.9.1rc2", chip="A3"),
          Deploy(DEEPSEEK_V3, ["-tp", "16", *TORCHAIR], "0.9.1rc1", chip="A3"))),
    Case("torchair-chunked-prefill-fix-0091rc2", "torchair graph mode with chunked prefill",
         Deploy(DEEPSEEK_V3, ["-tp", "16", *TORCHAIR_SCHEDULER], "0.9.1rc1", chip="A3"),
         Deploy(DEEPSEEK_V2, ["-tp", "4", *TORCHAIR], "0.9.1rc1"),
         (Deploy(DEEPSEEK_V3, ["-tp", "16", *TORCHAIR_SCHEDULER], "0.9.1rc2", chip="A3"),
          Deploy(DEEPSEEK_V3, ["-tp", "16", *SCHEDULER], "0.9.1rc1", chip="A3"))),
    Case("quant-type-detect-fix-0091rc2", "actual quantization type misrecognised",
         Deploy(DEEPSEEK_V3, ["-tp", "16", "--quantization", "ascend"], "0.9.1rc1",
                chip="A3", quant_type="W8A8_DYNAMIC"),
         Deploy(QWEN3, ["-q", "ascend"], "0.9.1rc1", quant_type="W8A8"),
         (Deploy(QWEN3, ["-q", "ascend"], "0.9.1rc2", quant_type="W8A8"),
          Deploy(QWEN3, ["-tp", "2"], "0.9.1rc1"))),
    Case("deepseek-tp1-fix-0091rc2", "DeepSeek has a bug with tensor parallel size 1",
         Deploy(DEEPSEEK_V3, ["-tp", "1", "-dp", "16", "--enable-expert-parallel"], "0.9.1rc1",
                chip="A3"),
         Deploy(DEEPSEEK_V2, ["--tensor-parallel-size", "1"], "0.9.1rc1"),
         (Deploy(DEEPSEEK_V3, ["-tp", "1", "-dp", "16"], "0.9.1rc2", chip="A3"),
          Deploy(DEEPSEEK_V3, ["-tp", "2", "-dp", "8"], "0.9.1rc1", chip="A3"))),
    Case("pd-long-output-hang-fix-0091rc2", "disaggregated prefill can hang on long outputs",
         Deploy(DEEPSEEK_V3, ["-tp", "16", *pd()], "0.9.1rc1", chip="A3"),
         Deploy(QWEN3, ["-tp", "4", *pd("kv_consumer")], "0.9.1rc1"),
         (Deploy(DEEPSEEK_V3, ["-tp", "16", *pd()], "0.9.1rc2", chip="A3"),
          Deploy(DEEPSEEK_V3, ["-tp", "16"], "0.9.1rc1", chip="A3"))),
    Case("static-eplb-log2phy-fix-0091rc2", "wrong log2phy",
         Deploy(DEEPSEEK_V3, ["-dp", "2", "-tp", "8", "--enable-expert-parallel",
                              *STATIC_EPLB], "0.9.1rc1", chip="A3"),
         Deploy(QWEN3_MOE, ["-tp", "8", "--enable-expert-parallel", *additional(
             eplb_config={"expert_map_path": "/models/map.json"})], "0.9.1rc1"),
         (Deploy(DEEPSEEK_V3, ["-dp", "2", "-tp", "8", "--enable-expert-parallel",
                               *STATIC_EPLB], "0.9.1rc2", chip="A3"),
          Deploy(DEEPSEEK_V3, ["-dp", "2", "-tp", "8", "--enable-expert-parallel"],
                 "0.9.1rc1", chip="A3"))),
    # -- v0.9.1rc1's fixes, on v0.9.0rc2
    Case("static-eplb-log2phy-none-fix-0091rc1", "NoneType error in its logical-to-physical",
         Deploy(DEEPSEEK_V3, ["-tp", "16", "--enable-expert-parallel", *STATIC_EPLB],
                "0.9.0rc2", chip="A3"),
         Deploy(QWEN3_MOE, ["-tp", "8", "--enable-expert-parallel", *STATIC_EPLB], "0.9.0rc2"),
         (Deploy(DEEPSEEK_V3, ["-tp", "16", "--enable-expert-parallel", *STATIC_EPLB],
                 "0.9.1rc1", chip="A3"),
          Deploy(DEEPSEEK_V3, ["-tp", "16", "--enable-expert-parallel"], "0.9.0rc2",
                 chip="A3"))),
    Case("ray-device-fix-0091rc1", "device discovery and set-up bug",
         Deploy(QWEN3, ["-tp", "16", *RAY], "0.9.0rc2"),
         Deploy(DEEPSEEK_V3, ["--distributed-executor-backend=ray", "-tp", "32"], "0.9.0rc2"),
         (Deploy(QWEN3, ["-tp", "16", *RAY], "0.9.1rc1"),
          Deploy(QWEN3, ["-tp", "8", "--distributed-executor-backend", "mp"], "0.9.0rc2"))),
    Case("ray-device-fix-0091rc2", "running on Ray meets a device error",
         Deploy(QWEN3, ["-tp", "16", *RAY], "0.9.1rc1"),
         Deploy(DEEPSEEK_V3, ["--distributed-executor-backend=ray", "-tp", "32"], "0.9.1rc1"),
         (Deploy(QWEN3, ["-tp", "16", *RAY], "0.9.1rc2"), Deploy(QWEN3, ["-tp", "8"], "0.9.1rc1"))),
    # -- v0.9.1rc3's fixes, on v0.9.1rc2
    Case("ray-backend-fix-0091rc3", "Ray distributed executor backend fails",
         Deploy(QWEN3, ["-tp", "16", *RAY], "0.9.1rc2"),
         Deploy(QWEN3_MOE, ["--distributed-executor-backend=ray", "-tp", "16"], "0.9.1rc2"),
         (Deploy(QWEN3, ["-tp", "16", *RAY], "0.9.1rc3"), Deploy(QWEN3, ["-tp", "8"], "0.9.1rc2"))),
    Case("qwen3-moe-graph-fix-0091rc3", "AscendSparseMoeBlock was not graph-capable",
         Deploy(QWEN3_MOE, ["-tp", "4"], "0.9.1rc2"),
         Deploy(QWEN3_MOE, ["--tensor-parallel-size", "8", "--max-model-len", "32768"],
                "0.9.1rc2", chip="A3"),
         (Deploy(QWEN3_MOE, ["-tp", "4", *EAGER], "0.9.1rc2"),
          Deploy(QWEN3_MOE, ["-tp", "4"], "0.9.1rc3"))),
    Case("deepseek-mtp-pd-scheduler-check-fix-0091rc3",
         "refused on this release unless the Ascend scheduler is on",
         Deploy(DEEPSEEK_V3, ["-tp", "16", *pd(), *MTP], "0.9.1rc2", chip="A3"),
         Deploy(DEEPSEEK_V3, ["-dp", "2", "-tp", "8", *pd("kv_consumer"), *TORCHAIR,
                              *speculative("deepseek_mtp", 2)], "0.9.1rc2", chip="A3"),
         (Deploy(DEEPSEEK_V3, ["-tp", "16", *pd(), *MTP, *SCHEDULER], "0.9.1rc2", chip="A3"),
          Deploy(DEEPSEEK_V3, ["-tp", "16", *pd(), *MTP], "0.9.1rc3", chip="A3"))),
    Case("ascend-scheduler-block-len-fix-0091rc3", "wrong request block length",
         Deploy(QWEN3, ["-tp", "2", *SCHEDULER], "0.9.1rc2"),
         Deploy(DEEPSEEK_V3, ["-tp", "16", *TORCHAIR_SCHEDULER], "0.9.1rc2", chip="A3"),
         (Deploy(QWEN3, ["-tp", "2", *SCHEDULER], "0.9.1rc3"), Deploy(QWEN3, ["-tp", "2"],
                                                                      "0.9.1rc2"))),
    Case("torchair-kv-cache-bytes-fix-0091rc3", "missing .kv_cache_bytes file",
         Deploy(DEEPSEEK_V3, ["-tp", "16", *TORCHAIR], "0.9.1rc2", chip="A3"),
         Deploy(DEEPSEEK_V2, ["-tp", "2", *TORCHAIR_SCHEDULER], "0.9.1rc2"),
         (Deploy(DEEPSEEK_V3, ["-tp", "16", *TORCHAIR], "0.9.1rc3", chip="A3"),
          Deploy(DEEPSEEK_V3, ["-tp", "16"], "0.9.1rc2", chip="A3"))),
    # -- v0.9.1's fixes, on v0.9.1rc3
    Case("torchair-rmtree-fix-091", "file-not-found error from shutil.rmtree",
         Deploy(DEEPSEEK_V3, ["-tp", "16", *TORCHAIR], "0.9.1rc3", chip="A3"),
         Deploy(DEEPSEEK_V2, ["-tp", "2", *TORCHAIR_SCHEDULER], "0.9.1rc3"),
         (Deploy(DEEPSEEK_V3, ["-tp", "16", *TORCHAIR], "0.9.1", chip="A3"),
          Deploy(DEEPSEEK_V3, ["-tp", "16"], "0.9.1rc3", chip="A3"))),
    Case("mtp-pd-fix-091", "MTP does not work well with prefill/decode disaggregation",
         Deploy(DEEPSEEK_V3, ["-tp", "16", *pd(), *MTP], "0.9.1rc3", chip="A3"),
         Deploy(DEEPSEEK_V3, ["-dp", "4", "-tp", "4", *pd("kv_consumer"),
                              *speculative("deepseek_mtp", 2)], "0.9.1rc3", chip="A3"),
         (Deploy(DEEPSEEK_V3, ["-tp", "16", *pd(), *MTP], "0.9.1", chip="A3"),
          Deploy(DEEPSEEK_V3, ["-tp", "16", *pd()], "0.9.1rc3", chip="A3"))),
    Case("pd-fixes-091", "disaggregation has several bugs",
         Deploy(DEEPSEEK_V3, ["-tp", "16", *pd()], "0.9.1rc3", chip="A3"),
         Deploy(QWEN3_MOE, ["-tp", "8", *pd("kv_consumer")], "0.9.1rc3"),
         (Deploy(DEEPSEEK_V3, ["-tp", "16", *pd()], "0.9.1", chip="A3"),
          Deploy(DEEPSEEK_V3, ["-tp", "16"], "0.9.1rc3", chip="A3"))),
    # -- v0.9.0rc1's fix, on v0.8.5rc1
    Case("ascend-quant-online-serve-fix-090rc1", "rejects --quantization ascend",
         Deploy(QWEN2, ["-tp", "4", "--quantization", "ascend"], "0.8.5rc1", quant_type="W8A8"),
         Deploy(QWEN2, ["-q", "ascend"], "0.8.5rc1", quant_type="W8A8"),
         (Deploy(QWEN2, ["-tp", "4", "--quantization", "ascend"], "0.9.0rc1",
                 quant_type="W8A8"),
          Deploy(QWEN2, ["-tp", "4"], "0.8.5rc1"))),
    # -- v0.8.4rc2's fixes, on v0.8.4rc1
    Case("minicpm-fix-084rc2", "MiniCPM does not work",
         Deploy(MINICPM, ["--max-model-len", "4096"], "0.8.4rc1"),
         Deploy(MINICPM, ["-tp", "2", "--trust-remote-code"], "0.8.4rc1"),
         (Deploy(MINICPM, [], "0.8.4rc2"), Deploy(QWEN2, [], "0.8.4rc1"))),
    Case("lora-module-fix-084rc2", "LoRA fails with a ModuleNotFoundError",
         Deploy(QWEN2, ["--enable-lora", "--lora-modules", "sql=/adapters/sql"], "0.8.4rc1"),
         Deploy(QWEN2, ["--enable-lora", "--max-loras", "4"], "0.8.4rc1"),
         (Deploy(QWEN2, ["--enable-lora"], "0.8.4rc2"), Deploy(QWEN2, [], "0.8.4rc1"))),
]


def known(finding: Finding, case: Case) -> bool:
    """The row's symptom is in the summary, and its id in the evidence."""
    cited = any(line.startswith(f"known issue {case.row}:") for line in finding.evidence)
    return "known-issue" in finding.rules and case.words in finding.summary and cited


@pytest.mark.parametrize("case", CASES, ids=[c.row for c in CASES])
def test_the_fix_row_warns_before_the_fixing_release_and_not_on_its_twins(
        tmp_path: Path, case: Case) -> None:
    hit = judge(tmp_path / "hit", case.hit)
    variant = judge(tmp_path / "variant", case.variant)
    assert known(hit, case), hit.summary
    assert known(variant, case), variant.summary
    assert hit.status in ("warn", "fail")
    for n, twin in enumerate(case.twins):
        quiet = judge(tmp_path / f"twin{n}", twin)
        assert case.words not in quiet.summary, (twin, quiet.summary)
        assert not any(line.startswith(f"known issue {case.row}:") for line in quiet.evidence)


def test_every_row_of_block_a_has_a_case() -> None:
    """The block's rows and the cases above are the same set: a row added without a test (or a
    case whose row was renamed) fails here."""
    text = (Path(__file__).parents[2] / "checks" / "data" / "known_issues.yaml").read_text()
    start = text.index("# -- fifth harvest A")
    end = text.index("# -- fifth harvest B")
    ids = {line.split("id:", 1)[1].strip() for line in text[start:end].splitlines()
           if line.strip().startswith("- id:")}
    assert ids == {c.row for c in CASES}
