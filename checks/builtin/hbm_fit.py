"""npu.hbm-fit: will the model's weights, KV cache and runtime fit in the free HBM of the chips?

Weights come from the safetensors headers (no tensor data is read), the KV cache size per
token from config.json, the free HBM per chip from `npu-smi info` (total - used, as measured:
facts/HARDWARE.md §2 says usable HBM must be read, not assumed). The arithmetic is a set of
pure functions over bytes so it can be tested without a checkpoint or an NPU.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from checks.builtin import facts
from checks.builtin.checkpoint import is_fp8, model_or_skip
from checks.context import Context
from checks.model import Finding, failed, passed, skipped, warned

if TYPE_CHECKING:
    from probes.checkpoint import ModelConfig, ModelDir, TensorInfo
    from probes.npu_smi import ChipRow

MB = 1024 * 1024  # npu-smi's MB are MiB (64 GB parts print 65536)
FP8_DTYPES = ("F8_E4M3", "F8_E5M2")
DEQUANT_BYTES = 2  # FP8 weights dequantised to BF16


# -- weights ------------------------------------------------------------------------------


def weight_bytes_by_dtype(tensors: Iterable[TensorInfo]) -> dict[str, int]:
    """Stored bytes per safetensors dtype."""
    totals: dict[str, int] = {}
    for tensor in tensors:
        totals[tensor.dtype] = totals.get(tensor.dtype, 0) + tensor.nbytes
    return totals


def stored_weight_bytes(by_dtype: Mapping[str, int]) -> int:
    return sum(by_dtype.values())


def dequantised_weight_bytes(by_dtype: Mapping[str, int]) -> int:
    """The weights once FP8 is widened to BF16 (1 -> 2 bytes per element); scales are kept."""
    return sum(n * DEQUANT_BYTES if dtype in FP8_DTYPES else n for dtype, n in by_dtype.items())


def dequantises_fp8(chip_name: str) -> bool:
    """True when serving stacks widen FP8 to BF16 on this chip: every chip but Ascend 950
    lacks FP8 compute (facts COMPAT.yaml fp8_support: A2 = 910B*, A3 = Ascend910)."""
    return "950" not in chip_name


# -- KV cache -----------------------------------------------------------------------------


def attention_layers(config: ModelConfig) -> tuple[int, str]:
    """(layers that keep a KV cache, how that was decided).

    Hybrids (qwen3_next, qwen3_5_moe) keep KV only on their full-attention layers; the
    Gated DeltaNet layers hold a fixed-size state per sequence instead (facts/model/ARCH.md).
    """
    layers = config.num_hidden_layers or 0
    full = config.full_attention_layers()
    if config.layer_types:
        return full, (f"hybrid: {full} of {len(config.layer_types)} layers are full attention "
                      "(layer_types); only they keep a KV cache")
    if config.is_hybrid and config.full_attention_interval:
        return full, (f"hybrid: {full} of {layers} layers are full attention "
                      f"(full_attention_interval {config.full_attention_interval}); only they "
                      "keep a KV cache")
    return layers, f"{layers} attention layers"


def kv_dtype_bytes(config: ModelConfig) -> int:
    from probes.model_memory import dtype_bytes

    return dtype_bytes(config.dtype)


@dataclass(frozen=True)
class KvShape:
    layers: int  # layers that keep a KV cache
    kv_heads: int
    head_dim: int
    dtype_bytes: int

    def bytes_per_token(self, chips: int = 1) -> int:
        """K and V for one token on one chip: KV heads are split over the tensor-parallel
        chips, and replicated (one per chip) when there are more chips than KV heads."""
        heads_per_chip = math.ceil(self.kv_heads / max(chips, 1))
        return self.layers * 2 * heads_per_chip * self.head_dim * self.dtype_bytes


def kv_shape(config: ModelConfig) -> KvShape | None:
    """The KV cache geometry, or None when config.json does not say enough."""
    layers, _ = attention_layers(config)
    heads = config.num_key_value_heads or config.num_attention_heads
    head_dim = config.head_dim
    if head_dim is None and config.hidden_size and config.num_attention_heads:
        head_dim = config.hidden_size // config.num_attention_heads
    if not layers or not heads or not head_dim:
        return None
    return KvShape(layers, heads, head_dim, kv_dtype_bytes(config))


# -- the plan per chip --------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """Bytes on the tightest chip of a tensor-parallel group."""

    free_bytes: int  # the smallest free HBM among the chips used
    weight_bytes: int  # this chip's share of the weights
    reserve_bytes: int
    kv_bytes_per_token: int  # this chip's share, one sequence
    max_seq_len: int
    batch_size: int

    @property
    def kv_room_bytes(self) -> int:
        """What is left for the KV cache after weights and reserve (negative: no room)."""
        return self.free_bytes - self.weight_bytes - self.reserve_bytes

    @property
    def kv_bytes(self) -> int:
        return self.kv_bytes_per_token * self.max_seq_len * self.batch_size

    @property
    def headroom_bytes(self) -> int:
        return self.kv_room_bytes - self.kv_bytes

    @property
    def largest_context(self) -> int:
        """The longest sequence that fits at this batch size (0 when none does)."""
        per_step = self.kv_bytes_per_token * self.batch_size
        if self.kv_room_bytes <= 0 or per_step <= 0:
            return 0
        return self.kv_room_bytes // per_step


def weight_share_bytes(weight_bytes: int, chips: int) -> int:
    """One chip's share of the weights under tensor parallelism over `chips`."""
    return math.ceil(weight_bytes / max(chips, 1))


def free_bytes(chip: ChipRow) -> int | None:
    if chip.hbm_total_mb is None or chip.hbm_used_mb is None:
        return None
    return (chip.hbm_total_mb - chip.hbm_used_mb) * MB


def chips_used(chips: tuple[ChipRow, ...], visible_ids: tuple[int, ...] | None) -> list[ChipRow]:
    """The chips the deployment sees: ASCEND_RT_VISIBLE_DEVICES logical ids are positions in
    npu-smi's table; ids past its end are ignored (cann.environment reports them)."""
    if visible_ids is None:
        return list(chips)
    return [chips[i] for i in visible_ids if 0 <= i < len(chips)]


def judge(plan: Plan, warn_free_mb: float) -> str:
    """fail / warn / pass for one plan."""
    if plan.kv_room_bytes < 0 or plan.headroom_bytes < 0:
        return "fail"
    if plan.headroom_bytes < warn_free_mb * MB:
        return "warn"
    return "pass"


# -- rendering ----------------------------------------------------------------------------


def mb(n_bytes: float) -> str:
    value_mb = n_bytes / MB
    return f"{value_mb:,.0f} MB" if abs(value_mb) >= 10 else f"{value_mb:.2f} MB"


def tokens(n: int) -> str:
    return f"{n:,} tokens"


def _chip_label(chip: ChipRow) -> str:
    part = "" if chip.chip_id is None else f" chip {chip.chip_id}"
    return f"NPU {chip.npu_id}{part}"


def _names(chips: list[ChipRow]) -> str:
    names = sorted({c.name or "unknown" for c in chips})
    return f"{len(chips)} x {'/'.join(names)}"


# -- the check ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Inputs:
    model: ModelDir
    chips: list[ChipRow]
    chip_count: int  # chips npu-smi shows
    visible_raw: str | None


def _chips(ctx: Context) -> tuple[list[ChipRow], int, str | None, Finding | None]:
    reading = facts.npu(ctx)
    if reading.is_error:
        return [], 0, None, skipped(f"no NPU: {reading.error_text}")
    info = reading.info
    if info is None or not info.chips:
        return [], 0, None, skipped("no NPU: npu-smi printed no chips")
    visible = facts.environment(ctx).visible_devices
    used = chips_used(info.chips, visible.ids)
    if not used:
        return [], 0, None, skipped(f"ASCEND_RT_VISIBLE_DEVICES={visible.raw!r} leaves no chip "
                                    "visible (see the environment checks)")
    if any(free_bytes(c) is None for c in used):
        return [], 0, None, skipped("no HBM figures in npu-smi",
                                    f"chips: {_names(used)} (310P and 310 print none)")
    return used, len(info.chips), visible.raw, None


def hbm_fit(ctx: Context) -> Finding:
    model, why_not = model_or_skip(ctx)
    if model is None:
        assert why_not is not None
        return why_not
    shape = kv_shape(model.config)
    if shape is None:
        return skipped("config.json does not give the KV cache shape "
                       "(num_hidden_layers, num_key_value_heads, head_dim)")
    used, count, raw, why_not = _chips(ctx)
    if why_not is not None:
        # no chips to judge against, but what the model needs is still worth knowing (CI)
        return skipped(why_not.summary, *why_not.evidence, *_need(ctx, model, shape))
    return _fit(ctx, Inputs(model, used, count, raw), shape)


def _need(ctx: Context, model: ModelDir, shape: KvShape) -> tuple[str, ...]:
    """What the model needs on one chip (no tensor parallelism), by the policy's context."""
    by_dtype = weight_bytes_by_dtype(model.tensors.values())
    plan = Plan(0, stored_weight_bytes(by_dtype),
                int(float(ctx.policy.get("hbm_fit", "runtime_reserve_mb")) * MB),
                shape.bytes_per_token(), int(ctx.policy.get("hbm_fit", "max_seq_len")),
                int(ctx.policy.get("hbm_fit", "batch_size")))
    total = plan.weight_bytes + plan.reserve_bytes + plan.kv_bytes
    lines = [f"needed on one chip: {mb(plan.weight_bytes)} weights + {mb(plan.reserve_bytes)} "
             f"reserve + {mb(plan.kv_bytes)} KV ({plan.max_seq_len:,} tokens x batch "
             f"{plan.batch_size}, {shape.bytes_per_token():,} bytes/token) = {mb(total)}; "
             "tensor parallel over N chips divides the weights and the KV heads"]
    if is_fp8(model):
        widened = dequantised_weight_bytes(by_dtype)
        lines.append(f"FP8 weights dequantised to BF16 (A2/A3 serving stacks do this at load): "
                     f"{mb(widened)} instead of {mb(plan.weight_bytes)}")
    lines += engine_plan_lines(model.config, plan.max_seq_len, plan.batch_size)
    return tuple(lines)


def engine_plan_lines(config: ModelConfig, max_seq_len: int, batch: int) -> list[str]:
    """This project's engine plan for the language model (probes.model_memory, the lines
    `python -m engine.plan` prints): weights per FP8 mode, KV and linear-attention state."""
    from probes.model_memory import plan_lines, plan_memory
    from probes.model_tensors import InventoryError

    try:
        plan = plan_memory(config, max_seq_len, batch=batch)
    except InventoryError as exc:
        return [f"engine plan: not computed ({exc})"]
    return [f"engine plan: {line}" for line in plan_lines(plan)]


def _fit(ctx: Context, inputs: Inputs, shape: KvShape) -> Finding:
    chips = inputs.chips
    count = len(chips)
    by_dtype = weight_bytes_by_dtype(inputs.model.tensors.values())
    fp8 = is_fp8(inputs.model)
    stored = stored_weight_bytes(by_dtype)
    widened = fp8 and any(dequantises_fp8(c.name or "") for c in chips)
    judged = dequantised_weight_bytes(by_dtype) if widened else stored
    tightest = min(chips, key=lambda c: free_bytes(c) or 0)
    plan = Plan(
        free_bytes=free_bytes(tightest) or 0,
        weight_bytes=weight_share_bytes(judged, count),
        reserve_bytes=int(float(ctx.policy.get("hbm_fit", "runtime_reserve_mb")) * MB),
        kv_bytes_per_token=shape.bytes_per_token(count),
        max_seq_len=int(ctx.policy.get("hbm_fit", "max_seq_len")),
        batch_size=int(ctx.policy.get("hbm_fit", "batch_size")),
    )
    resident = (None if not widened else
                Plan(plan.free_bytes, weight_share_bytes(stored, count), plan.reserve_bytes,
                     plan.kv_bytes_per_token, plan.max_seq_len, plan.batch_size))
    evidence = _evidence(inputs, shape, by_dtype, plan, tightest, fp8, widened)
    return _finding(ctx, inputs, plan, resident, evidence)


def _evidence(inputs: Inputs, shape: KvShape, by_dtype: Mapping[str, int], plan: Plan,
              tightest: ChipRow, fp8: bool, widened: bool) -> tuple[str, ...]:
    count = len(inputs.chips)
    config = inputs.model.config
    per_dtype = ", ".join(f"{d} {mb(n)}" for d, n in sorted(by_dtype.items(), key=lambda i: -i[1]))
    lines = [f"weights as stored: {mb(stored_weight_bytes(by_dtype))} ({per_dtype}), "
             f"from the safetensors headers of {inputs.model.path}"]
    if fp8:
        widened_text = mb(dequantised_weight_bytes(by_dtype))
        lines.append(
            f"FP8 weights: {mb(stored_weight_bytes(by_dtype))} resident as FP8, {widened_text} "
            "dequantised to BF16" + (" (judged: serving stacks on these chips have no FP8 "
                                     "compute and dequantise at load)" if widened else ""))
    visible = ("all chips npu-smi shows" if inputs.visible_raw is None else
               f"ASCEND_RT_VISIBLE_DEVICES={inputs.visible_raw}")
    lines += [
        f"chips used: {_names(inputs.chips)} of {inputs.chip_count} ({visible}); "
        f"tightest {_chip_label(tightest)} with {mb(plan.free_bytes)} free "
        f"({tightest.hbm_used_mb} / {tightest.hbm_total_mb} MB used)",
        f"assumed tensor parallel over {count} chip(s): weights split evenly, "
        f"{mb(plan.weight_bytes)} per chip",
        f"KV cache: {attention_layers(config)[1]} x 2 x {shape.kv_heads} KV heads x "
        f"{shape.head_dim} head_dim x {shape.dtype_bytes} bytes ({config.dtype or 'bfloat16'})"
        f" = {shape.bytes_per_token():,} bytes/token, {plan.kv_bytes_per_token:,} per chip",
        f"policy: max_seq_len {plan.max_seq_len:,} x batch {plan.batch_size} -> "
        f"{mb(plan.kv_bytes)} KV per chip; runtime reserve {mb(plan.reserve_bytes)} per chip",
        f"per chip: {mb(plan.weight_bytes)} weights + {mb(plan.reserve_bytes)} reserve + "
        f"{mb(plan.kv_bytes)} KV of {mb(plan.free_bytes)} free -> "
        f"{mb(plan.headroom_bytes)} left",
        f"largest context that fits: {tokens(plan.largest_context)} at batch {plan.batch_size}",
    ]
    lines += engine_plan_lines(config, plan.max_seq_len, plan.batch_size)
    broken = len(inputs.model.missing_shards) + len(inputs.model.unreadable_shards)
    if broken:
        lines.append(f"{broken} shard(s) missing or unreadable: weights are undercounted "
                     "(see checkpoint.format)")
    return tuple(lines)


def _finding(ctx: Context, inputs: Inputs, plan: Plan, resident: Plan | None,
             evidence: tuple[str, ...]) -> Finding:
    where = _names(inputs.chips)
    fp8_note = _resident_note(resident)
    warn_mb = float(ctx.policy.get("npu", "hbm_free_warn_mb"))
    status = judge(plan, warn_mb)
    if status == "fail" and plan.kv_room_bytes < 0:
        return failed(
            f"weights + reserve do not fit: {mb(plan.weight_bytes)} + {mb(plan.reserve_bytes)} "
            f"per chip, {mb(plan.free_bytes)} free on {where}",
            "use more chips (tensor parallel), a smaller or quantised checkpoint (W8A8), "
            "or free the HBM other processes hold" + fp8_note, *evidence)
    if status == "fail":
        return failed(
            f"max_seq_len {plan.max_seq_len:,} at batch {plan.batch_size} does not fit on "
            f"{where}: largest context that fits is {tokens(plan.largest_context)}",
            f"serve with --max-model-len {plan.largest_context:,} or less, lower the batch, "
            "use more chips, or an int8 KV cache" + fp8_note, *evidence)
    summary = (f"fits on {where}: {mb(plan.headroom_bytes)} free per chip after weights, "
               f"reserve and {tokens(plan.max_seq_len)} of KV; largest context "
               f"{tokens(plan.largest_context)}")
    missing = len(inputs.model.missing_shards) + len(inputs.model.unreadable_shards)
    if status == "warn":
        return warned(
            f"little headroom on {where}: {mb(plan.headroom_bytes)} free per chip after "
            f"everything (policy npu.hbm_free_warn_mb {warn_mb:,.0f}); largest context "
            f"{tokens(plan.largest_context)}",
            "lower max_seq_len or the batch, or use more chips: activations and fragmentation "
            "need room beyond the KV cache" + fp8_note, *evidence)
    if missing:
        return warned(summary + " (weights undercounted: shards missing)",
                      "re-download the missing shards (see checkpoint.format)", *evidence)
    return passed(summary, *evidence)


def _resident_note(resident: Plan | None) -> str:
    """For FP8 judged at BF16 size: what keeping FP8 resident would give."""
    if resident is None:
        return ""
    if resident.headroom_bytes >= 0:
        verdict = f"fits, largest context {tokens(resident.largest_context)}"
    elif resident.kv_room_bytes >= 0:
        verdict = f"largest context {tokens(resident.largest_context)}"
    else:
        verdict = "still does not fit"
    return (f"; or keep the FP8 weights resident with this project's engine "
            f"({mb(resident.weight_bytes)} per chip: {verdict})")
