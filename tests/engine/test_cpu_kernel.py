"""The compiled CPU kernels: the FP8 GEMV's weights are the tile reference bit for bit (read
back through one-hot inputs) and its sums float32 sums of them; the float32 and bfloat16
GEMVs are float32 sums too; a GEMV cut across the kernel's threads equals the uncut one bit
for bit, from several Python threads at once, after its workers slept, and in a forked
child; without a compiler, without AVX-512 or when switched off the engine keeps the torch
path and says why."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from engine import cpu_decode, cpu_kernel
from engine.cpu_decode import DecodeStep, ResidentFp8, prefer_layout
from engine.fp8 import Fp8Weight, quantize_block
from tests.engine.test_cpu_decode import random_weight, tile_reference

# Ragged shapes on purpose: rows not a multiple of 4 or 128, columns not a multiple of 16,
# 32 or 128 (the kernel's tails), plus SmolLM2's MLP shapes.
SHAPES = [(1536, 576), (576, 1536), (130, 200), (7, 45), (1000, 72)]

needs_kernel = pytest.mark.skipif(cpu_kernel.kernel() is None,
                                  reason=f"no CPU kernel here: {cpu_kernel.why_not}")


def fused_of(quant: torch.Tensor, scale: torch.Tensor) -> cpu_kernel.BoundWeight:
    made = cpu_kernel.fused(quant.view(torch.uint8), scale, (128, 128))
    assert made is not None
    return made


def gemv(weight: cpu_kernel.BoundWeight, x: torch.Tensor) -> torch.Tensor:
    y = torch.empty(weight.rows, dtype=x.dtype)
    weight.into(x.contiguous(), y)
    return y


# One pass alone, through the load's own calls (engine.weights runs them batched).


def dequantized(weight_fp8: torch.Tensor, scale_inv: torch.Tensor, block: tuple[int, int],
                dtype: torch.dtype, parts: int = 1) -> torch.Tensor | None:
    """The weight dequantised in one pass; None without a pass or when it met NaN codes."""
    one = cpu_kernel.dequantize_pass(weight_fp8, scale_inv, block, dtype)
    if one is None:
        return None
    return one.out if cpu_kernel.run_load_passes([one], parts) == [0] else None


def copied_fp8(weight_fp8: torch.Tensor, parts: int = 1) -> tuple[torch.Tensor, bool] | None:
    """(a copy of FP8 bytes, whether they are free of NaN codes) in one pass."""
    one = cpu_kernel.copy_pass(weight_fp8.view(torch.uint8))
    if one is None:
        return None
    return one.out, cpu_kernel.run_load_passes([one], parts) == [0]


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
    got = dequantized(quant, scale, (128, 128), dtype)
    assert got is not None and got.dtype == dtype
    assert torch.equal(got, tile_reference(quant, scale, dtype))


@pytest.mark.parametrize("where", [(0, 0), (255, 127), (100, 64)])
@pytest.mark.parametrize("code", [0xFF, 0x7F])
def test_a_dequantised_load_leaves_nan_codes_and_float16_to_torch(where: tuple[int, int],
                                                                   code: int) -> None:
    quant, scale = quantize_block(random_weight((256, 130), seed=9))
    assert dequantized(quant, scale, (128, 128), torch.float16) is None
    raw = quant.view(torch.uint8).clone()
    raw[where] = code  # in a 16-byte vector, or in a row's tail (130 = 8 x 16 + 2)
    for parts in (1, 2):
        assert dequantized(raw, scale, (128, 128), torch.bfloat16, parts) is None


@needs_kernel
@pytest.mark.parametrize("size", [1, 63, 64, 1000, 4096 + 17])
def test_resident_bytes_are_copied_and_scanned_for_nan_codes_in_one_pass(size: int) -> None:
    raw = torch.randint(0, 0x7F, (size,), dtype=torch.uint8,
                        generator=torch.Generator().manual_seed(size))
    copied = copied_fp8(raw.view(torch.float8_e4m3fn))
    assert copied is not None
    assert torch.equal(copied[0], raw) and copied[0].data_ptr() != raw.data_ptr()
    assert copied[1] is True
    for at in {0, size // 2, size - 1}:
        for code in (0x7F, 0xFF):
            bad = raw.clone()
            bad[at] = code
            found = copied_fp8(bad)
            assert found is not None and found[1] is False, (at, code)


def test_a_scale_grid_that_does_not_fit_is_refused() -> None:
    from engine.errors import ModelFormatError

    quant, scale = quantize_block(random_weight((256, 128), seed=10))
    if cpu_kernel.kernel() is None:
        pytest.skip(f"no CPU kernel here: {cpu_kernel.why_not}")
    with pytest.raises(ModelFormatError, match="does not match weight"):
        dequantized(quant, scale[:1], (128, 128), torch.bfloat16)


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
def test_resident_decode_takes_the_kernel_and_cuts_it_across_threads(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cpu_decode, "KERNEL_SPLIT_MIN_BYTES", 0)
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
    monkeypatch.setattr(cpu_kernel, "_loaded", [])
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path


def test_switched_off_the_engine_keeps_the_torch_path(fresh_kernel: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASCEND_DOCTOR_CPU_KERNEL", "0")
    assert cpu_kernel.kernel() is None
    assert cpu_kernel.why_not == "ASCEND_DOCTOR_CPU_KERNEL=0"
    quant, scale = quantize_block(random_weight((256, 128), seed=7))
    weight = prefer_layout(Fp8Weight.from_tensors(quant, scale), torch.device("cpu"),
                           torch.float32)
    assert isinstance(weight, ResidentFp8) and weight._fused is None
    x = torch.randn(1, 128)
    assert torch.equal(weight.matmul(x), x @ tile_reference(quant, scale, torch.float32).t())


def test_without_a_compiler_it_says_so(fresh_kernel: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CC", str(fresh_kernel / "no-such-cc"))
    assert cpu_kernel.kernel() is None
    assert cpu_kernel.why_not.startswith("the CPU kernel did not build: ")
    assert "no-such-cc" in cpu_kernel.why_not


def test_a_failing_compiler_says_its_first_line(fresh_kernel: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    fake = fresh_kernel / "cc"
    fake.write_text("#!/bin/sh\necho 'cc1: error: bad flag' >&2\nexit 4\n")
    fake.chmod(0o755)
    monkeypatch.setenv("CC", str(fake))
    assert cpu_kernel.kernel() is None
    assert cpu_kernel.why_not == (f"the CPU kernel did not build: {fake} exited 4: "
                                      "cc1: error: bad flag")


@needs_kernel
def test_it_is_built_once_into_the_cache(fresh_kernel: Path) -> None:
    assert cpu_kernel.kernel() is not None
    built = sorted((fresh_kernel / "ascend-doctor" / "kernels").iterdir())
    assert [p.suffix for p in built] == [".so"]
    stamp = built[0].stat().st_mtime_ns
    cpu_kernel._loaded.clear()
    assert cpu_kernel.kernel() is not None
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
    if cpu_kernel.kernel() is not None:
        assert load("resident") == "compiled kernel"
    cpu_kernel._loaded.clear()
    monkeypatch.setenv("ASCEND_DOCTOR_CPU_KERNEL", "0")
    assert load("resident") == "torch path: ASCEND_DOCTOR_CPU_KERNEL=0"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_plain_projections_take_the_compiled_gemv_in_a_decode_step(
        dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch) -> None:
    gemv = cpu_kernel.kernel()
    if gemv is None or (dtype == torch.bfloat16 and not gemv.bf16):
        pytest.skip(f"no {dtype} kernel here")
    from engine.cpu_decode import Rows

    def step_matmul(rows: Rows, x: torch.Tensor) -> torch.Tensor:
        with monkeypatch.context() as patched, DecodeStep(dtype, 2):
            patched.setattr(torch.nn.functional, "linear", _refuse)
            return rows.matmul(x)

    for shape in [(1536, 576), (576, 1536), (7, 45), (130, 200), (9, 8)]:
        weight = random_weight(shape, seed=11).to(dtype)
        rows = Rows.of(weight)
        assert rows.kernel is not None
        x = torch.randn(1, 1, shape[1], generator=torch.Generator().manual_seed(12))
        x = x.to(dtype)
        assert torch.equal(rows.matmul(x), torch.nn.functional.linear(x, weight))  # no step
        got = step_matmul(rows, x).double().reshape(-1)
        exact = weight.double() @ x.double().reshape(-1)
        bound = shape[1] * 2.0**-23 * (weight.double().abs() @ x.double().abs().reshape(-1))
        if dtype == torch.bfloat16:  # one rounding of the result
            bound = bound + exact.abs() * 2.0**-8
        assert bool(((got - exact).abs() <= bound).all())
        one_hot = torch.zeros(1, shape[1], dtype=dtype)
        one_hot[0, shape[1] - 1] = 1
        assert torch.equal(step_matmul(rows, one_hot).reshape(-1), weight[:, -1])
    assert Rows.of(random_weight((8, 8)).to(torch.float16)).kernel is None


def _refuse(*args: object) -> torch.Tensor:
    raise AssertionError("torch's GEMV ran where the compiled one should have")


def bound_weights() -> list[tuple[str, cpu_kernel.BoundWeight, torch.Tensor]]:
    """(what, a weight bound to each GEMV this machine has, an x it takes): ragged rows."""
    gemv = cpu_kernel.kernel()
    assert gemv is not None
    shape = (1037, 200)
    found = []
    f32 = random_weight(shape, seed=13)
    x = torch.randn(shape[1], generator=torch.Generator().manual_seed(14))
    found.append(("float32", cpu_kernel.plain_rows(f32), x))
    if gemv.bf16:
        found.append(("bfloat16", cpu_kernel.plain_rows(f32.to(torch.bfloat16)),
                      x.to(torch.bfloat16)))
    quant, scale = quantize_block(f32)
    for dtype in (torch.float32, torch.bfloat16):
        found.append((f"fp8 {dtype}", fused_of(quant, scale), x.to(dtype)))
    return [(what, weight, x) for what, weight, x in found if weight is not None]


def cut(weight: cpu_kernel.BoundWeight | cpu_kernel.BoundStack, x: torch.Tensor,
        parts: int) -> torch.Tensor:
    y = torch.full((weight.rows,), float("nan"), dtype=x.dtype)
    weight.into(x, y, parts)
    return y


@needs_kernel
@pytest.mark.parametrize("parts", [2, 3, 8, 50])
def test_a_gemv_cut_across_threads_equals_the_uncut_one(parts: int) -> None:
    for what, weight, x in bound_weights():
        assert torch.equal(cut(weight, x, parts), cut(weight, x, 1)), what


def stack_members(kind: str, rows: list[int], cols: int) -> tuple[
        list[cpu_kernel.BoundWeight | None], torch.Tensor]:
    """Weights of one kind and width (ragged row counts) bound alone, and an x they take."""
    x = torch.randn(cols, generator=torch.Generator().manual_seed(15))
    bound: list[cpu_kernel.BoundWeight | None] = []
    for i, count in enumerate(rows):
        weight = random_weight((count, cols), seed=16 + i)
        if kind == "bfloat16":
            bound.append(cpu_kernel.plain_rows(weight.to(torch.bfloat16)))
        elif kind.startswith("fp8"):
            bound.append(fused_of(*quantize_block(weight)))
        else:
            bound.append(cpu_kernel.plain_rows(weight))
    dtype = torch.float32 if kind in ("float32", "fp8 float32") else torch.bfloat16
    return bound, x.to(dtype)


@needs_kernel
@pytest.mark.parametrize("kind", ["float32", "bfloat16", "fp8 float32", "fp8 bfloat16"])
@pytest.mark.parametrize("parts", [1, 2, 3, 8])
def test_a_stack_s_rows_are_each_weight_s_own_bit_for_bit(kind: str, parts: int) -> None:
    gemv = cpu_kernel.kernel()
    assert gemv is not None
    if kind == "bfloat16" and not gemv.bf16:
        pytest.skip("no bfloat16 GEMV on this CPU")
    members, x = stack_members(kind, [576, 192, 192, 7, 130], 200)
    stack = cpu_kernel.stacked(members)
    assert stack is not None and stack.splits == (576, 192, 192, 7, 130)
    alone = torch.cat([cut(m, x, 1) for m in members if m is not None])
    assert torch.equal(cut(stack, x, parts), alone), kind


@needs_kernel
def test_only_weights_of_one_kind_and_width_stack() -> None:
    f32, _ = stack_members("float32", [64, 64], 200)
    fp8, _ = stack_members("fp8 float32", [64], 200)
    wider, _ = stack_members("float32", [64], 256)
    assert cpu_kernel.stacked(f32[:1]) is None  # one weight is no stack
    assert cpu_kernel.stacked([*f32, None]) is None  # one not bound
    assert cpu_kernel.stacked([*f32, *fp8]) is None
    assert cpu_kernel.stacked([*f32, *wider]) is None
    assert cpu_kernel.stacked(f32) is not None


@needs_kernel
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_projections_of_one_input_decode_as_one_stacked_gemv(
        dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch) -> None:
    gemv = cpu_kernel.kernel()
    assert gemv is not None
    if dtype == torch.bfloat16 and not gemv.bf16:
        pytest.skip("no bfloat16 GEMV on this CPU")
    cpu = torch.device("cpu")
    weights = [prefer_layout(random_weight((rows, 576), seed=rows).to(dtype), cpu, dtype)
               for rows in (576, 192, 192)]
    stack = cpu_decode.stack(weights)
    assert stack is not None
    x = torch.randn(1, 1, 576, generator=torch.Generator().manual_seed(3)).to(dtype)
    assert stack.split(x) is None  # outside a decode step each keeps torch's GEMV
    with DecodeStep(dtype, 2):
        alone = [w.matmul(x) for w in weights]
        with monkeypatch.context() as patched:
            patched.setattr(cpu_kernel.BoundWeight, "into", _refuse)  # one call for all three
            parts = stack.split(x)
        assert stack.split(torch.cat([x, x], dim=1)) is None  # a prefill's rows
    assert parts is not None and [p.shape for p in parts] == [a.shape for a in alone]
    assert all(torch.equal(p, a) for p, a in zip(parts, alone, strict=True))
    assert cpu_decode.stack([weights[0], weights[1].nk]) is None  # a plain tensor: no stack
    assert cpu_decode.stack([w.nk for w in weights]) is None


@needs_kernel
def test_resident_fp8_projections_stack_outside_a_step_too() -> None:
    cpu = torch.device("cpu")
    weights = [prefer_layout(Fp8Weight.from_tensors(*quantize_block(
        random_weight((rows, 256), seed=rows))), cpu, torch.float32) for rows in (256, 130)]
    stack = cpu_decode.stack(weights)
    assert stack is not None
    x = torch.randn(1, 1, 256, generator=torch.Generator().manual_seed(4))
    parts = stack.split(x)  # the resident weights' own GEMV is the kernel's everywhere
    assert parts is not None
    assert all(torch.equal(p, w.matmul(x)) for p, w in zip(parts, weights, strict=True))


@needs_kernel
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("shape", [(1, 1, 576), (1, 1, 9, 64), (3, 7, 200), (1, 1, 17), (5,)])
def test_the_kernel_s_rms_norm_is_the_standard_one(shape: tuple[int, ...],
                                                   dtype: torch.dtype) -> None:
    from engine.layers import rms_norm

    generator = torch.Generator().manual_seed(len(shape))
    x = (3 * torch.randn(*shape, generator=generator)).to(dtype)
    weight = (1 + 0.1 * torch.randn(shape[-1], generator=generator)).to(dtype)
    got, want = cpu_kernel.rms_norm(x, weight, 1e-6), rms_norm(x, weight, 1e-6)
    assert got is not None and got.shape == want.shape and got.dtype == dtype
    assert got.stride() == torch.empty(shape).stride()
    if dtype == torch.bfloat16:  # the sum's order moves no bfloat16 result here
        assert torch.equal(got, want)
    else:  # within float32 rounding: the sum of squares is added in another order
        assert torch.allclose(got, want, rtol=4 * 2.0**-23, atol=0)
    strided = x.transpose(0, -1).contiguous().transpose(0, -1)  # x's values, other strides
    assert torch.equal(cpu_kernel.rms_norm(strided, weight, 1e-6), got)  # type: ignore[arg-type]
    # a last position's view keeps its parent's stride on the size-1 dim; the output does not
    # (oneDNN's GEMV took 60x as long on an input that carried one)
    rows = torch.cat([x.reshape(-1, shape[-1])] * 3).unsqueeze(0)
    last = cpu_kernel.rms_norm(rows[:, -1:], weight, 1e-6)
    assert last is not None and last.stride() == (shape[-1], shape[-1], 1)
    assert cpu_kernel.rms_norm(x, weight.float() if dtype != torch.float32 else
                               weight.double(), 1e-6) is None  # a weight of another dtype
    assert cpu_kernel.rms_norm(x.half(), weight.half(), 1e-6) is None
    assert cpu_kernel.rms_norm(x[..., :-1], weight, 1e-6) is None  # another width
    big = torch.randn(cpu_kernel.NORM_MAX_ELEMENTS // 64 + 1, 64).to(dtype)
    assert cpu_kernel.rms_norm(big, torch.ones(64, dtype=dtype), 1e-6) is None  # a prefill


@needs_kernel
def test_a_dequantised_load_cut_across_threads_is_the_same() -> None:
    quant, scale = quantize_block(random_weight((1037, 200), seed=15))
    for dtype in (torch.float32, torch.bfloat16):
        one = dequantized(quant, scale, (128, 128), dtype)
        many = dequantized(quant, scale, (128, 128), dtype, parts=3)
        assert one is not None and many is not None and torch.equal(one, many)


@needs_kernel
def test_a_load_s_passes_run_in_one_call_each_as_it_would_alone() -> None:
    quant, scale = quantize_block(random_weight((1037, 200), seed=16))
    bad = quant.view(torch.uint8).clone()
    bad[700, 3] = 0x7F
    embedding = torch.randn(333, 96).to(torch.bfloat16)
    passes = [cpu_kernel.dequantize_pass(quant, scale, (128, 128), torch.bfloat16),
              cpu_kernel.copy_pass(bad), cpu_kernel.copy_pass(embedding.t()),
              cpu_kernel.copy_pass(torch.ones(5)), cpu_kernel.copy_pass(torch.empty(0, 7)),
              cpu_kernel.dequantize_pass(quant, scale, (128, 128), torch.float32)]
    assert all(p is not None for p in passes)
    ready = [p for p in passes if p is not None]
    nans = cpu_kernel.run_load_passes(ready, parts=3)
    assert nans[0] == 0 and nans[1] == 1 and nans[5] == 0
    assert torch.equal(ready[0].out, tile_reference(quant, scale, torch.bfloat16))
    assert torch.equal(ready[5].out, tile_reference(quant, scale, torch.float32))
    assert torch.equal(ready[1].out, bad) and ready[1].out.data_ptr() != bad.data_ptr()
    assert torch.equal(ready[2].out, embedding.t()) and ready[2].out.is_contiguous()
    assert torch.equal(ready[3].out, torch.ones(5)) and ready[4].out.shape == (0, 7)
    assert cpu_kernel.run_load_passes([]) == []


@needs_kernel
def test_python_threads_share_the_kernel_s_workers() -> None:
    """One caller at a time gets the workers; the others run their GEMV alone meanwhile."""
    import threading

    weights = bound_weights()
    want = [cut(weight, x, 1) for _, weight, x in weights]
    failures: list[str] = []

    def hammer() -> None:
        for _ in range(200):
            for (what, weight, x), expected in zip(weights, want, strict=True):
                if not torch.equal(cut(weight, x, 2), expected):
                    failures.append(what)

    threads = [threading.Thread(target=hammer) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads) and failures == []


@needs_kernel
def test_sleeping_workers_wake_for_the_next_gemv() -> None:
    import time

    what, weight, x = bound_weights()[0]
    want = cut(weight, x, 1)
    for _ in range(3):
        assert torch.equal(cut(weight, x, 2), want), what
        time.sleep(0.02)  # past the kernel's 2 ms of spinning: the workers sleep


@needs_kernel
def test_idle_workers_burn_no_core() -> None:
    """After its last part a worker spins 2 ms, then sleeps: an idle engine costs no CPU (a
    spinning worker would use about as much CPU time as the wall time waited)."""
    import time

    what, weight, x = bound_weights()[0]
    cut(weight, x, 2)
    time.sleep(0.1)  # past the spinning
    began = time.process_time()
    time.sleep(0.5)
    assert time.process_time() - began < 0.1, what


@needs_kernel
def test_a_forked_child_makes_its_own_workers(tmp_path: Path) -> None:
    """The parent's workers do not exist in a child; the child's GEMV must not wait for
    them. Run in a fresh interpreter: this test process may have other threads."""
    import subprocess
    import sys

    script = tmp_path / "fork.py"
    script.write_text(FORK_SCRIPT)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120, cwd=Path(__file__).parents[2])
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["parent", "child:0"]


FORK_SCRIPT = """
import os, torch
from engine import cpu_kernel
weight = torch.randn(1037, 200)
x = torch.randn(200)
bound = cpu_kernel.plain_rows(weight)
def gemv(parts):
    y = torch.empty(1037)
    bound.into(x, y, parts)
    return y
want = gemv(1)
assert torch.equal(gemv(2), want)
print("parent", flush=True)
pid = os.fork()
if pid == 0:
    os._exit(0 if torch.equal(gemv(2), want) else 3)
_, status = os.waitpid(pid, 0)
print(f"child:{os.waitstatus_to_exitcode(status)}", flush=True)
"""


def _attention_inputs(dtype: torch.dtype, heads: int, kv_heads: int, dim: int, rot: int,
                      filled: int, seed: int) -> dict[str, torch.Tensor]:
    from engine.layers import Rotary

    generator = torch.Generator().manual_seed(seed)

    def rand(*shape: int) -> torch.Tensor:
        return (2 * torch.randn(*shape, generator=generator)).to(dtype)

    cache = torch.zeros(2, 1, 640, kv_heads, dim, dtype=dtype)
    cache[:, :, :filled] = rand(2, 1, filled, kv_heads, dim)
    cos, sin = Rotary(rot, 10000.0, 640, None, torch.device("cpu"), dtype).tables(filled, 1)
    return {"q": rand(1, 1, heads, dim), "k": rand(1, 1, kv_heads, dim),
            "v": rand(1, 1, kv_heads, dim), "cos": cos, "sin": sin, "keys": cache[0],
            "values": cache[1]}


@needs_kernel
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(("heads", "kv_heads", "dim", "rot", "filled"), [
    (9, 3, 64, 64, 37), (4, 4, 128, 128, 0), (8, 2, 256, 64, 63), (2, 1, 48, 24, 5),
    (16, 2, 256, 64, 600)])
def test_the_kernel_s_decode_attention_is_the_standard_path(
        dtype: torch.dtype, heads: int, kv_heads: int, dim: int, rot: int, filled: int) -> None:
    """RoPE and the cache rows bit for bit; the attention within its sums' rounding."""
    from engine.cache import LayerCache
    from engine.layers import apply_rotary

    ours = _attention_inputs(dtype, heads, kv_heads, dim, rot, filled, seed=heads + dim)
    theirs = {name: t.clone() for name, t in ours.items()}
    got = cpu_decode.rope_attend(ours["q"], ours["k"], ours["v"], ours["cos"], ours["sin"],
                                 LayerCache(ours["keys"], ours["values"]), filled, dim ** -0.5)
    cos, sin = theirs["cos"], theirs["sin"]
    cache = LayerCache(theirs["keys"], theirs["values"])
    cache.write(filled, apply_rotary(theirs["k"], cos, sin), theirs["v"])
    keys, values = cache.read(filled + 1)
    want = cpu_decode.decode_attention(apply_rotary(theirs["q"], cos, sin), keys, values,
                                       dim ** -0.5)
    assert torch.equal(ours["keys"], theirs["keys"]) and torch.equal(ours["values"],
                                                                     theirs["values"])
    assert got is not None and got.shape == want.shape and got.dtype == dtype
    if dtype == torch.float32:  # sums in another order: a few ulps of the largest value
        assert torch.allclose(got, want, rtol=0, atol=16 * 2.0**-23 * float(ours["v"].abs().max()))
    else:  # the same float32 sums, rounded once: at most one bfloat16 ulp apart
        assert torch.allclose(got.float(), want.float(), rtol=2.0**-7, atol=0)


@needs_kernel
def test_the_kernel_s_decode_attention_refuses_what_it_does_not_take() -> None:
    from engine.cache import Int8LayerCache, LayerCache

    inputs = _attention_inputs(torch.float32, 4, 2, 64, 64, 3, seed=1)
    q, k, v, cos, sin, keys, values = inputs.values()

    def attend(*, q: torch.Tensor = q, k: torch.Tensor = k, position: int = 3,
               keys: torch.Tensor = keys) -> torch.Tensor | None:
        return cpu_kernel.rope_attend(q, k, v, cos, sin, keys, values, position, 0.125)

    assert attend() is not None
    assert attend(q=q.to(torch.bfloat16)) is None  # dtypes differ
    assert attend(q=torch.cat([q, q])) is None  # a batch
    assert attend(q=q.transpose(2, 3).contiguous().transpose(2, 3)) is None  # strided
    assert attend(k=torch.cat([k, k], dim=1)) is None  # two positions
    assert attend(position=640) is None and attend(position=-1) is None  # outside the cache
    assert attend(keys=keys[:, :, :1]) is None  # another KV head count
    odd = _attention_inputs(torch.float32, 4, 2, 40, 40, 3, seed=2)  # a width the kernel's
    assert cpu_kernel.rope_attend(*odd.values(), 3, 0.125) is None  # vectors do not tile
    scales = torch.ones(1, 64, 2)
    int8 = Int8LayerCache(keys.to(torch.int8), values.to(torch.int8), scales, scales,
                          torch.float32)
    assert cpu_decode.rope_attend(q, k, v, cos, sin, int8, 3, 0.125) is None
    assert cpu_decode.rope_attend(q, k, v, cos, sin, LayerCache(keys, values), 3,
                                  0.125) is not None


@needs_kernel
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("architecture", ["llama", "qwen3", "qwen3_moe", "mixtral"])
def test_a_layer_s_decode_step_in_the_kernel_is_the_torch_path(architecture: str, dtype: str,
                                                                tmp_path: Path) -> None:
    """Attention layers, dense MLPs and mixtures of experts (both routers) decode in
    compiled calls, to the torch path's logits: float32 within its sums' rounding, bfloat16
    within a few roundings of the largest logit, the same greedy tokens."""
    gemv = cpu_kernel.kernel()
    assert gemv is not None
    if dtype == "bfloat16" and not gemv.bf16:
        pytest.skip("no bfloat16 GEMV on this CPU")
    from engine import Engine
    from tests.engine.tiny_models import save_tiny

    save_tiny(architecture, tmp_path)
    runner = Engine.load(tmp_path, device="cpu", dtype=dtype, max_seq_len=64,
                         require_tokenizer=False).runner
    blocks = runner.model.blocks
    kernels = [block.kernel for block in blocks]
    assert all(kernel is not None for kernel in kernels)
    moe = architecture in ("qwen3_moe", "mixtral")
    assert [(k.bound.shape.intermediate > 0, k.moe is not None) for k in kernels
            if k is not None] == [(not moe, moe)] * len(blocks)
    assert runner.model.kernel_layers == f"{len(blocks)} of {len(blocks)} layers " \
        f"({len(blocks)} whole)"

    def logits(kernel_layers: bool) -> torch.Tensor:
        for block, kernel in zip(blocks, kernels, strict=True):
            block.kernel = kernel if kernel_layers else None
        runner.prefill(list(range(3, 30)))
        return torch.stack([runner.decode(30 + i) for i in range(8)])  # teacher-forced

    ours, theirs = logits(True), logits(False)
    if dtype == "float32":
        assert torch.allclose(ours, theirs, rtol=0, atol=2e-5)
    else:
        assert torch.equal(ours.argmax(-1), theirs.argmax(-1))
        assert torch.allclose(ours, theirs, rtol=0, atol=0.05 * float(theirs.abs().max()))


@needs_kernel
def test_a_kernel_layer_runs_only_in_a_decode_step_on_a_plain_cache(tmp_path: Path) -> None:
    from engine import Engine
    from tests.engine.tiny_models import save_tiny

    save_tiny("qwen3", tmp_path)
    model = Engine.load(tmp_path, device="cpu", dtype="float32", max_seq_len=64,
                        require_tokenizer=False).runner.model
    int8 = Engine.load(tmp_path, device="cpu", dtype="float32", max_seq_len=64,
                       require_tokenizer=False, kv_cache="int8").runner
    kernel = model.blocks[0].kernel
    assert kernel is not None
    h = torch.randn(1, 1, 64)
    before = h.clone()
    cos, sin = model.rotary.tables(3, 1)
    assert not kernel.attention(h, int8.cache.layers[0], 3, cos, sin)  # outside a step
    assert not kernel.mlp(h)
    with DecodeStep(torch.float32, 2):
        assert not kernel.attention(h, int8.cache.layers[0], 3, cos, sin)  # an int8 cache
        assert not kernel.attention(h.to(torch.bfloat16), int8.cache.layers[0], 3, cos, sin)
        assert not kernel.mlp(torch.cat([h, h], dim=1))  # two positions
    assert torch.equal(h, before)
    with DecodeStep(torch.float32, 2):
        assert kernel.mlp(h)
    assert not torch.equal(h, before)  # added to in place
