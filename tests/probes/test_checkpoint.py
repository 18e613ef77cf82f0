from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from probes.live import LiveHost
from probes.model.reader import (
    CheckpointError,
    floats_of,
    load_floats,
    load_tensor,
    parse_config,
    read_header,
    read_model_dir,
    read_raw,
)
from probes.model.tensor_decode import E4M3_TABLE, decode, decode_bf16
from tests.fp8_fixtures import (
    bf16_model_tensors,
    fp8_model_tensors,
    model_config,
    to_bf16_bits,
    write_model,
)

HOST = LiveHost(root="/", env={})


def test_e4m3_table_known_values() -> None:
    assert E4M3_TABLE[0x38] == 1.0
    assert E4M3_TABLE[0x7E] == 448.0
    assert E4M3_TABLE[0xFE] == -448.0
    assert E4M3_TABLE[0x01] == 2.0**-9
    assert E4M3_TABLE[0x08] == 2.0**-6  # smallest normal
    assert E4M3_TABLE[0x00] == 0.0 and E4M3_TABLE[0x80] == 0.0
    assert np.isnan(E4M3_TABLE[0x7F]) and np.isnan(E4M3_TABLE[0xFF])
    assert np.isfinite(np.delete(E4M3_TABLE, [0x7F, 0xFF])).all()  # e4m3fn has no infinities
    assert np.nanmax(E4M3_TABLE) == 448.0


def test_e4m3_table_matches_torch_if_available() -> None:
    torch = pytest.importorskip("torch")
    ours = E4M3_TABLE
    theirs = torch.arange(256, dtype=torch.uint8).view(torch.float8_e4m3fn).float().numpy()
    assert np.array_equal(ours, theirs, equal_nan=True)


def test_bf16_decode() -> None:
    bits = np.array([0x3F80, 0xC000, 0x7F80, 0x0001, 0x3E80], dtype="<u2")
    values = decode_bf16(bits.tobytes())
    assert values[0] == 1.0 and values[1] == -2.0 and np.isinf(values[2])
    assert values[3] == 2.0**-133 and values[4] == 0.25
    x = np.array([3.140625, 1e-3, -7.5e20], dtype=np.float32)
    assert np.allclose(decode(to_bf16_bits(x).tobytes(), "BF16"), x, rtol=1e-2)


def test_reads_an_fp8_model_dir(tmp_path: Path) -> None:
    tensors = fp8_model_tensors()
    model_path = write_model(tmp_path / "m", tensors)
    model = read_model_dir(HOST, str(model_path))
    assert model.config.model_type == "qwen3_moe"
    assert model.config.architecture == "Qwen3MoeForCausalLM"
    assert model.config.quant_method == "fp8"
    assert model.config.weight_block_size == (128, 128)
    assert model.config.num_experts == 4 and model.config.dtype == "bfloat16"
    assert "lm_head" in model.config.modules_to_not_convert
    assert len(model.shards) == 2 and not model.missing_shards and not model.header_errors
    assert all(s.size_ok for s in model.shards)
    assert set(model.tensors) == set(tensors)
    q = model.tensors["model.layers.0.self_attn.q_proj.weight"]
    assert q.dtype == "F8_E4M3" and q.shape == (256, 320)
    scale = model.tensors["model.layers.0.self_attn.q_proj.weight_scale_inv"]
    assert scale.dtype == "BF16" and scale.shape == (2, 3)
    assert model.total_bytes == sum(p.stat().st_size for p in model_path.glob("*.safetensors"))


def test_read_tensor_decodes_scales_and_fp8(tmp_path: Path) -> None:
    tensors = fp8_model_tensors(scale_dtype="F32")
    model_path = write_model(tmp_path / "m", tensors)
    model = read_model_dir(HOST, str(model_path))
    name = "model.layers.1.self_attn.o_proj.weight_scale_inv"
    assert np.array_equal(load_tensor(HOST, model, name), tensors[name][0])
    weight = "model.layers.1.self_attn.o_proj.weight"
    # safetensors.numpy cannot load F8; compare against the fixture's bytes instead
    expected = E4M3_TABLE[tensors[weight][0]]
    assert np.array_equal(load_tensor(HOST, model, weight), expected, equal_nan=True)


def test_bf16_scales_decode(tmp_path: Path) -> None:
    tensors = fp8_model_tensors(scale_dtype="BF16")
    model = read_model_dir(HOST, str(write_model(tmp_path / "m", tensors)))
    name = "model.layers.0.self_attn.q_proj.weight_scale_inv"
    values = load_tensor(HOST, model, name)
    assert values.dtype == np.float32 and values.shape == (2, 3)
    assert ((values > 9e-5) & (values < 5.1e-4)).all()


def test_single_file_model(tmp_path: Path) -> None:
    model_path = write_model(tmp_path / "m", bf16_model_tensors(), model_config(fp8=False), 1)
    model = read_model_dir(HOST, str(model_path))
    assert [s.name for s in model.shards] == ["model.safetensors"]
    assert model.config.quantization is None and not model.weight_map


def test_config_spellings_and_hybrid_fields() -> None:
    config = parse_config({"model_type": "qwen3_5_moe", "architectures": ["X"],
                           "text_config": {"num_local_experts": 256, "hidden_size": 2048,
                                           "layer_types": ["linear_attention", "full_attention"],
                                           "dtype": "bfloat16"}})
    assert config.num_experts == 256 and config.hidden_size == 2048
    assert config.layer_types == ("linear_attention", "full_attention")
    assert config.dtype == "bfloat16"


def test_config_not_json_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{nope")
    with pytest.raises(CheckpointError, match=r"config\.json: not valid JSON"):
        read_model_dir(HOST, str(tmp_path))


def test_missing_shard_is_listed(tmp_path: Path) -> None:
    model_path = write_model(tmp_path / "m", fp8_model_tensors())
    (model_path / "model-00002-of-00002.safetensors").unlink()
    model = read_model_dir(HOST, str(model_path))
    assert model.missing_shards == ("model-00002-of-00002.safetensors",)
    assert len(model.shards) == 1


def test_truncated_shard_size_is_measured(tmp_path: Path) -> None:
    model_path = write_model(tmp_path / "m", fp8_model_tensors())
    shard = model_path / "model-00001-of-00002.safetensors"
    full = shard.stat().st_size
    shard.write_bytes(shard.read_bytes()[: full - 1000])
    info = read_model_dir(HOST, str(model_path)).shard(shard.name)
    assert info is not None and not info.size_ok
    assert info.size_bytes == full - 1000 and info.expected_bytes == full


def test_longer_shard_is_not_ok(tmp_path: Path) -> None:
    model_path = write_model(tmp_path / "m", fp8_model_tensors())
    shard = model_path / "model-00001-of-00002.safetensors"
    with shard.open("ab") as fh:
        fh.write(b"\0" * 16)
    info = read_model_dir(HOST, str(model_path)).shard(shard.name)
    assert info is not None and not info.size_ok
    assert info.size_bytes == info.expected_bytes + 16


@pytest.mark.parametrize(("blob", "message"), [
    (b"\x01\x02", "header truncated"),
    (struct.pack("<Q", 200_000_000) + b"{}", "over the 100 MB limit"),
    (struct.pack("<Q", 64) + b"{}", "header truncated"),
    (struct.pack("<Q", 4) + b"{x}}", "not valid JSON"),
])
def test_bad_headers(tmp_path: Path, blob: bytes, message: str) -> None:
    path = tmp_path / "bad.safetensors"
    path.write_bytes(blob)
    with pytest.raises(CheckpointError, match=message) as info:
        read_header(HOST, str(path))
    assert str(path) in str(info.value)


def test_bad_header_is_collected_not_raised(tmp_path: Path) -> None:
    model_path = write_model(tmp_path / "m", fp8_model_tensors())
    (model_path / "model-00002-of-00002.safetensors").write_bytes(b"\xff" * 12)
    model = read_model_dir(HOST, str(model_path))
    assert len(model.header_errors) == 1
    assert "model-00002-of-00002.safetensors" in model.header_errors[0]


def test_offsets_that_disagree_with_shape(tmp_path: Path) -> None:
    header = {"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 8]}}
    text = json.dumps(header).encode()
    path = tmp_path / "x.safetensors"
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"\0" * 8)
    (tmp_path / "config.json").write_text("{}")
    model = read_model_dir(HOST, str(tmp_path))
    assert "tensor w spans 8 bytes" in model.header_errors[0]


SCALES = ("model.layers.0.self_attn.q_proj.weight_scale_inv",
          "model.layers.1.self_attn.o_proj.weight_scale_inv")


def test_read_raw_gives_what_load_floats_reads(tmp_path: Path) -> None:
    model = read_model_dir(HOST, str(write_model(tmp_path / "m", fp8_model_tensors())))
    names = [n for n in model.tensors if n.endswith("_scale_inv")]
    assert len({model.tensors[n].shard for n in names}) == 2  # both shards, in one call
    raw = read_raw(HOST, model, names)
    assert set(raw) == set(names)
    for name in names:
        assert floats_of(model, name, raw[name]) == load_floats(HOST, model, name)


def test_read_raw_of_a_cut_shard_says_which_tensor_is_short(tmp_path: Path) -> None:
    model_path = write_model(tmp_path / "m", fp8_model_tensors(scale_dtype="F32"))
    model = read_model_dir(HOST, str(model_path))
    last = max(model.tensors.values(), key=lambda t: (t.shard, t.offset_begin))
    shard = model_path / last.shard
    shard.write_bytes(shard.read_bytes()[:-2])  # the shard's last tensor loses two bytes
    raw = read_raw(HOST, model, [last.name])
    with pytest.raises(CheckpointError, match=rf"{last.name} truncated "
                                              rf"\({last.nbytes - 2} of {last.nbytes} bytes\)"):
        floats_of(model, last.name, raw[last.name])
    with pytest.raises(CheckpointError, match="truncated"):  # as load_floats says it
        load_floats(HOST, model, last.name)


def test_read_raw_past_the_end_of_a_shard(tmp_path: Path) -> None:
    model_path = write_model(tmp_path / "m", fp8_model_tensors())
    model = read_model_dir(HOST, str(model_path))
    name = SCALES[0]
    shard = model_path / model.tensors[name].shard
    shard.write_bytes(shard.read_bytes()[:64])  # every tensor now lies beyond the end
    raw = read_raw(HOST, model, [name])
    assert raw[name] == b""
    with pytest.raises(CheckpointError, match=rf"\(0 of {model.tensors[name].nbytes} bytes\)"):
        floats_of(model, name, raw[name])


def test_read_raw_of_an_unknown_tensor_is_a_key_error(tmp_path: Path) -> None:
    model = read_model_dir(HOST, str(write_model(tmp_path / "m", fp8_model_tensors())))
    with pytest.raises(KeyError, match=r"no\.such\.tensor"):
        read_raw(HOST, model, [SCALES[0], "no.such.tensor"])
