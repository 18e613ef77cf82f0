"""probes.target.memory_args: the memory-layout settings of a command line and environment."""

from __future__ import annotations

from probes.model.quant import parse_modelslim_description
from probes.target.memory_args import memory_args, quantization_flag

SERVE = ("/venv/bin/python3", "/venv/bin/vllm", "serve", "/models/q")


def test_vllm_switches_last_one_wins() -> None:
    args = memory_args((*SERVE, "--enable-expert-parallel", "--enforce_eager"), {}, "vllm")
    assert args.expert_parallel is not None and args.expert_parallel.value == 1
    assert args.enforce_eager is not None and args.enforce_eager.value == 1
    assert args.enforce_eager.source == "`--enforce_eager` on the command line"
    off = memory_args((*SERVE, "--enable-expert-parallel", "--no-enable-expert-parallel"), {},
                      "vllm")
    assert off.expert_parallel is not None and off.expert_parallel.value == 0
    assert memory_args(SERVE, {}, "vllm").expert_parallel is None


def test_mindie_fraction_from_the_environment() -> None:
    given = memory_args(("mindieservice_daemon",), {"NPU_MEMORY_FRACTION": "0.92"}, "mindie")
    assert given.npu_memory_fraction is not None and given.npu_memory_fraction.value == 0.92
    bad = memory_args(("mindieservice_daemon",), {"NPU_MEMORY_FRACTION": "1.5"}, "mindie")
    assert bad.npu_memory_fraction is None and "outside (0, 1]" in bad.notes[0]
    text = memory_args(("mindieservice_daemon",), {"NPU_MEMORY_FRACTION": "lots"}, "mindie")
    assert "not a number" in text.notes[0]
    assert memory_args(SERVE, {"NPU_MEMORY_FRACTION": "0.5"}, "vllm").npu_memory_fraction is None


def test_quantization_flag_spellings() -> None:
    found = quantization_flag((*SERVE, "--quantization=ascend"))
    assert found is not None and found.value == "ascend"
    short = quantization_flag((*SERVE, "-q", "ascend"))
    assert short is not None and short.source == "`-q ascend` on the command line"
    assert quantization_flag(SERVE) is None


def test_modelslim_description_parts() -> None:
    found = parse_modelslim_description({
        "model_quant_type": "W8A8", "version": "1.0.0", "model.embed_tokens.weight": "FLOAT",
        "model.layers.0.mlp.down_proj.weight": "W8A8", "model.layers.0.mlp.bad": 3})
    assert found.model_quant_type == "W8A8"
    assert found.quantized == ("model.layers.0.mlp.down_proj.weight",)
    assert set(found.settings) == {"model_quant_type", "version"}
    assert found.problems and "model.layers.0.mlp.bad" in found.problems[0]
    assert parse_modelslim_description([1]).problems == ("expected a JSON object, got list",)
