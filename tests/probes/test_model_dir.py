"""The one model-directory reader: where the model is, config facts (both spellings,
text_config, layer types, quantisation format), the index, validated headers, tokenizer files;
bounded on every file."""

from __future__ import annotations

import json
import os
import struct
from itertools import product
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from probes.live import LiveHost
from probes.model.config import parse_config
from probes.model.quant import QuantFormat, parse_quantization
from probes.model.reader import (
    CheckpointError,
    locate_model,
    read_json,
    read_model_dir,
)
from probes.model.tensors import (
    LayerKind,
    expected_count,
    expected_tensors,
    layer_kind,
    layer_kind_counts,
)
from tests.fp8_fixtures import bf16_model_tensors, model_config, write_model

HOST = LiveHost(root="/", env={})
MODELS = Path(__file__).resolve().parents[1] / "data" / "models"


def real(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((MODELS / name / "config.json").read_text())
    return loaded


# -- where ------------------------------------------------------------------------------------


def test_locate_model(tmp_path: Path) -> None:
    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    (tmp_path / "notes.txt").write_text("x")
    os.mkfifo(tmp_path / "pipe")
    assert locate_model(HOST, str(tmp_path)).kind == "directory"
    assert locate_model(HOST, str(tmp_path / "m.gguf")).kind == "gguf"
    missing = locate_model(HOST, str(tmp_path / "nope"))
    assert missing.kind == "missing" and "no such model directory" in str(missing.problem)
    assert "a file, not a model directory" in str(locate_model(HOST, str(tmp_path / "notes.txt"))
                                                  .problem)
    pipe = locate_model(HOST, str(tmp_path / "pipe"))
    assert "a FIFO, socket or other special file" in str(pipe.problem)
    assert locate_model(HOST, str(tmp_path)).problem is None


# -- config facts -----------------------------------------------------------------------------


def test_qwen3_5_text_config_and_explicit_layer_types() -> None:
    config = parse_config(real("Qwen3.5-35B-A3B"))
    assert config.family == "qwen3_5_moe" and config.text_model_type == "qwen3_5_moe_text"
    assert config.nested and config.weight_prefix == "model.language_model."
    assert (config.num_hidden_layers, config.vocab_size, config.num_experts) == (40, 248320, 256)
    assert config.full_attention_layers() == 10 and config.layer_kind(3) == "full_attention"
    assert config.rope_theta == 1e7 and config.partial_rotary_factor == 0.25
    assert config.rotary_dim == 64 and config.eos_token_ids == (248044,) and not config.problems


def test_qwen3_next_derives_layer_types_from_the_interval() -> None:
    config = parse_config(real("Qwen3-Next-80B-A3B-Instruct"))
    assert config.family == "qwen3_next" and not config.layer_types
    assert [config.layer_kind(i) for i in range(8)] == (["linear_attention"] * 3
                                                        + ["full_attention"]) * 2
    assert config.full_attention_layers() == 12 and config.weight_prefix == "model."


def test_transformers_defaults_for_the_hybrid_families() -> None:
    bare = parse_config({"architectures": ["Qwen3NextForCausalLM"], "num_hidden_layers": 8,
                         "hidden_size": 64, "num_attention_heads": 4})
    assert (bare.head_dim, bare.full_attention_interval, bare.partial_rotary_factor) == (
        256, 4, 0.25)
    assert bare.linear_conv_kernel_dim == 4 and bare.norm_topk_prob is True
    assert bare.full_attention_layers() == 2


def test_both_spellings() -> None:
    hub = {"model_type": "mixtral", "num_local_experts": 8, "rope_theta": 1e6,
           "torch_dtype": "bfloat16"}
    v5 = {"model_type": "mixtral", "num_experts": 8, "dtype": "bfloat16",
          "rope_parameters": {"rope_type": "default", "rope_theta": 1e6}}
    assert parse_config(hub) == parse_config(v5)
    nested = parse_config({"model_type": "qwen3_5_moe", "text_config": {"num_local_experts": 4}})
    assert nested.num_experts == 4


def test_bad_fields_are_problems_not_exceptions() -> None:
    config = parse_config({"model_type": "llama", "hidden_size": "2048",
                           "num_hidden_layers": -1, "rms_norm_eps": "tiny",
                           "eos_token_id": "x", "layer_types": ["attention"],
                           "partial_rotary_factor": 7})
    fields = {p.field for p in config.problems}
    assert fields == {"hidden_size", "num_hidden_layers", "rms_norm_eps", "eos_token_id",
                      "layer_types", "partial_rotary_factor"}
    assert config.hidden_size is None and config.num_hidden_layers is None
    assert all(p.field in p.message for p in config.problems)
    wrong_length = parse_config({"model_type": "qwen3_next", "num_hidden_layers": 4,
                                 "layer_types": ["full_attention"] * 3})
    assert "lists 3 layers but num_hidden_layers is 4" in wrong_length.problems[0].message
    assert parse_config([1, 2]).problems[0].message.startswith("expected a JSON object")


def test_a_billion_layers_cost_nothing_to_count() -> None:
    config = parse_config({"model_type": "qwen3_next", "num_hidden_layers": 10**9,
                           "num_experts": 10**12, "mlp_only_layers": [3, 7]})
    assert config.full_attention_layers() == 10**9 // 4
    assert config.moe_layers() == 10**9 - 2
    counts = layer_kind_counts(config)
    assert sum(counts.values()) == 10**9
    assert counts[LayerKind("full_attention", False)] == 2  # layers 3 and 7


@pytest.mark.parametrize(("interval", "step", "dense"), list(product(
    [1, 2, 3, 4], [1, 2, 3], [(), (0,), (3, 5), (1, 2, 3)])))
def test_layer_kind_counts_equal_counting_each_layer(interval: int, step: int,
                                                     dense: tuple[int, ...]) -> None:
    config = parse_config({"model_type": "qwen3_next", "num_hidden_layers": 13,
                           "full_attention_interval": interval, "decoder_sparse_step": step,
                           "mlp_only_layers": list(dense), "num_experts": 4})
    counted: dict[LayerKind, int] = {}
    for i in range(13):
        counted[layer_kind(config, i)] = counted.get(layer_kind(config, i), 0) + 1
    assert layer_kind_counts(config) == counted


def test_the_inventory_names_the_official_tensors() -> None:
    config = parse_config(real("Qwen3.5-35B-A3B"))
    names = {}
    for name, spec in expected_tensors(config):
        if ".layers.0." in name or ".layers.3." in name or "layers" not in name:
            names[name] = spec.shape
        if ".layers.4." in name:
            break
    p = "model.language_model.layers."
    assert names[f"{p}0.linear_attn.in_proj_qkv.weight"] == (8192, 2048)
    assert names[f"{p}0.linear_attn.conv1d.weight"] == (8192, 1, 4)
    assert names[f"{p}0.linear_attn.out_proj.weight"] == (2048, 4096)
    assert names[f"{p}0.mlp.experts.255.down_proj.weight"] == (2048, 512)
    assert names[f"{p}0.mlp.shared_expert_gate.weight"] == (1, 2048)
    assert names[f"{p}3.self_attn.q_proj.weight"] == (16 * 256 * 2, 2048)
    assert names["lm_head.weight"] == (248320, 2048)
    assert names["model.language_model.embed_tokens.weight"] == (248320, 2048)
    assert expected_count(config) == 3 + 40 * (2 + 1 + 256 * 3 + 4) + 10 * 6 + 30 * 9
    nxt = parse_config(real("Qwen3-Next-80B-A3B-Instruct"))
    first = [name for name, _ in expected_tensors(nxt) if ".layers.0.linear_attn.in_proj" in name]
    assert first == ["model.layers.0.linear_attn.in_proj_qkvz.weight",
                     "model.layers.0.linear_attn.in_proj_ba.weight"]


# -- quantisation formats ---------------------------------------------------------------------


def test_quantisation_formats() -> None:
    block, problems = parse_quantization({"quant_method": "fp8", "fmt": "e4m3",
                                          "weight_block_size": [128, 128],
                                          "ignored_layers": ["lm_head"]})
    assert (block.scheme, block.scale_suffix, block.block_size) == ("block", "weight_scale_inv",
                                                                    (128, 128))
    assert block.skips("lm_head") and not block.skips("lm_headx") and not problems
    autofp8, _ = parse_quantization({"quant_method": "fp8", "activation_scheme": "static"})
    assert (autofp8.scheme, autofp8.scale_suffix, autofp8.input_scales) == (
        "tensor", "weight_scale", True)
    for strategy in ("tensor", "channel"):
        ct, _ = parse_quantization({"quant_method": "compressed-tensors", "config_groups": {
            "group_0": {"weights": {"num_bits": 8, "type": "float", "strategy": strategy},
                        "input_activations": {"dynamic": True}}}, "ignore": ["lm_head"]})
        assert (ct.scheme, ct.scale_suffix, ct.input_scales) == (strategy, "weight_scale", False)
        assert ct.modules_to_not_convert == ("lm_head",)
    ct_block, _ = parse_quantization({"quant_method": "compressed-tensors", "config_groups": {
        "g": {"weights": {"num_bits": 8, "type": "float", "strategy": "block",
                          "block_structure": [128, 128]}}}})
    assert (ct_block.scheme, ct_block.block_size) == ("block", (128, 128))
    assert parse_quantization({"quant_method": "gptq", "bits": 4})[0].scheme == "unknown"
    assert parse_quantization(None)[0].scheme == "none"
    _, bad = parse_quantization({"quant_method": "fp8", "weight_block_size": [128]})
    assert "weight_block_size" in bad[0].message


# -- files ------------------------------------------------------------------------------------


def test_index_total_size_tokenizer_and_generation_files(tmp_path: Path) -> None:
    model = write_model(tmp_path / "m", bf16_model_tensors(), model_config(fp8=False))
    index = json.loads((model / "model.safetensors.index.json").read_text())
    index["metadata"]["total_size"] = 1234
    (model / "model.safetensors.index.json").write_text(json.dumps(index))
    (model / "tokenizer.json").write_text("{}")
    (model / "generation_config.json").write_text('{"eos_token_id": [1, 2]}')
    found = read_model_dir(HOST, str(model))
    assert found.index_total_size == 1234 and found.tokenizer_files == ("tokenizer.json",)
    assert found.generation_config == {"eos_token_id": [1, 2]} and found.problems() == []


def test_a_generation_config_on_dev_zero_is_ignored(tmp_path: Path) -> None:
    model = write_model(tmp_path / "m", bf16_model_tensors(), model_config(fp8=False))
    (model / "generation_config.json").symlink_to("/dev/zero")
    assert read_model_dir(HOST, str(model)).generation_config == {}


@pytest.mark.parametrize(("index", "message"), [
    ({"weight_map": {"w": "../x.safetensors"}}, "plain file name"),
    ({"weight_map": {}}, "no weight_map"),
    ({"weight_map": {"w": 3}}, "no weight_map"),
])
def test_bad_indexes(tmp_path: Path, index: Any, message: str) -> None:
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(CheckpointError, match=message):
        read_model_dir(HOST, str(tmp_path))


def shard(path: Path, header: Any, data: int = 16) -> None:
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"\0" * data)


@pytest.mark.parametrize(("header", "message"), [
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}}, "gap of 8 bytes"),
    ({"a": {"dtype": "F4", "shape": [2], "data_offsets": [0, 1]}}, "unknown dtype"),
    ({"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}}, "malformed shape"),
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}}, "malformed data_offsets"),
    ({"__metadata__": {"k": 1}}, "__metadata__"),
    (b' {"a": 1}', "does not start with"),
    (b'{"a":' * 5000, "nested too deeply"),
    ({"a\x1b]0;x\x07": {"dtype": "F32", "shape": [9], "data_offsets": [0, 4]}}, "\\x1b"),
], ids=["gap", "dtype", "shape", "offsets", "metadata", "start", "deep", "escape"])
def test_headers_are_validated_like_safetensors(tmp_path: Path, header: Any,
                                                message: str) -> None:
    (tmp_path / "config.json").write_text("{}")
    shard(tmp_path / "model.safetensors", header)
    found = read_model_dir(HOST, str(tmp_path))
    assert len(found.header_errors) == 1 and message in found.header_errors[0]
    assert "\x1b" not in found.header_errors[0]  # names from outside shown, never obeyed
    assert found.problems() == list(found.header_errors)


def test_read_json_is_bounded(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    big.write_bytes(b" " * 100 + b"{}")
    assert read_json(HOST, str(big), limit=200) == {}
    with pytest.raises(CheckpointError, match="over the 50-byte limit"):
        read_json(HOST, str(big), limit=50)
    (tmp_path / "digits.json").write_text('{"a": ' + "1" * 5000 + "}")
    with pytest.raises(CheckpointError, match="unreadable JSON value"):
        read_json(HOST, str(tmp_path / "digits.json"))
    (tmp_path / "latin1.json").write_bytes(b'{"a": "\xe9"}')
    with pytest.raises(CheckpointError, match="not UTF-8"):
        read_json(HOST, str(tmp_path / "latin1.json"))


_NAMES = st.sampled_from(["lm_head", "model.layers.0.mlp", "model.layers.0.mlp.gate",
                          "model.layers.1", "model.layers.10", "visual", ""])


@given(st.lists(_NAMES, max_size=6), _NAMES, st.sampled_from(["", ".weight", ".x.y", "x"]))
def test_skips_is_a_name_or_a_module_inside_one(listed: list[str], base: str,
                                                tail: str) -> None:
    quant = QuantFormat(modules_to_not_convert=tuple(listed))
    module = base + tail
    expected = any(module == m or module.startswith(m + ".") for m in listed)
    assert quant.skips(module) is expected
