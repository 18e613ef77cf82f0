"""`ascend-doctor bench`: the model's hot operators, timed at its real shapes on one device.

The cases come from the engine's own layers built on the meta device (engine.tools.meta_model): one
layer of each kind, so the shapes, dtypes and FP8 mode are the ones the engine would run. Each
case then allocates random tensors of those shapes on the device -- only its own, and only while
it runs: a 35B model costs one layer's tensors at most, never its weights -- and times the
engine's function for it (engine.layers.linear, swiglu, the attention call, the DeltaNet
recurrent step, the router, the RMSNorm) as engine.tools.bench_timing times a call: median of
several samples after warm-up, small operators cycled through copies of their tensors.

The copy bandwidth and the matmul peak of the same device are measured first, in the same run;
each operator is reported against them (engine.tools.bench_math.rate).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch
import torch.nn.functional as F

from engine.cache import element_bytes
from engine.config import ModelConfig
from engine.cpu_decode import prefer_layout
from engine.deltanet import FusedProjections, GatedDeltaNet, SplitProjections, recurrent_delta_rule
from engine.errors import ModelFormatError
from engine.fp8 import Fp8Weight
from engine.layers import Attention, MlpWeights, NormFn, linear, swiglu
from engine.moe import SparseMoe, route
from engine.ops import in_use, select_fused_ops
from engine.tools.bench_math import (
    Cost,
    attention_decode_cost,
    copy_cost,
    deltanet_step_cost,
    fp8_weight_bytes,
    matmul_cost,
    rate,
    rmsnorm_cost,
    router_topk_cost,
    swiglu_cost,
    tokens_per_expert,
)
from engine.tools.bench_timing import Device, Settings, Timing, copies_for, cycling, time_call
from engine.tools.meta_model import MetaModel, build_meta_model
from probes.model.memory import KvStateSize, human_bytes, kv_state_size, plan_memory
from probes.model.tensors import InventoryError
from probes.textsafe import one_line

SCHEMA = "ascend-doctor-bench/1"
PREFILL_TOKENS = 2048  # RMSNorm and router over a prefill chunk


@dataclass(frozen=True)
class Case:
    name: str  # stable across machines: the key --compare matches on
    group: str  # peak | gemv | expert | attention | deltanet | router | norm
    shape: str
    dtype: str
    cost: Cost
    build: Callable[[], Callable[[], Any]]  # allocates its tensors, returns the timed call


# -- random tensors shaped like the meta model's ---------------------------------------------


def random_tensor(shape: Sequence[int], dtype: torch.dtype, device: torch.device,
                  scale: float = 0.02) -> torch.Tensor:
    return torch.empty(tuple(shape), dtype=dtype, device=device).normal_(0.0, scale)


def random_fp8(like: Fp8Weight, device: torch.device) -> Fp8Weight:
    """Random FP8 bytes (no NaN codes) with bfloat16-exact scales, as a checkpoint has them."""
    raw = torch.randint(0, 256, tuple(like.data.shape), dtype=torch.uint8, device=device)
    raw.masked_fill_((raw & 0x7F) == 0x7F, 0)
    scale = (torch.rand(tuple(like.scale_inv.shape), device=device) * 1e-2 + 1e-4)
    scale = scale.to(torch.bfloat16).float()
    return Fp8Weight(raw, scale, like.block, nan_free=True, bf16_scales=like.bf16_scales)


def random_weight(like: Any, device: torch.device, dtype: torch.dtype) -> Any:
    """A weight of the same kind and shape as a meta one, in the device's preferred layout."""
    if isinstance(like, Fp8Weight):
        return random_fp8(like, device)
    return prefer_layout(random_tensor(like.shape, dtype, device), device, dtype)


def weight_bytes(like: Any, dtype: torch.dtype) -> int:
    if isinstance(like, Fp8Weight):
        return fp8_weight_bytes(int(like.shape[0]), int(like.shape[1]), like.block)
    return int(like.numel()) * torch.empty((), dtype=dtype).element_size()


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _weight_dtype(like: Any, dtype: torch.dtype) -> str:
    return "fp8 (dequantised per use)" if isinstance(like, Fp8Weight) else _dtype_name(dtype)


# -- the cases -------------------------------------------------------------------------------


def _kv_size(meta: MetaModel, act_bytes: int) -> KvStateSize:
    """The cache per token and layer the engine would allocate: probes.model.memory's one
    arithmetic, so a decode case reads exactly that many bytes per cached token."""
    if meta.config.facts is None:
        raise ModelFormatError("the config was not read from config.json facts")
    return kv_state_size(meta.config.facts, act_bytes)


class Planner:
    def __init__(self, meta: MetaModel, device: Device, settings: Settings) -> None:
        self.meta, self.device, self.settings = meta, device, settings
        self.dtype = meta.dtype
        self.act_bytes = torch.empty((), dtype=self.dtype).element_size()
        self.kv_size = _kv_size(meta, self.act_bytes)
        self.cases: dict[str, Case] = {}

    def add(self, case: Case) -> None:
        self.cases.setdefault(case.name, case)

    def copies(self, nbytes: int) -> int:
        return copies_for(nbytes, self.settings.cold_bytes)

    # projections -----------------------------------------------------------------------

    def gemv(self, name: str, like: Any) -> None:
        out_features, in_features = int(like.shape[0]), int(like.shape[1])
        cost = matmul_cost(1, out_features, in_features, weight_bytes(like, self.dtype),
                           self.act_bytes)
        dev, dtype = self.device.device, self.dtype

        def build() -> Callable[[], Any]:
            x = random_tensor((1, in_features), dtype, dev, 1.0)
            weights = [random_weight(like, dev, dtype) for _ in range(self.copies(cost.bytes))]
            return cycling([partial(linear, x, w) for w in weights])

        self.add(Case(f"gemv {name}", "gemv", f"[1,{in_features}] x [{out_features},"
                      f"{in_features}]^T", _weight_dtype(like, self.dtype), cost, build))

    def experts(self, mlp: MlpWeights, experts: int, top_k: int) -> None:
        parts: tuple[Any, ...] = (mlp.gate, mlp.up, mlp.down)
        width, hidden = int(parts[0].shape[0]), int(parts[0].shape[1])
        weights = sum(weight_bytes(p, self.dtype) for p in parts)
        dev, dtype = self.device.device, self.dtype
        for batch in self.settings.batches:
            tokens = tokens_per_expert(batch, experts, top_k)
            cost = swiglu_cost(tokens, hidden, width, weights, self.act_bytes)

            def build(tokens: int = tokens, cost: Cost = cost) -> Callable[[], Any]:
                x = random_tensor((tokens, hidden), dtype, dev, 1.0)
                copies = [MlpWeights(*(random_weight(p, dev, dtype) for p in parts))
                          for _ in range(self.copies(cost.bytes))]
                return cycling([partial(swiglu, x, m) for m in copies])

            self.add(Case(f"expert swiglu {tokens} tokens", "expert",
                          f"[{tokens},{hidden}] x 3 x [{width},{hidden}] (batch {batch}, "
                          f"{top_k} of {experts} experts)", _weight_dtype(mlp.gate, dtype),
                          cost, build))

    # layer parts -------------------------------------------------------------------------

    def attention_layer(self, attn: Attention) -> None:
        for name in ("q", "k", "v", "o"):
            self.gemv(f"attn.{name}_proj", getattr(attn.w, name))
        max_context = self.meta.config.max_position_embeddings or max(self.settings.contexts)
        for context in self.settings.contexts:
            if context <= max_context:
                self.attention(attn, context)

    def attention(self, attn: Attention, context: int) -> None:
        heads, kv, dim = attn.num_heads, attn.num_kv_heads, attn.head_dim
        cost = attention_decode_cost(heads, dim, context, self.kv_size, self.act_bytes)
        dev, dtype = self.device.device, self.dtype

        def build() -> Callable[[], Any]:
            q = random_tensor((1, 1, heads, dim), dtype, dev, 1.0).transpose(1, 2)
            caches = [(random_tensor((1, context, kv, dim), dtype, dev, 1.0).transpose(1, 2),
                       random_tensor((1, context, kv, dim), dtype, dev, 1.0).transpose(1, 2))
                      for _ in range(self.copies(cost.bytes))]
            return cycling([partial(F.scaled_dot_product_attention, q, k, v, scale=attn.scale,
                                    enable_gqa=heads != kv) for k, v in caches])

        self.add(Case(f"attention decode {context} ctx", "attention",
                      f"{heads} heads x {dim} over {context} x {kv} KV heads",
                      _dtype_name(dtype), cost, build))

    def deltanet_layer(self, layer: GatedDeltaNet) -> None:
        p = layer.project
        if isinstance(p, SplitProjections):
            for name in ("qkv", "z", "b", "a"):
                self.gemv(f"deltanet.in_proj_{name}", getattr(p, name))
        elif isinstance(p, FusedProjections):
            self.gemv("deltanet.in_proj_qkvz", p.qkvz)
            self.gemv("deltanet.in_proj_ba", p.ba)
        self.gemv("deltanet.out_proj", layer.w.out)
        self.deltanet_step(layer)

    def deltanet_step(self, layer: GatedDeltaNet) -> None:
        s = layer.shape
        cost = deltanet_step_cost(s.key_heads, s.value_heads, s.key_dim, s.value_dim,
                                  self.kv_size, self.act_bytes)
        dev, dtype = self.device.device, self.dtype

        def build() -> Callable[[], Any]:
            def inputs() -> tuple[torch.Tensor, ...]:
                return (random_tensor((1, 1, s.key_heads, s.key_dim), dtype, dev, 1.0),
                        random_tensor((1, 1, s.key_heads, s.key_dim), dtype, dev, 1.0),
                        random_tensor((1, 1, s.value_heads, s.value_dim), dtype, dev, 1.0),
                        -torch.rand((1, 1, s.value_heads), device=dev),
                        torch.rand((1, 1, s.value_heads), device=dev).to(dtype),
                        random_tensor((1, s.value_heads, s.key_dim, s.value_dim),
                                      torch.float32, dev, 0.1))
            sets = [inputs() for _ in range(self.copies(cost.bytes))]
            return cycling([partial(recurrent_delta_rule, *t) for t in sets])

        self.add(Case("deltanet recurrent step", "deltanet",
                      f"state {s.value_heads} x {s.key_dim} x {s.value_dim} float32",
                      _dtype_name(dtype), cost, build))

    def moe_layer(self, moe: SparseMoe) -> None:
        experts = len(moe.w.experts)
        self.gemv("moe.router", moe.w.router)
        self.experts(moe.w.experts[0], experts, moe.top_k)
        if moe.w.shared is not None:
            for name in ("gate", "up", "down"):
                self.gemv(f"moe.shared_expert.{name}_proj", getattr(moe.w.shared.mlp, name))
            self.gemv("moe.shared_expert_gate", moe.w.shared.gate)
        for tokens in (1, PREFILL_TOKENS):
            self.router(moe, experts, tokens)

    def router(self, moe: SparseMoe, experts: int, tokens: int) -> None:
        cost = router_topk_cost(tokens, experts, moe.top_k, self.act_bytes)
        dev, dtype = self.device.device, self.dtype

        def build() -> Callable[[], Any]:
            sets = [random_tensor((tokens, experts), dtype, dev, 1.0)
                    for _ in range(self.copies(cost.bytes))]
            return cycling([partial(route, t, moe.top_k, moe.router_style, moe.norm_topk_prob)
                            for t in sets])

        self.add(Case(f"router top-{moe.top_k} {tokens} tokens", "router",
                      f"[{tokens},{experts}] -> top {moe.top_k}", _dtype_name(dtype), cost,
                      build))

    def mlp_layer(self, mlp: MlpWeights) -> None:
        for name in ("gate", "up", "down"):
            self.gemv(f"mlp.{name}_proj", getattr(mlp, name))

    def norm(self, norm: NormFn, label: str, tokens: int) -> None:
        hidden = self.meta.config.hidden_size
        cost = rmsnorm_cost(tokens, hidden, self.act_bytes)
        dev, dtype, eps = self.device.device, self.dtype, float(self.meta.config.rms_norm_eps)

        def build() -> Callable[[], Any]:
            weight = random_tensor((hidden,), dtype, dev, 0.1)
            sets = [random_tensor((tokens, hidden), dtype, dev, 1.0)
                    for _ in range(self.copies(cost.bytes))]
            return cycling([partial(norm, x, weight, eps) for x in sets])

        self.add(Case(f"{label} {tokens} tokens", "norm", f"[{tokens},{hidden}]",
                      _dtype_name(dtype), cost, build))


def plan(meta: MetaModel, device: Device, settings: Settings) -> list[Case]:
    """Every case of the model, one layer of each kind (duplicates named once)."""
    planner = Planner(meta, device, settings)
    for block in meta.decoder.blocks:
        if block.attn is not None:
            planner.attention_layer(block.attn)
        if block.linear is not None:
            planner.deltanet_layer(block.linear)
        if block.moe is not None:
            planner.moe_layer(block.moe)
        if block.mlp is not None:
            planner.mlp_layer(block.mlp)
    planner.gemv("lm_head", meta.decoder.lm_head)
    fused = in_use(select_fused_ops(device.device, meta.dtype), meta.config.norm_offset)
    norm_label = "rmsnorm" + (f" ({fused.active[0]})" if fused.active else "")
    norm = fused.rms_norm if fused.active else meta.decoder.norm
    for tokens in (1, PREFILL_TOKENS):
        planner.norm(norm, norm_label, tokens)
    return list(planner.cases.values())


def peak_cases(device: Device, dtype: torch.dtype, settings: Settings) -> tuple[Case, Case]:
    """The device's copy bandwidth and matmul peak, in the model's dtype."""
    nbytes = settings.copy_bytes or (256 * 2**20 if device.is_cpu else 2**30)
    n = settings.matmul_n or (2048 if device.is_cpu else 8192)
    dev = device.device

    def copy() -> Callable[[], Any]:
        src = torch.ones(nbytes, dtype=torch.uint8, device=dev)
        dst = torch.empty_like(src)
        return lambda: dst.copy_(src)

    def gemm() -> Callable[[], Any]:
        a, b = random_tensor((n, n), dtype, dev, 1.0), random_tensor((n, n), dtype, dev, 1.0)
        out = torch.empty((n, n), dtype=dtype, device=dev)
        return lambda: torch.mm(a, b, out=out)

    return (Case("peak copy", "peak", f"{nbytes // 2**20} MiB", "uint8", copy_cost(nbytes),
                 copy),
            Case("peak matmul", "peak", f"[{n},{n}] x [{n},{n}]", _dtype_name(dtype),
                 Cost(3 * n * n * torch.empty((), dtype=dtype).element_size(), 2 * n ** 3),
                 gemm))


# -- running ------------------------------------------------------------------------------------

Progress = Callable[[int, int, str], None]


def run_case(case: Case, device: Device, settings: Settings) -> Timing:
    fn = case.build()
    try:
        return time_call(fn, device, settings)
    finally:
        del fn
        if device.device.type == "cuda":
            torch.cuda.empty_cache()
        elif device.device.type == "npu":
            torch.npu.empty_cache()  # type: ignore[attr-defined]


def measured(case: Case, timing: Timing, copy_bps: float, flops_ps: float) -> dict[str, Any]:
    r = rate(case.cost, timing.median_s, copy_bps, flops_ps)
    return {"name": case.name, "group": case.group, "shape": case.shape, "dtype": case.dtype,
            "bytes": case.cost.bytes, "flops": case.cost.flops, "median_s": timing.median_s,
            "best_s": timing.best_s, "reps": timing.reps, "samples": timing.samples,
            "gb_per_s": r.gb_per_s, "tflop_per_s": r.tflop_per_s,
            "roofline_s": r.roofline_s, "pct_of_roofline": r.pct_of_roofline, "bound": r.bound}


def bench(config: ModelConfig, device: torch.device, *, dtype: torch.dtype = torch.bfloat16,
          fp8_mode: str = "dequantize", settings: Settings | None = None,
          progress: Progress | None = None, model: str = "") -> dict[str, Any]:
    """Measure the peaks, then every case; the ascend-doctor-bench/1 document."""
    settings = settings or Settings()
    dev = Device(device)
    check_plausible(config, device, dtype, fp8_mode)
    try:  # on the meta device: shapes that disagree fail here, before anything is allocated
        meta = build_meta_model(config, dtype, fp8_mode, max_seq_len=1)
        cases = plan(meta, dev, settings)
    except (RuntimeError, ValueError) as exc:

        raise ModelFormatError(f"the config's shapes do not fit together "
                               f"({type(exc).__name__}: {one_line(str(exc))[:160]}); fix "
                               "config.json") from None
    copy_case, mm_case = peak_cases(dev, dtype, settings)
    total = len(cases) + 2
    report = (lambda i, name: progress(i, total, name)) if progress else (lambda i, name: None)
    report(0, copy_case.name)
    copy_t = run_case(copy_case, dev, settings)
    report(1, mm_case.name)
    mm_t = run_case(mm_case, dev, settings)
    copy_bps = copy_case.cost.bytes / copy_t.median_s
    flops_ps = mm_case.cost.flops / mm_t.median_s
    budget = memory_budget(device, settings)
    rows, too_big, failed = [], [], []
    for i, case in enumerate(cases, 2):
        report(i, case.name)
        if case.cost.bytes > budget:
            too_big.append(case.name)
            continue
        try:
            rows.append(measured(case, run_case(case, dev, settings), copy_bps, flops_ps))
        except (RuntimeError, MemoryError) as exc:  # shapes torch refuses, memory it lacks
            failed.append(f"{case.name} ({type(exc).__name__}: {str(exc)[:120]})")
    report(total, "")
    rows.sort(key=lambda r: r["pct_of_roofline"])
    document = _document(config, dev, meta, model, settings, copy_case, copy_t, mm_case, mm_t,
                         rows)
    if too_big:
        document["notes"].append(f"not run, their tensors exceed half the free memory "
                                 f"({budget / 2**30:.1f} GiB): {', '.join(too_big)}")
    if failed:

        document["notes"].append(one_line(f"failed, not measured: {'; '.join(failed)}"))
    return document


# A model is benchmarked one layer at a time, so it may be larger than this device; but not
# larger than the most devices the doctor reads a tensor-parallel size for
# (probes.target.serving.MAX_PARALLEL): past that, the config is not a model, and its one
# layer would still be gigabytes (hidden_size 1e9 allocated 12 GB here).
MAX_DEVICES = 4096


def check_plausible(config: ModelConfig, device: torch.device, dtype: torch.dtype,
                    fp8_mode: str) -> None:
    """Refuse, before anything is allocated, a config whose weights (priced as the engine's
    load prices them) would not fit even MAX_DEVICES devices with this one's free memory."""
    from engine.runner import available_memory_bytes

    if config.facts is None:
        return
    try:
        need = plan_memory(config.facts, 1, element_bytes(dtype)).weight_bytes(fp8_mode)
    except InventoryError:
        return
    free = available_memory_bytes(device)
    if need > MAX_DEVICES * free:
        raise ModelFormatError(f"{config.facts.source}: this model's weights would need "
                               f"{human_bytes(need)}, more than {MAX_DEVICES} devices with "
                               f"this one's {human_bytes(free)} free; check config.json")


def memory_budget(device: torch.device, settings: Settings) -> int:
    """Bytes one case may allocate: half the device's free memory, less the cycled copies."""
    from engine.runner import available_memory_bytes

    return max(0, available_memory_bytes(device) // 2 - settings.cold_bytes)


def _document(config: ModelConfig, dev: Device, meta: MetaModel, model: str,
              settings: Settings, copy_case: Case, copy_t: Timing, mm_case: Case,
              mm_t: Timing, rows: list[dict[str, Any]]) -> dict[str, Any]:
    npu_version = None
    if dev.device.type == "npu":
        import torch_npu

        npu_version = getattr(torch_npu, "__version__", None)
    kinds = ", ".join(f"layer {u.index} ({u.label}, stands for {u.stands_for})"
                      for u in meta.layers)
    return {
        "schema": SCHEMA, "model": model or config.architecture,
        "architecture": config.architecture, "device": str(dev.device),
        "device_name": dev.name(), "torch": torch.__version__, "torch_npu": npu_version,
        "threads": torch.get_num_threads() if dev.is_cpu else None,
        "dtype": _dtype_name(meta.dtype), "fp8_mode": meta.fp8_mode or None,
        "settings": {"samples": settings.samples, "min_sample_s": settings.min_sample_s,
                     "cold_bytes": settings.cold_bytes},
        "peaks": {"copy_gb_per_s": copy_case.cost.bytes / copy_t.median_s / 1e9,
                  "copy_shape": copy_case.shape, "copy_median_s": copy_t.median_s,
                  "matmul_tflop_per_s": mm_case.cost.flops / mm_t.median_s / 1e12,
                  "matmul_shape": mm_case.shape, "matmul_median_s": mm_t.median_s},
        "operators": rows,
        "notes": [f"random tensors of one layer of each kind at the model's shapes ({kinds}); "
                  "no checkpoint weights are read and the model is never allocated whole",
                  f"small operators cycle through copies of their tensors (>= "
                  f"{settings.cold_bytes // 2**20} MiB in all) so they read memory, not a "
                  "cache",
                  "% of roofline: the time the bytes would take at the measured copy "
                  "bandwidth, or the FLOPs at the measured matmul peak (the larger), over the "
                  "measured time"],
    }
