"""Every real config in tests/data/models is read as transformers means it, by the one reader
(probes.model.config), the engine's config, `python -m engine.tools.plan` and `ascend-doctor ops`;
an architecture the engine does not run (DeepSeek-V3) is named as such, never priced as if it
were another."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from probes.model.config import parse_config
from probes.model.families import FAMILIES
from probes.model.memory import plan_memory
from probes.model.tensors import InventoryError, expected_count, expected_tensors

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "tests" / "data" / "models"
REAL = sorted(p.name for p in MODELS.iterdir() if (p / "config.json").is_file())
UNSUPPORTED = {"DeepSeek-V3": "deepseek_v3"}
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def config_of(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((MODELS / name / "config.json").read_text())
    return loaded


def test_every_real_model_is_here() -> None:
    assert {"Qwen3-Coder-30B-A3B-Instruct", "Qwen3-30B-A3B", "Mixtral-8x7B-v0.1",
            "DeepSeek-V3"} <= set(REAL)


@pytest.mark.parametrize("name", REAL)
def test_the_reader_finds_no_problem_in_a_real_config(name: str) -> None:
    config = parse_config(config_of(name))
    assert config.problems == ()
    assert (config.family in FAMILIES) == (name not in UNSUPPORTED)


def test_qwen3_moe_shared_expert_zero_means_none() -> None:
    """Qwen3-Coder writes `shared_expert_intermediate_size: 0`; Qwen3MoeConfig has no such field
    and Qwen3MoeSparseMoeBlock no shared expert."""
    config = parse_config(config_of("Qwen3-Coder-30B-A3B-Instruct"))
    assert config.family == "qwen3_moe" and config.shared_expert_intermediate_size is None
    index = json.loads((MODELS / "Qwen3-Coder-30B-A3B-Instruct" /
                        "model.safetensors.index.json").read_text())
    names = {name for name, _spec in expected_tensors(config)}
    assert names == set(index["weight_map"]) and expected_count(config) == 18_867


def test_hybrids_still_need_a_positive_shared_expert() -> None:
    hybrid = {**config_of("Qwen3-Next-80B-A3B-Instruct"), "shared_expert_intermediate_size": 0}
    problems = parse_config(hybrid).problems
    assert [p.field for p in problems] == ["shared_expert_intermediate_size"]


@pytest.mark.parametrize("name", sorted(set(REAL) - set(UNSUPPORTED)))
def test_the_engine_accepts_every_supported_real_config(name: str) -> None:
    from engine.config import from_facts

    config = from_facts(parse_config(config_of(name)))
    shared = config.shared_expert_intermediate_size
    assert (shared > 0) == (config.architecture in ("qwen3_next", "qwen3_5_moe"))


def test_an_unknown_architecture_is_not_priced_as_another() -> None:
    deepseek = parse_config(config_of("DeepSeek-V3"))
    with pytest.raises(InventoryError, match="deepseek_v3 is not one this project lays out"):
        plan_memory(deepseek, 4096)
    with pytest.raises(InventoryError, match="deepseek_v3"):
        expected_count(deepseek)


def engine_plan(name: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "engine.tools.plan", str(MODELS / name)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, env=ENV)


@pytest.mark.parametrize("name", REAL)
def test_engine_plan_on_every_real_config(name: str) -> None:
    result = engine_plan(name)
    if name in UNSUPPORTED:
        assert result.returncode == 2 and result.stdout == ""
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
        assert f"architecture {UNSUPPORTED[name]} is not one this project lays out" \
            in result.stderr
    else:
        assert result.returncode == 0 and result.stderr == "", result.stderr
        assert "weights" in result.stdout and "KV cache" in result.stdout


def test_ops_reads_the_real_qwen3_coder_config(tmp_path: Path) -> None:
    model = tmp_path / "coder"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(config_of("Qwen3-Coder-30B-A3B-Instruct")))
    result = subprocess.run([sys.executable, "-m", "checks.cli", "ops", "--model", str(model)],
                            cwd=ROOT, capture_output=True, text=True, timeout=300, env=ENV)
    assert result.returncode == 0, result.stderr
    assert "shared_expert_intermediate_size" not in result.stdout + result.stderr
