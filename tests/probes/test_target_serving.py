"""What serving command lines and MindIE's config.json say, and where each value came from."""

from __future__ import annotations

import json

import pytest
from conftest import FakeRoot

from probes.live import LiveHost
from probes.numbers import Field, NumberError
from probes.target.cmdline import display, masked, server_kind
from probes.target.parts import Sourced
from probes.target.serving import human_int, mindie_args, model_dir, serving_args, vllm_args

VENV = "/opt/venv/bin/python3"


@pytest.mark.parametrize(("cmdline", "kind"), [
    ([VENV, "/opt/venv/bin/vllm", "serve", "/m"], "vllm"),
    (["vllm", "serve", "/m"], "vllm"),
    (["/usr/bin/python3", "-u", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m"],
     "vllm"),
    (["/usr/local/Ascend/mindie/latest/mindie-service/bin/mindieservice_daemon"], "mindie"),
    (["/usr/bin/python3", "/usr/local/bin/torchrun", "--nproc-per-node", "8", "train.py"],
     "torchrun"),
    (["python", "-m", "torch.distributed.run", "train.py"], "torchrun"),
    (["vllm", "bench", "serve"], ""),
    (["python3", "-c", "import vllm"], ""),
    (["/bin/bash", "-c", "vllm serve /m"], ""),
])
def test_known_servers(cmdline: list[str], kind: str) -> None:
    assert server_kind(cmdline) == kind


def test_display_reads_as_typed() -> None:
    assert display([VENV, "/opt/venv/bin/vllm", "serve", "/m"]) == "vllm serve /m"
    assert display(["python3", "-m", "vllm.entrypoints.openai.api_server"]) == \
        "python -m vllm.entrypoints.openai.api_server"


def test_vllm_settings_and_their_sources() -> None:
    args = vllm_args([VENV, "/opt/venv/bin/vllm", "serve", "/models/Qwen3-30B-A3B",
                      "-tp", "4", "--max_model_len=32k", "--gpu-memory-utilization", "0.85",
                      "--pipeline-parallel-size=2", "--api-key", "sk-x"])
    assert args.server == "vllm"
    assert args.model is not None and args.model.value == "/models/Qwen3-30B-A3B"
    assert args.model.source == "`vllm serve /models/Qwen3-30B-A3B` on the command line"
    assert args.tensor_parallel_size is not None and args.tensor_parallel_size.value == 4
    assert args.tensor_parallel_size.source == "`-tp 4` on the command line"
    assert args.max_model_len is not None and args.max_model_len.value == 32000
    assert args.max_model_len.source == "`--max_model_len=32k` on the command line"
    assert args.gpu_memory_utilization is not None
    assert args.gpu_memory_utilization.value == 0.85
    assert args.pipeline_parallel_size is not None and args.pipeline_parallel_size.value == 2


def test_the_last_flag_wins_and_module_servers_take_model() -> None:
    args = vllm_args(["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "/a",
                      "--tensor-parallel-size", "2", "--tensor-parallel-size", "8"])
    assert args.model is not None and args.model.value == "/a"
    assert args.tensor_parallel_size is not None and args.tensor_parallel_size.value == 8


def test_what_is_not_read_is_said() -> None:
    args = vllm_args(["vllm", "serve", "--config", "c.yaml", "--max-model-len", "auto",
                      "-tp", "two"])
    assert args.model is None and args.max_model_len is None
    assert args.tensor_parallel_size is None
    notes = " ".join(args.notes)
    assert "no model on the command line" in notes
    assert "`--config c.yaml`: settings in that file are not read" in notes
    assert "left to vLLM" in notes and "`-tp two`" in notes


@pytest.mark.parametrize(("text", "value"), [
    ("8192", 8192), ("32k", 32000), ("25.6k", 25600), ("32K", 32768), ("1Ki", 1024),
    ("1M", None), ("1.5K", None), ("x", None), ("", None)])
def test_human_int(text: str, value: int | None) -> None:
    field = Field("--max-model-len", 1, 10**9)
    if value is None:
        with pytest.raises(NumberError, match="--max-model-len"):
            human_int(text, field)
    else:
        assert human_int(text, field) == value


def mindie_config(root: FakeRoot, path: str, **deploy: object) -> None:
    model = {"modelName": "qwen3", "modelWeightPath": "/data/Qwen3-30B-A3B", "worldSize": 4,
             "cpuMemSize": 5, "npuMemSize": -1}
    doc = {"BackendConfig": {"npuDeviceIds": [[0, 1, 2, 3]], "ModelDeployConfig": {
        "maxSeqLen": 2560, "maxInputTokenLen": 2048, "ModelConfig": [model], **deploy}}}
    root.file(path, json.dumps(doc))


def test_mindie_settings_from_its_config(fake_root: FakeRoot) -> None:
    path = "/usr/local/Ascend/mindie/latest/mindie-service/conf/config.json"
    mindie_config(fake_root, path)
    args = mindie_args(LiveHost(root=str(fake_root.path)), {}, "/")
    assert args.config_file == path
    assert args.model is not None and args.model.value == "/data/Qwen3-30B-A3B"
    assert args.world_size is not None and args.world_size.value == 4
    assert args.world_size.source.endswith("BackendConfig.ModelDeployConfig.ModelConfig[0]"
                                           ".worldSize")
    assert args.max_model_len is not None and args.max_model_len.value == 2560
    assert args.npu_mem_size_gb is not None and args.npu_mem_size_gb.value == -1


def test_mindie_config_override_and_absence(fake_root: FakeRoot) -> None:
    host = LiveHost(root=str(fake_root.path))
    mindie_config(fake_root, "/srv/mies/config.json")
    found = mindie_args(host, {"MIES_CONFIG_JSON_PATH": "mies/config.json"}, "/srv")
    assert found.config_file == "/srv/mies/config.json" and found.world_size is not None
    missing = mindie_args(host, {"MINDIE_LLM_HOME_PATH": "/nowhere"}, "/")
    assert missing.world_size is None
    assert "MindIE config not read: /nowhere/conf/config.json" in missing.notes[0]


def test_model_directory_relative_hub_cache_and_missing(fake_root: FakeRoot) -> None:
    host = LiveHost(root=str(fake_root.path))
    fake_root.dir("/srv/app/models/m")
    args = serving_args(["vllm", "serve", "models/m"], host, {}, "/srv/app")
    assert args.model_dir is not None and args.model_dir.value == "/srv/app/models/m"
    assert "from /srv/app" in args.model_dir.source

    repo = "/home/svc/.cache/huggingface/hub/models--Qwen--Qwen3-30B-A3B"
    fake_root.file(f"{repo}/refs/main", "abc123\n")
    fake_root.dir(f"{repo}/snapshots/abc123")
    hub = serving_args(["vllm", "serve", "Qwen/Qwen3-30B-A3B"], host, {"HOME": "/home/svc"},
                       "/")
    assert hub.model_dir is not None
    assert hub.model_dir.value == f"{repo}/snapshots/abc123"
    assert hub.model_dir.source.endswith("in its Hugging Face cache")

    absent = serving_args(["vllm", "serve", "Qwen/Other"], host, {"HF_HOME": "/hf"}, "/")
    assert absent.model_dir is None
    assert "not in the Hugging Face cache" in absent.notes[-1]
    found, why = model_dir(host, Sourced("/models/gone", "test"), {}, None)
    assert found is None and why == "model /models/gone: not a directory on the target's machine"


def test_secret_flag_values_are_masked_for_reports() -> None:
    def secret(name: str) -> bool:
        return name in ("api-key", "hf-token")

    cmdline = ["vllm", "serve", "/m", "--api-key", "sk-1", "--hf-token=hf_2", "-tp", "2",
               "--api-key"]
    assert masked(cmdline, secret) == ("vllm", "serve", "/m", "--api-key", "<redacted>",
                                       "--hf-token=<redacted>", "-tp", "2", "--api-key")
    assert masked(cmdline, None) == tuple(cmdline)
