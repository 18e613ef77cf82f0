"""The incidents of issue 25 items 2 and 3 as a user meets them: a real `vllm serve` process
with the user's command line, a fake npu-smi on PATH printing a real chip table, the real
config.json, and the doctor's CLI judging it with --pid; each beside its healthy twin."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import CORPUS_DIR
from target_fixtures import fake_vllm

from checks.cli import main
from tests.fp8_fixtures import Tensors, model_config, write_model
from tests.model_shapes import write_sharded_header_only

MODELS = Path(__file__).resolve().parents[1] / "data" / "models"
CODER = MODELS / "Qwen3-Coder-30B-A3B-Instruct"
A2_8X32 = CORPUS_DIR / "npu-smi" / "014-info-25.0.rc1.1-910B4-8cards-noproc.txt"


def coder(where: Path) -> Path:
    """Header-only shards laid out by the real Qwen3-Coder-30B-A3B index (262,144 context)."""
    index = json.loads((CODER / "model.safetensors.index.json").read_text())
    config = json.loads((CODER / "config.json").read_text())
    write_sharded_header_only(where, config, weight_map=index["weight_map"])
    return where


def doctor(tmp_path: Path, serve: tuple[str, ...], only: str,
           capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """`ascend-doctor --pid PID --json --only CHECK` against `vllm serve ...` on 8 x 910B4."""
    bindir = tmp_path / "npu-bin"
    bindir.mkdir(exist_ok=True)
    npu_smi = bindir / "npu-smi"
    npu_smi.write_text(f'#!/bin/sh\ncat "{A2_8X32}"\n')
    npu_smi.chmod(0o755)
    shell = {"PATH": f"{bindir}:/usr/bin:/bin", "HOME": str(tmp_path)}
    server_dir = tmp_path / f"server-{len(list(tmp_path.glob('server-*')))}"
    with fake_vllm(server_dir, {}, tail=("serve", *serve)) as server, \
            pytest.MonkeyPatch.context() as mp:
        mp.setattr("checks.cli.os.environ", dict(shell))
        main(["--pid", str(server.pid), "--json", "--only", only])
    doc = json.loads(capsys.readouterr().out)
    return next(r for r in doc["results"] if r["id"] == only)


def test_no_max_model_len_is_sized_for_the_models_context(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """vllm-project/vllm#19407: started without --max-model-len, vLLM needs room for one
    request of max_position_embeddings tokens; the policy's 32,768 would say "fits"."""
    model = str(coder(tmp_path / "coder"))
    unset = doctor(tmp_path, (model, "--tensor-parallel-size", "4",
                              "--gpu-memory-utilization", "0.8"), "npu.hbm-fit", capsys)
    assert unset["status"] == "fail", unset
    assert unset["rules"] == ["context-does-not-fit"]
    assert "262,144 tokens (the model's maximum)" in unset["summary"]
    twin = doctor(tmp_path, (model, "--tensor-parallel-size", "4", "--gpu-memory-utilization",
                             "0.8", "--max-model-len", "32768"), "npu.hbm-fit", capsys)
    assert twin["status"] == "pass", twin
    assert twin["summary"].startswith("fits: per chip ")


def test_a_share_close_to_one_in_graph_mode_warns(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """vllm-project/vllm-ascend#5020: graph capture runs out of memory beside a full pool."""
    model = str(coder(tmp_path / "coder"))
    base = (model, "--tensor-parallel-size", "4", "--max-model-len", "32768",
            "--gpu-memory-utilization", "0.99")
    graph = doctor(tmp_path, base, "npu.hbm-fit", capsys)
    assert graph["status"] == "warn" and graph["rules"] == ["little-room-outside-pool"], graph
    eager = doctor(tmp_path, (*base, "--enforce-eager"), "npu.hbm-fit", capsys)
    assert eager["status"] == "pass", eager


def test_quantization_ascend_without_the_description(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """vllm-project/vllm-ascend#2290: an msModelSlim output served with --quantization ascend
    but no quant_model_description.json beside its shards."""
    import numpy as np

    tensors: Tensors = {"model.layers.0.self_attn.q_proj.weight":
               (np.zeros((256, 128), np.int8), "I8"),
               "model.layers.0.self_attn.q_proj.weight_scale":
               (np.ones((256, 1), np.float32), "F32")}
    model = write_model(tmp_path / "w8a8", tensors, model_config(fp8=False))
    missing = doctor(tmp_path, (str(model), "--quantization", "ascend"), "checkpoint.format",
                     capsys)
    assert "modelslim-description-missing" in missing["rules"], missing
    described = {"model_quant_type": "W8A8_DYNAMIC",
                 **dict.fromkeys(tensors, "W8A8_DYNAMIC")}
    (model / "quant_model_description.json").write_text(json.dumps(described))
    twin = doctor(tmp_path, (str(model), "--quantization", "ascend"), "checkpoint.format",
                  capsys)
    assert not any(r.startswith("modelslim") for r in twin["rules"]), twin
