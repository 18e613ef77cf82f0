"""serving.flags on MindIE deployments: a real `mindieservice_daemon` process whose environment
names its config.json (MIES_CONFIG_JSON_PATH) and its install (MINDIE_LLM_HOME_PATH, beside the
version.info that gives the release), the model's config.json at modelWeightPath, and the
chip's npu-smi table. Each rule fires on a config shaped like MindIE's own sample
(Ascend/MindIE-LLM docs/zh/user_guide/user_manual/service_parameter_configuration.md) and
stays quiet on its healthy twin."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from serving_fixtures import npu_reading, write_model
from target_fixtures import running, write_script

from checks.builtin.serving_flags import serving_flags
from checks.context import Context
from checks.inputs import observe
from checks.model import Finding
from checks.options import HostOptions
from checks.policy import load_policy
from probes.target.model import from_json, to_json

QWEN2_5 = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "torch_dtype": "bfloat16"}
QWEN2_5_VL = {"architectures": ["Qwen2_5_VLForConditionalGeneration"], "model_type": "qwen2_5_vl",
              "vision_config": {"depth": 32}, "torch_dtype": "bfloat16"}
VERSION_INFO = "Ascend-mindie : MindIE 2.1.RC1\nmindie-llm: 2.1.RC1\nPlatform : aarch64\n"


def sample_config() -> dict[str, Any]:
    """The healthy shape: the page's defaults, one instance on four NPUs."""
    return {
        "Version": "1.0.0",
        "ServerConfig": {"ipAddress": "127.0.0.1", "port": 1025, "managementPort": 1026,
                         "httpsEnabled": False},
        "BackendConfig": {
            "backendName": "mindieservice_llm_engine", "modelInstanceNumber": 1,
            "npuDeviceIds": [[0, 1, 2, 3]], "multiNodesInferEnabled": False,
            "ModelDeployConfig": {
                "maxSeqLen": 2560, "maxInputTokenLen": 2048, "truncation": False,
                "ModelConfig": [{"modelInstanceType": "Standard", "modelName": "qwen",
                                 "modelWeightPath": "", "worldSize": 4, "cpuMemSize": 5,
                                 "npuMemSize": -1, "backendType": "atb"}]},
            "ScheduleConfig": {"templateType": "Standard", "cacheBlockSize": 128,
                               "maxPrefillBatchSize": 50, "maxPrefillTokens": 8192,
                               "maxBatchSize": 200, "maxIterTimes": 512, "maxPreemptCount": 0}},
    }


def judged(tmp_path: Path, edit: Callable[[dict[str, Any]], None] | None = None,
           model: dict[str, Any] | None = None, text: str | None = None,
           replayed: bool = False, version_info: str | None = VERSION_INFO) -> Finding:
    """serving.flags on a running mindieservice_daemon; `edit` changes the sample config,
    `text` replaces the file's content outright; `replayed`: the target as a bundle's
    target.json gives it back (settings only, no parsed config); `version_info` None: the
    install has no version.info, so the release is unknown."""
    weights = write_model(tmp_path / "weights", model or QWEN2_5)
    config = sample_config()
    config["BackendConfig"]["ModelDeployConfig"]["ModelConfig"][0]["modelWeightPath"] = \
        str(weights)
    if edit is not None:
        edit(config)
    home = tmp_path / "mindie" / "latest" / "mindie-service"
    (home / "conf").mkdir(parents=True)
    if version_info is not None:
        (tmp_path / "mindie" / "latest" / "version.info").write_text(version_info)
    conf = home / "conf" / "config.json"
    conf.write_text(json.dumps(config) if text is None else text)
    import sys

    script = write_script(home / "bin", "mindieservice_daemon", sys.executable)
    env = {"PATH": "/usr/bin:/bin", "MIES_CONFIG_JSON_PATH": str(conf),
           "MINDIE_LLM_HOME_PATH": str(home)}
    with running([str(script)], env) as pid:
        observed = observe(HostOptions(pid=pid), npu_smi=False)
        target = from_json(to_json(observed.target)) if replayed else observed.target
        found = target.serving.model_dir
        ctx = Context(observed.host, load_policy(None), target=target,
                      model_dir=Path(found.value) if found else None)
        ctx.know("npu", npu_reading("A2"))
        return serving_flags(ctx)


def _set(*path: str | int, to: Any) -> Callable[[dict[str, Any]], None]:
    def edit(config: dict[str, Any]) -> None:
        node: Any = config
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = to
    return edit


BACKEND, DEPLOY, SCHEDULE = ("BackendConfig",), ("BackendConfig", "ModelDeployConfig"), \
    ("BackendConfig", "ScheduleConfig")
MODEL0 = (*DEPLOY, "ModelConfig", 0)


def test_the_healthy_sample_passes_and_shows_the_engine(tmp_path: Path) -> None:
    finding = judged(tmp_path)
    assert finding.status == "pass", finding.summary
    assert "engine: mindie 2.1.RC1" in finding.evidence
    assert not [e for e in finding.evidence if e.startswith("not judged: mindie-")]


def _sourced(finding: Finding) -> bool:
    """Every rule that fired prints its source: MindIE-LLM's parameter page."""
    return all(any(e.startswith(f"rule {rule}: Ascend/MindIE-LLM docs/zh/")
                   for e in finding.evidence) for rule in finding.rules)


def test_world_size_above_the_device_ids_fails(tmp_path: Path) -> None:
    finding = judged(tmp_path, _set(*MODEL0, "worldSize", to=8))
    assert finding.status == "fail" and finding.rules == ("mindie-world-size-above-device-ids",)
    assert _sourced(finding)


def test_world_size_below_the_device_ids_fails(tmp_path: Path) -> None:
    finding = judged(tmp_path, _set(*BACKEND, "npuDeviceIds", to=[[0, 1, 2, 3, 4, 5, 6, 7]]))
    assert finding.status == "fail" and finding.rules == ("mindie-world-size-below-device-ids",)
    assert _sourced(finding)


def test_prefill_tokens_below_the_input_length_fail(tmp_path: Path) -> None:
    finding = judged(tmp_path, _set(*SCHEDULE, "maxPrefillTokens", to=1024))
    assert finding.status == "fail"
    assert finding.rules == ("mindie-prefill-tokens-below-input-len",) and _sourced(finding)


def test_iterations_above_the_sequence_length_warn(tmp_path: Path) -> None:
    finding = judged(tmp_path, _set(*SCHEDULE, "maxIterTimes", to=4096))
    assert finding.status == "warn"
    assert finding.rules == ("mindie-iter-times-above-seq-len",) and _sourced(finding)


def test_preemption_above_the_batch_fails(tmp_path: Path) -> None:
    finding = judged(tmp_path, _set(*SCHEDULE, "maxPreemptCount", to=300))
    assert finding.status == "fail"
    assert finding.rules == ("mindie-preempt-above-batch",) and _sourced(finding)


@pytest.mark.parametrize(("size", "status"), [(256, "warn"), (0, "warn"), (128, "pass"),
                                              (16, "pass")])
def test_cache_block_size_outside_its_range_warns(tmp_path: Path, size: int,
                                                  status: str) -> None:
    finding = judged(tmp_path, _set(*SCHEDULE, "cacheBlockSize", to=size))
    assert finding.status == status, finding.summary
    if status == "warn":
        assert finding.rules == ("mindie-cache-block-size-range",) and _sourced(finding)


@pytest.mark.parametrize(("port", "status"), [(80, "warn"), (70000, "warn"), (1025, "pass")])
def test_server_port_outside_its_range_warns(tmp_path: Path, port: int, status: str) -> None:
    finding = judged(tmp_path, _set("ServerConfig", "port", to=port))
    assert finding.status == status, finding.summary
    if status == "warn":
        assert finding.rules == ("mindie-server-port-range",) and _sourced(finding)


def test_world_size_is_not_judged_against_device_ids_across_nodes(tmp_path: Path) -> None:
    """The page: in multi-node inference npuDeviceIds and worldSize come from the ranktable."""
    def multi(config: dict[str, Any]) -> None:
        _set(*MODEL0, "worldSize", to=16)(config)
        _set(*BACKEND, "multiNodesInferEnabled", to=True)(config)
    assert judged(tmp_path, multi).status == "pass"


def test_preemption_needs_host_memory(tmp_path: Path) -> None:
    def preempt(cpu_gb: int) -> Callable[[dict[str, Any]], None]:
        def edit(config: dict[str, Any]) -> None:
            _set(*SCHEDULE, "maxPreemptCount", to=10)(config)
            _set(*MODEL0, "cpuMemSize", to=cpu_gb)(config)
        return edit
    none = judged(tmp_path / "a", preempt(0))
    some = judged(tmp_path / "b", preempt(5))
    assert none.status == "fail" and none.rules == ("mindie-preempt-without-cpu-mem",)
    assert some.status == "pass", some.summary


def test_automatic_kv_size_on_a_multimodal_model_fails(tmp_path: Path) -> None:
    """gpustack/gpustack#4111: Qwen2.5-VL on MindIE fails on image inputs until npuMemSize is
    set; the page: -1 is not supported for multimodal models. A text model and a set size
    are quiet."""
    vl_auto = judged(tmp_path / "a", model=QWEN2_5_VL)
    vl_sized = judged(tmp_path / "b", _set(*MODEL0, "npuMemSize", to=8), model=QWEN2_5_VL)
    assert vl_auto.status == "fail" and vl_auto.rules == ("mindie-auto-npu-mem-multimodal",)
    assert "gpustack/gpustack#4111" in " ".join(vl_auto.evidence)
    assert vl_sized.status == "pass", vl_sized.summary


@pytest.mark.parametrize("text", ["{not json", "[1, 2]"])
def test_an_unreadable_config_leaves_the_mindie_rules_not_judged(tmp_path: Path,
                                                                 text: str) -> None:
    finding = judged(tmp_path, text=text)
    assert finding.status == "warn" and finding.rules == ("mindie-config-unreadable",)
    unjudged = [e for e in finding.evidence if e.startswith("not judged: mindie-world-size-")]
    assert len(unjudged) == 1 and "mindie-server-port-range" in unjudged[0], finding.evidence
    assert unjudged[0].endswith(": MindIE's config.json not read")
    assert "config.json: " in " ".join(finding.evidence)  # the reason, with the file's path


def test_a_missing_config_is_named(tmp_path: Path) -> None:
    def gone(config: dict[str, Any]) -> None:
        config.clear()
    finding = judged(tmp_path, gone, text="")
    assert finding.rules == ("mindie-config-unreadable",)
    assert "MindIE's config.json not read, its rules not judged: " in finding.summary


def test_the_json_path_reader() -> None:
    from probes.target.jsonpath import at_path

    config = copy.deepcopy(sample_config())
    assert at_path(config, "BackendConfig.npuDeviceIds[0]#count") == 4
    assert at_path(config, "BackendConfig.npuDeviceIds[0][3]") == 3
    assert at_path(config, "BackendConfig.ModelDeployConfig.ModelConfig[0].worldSize") == 4
    assert at_path(config, "BackendConfig.npuDeviceIds[1]#count") is None
    assert at_path(config, "BackendConfig.nothing.here") is None
    assert at_path(None, "BackendConfig") is None


def test_a_replayed_target_reads_the_recorded_config_again(tmp_path: Path) -> None:
    """A bundle's target.json keeps MindIE's settings, not its parsed config: the replay
    reads the config file again through its host (the recording answers the read the
    recorded run made), so the rules are judged as they were live."""
    wrong = _set(*MODEL0, "worldSize", to=8)
    live = judged(tmp_path / "live", wrong)
    replay = judged(tmp_path / "replay", wrong, replayed=True)
    assert live.rules == replay.rules == ("mindie-world-size-above-device-ids",)
    assert replay.status == live.status == "fail"


def test_a_comparison_rule_without_a_release_is_not_judged_never_silent(tmp_path: Path) -> None:
    """No version.info: maxPrefillTokens below maxInputTokenLen cannot be scoped to a release,
    so the rule is listed as not judged, with the reason, instead of being left out."""
    finding = judged(tmp_path, _set(*SCHEDULE, "maxPrefillTokens", to=1024), version_info=None)
    assert finding.status == "warn" and finding.rules == ("release-unknown",), finding.summary
    assert any(e.startswith("not judged: mindie-") and "no engine release" in e
               for e in finding.evidence), finding.evidence
    healthy = judged(tmp_path / "twin", version_info=None)
    assert not any("maxPrefillTokens" in e and e.startswith("not judged")
                   for e in healthy.evidence)
