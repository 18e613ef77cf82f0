"""The KV cache: planned before allocation, aligned, BSND, written in place."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from demo_models.base import BuildOptions
from demo_models.build import build
from engine import Engine, GenerationConfig
from engine.cache import (
    CacheShape,
    KVCache,
    aligned_empty,
    aligned_zeros,
    alignment_of,
)
from engine.errors import OutOfMemoryPlan
from engine.runner import cache_size, check_kv_plan, plan_bytes
from probes.model.config import parse_config
from probes.model.memory import KV, KvStateSize, kv_state_size, plan_memory
from tests.engine.tiny_models import save_tiny

ROOT = Path(__file__).resolve().parents[2]
SHAPE = CacheShape(num_layers=2, batch=1, max_seq_len=16, kv_heads=2, head_dim=8)


@pytest.fixture(scope="module")
def moe_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("qwen3_moe")
    save_tiny("qwen3_moe", directory)
    return directory


def storage(eng: Engine) -> list[tuple[int, int]]:
    """(object id, address) of every tensor the cache holds."""
    return [(id(t), t.data_ptr()) for layer in eng.runner.cache.layers for t in layer.tensors()]


@pytest.mark.parametrize("kv_cache", ["auto", "int8"])
def test_decode_writes_in_place(moe_dir: Path, kv_cache: str) -> None:
    eng = Engine.load(moe_dir, device="cpu", dtype="float32", max_seq_len=96, kv_cache=kv_cache)
    before = storage(eng)
    buffers = [(id(b), b.data_ptr()) for b in eng.runner.cache.buffers]
    events = list(eng.generate([4, 8, 15, 16, 23, 42], GenerationConfig(max_new_tokens=60)))
    assert len(events) == 60
    assert storage(eng) == before
    assert [(id(b), b.data_ptr()) for b in eng.runner.cache.buffers] == buffers
    assert eng.stats.kv_tokens_used == 6 + 59


def test_cache_layout_and_alignment(moe_dir: Path) -> None:
    eng = Engine.load(moe_dir, device="cpu", dtype="float32", max_seq_len=40)
    cfg, cache = eng.config, eng.runner.cache
    for layer in cache.layers:
        assert layer.keys.shape == (1, 40, cfg.num_kv_heads, cfg.head_dim)
        assert layer.values.shape == layer.keys.shape
        assert layer.keys.is_contiguous()
    assert cache.buffers[0].data_ptr() % 64 == 0
    stats = eng.stats
    assert stats.kv_layout == "BSND"
    assert stats.kv_alignment_bytes >= 64
    assert stats.kv_cache_bytes == 2 * cfg.num_layers * 40 * cfg.num_kv_heads * cfg.head_dim * 4


def test_prefill_fills_the_cache_with_the_prompt_keys(moe_dir: Path) -> None:
    eng = Engine.load(moe_dir, device="cpu", dtype="float32", max_seq_len=32)
    eng.logits([3, 4, 5, 6, 7])
    layer = eng.runner.cache.layers[0]
    assert eng.stats.kv_tokens_used == 5
    assert layer.keys[:, :5].abs().sum() > 0


def test_alignment_of() -> None:
    assert alignment_of(4096 * 3) == 4096
    assert alignment_of(64 * 5) == 64
    assert alignment_of(2**20) == 4096
    assert alignment_of(0) == 4096
    assert alignment_of(6) == 2


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int8])
def test_aligned_empty(dtype: torch.dtype) -> None:
    for count in (1, 7, 1000):
        tensor = aligned_empty(count, dtype, torch.device("cpu"), alignment=512)
        assert tensor.numel() == count and tensor.dtype == dtype
        assert tensor.data_ptr() % 512 == 0


def _resident_kib() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int8])
def test_aligned_zeros_are_zero_and_faulted_in_only_where_written(dtype: torch.dtype) -> None:
    for count in (0, 1, 7, 1000):
        tensor = aligned_zeros(count, dtype, torch.device("cpu"))
        assert tensor.numel() == count and tensor.dtype == dtype
        assert tensor.data_ptr() % 512 == 0 and not tensor.any()
    before = _resident_kib()
    big = aligned_zeros(256 << 20, torch.int8, torch.device("cpu"))  # 256 MiB
    assert _resident_kib() - before < 64 << 10  # not touched: not resident
    big[: 1 << 20].fill_(1)  # written pages only
    assert _resident_kib() - before < 64 << 10
    view = big[: 1 << 20]
    del big
    import gc

    gc.collect()
    assert int(view.sum()) == 1 << 20  # the mapping lives as long as a view of it
    meta = aligned_zeros(10, torch.float32, torch.device("meta"))
    assert meta.device.type == "meta" and meta.numel() == 10


def test_the_allocated_cache_is_the_planned_size(moe_dir: Path) -> None:
    """The runner sizes its cache with probes.model.memory's arithmetic: what it allocates is
    what that arithmetic predicts, for plain and int8 KV."""
    for kv_cache, dtype in (("auto", torch.float32), ("auto", torch.bfloat16),
                            ("int8", torch.bfloat16)):
        eng = Engine.load(moe_dir, device="cpu", dtype=dtype, max_seq_len=48, kv_cache=kv_cache)
        size = cache_size(eng.config, dtype, kv_cache == "int8")
        assert eng.runner.cache.nbytes == size.bytes(48) > 0
        assert eng.stats.kv_cache_bytes == size.kv_bytes(48) and size.state_bytes_per_sequence == 0
    cfg = eng.config
    assert size.kv_bytes_per_token == 2 * cfg.num_layers * cfg.num_kv_heads * (cfg.head_dim + 4)


def test_kv_bytes_of_a_shape() -> None:
    plain = KvStateSize(KV, 2, 0, 2 * 2 * 8 * 2)  # 2 KV heads x head_dim 8 in bfloat16
    assert plain.kv_bytes(16) == 2 * 2 * 16 * 2 * 8 * 2
    cache = KVCache.allocate(SHAPE, torch.bfloat16, torch.device("cpu"))
    assert cache.nbytes == plain.kv_bytes(16)
    int8 = KvStateSize(KV, 2, 0, 2 * 2 * (8 + 4), int8=True)  # a float32 scale per row
    assert int8.kv_bytes(16) == 2 * 2 * (16 * 2 * 8 + 16 * 2 * 4)
    assert KVCache.allocate(SHAPE, torch.bfloat16, torch.device("cpu"), int8=True).nbytes \
        == int8.kv_bytes(16)


def test_plan_refuses_and_names_the_largest_fitting_length() -> None:
    size = KvStateSize(KV, 2, 0, 2 * 2 * 8 * 4)  # float32
    rotary = 2 * 8 * 4
    per_token = plan_bytes(size, rotary, 1)
    free = 1000 * per_token
    with pytest.raises(OutOfMemoryPlan, match=r"largest max_seq_len that fits is 900"):
        check_kv_plan(size, rotary, 5000, torch.device("cpu"), free_bytes=free)
    assert check_kv_plan(size, rotary, 800, torch.device("cpu"), free_bytes=free) \
        == 800 * per_token


def test_load_refuses_a_cache_larger_than_memory(moe_dir: Path) -> None:
    with pytest.raises(OutOfMemoryPlan, match="largest max_seq_len that fits"):
        Engine.load(moe_dir, device="cpu", dtype="float32", max_seq_len=10**11)


def test_int8_cache_round_trip() -> None:
    cache = KVCache.allocate(SHAPE, torch.float32, torch.device("cpu"), int8=True)
    layer = cache.layers[1]
    k = torch.randn(1, 5, 2, 8)
    v = torch.randn(1, 5, 2, 8) * 10
    layer.write(3, k, v)
    keys, values = layer.read(8)
    assert keys.shape == (1, 8, 2, 8)
    assert torch.allclose(keys[:, 3:], k, atol=k.abs().max().item() / 100)
    assert torch.allclose(values[:, 3:], v, atol=v.abs().max().item() / 100)
    assert cache.storage_dtype == torch.int8


@pytest.mark.parametrize("name", ["qwen3.6-moe-fp8-tiny", "smollm2-moe-fp8"])
@pytest.mark.parametrize("kv_cache", ["auto", "int8"])
def test_demo_cache_is_what_the_memory_arithmetic_predicts(
        name: str, kv_cache: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    """On the demo checkpoints (a Gated DeltaNet hybrid and a plain MoE), the cache the engine
    allocates is byte for byte what probes.model.memory.kv_state_size predicts from config.json
    alone -- the arithmetic engine.tools.plan prints and npu.hbm-fit judges."""
    model = demo_model(name, tmp_path_factory)
    eng = Engine.load(model, device="cpu", dtype="bfloat16", max_seq_len=64, kv_cache=kv_cache)
    facts = parse_config(json.loads((model / "config.json").read_text()))
    size = kv_state_size(facts, 2, int8=kv_cache == "int8")
    assert eng.runner.cache.nbytes == size.bytes(64) == eng.stats.kv_cache_bytes
    assert eng.runner.cache.state_bytes == size.state_bytes_per_sequence
    assert eng.runner.cache.kv_layers == size.full_attention_layers
    assert eng.runner.cache.linear_layers == size.linear_attention_layers
    assert (size.linear_attention_layers > 0) == (name == "qwen3.6-moe-fp8-tiny")
    plan = plan_memory(facts, 64, 2, int8_kv=kv_cache == "int8")
    assert plan.sequence_bytes == size.bytes(64)


def demo_model(name: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The lead's built demo checkpoint when there is one, else one built here."""
    built = ROOT / "demo-assets" / name
    if (built / "config.json").is_file():
        return built
    out = tmp_path_factory.mktemp("demo") / name
    build(out, BuildOptions(name))
    return out
