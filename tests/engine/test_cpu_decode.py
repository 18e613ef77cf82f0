"""The CPU decode fast path: split GEMVs equal one call bit for bit, resident FP8 equals its
tile reference bit for bit, greedy parity with transformers holds with every GEMV split, the
step restores torch's settings, and other devices never take the path (meta device stub)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from engine import Engine, GenerationConfig, cpu_decode
from engine.cpu_decode import DecodeStep, ResidentFp8, Rows, Transposed, prefer_layout
from engine.fp8 import Fp8Weight, quantize_block
from engine.runner import ModelRunner
from engine.weights import load_checkpoint
from tests.engine.tiny_models import ARCHITECTURES, VOCAB_SIZE, save_tiny

# Shapes of the benchmark models' decode GEMVs: SmolLM2's MLP, the vocabulary projection
# (cut), an odd width, and a ragged FP8 weight (last tile 64 rows / 64 columns).
SHAPES = [(1536, 576), (576, 1536), (4096, 320), (1000, 72)]


@pytest.fixture(autouse=True)
def split_everything(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every GEMV is cut, however small, so tiny shapes exercise the real path."""
    monkeypatch.setattr(cpu_decode, "SPLIT_MIN_BYTES", 0)
    monkeypatch.setattr(cpu_decode, "FP8_SPLIT_MIN_BYTES", 0)
    monkeypatch.setattr(cpu_decode, "KERNEL_SPLIT_MIN_BYTES", 0)


def random_weight(shape: tuple[int, int], seed: int = 0) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)) * 0.05


def two_threads(dtype: torch.dtype) -> DecodeStep:
    torch.set_num_threads(2)
    return DecodeStep(dtype)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("parts", [2, 3])
def test_split_float32_gemv_equals_one_call(shape: tuple[int, int], parts: int) -> None:
    weight = Transposed.of(random_weight(shape))
    x = torch.randn(1, 1, shape[1])
    want = x @ weight.kn
    row = x.reshape(1, -1)
    threads = torch.get_num_threads()
    torch.set_num_threads(parts)
    try:
        with DecodeStep(torch.float32):
            got = weight.matmul(x)
            blocks = [row @ weight.kn[:, a:b]
                      for a, b in cpu_decode._bounds(shape[0], parts, cpu_decode.ALIGN_COLUMNS)]
    finally:
        torch.set_num_threads(threads)
    # each column block is the GEMV it would be alone, bit for bit; MKL picks its kernel by
    # shape and thread count, so against one call over every column only the order of the
    # sums may differ
    assert got.shape == want.shape
    assert torch.equal(got.reshape(1, -1), torch.cat(blocks, dim=1))
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_split_reduced_precision_gemv_equals_one_call(shape: tuple[int, int],
                                                      dtype: torch.dtype) -> None:
    weight = Rows(random_weight(shape).to(dtype))
    x = torch.randn(1, 1, shape[1]).to(dtype)
    threads = torch.get_num_threads()
    try:
        with two_threads(dtype):
            got = weight.matmul(x)
            want = torch.nn.functional.linear(x, weight.nk)  # oneDNN is off in the step
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(got, want)


def tile_reference(weight_fp8: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype,
                   block: tuple[int, int] = (128, 128)) -> torch.Tensor:
    """The format's definition, one tile at a time: float32(W) * scale, rounded to dtype."""
    out = torch.empty(weight_fp8.shape, dtype=dtype)
    for i in range(scale.shape[0]):
        for j in range(scale.shape[1]):
            rows = slice(i * block[0], (i + 1) * block[0])
            cols = slice(j * block[1], (j + 1) * block[1])
            out[rows, cols] = (weight_fp8[rows, cols].float() * scale[i, j].float()).to(dtype)
    return out


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("scale_dtype", [torch.bfloat16, torch.float32])
def test_resident_fp8_torch_path_is_bit_exact_with_its_tile_reference(
        shape: tuple[int, int], dtype: torch.dtype, scale_dtype: torch.dtype,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the compiled kernel: each row block is dequantised to exactly the reference
    and multiplied by torch's GEMV; the kernel's own exactness is in test_cpu_kernel."""
    monkeypatch.setattr(cpu_decode, "fused", lambda *args: None)
    quant, scale = quantize_block(random_weight(shape, seed=1), scale_dtype=scale_dtype)
    weight = prefer_layout(Fp8Weight.from_tensors(quant, scale), torch.device("cpu"), dtype)
    assert isinstance(weight, ResidentFp8)
    x = torch.randn(1, 1, shape[1]).to(dtype)
    reference = tile_reference(quant, scale, dtype)
    row = x.reshape(1, -1)
    threads = torch.get_num_threads()
    try:
        with two_threads(dtype):
            got = weight.matmul(x)
            blocks = [row @ reference[a:b].t() for a, b in cpu_decode._bounds(
                shape[0], cpu_decode._parts(), 128)]
            one_call = row @ reference.t()
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(weight.dequantize(dtype), reference)
    assert torch.equal(got.reshape(1, -1), torch.cat(blocks, dim=1))
    tolerance = 1e-5 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(got.reshape(1, -1), one_call, rtol=tolerance, atol=tolerance)


def test_decode_step_restores_torch_settings() -> None:
    threads, mkldnn = torch.get_num_threads(), torch.backends.mkldnn.enabled
    torch.set_num_threads(2)
    try:
        with DecodeStep(torch.bfloat16):
            assert torch.get_num_threads() == 1
            assert not torch.backends.mkldnn.enabled
        assert torch.get_num_threads() == 2 and torch.backends.mkldnn.enabled == mkldnn
        with pytest.raises(RuntimeError), DecodeStep(torch.float32):
            raise RuntimeError("a failing step")
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)


def test_an_error_on_a_helper_thread_reaches_the_caller() -> None:
    weight = Transposed.of(random_weight((64, 256)))
    threads = torch.get_num_threads()
    try:
        with two_threads(torch.float32), pytest.raises(RuntimeError):
            weight.matmul(torch.randn(1, 1, 65))  # wrong width: every part fails
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(scope="module", params=ARCHITECTURES)
def tiny(request: pytest.FixtureRequest,
         tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    directory = tmp_path_factory.mktemp(request.param)
    return save_tiny(request.param, directory), directory


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled-kernel", "torch-gemv"])
def test_greedy_parity_with_every_gemv_split(tiny: tuple[Any, Path], compiled: bool,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    model, directory = tiny
    if not compiled:
        monkeypatch.setattr(cpu_decode, "plain_rows", lambda weight: None)
        monkeypatch.setattr(cpu_decode, "fused", lambda *args: None)
    ids = torch.randint(3, VOCAB_SIZE, (1, 12), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        want = model.generate(ids, do_sample=False, max_new_tokens=48)[0, 12:].tolist()
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        eng = Engine.load(directory, device="cpu", dtype="float32", max_seq_len=96)
        got = [ev.token_id for ev in eng.generate(ids[0], GenerationConfig(max_new_tokens=48))]
    finally:
        torch.set_num_threads(threads)
    assert got == want


def test_other_devices_never_take_the_cpu_path(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The meta device stands in for an NPU or CUDA device: plain [out, in] tensors, no
    decode step of this module, the same shapes out."""
    weight = random_weight((64, 32)).to(torch.bfloat16)
    for device in ("cuda", "meta"):
        assert prefer_layout(weight, torch.device(device), torch.bfloat16) is weight
    save_tiny("llama", tmp_path)
    config, weights = load_checkpoint(tmp_path, device="cpu", dtype=torch.float32)
    meta = {name: tensor.to("meta") for name, tensor in weights.items()}
    meta["lm_head.weight"] = meta["embed.weight"]  # tied, as loaded
    monkeypatch.setattr(DecodeStep, "__enter__", _refuse)
    runner = ModelRunner(config, meta, torch.device("meta"), torch.float32, 16,
                         free_bytes=1 << 30)
    assert isinstance(runner.model.blocks[0].attn.w.q, torch.Tensor)
    assert runner.prefill([3, 4, 5]).shape == (1, VOCAB_SIZE)
    assert runner.decode(6).shape == (VOCAB_SIZE,)


def _refuse(self: DecodeStep) -> DecodeStep:
    raise AssertionError("the CPU decode step ran on another device")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize(("heads", "kv_heads"), [(9, 3), (4, 4)])
def test_one_query_attention_matches_sdpa(dtype: torch.dtype, heads: int,
                                          kv_heads: int) -> None:
    generator = torch.Generator().manual_seed(3)
    q = torch.randn(1, 1, heads, 64, generator=generator)
    keys, values = (torch.randn(1, 37, kv_heads, 64, generator=generator) for _ in range(2))
    want = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(1, 2), keys.transpose(1, 2), values.transpose(1, 2), scale=0.125,
        enable_gqa=heads != kv_heads).transpose(1, 2)  # float32 reference
    got = cpu_decode.decode_attention(q.to(dtype), keys.to(dtype), values.to(dtype), 0.125)
    assert got.dtype == dtype and got.shape == want.shape
    tolerance = {torch.float32: 1e-5, torch.float16: 5e-3, torch.bfloat16: 2e-2}[dtype]
    assert (got.float() - want).abs().max().item() < tolerance * want.abs().max().item()
    assert cpu_decode.decode_attention_for(torch.device("cpu"), torch.bfloat16) is not None
    assert cpu_decode.decode_attention_for(torch.device("cpu"), torch.float32) is None
    assert cpu_decode.decode_attention_for(torch.device("cuda"), torch.bfloat16) is None


def drive(steps: cpu_decode.DecodeSteps, seconds: dict[int, float], count: int) -> list[int]:
    """`count` steps, each reported as taking `seconds[its parts]`; the parts each one used."""
    used = []
    for _ in range(count):
        step = steps()
        used.append(step.max_parts)
        assert step._done is not None or steps.chosen
        if step._done is not None:
            step._done(seconds[step.max_parts])
    return used


@pytest.mark.parametrize(("seconds", "faster"), [({1: 0.01, 2: 0.02}, 1),
                                                 ({1: 0.02, 2: 0.01}, 2)])
def test_decode_steps_keep_whichever_is_faster_here(seconds: dict[int, float],
                                                     faster: int) -> None:
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        steps = cpu_decode.DecodeSteps(torch.float32)
        trial = 2 * (steps.TRIAL_STEPS + 1)
        used = drive(steps, seconds, trial)
        assert sorted(used) == [1] * (trial // 2) + [2] * (trial // 2)  # alternated, fairly
        assert steps.chosen == faster
        assert {steps().max_parts for _ in range(5)} == {faster}
    finally:
        torch.set_num_threads(threads)


def test_decode_steps_read_through_a_burst_of_load_elsewhere() -> None:
    """Paired steps: every core wins three pairs of four, though a burst of load that hit one
    step of each made each side's own median favour one thread."""
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        steps = cpu_decode.DecodeSteps(torch.float32)
        times = {1: iter([0.1, 0.030, 0.032, 0.050, 0.090]),
                 2: iter([0.1, 0.028, 0.030, 0.060, 0.070])}
        for _ in range(2 * (steps.TRIAL_STEPS + 1)):
            step = steps()
            assert step._done is not None
            step._done(next(times[step.max_parts]))
        assert steps.chosen == 2
    finally:
        torch.set_num_threads(threads)


def test_decode_steps_measure_again_after_a_while(monkeypatch: pytest.MonkeyPatch) -> None:
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        steps = cpu_decode.DecodeSteps(torch.float32)
        monkeypatch.setattr(steps, "RECHECK_STEPS", 3)
        drive(steps, {1: 0.01, 2: 0.02}, 2 * (steps.TRIAL_STEPS + 1))
        assert steps.chosen == 1
        drive(steps, {1: 0.01, 2: 0.02}, 2)
        assert steps.chosen == 1
        drive(steps, {1: 0.03, 2: 0.01}, 1 + 2 * (steps.TRIAL_STEPS + 1))  # the machine changed
        assert steps.chosen == 2
    finally:
        torch.set_num_threads(threads)


def test_one_thread_never_cuts() -> None:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        steps = cpu_decode.DecodeSteps(torch.float32)
        assert {steps().max_parts for _ in range(20)} == {1}
    finally:
        torch.set_num_threads(threads)


def test_a_runner_chooses_within_its_first_decode_steps(tiny: tuple[Any, Path]) -> None:
    _, directory = tiny
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        engine = Engine.load(directory, device="cpu", dtype="float32", max_seq_len=64)
        runner = engine.runner
        runner.prefill([1, 2, 3])
        for token in range(2 * (cpu_decode.DecodeSteps.TRIAL_STEPS + 1)):
            runner.decode(token + 4)
        assert runner._decode_step.chosen in (1, 2)
    finally:
        torch.set_num_threads(threads)
