"""A deployment for the serving checks, built as a user meets it: a real process named `vllm`
with the user's command line and environment, a fake site-packages with their vllm_ascend
release, a model directory with their config.json, and the npu-smi output of their chip
replayed from the corpus."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from conftest import CORPUS_DIR
from machines import site_packages
from target_fixtures import running, write_script

from checks.context import Context
from checks.inputs import observe
from checks.model import Finding
from checks.options import HostOptions
from checks.policy import load_policy
from probes.host import CommandResult
from probes.inventory import NpuReading, parse_output, unavailable

NPU_SMI = {  # chip family -> a real npu-smi table of that chip
    "A2": "014-info-25.0.rc1.1-910B4-8cards-noproc.txt",
    "A3": "055-info-24.1.rc3.7-A3-Ascend910-PARTIAL.txt",
    "310P": "049-info-25.2.0-300IDuo-310P3-2chips-same-busid-PARTIAL.txt",
    "A5_950": "constructed/C05-info-25.7.rc1-Ascend950PR-4cards-NPU-ID-column.txt",
    "A1_910": "003-info-22.0.3.1-910A-atlas800-9010.txt",
}


def model(model_type: str, architecture: str, dtype: str = "bfloat16") -> dict[str, Any]:
    """A config.json reduced to what the serving checks read of a model's family."""
    return {"architectures": [architecture], "model_type": model_type, "torch_dtype": dtype}


QWEN3_MOE = model("qwen3_moe", "Qwen3MoeForCausalLM")
QWEN2 = model("qwen2", "Qwen2ForCausalLM")
QWEN3 = model("qwen3", "Qwen3ForCausalLM")
QWEN3_VL = model("qwen3_vl", "Qwen3VLForConditionalGeneration")
QWEN3_5 = model("qwen3_5", "Qwen3_5ForConditionalGeneration")
QWEN3_5_MOE = model("qwen3_5_moe", "Qwen3_5MoeForConditionalGeneration")
DEEPSEEK_V3 = model("deepseek_v3", "DeepseekV3ForCausalLM")
DEEPSEEK_V4 = model("deepseek_v4", "DeepseekV4ForCausalLM")
QWEN3_NEXT = model("qwen3_next", "Qwen3NextForCausalLM")
QWEN2_5_VL = model("qwen2_5_vl", "Qwen2_5_VLForConditionalGeneration")
GLM4_MOE = model("glm4_moe", "Glm4MoeForCausalLM")
GLM5 = model("glm_moe_dsa", "GlmMoeDsaForCausalLM")


def npu_reading(family: str | None) -> NpuReading:
    if family is None:
        return unavailable(CommandResult(("npu-smi", "info"), "not_found"), "no NPU driver tools")
    return parse_output((CORPUS_DIR / "npu-smi" / NPU_SMI[family]).read_text())


def write_model(where: Path, config: Mapping[str, Any]) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    (where / "config.json").write_text(json.dumps(config))
    return where


@contextmanager
def served(tmp_path: Path, args: Sequence[str], *, release: str | None = "0.11.0",
           config: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None,
           chip: str | None = "A2",
           files: Mapping[str, Any] | None = None) -> Iterator[Context]:
    """`vllm serve MODEL ARGS...` running with `env`, vllm_ascend `release` installed (None:
    not installed), the model's config.json `config` and JSON `files` beside it (name ->
    content: quant_model_description.json, ...), on `chip`; yields the run's Context."""
    packages = {"torch": "2.7.1", "vllm": "0.11.0"}
    if release is not None:
        packages["vllm_ascend"] = release
    site = site_packages(tmp_path / "site", packages)
    model = write_model(tmp_path / "models" / "m", config or QWEN3_MOE)
    for name, content in (files or {}).items():
        (model / name).write_text(json.dumps(content))
    script = write_script(tmp_path / "bin", "vllm", _python())
    full_env = {"PATH": "/usr/bin:/bin", **(env or {}), "PYTHONPATH": site}
    with running([str(script), "serve", str(model), *args], full_env) as pid:
        observed = observe(HostOptions(pid=pid), npu_smi=False)
        model_dir = observed.target.serving.model_dir
        ctx = Context(observed.host, load_policy(None), target=observed.target,
                      model_dir=Path(model_dir.value) if model_dir else None)
        ctx.know("npu", npu_reading(chip))
        yield ctx


def support_finding(tmp_path: Path, args: Sequence[str], release: str | None,
                    config: Mapping[str, Any], chip: str | None = "A2",
                    env: Mapping[str, str] | None = None,
                    files: Mapping[str, Any] | None = None) -> Finding:
    """serving.support on `served(...)`."""
    from checks.builtin.serving_support import serving_support

    return _judged(serving_support, tmp_path, args, release, config, chip, env, files)


def flags_finding(tmp_path: Path, args: Sequence[str], release: str | None,
                  config: Mapping[str, Any], chip: str | None = "A2",
                  env: Mapping[str, str] | None = None,
                  files: Mapping[str, Any] | None = None) -> Finding:
    """serving.flags on `served(...)`."""
    from checks.builtin.serving_flags import serving_flags

    return _judged(serving_flags, tmp_path, args, release, config, chip, env, files)


def _judged(check: Callable[[Context], Finding], tmp_path: Path, args: Sequence[str],
            release: str | None, config: Mapping[str, Any], chip: str | None,
            env: Mapping[str, str] | None, files: Mapping[str, Any] | None) -> Finding:
    with served(tmp_path, args, release=release, config=config, env=env, chip=chip,
                files=files) as ctx:
        return check(ctx)


def described(quant_type: str) -> dict[str, Any] | None:
    """The msModelSlim quant_model_description.json beside config.json for `quant_type` (as
    `served(files=...)` takes it); None for an unquantized checkpoint ("")."""
    return {"quant_model_description.json": {"model_quant_type": quant_type}} if quant_type \
        else None


def known(finding: Finding, words: str) -> bool:
    """serving.support names a known issue whose symptom holds `words`."""
    return "known-issue" in finding.rules and words in finding.summary


def _python() -> str:
    import sys

    return sys.executable
