"""The compiled FP8 decode GEMV: its weights are the tile reference bit for bit (read back
through one-hot inputs), its sums are float32 sums of them, and without a compiler, without
AVX-512 or when switched off the engine keeps the torch path and says why."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from engine import cpu_decode, cpu_fp8_kernel
from engine.cpu_decode import DecodeStep, ResidentFp8, prefer_layout
from engine.fp8 import Fp8Weight, quantize_block
from tests.engine.test_cpu_decode import random_weight, tile_reference

# Ragged shapes on purpose: rows not a multiple of 4 or 128, columns not a multiple of 16,
# 32 or 128 (the kernel's tails), plus SmolLM2's MLP shapes.
SHAPES = [(1536, 576), (576, 1536), (130, 200), (7, 45), (1000, 72)]

needs_kernel = pytest.mark.skipif(cpu_fp8_kernel.kernel() is None,
                                  reason=f"no FP8 kernel here: {cpu_fp8_kernel.why_not}")


def fused_of(quant: torch.Tensor, scale: torch.Tensor) -> cpu_fp8_kernel.BoundWeight:
    made = cpu_fp8_kernel.fused(quant.view(torch.uint8), scale, (128, 128))
    assert made is not None
    return made


def gemv(weight: cpu_fp8_kernel.BoundWeight, x: torch.Tensor) -> torch.Tensor:
    y = torch.empty(weight.rows, dtype=x.dtype)
    weight.into(x.contiguous(), y, 0, weight.rows)
    return y


@needs_kernel
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("scale_dtype", [torch.bfloat16, torch.float32])
def test_the_kernel_s_weights_are_the_tile_reference_bit_for_bit(
        shape: tuple[int, int], dtype: torch.dtype, scale_dtype: torch.dtype) -> None:
    quant, scale = quantize_block(random_weight(shape, seed=2), scale_dtype=scale_dtype)
    weight = fused_of(quant, scale)
    reference = tile_reference(quant, scale, dtype)
    columns = sorted({0, 1, 15, 16, 31, 32, 127, 128, shape[1] - 1,
                      *range(0, shape[1], 37)} & set(range(shape[1])))
    for column in columns:  # W @ e_c is column c: nothing is added to it but zeros
        one_hot = torch.zeros(shape[1], dtype=dtype)
        one_hot[column] = 1
        assert torch.equal(gemv(weight, one_hot), reference[:, column]), column


@needs_kernel
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("scale_dtype", [torch.bfloat16, torch.float32])
def test_a_dequantised_load_is_the_tile_reference_bit_for_bit(
        shape: tuple[int, int], dtype: torch.dtype, scale_dtype: torch.dtype) -> None:
    quant, scale = quantize_block(random_weight(shape, seed=8), scale_dtype=scale_dtype)
    got = cpu_fp8_kernel.dequantized(quant, scale, (128, 128), dtype)
    assert got is not None and got.dtype == dtype
    assert torch.equal(got, tile_reference(quant, scale, dtype))


def test_a_dequantised_load_leaves_nan_codes_and_float16_to_torch() -> None:
    quant, scale = quantize_block(random_weight((256, 128), seed=9))
    assert cpu_fp8_kernel.dequantized(quant, scale, (128, 128), torch.float16) is None
    raw = quant.view(torch.uint8).clone()
    raw[0, 0] = 0xFF
    assert cpu_fp8_kernel.dequantized(raw, scale, (128, 128), torch.bfloat16) is None


def test_a_scale_grid_that_does_not_fit_is_refused() -> None:
    from engine.errors import ModelFormatError

    quant, scale = quantize_block(random_weight((256, 128), seed=10))
    if cpu_fp8_kernel.kernel() is None:
        pytest.skip(f"no FP8 kernel here: {cpu_fp8_kernel.why_not}")
    with pytest.raises(ModelFormatError, match="does not match weight"):
        cpu_fp8_kernel.dequantized(quant, scale[:1], (128, 128), torch.bfloat16)


@needs_kernel
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_the_kernel_s_sums_are_float32_sums(shape: tuple[int, int], dtype: torch.dtype) -> None:
    quant, scale = quantize_block(random_weight(shape, seed=3), scale_dtype=torch.bfloat16)
    reference = tile_reference(quant, scale, dtype).double()
    x = torch.randn(shape[1], generator=torch.Generator().manual_seed(4)).to(dtype)
    exact = reference @ x.double()
    got = gemv(fused_of(quant, scale), x).double()
    # float32 sums of `cols` products, then (bfloat16) one rounding of the result
    bound = shape[1] * 2.0**-23 * (reference.abs() @ x.double().abs()) + 1e-30
    if dtype == torch.bfloat16:
        bound = bound + exact.abs() * 2.0**-8
    assert bool(((got - exact).abs() <= bound).all())


@needs_kernel
def test_resident_decode_takes_the_kernel_and_splits_it_by_tile_rows(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cpu_decode, "FP8_SPLIT_MIN_BYTES", 0)
    quant, scale = quantize_block(random_weight((1000, 72), seed=5))
    weight = prefer_layout(Fp8Weight.from_tensors(quant, scale), torch.device("cpu"),
                           torch.bfloat16)
    assert isinstance(weight, ResidentFp8) and weight._fused is not None
    x = torch.randn(1, 1, 72).to(torch.bfloat16)
    alone = gemv(fused_of(quant, scale), x.reshape(-1))
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        with DecodeStep(torch.bfloat16):
            got = weight.matmul(x)
    finally:
        torch.set_num_threads(threads)
    assert got.shape == (1, 1, 1000)
    assert torch.equal(got.reshape(-1), alone)  # a row's sum does not depend on the split


def test_nan_codes_keep_the_torch_path() -> None:
    quant, scale = quantize_block(random_weight((256, 128), seed=6))
    raw = quant.view(torch.uint8).clone()
    raw[3, 5] = 0x7F  # e4m3 NaN: the kernel would read it as 480
    weight = prefer_layout(Fp8Weight.from_tensors(raw, scale), torch.device("cpu"),
                           torch.bfloat16)
    assert isinstance(weight, ResidentFp8) and weight._fused is None
    assert bool(weight.matmul(torch.ones(1, 128, dtype=torch.bfloat16)).isnan().any())


@pytest.fixture
def fresh_kernel(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The next kernel() call builds afresh, into an empty cache."""
    monkeypatch.setattr(cpu_fp8_kernel, "_loaded", [])
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path


def test_switched_off_the_engine_keeps_the_torch_path(fresh_kernel: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASCEND_DOCTOR_FP8_KERNEL", "0")
    assert cpu_fp8_kernel.kernel() is None
    assert cpu_fp8_kernel.why_not == "ASCEND_DOCTOR_FP8_KERNEL=0"
    quant, scale = quantize_block(random_weight((256, 128), seed=7))
    weight = prefer_layout(Fp8Weight.from_tensors(quant, scale), torch.device("cpu"),
                           torch.float32)
    assert isinstance(weight, ResidentFp8) and weight._fused is None
    x = torch.randn(1, 128)
    assert torch.equal(weight.matmul(x), x @ tile_reference(quant, scale, torch.float32).t())


def test_without_a_compiler_it_says_so(fresh_kernel: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CC", str(fresh_kernel / "no-such-cc"))
    assert cpu_fp8_kernel.kernel() is None
    assert cpu_fp8_kernel.why_not.startswith("the FP8 kernel did not build: ")
    assert "no-such-cc" in cpu_fp8_kernel.why_not


def test_a_failing_compiler_says_its_first_line(fresh_kernel: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    fake = fresh_kernel / "cc"
    fake.write_text("#!/bin/sh\necho 'cc1: error: bad flag' >&2\nexit 4\n")
    fake.chmod(0o755)
    monkeypatch.setenv("CC", str(fake))
    assert cpu_fp8_kernel.kernel() is None
    assert cpu_fp8_kernel.why_not == (f"the FP8 kernel did not build: {fake} exited 4: "
                                      "cc1: error: bad flag")


@needs_kernel
def test_it_is_built_once_into_the_cache(fresh_kernel: Path) -> None:
    assert cpu_fp8_kernel.kernel() is not None
    built = sorted((fresh_kernel / "ascend-doctor" / "kernels").iterdir())
    assert [p.suffix for p in built] == [".so"]
    stamp = built[0].stat().st_mtime_ns
    cpu_fp8_kernel._loaded.clear()
    assert cpu_fp8_kernel.kernel() is not None
    assert built[0].stat().st_mtime_ns == stamp


@pytest.fixture(scope="module")
def fp8_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.engine.test_model_parity import quantize_dir
    from tests.engine.tiny_models import save_tiny

    base = tmp_path_factory.mktemp("moe")
    save_tiny("qwen3_moe", base)
    return quantize_dir(base, tmp_path_factory.mktemp("fp8") / "model")


def test_the_engine_says_which_path_resident_fp8_takes(fp8_model: Path,
                                                       fresh_kernel: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from engine import Engine

    def load(fp8: str) -> str:
        return Engine.load(fp8_model, device="cpu", dtype="bfloat16", max_seq_len=16,
                           fp8=fp8).stats.fp8_decode

    assert load("dequantize") == ""
    if cpu_fp8_kernel.kernel() is not None:
        assert load("resident") == "compiled kernel"
    cpu_fp8_kernel._loaded.clear()
    monkeypatch.setenv("ASCEND_DOCTOR_FP8_KERNEL", "0")
    assert load("resident") == "torch path: ASCEND_DOCTOR_FP8_KERNEL=0"


def test_bfloat16_projections_take_the_bfloat16_gemv_where_the_cpu_has_it() -> None:
    gemv = cpu_fp8_kernel.kernel()
    if gemv is None or gemv.bf16_gemv is None:
        pytest.skip("no AVX512_BF16 kernel here")
    from engine.cpu_decode import BF16_KERNEL_MAX_BYTES, Rows

    for shape in [(1536, 576), (576, 1536), (7, 45), (130, 200)]:
        weight = random_weight(shape, seed=11).to(torch.bfloat16)
        rows = Rows.of(weight)
        assert rows.kernel is not None
        x = torch.randn(1, 1, shape[1], generator=torch.Generator().manual_seed(12))
        x = x.to(torch.bfloat16)
        got = rows.matmul(x).double().reshape(-1)
        exact = weight.double() @ x.double().reshape(-1)
        bound = shape[1] * 2.0**-23 * (weight.double().abs() @ x.double().abs().reshape(-1))
        assert bool(((got - exact).abs() <= bound + exact.abs() * 2.0**-8).all())
        one_hot = torch.zeros(1, shape[1], dtype=torch.bfloat16)
        one_hot[0, shape[1] - 1] = 1
        assert torch.equal(rows.matmul(one_hot).reshape(-1), weight[:, -1])
    big = torch.empty(BF16_KERNEL_MAX_BYTES // 2 + 64, 1, dtype=torch.bfloat16)
    assert Rows.of(big).kernel is None  # a vocabulary projection keeps torch's GEMV
