"""npu.hbm-fit's verdict on the chips of one deployment: the plan per chip, the FP8 size that
applies on these chips, and the finding, every number with its source (checks.builtin.hbm_fit
says what is counted and why)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from checks.builtin.hbm_fit import (
    MB,
    ChipBudget,
    Model,
    Plan,
    attention_layers,
    chip_label,
    engine_plan_lines,
    judge,
    kv_not_modelled,
    kv_shape,
    mb,
    names,
    state_bytes,
    tokens,
    weight_share_bytes,
)
from checks.builtin.hbm_inputs import Deployment
from checks.context import Context
from checks.model import Finding, failed, passed, warned

if TYPE_CHECKING:
    from probes.checkpoint import ModelConfig
    from probes.npu_smi import ChipRow


def kv_note(config: ModelConfig) -> str:
    """Why no KV figure is given for this model; "" when one is."""
    found = kv_not_modelled(config)
    if found:
        return found
    if kv_shape(config) is None:
        return ("KV not estimated: config.json does not give the KV cache shape "
                "(num_hidden_layers, num_key_value_heads, head_dim)")
    return ""


def plan_for(ctx: Context, model: Model, settings: Deployment, weight_bytes: int,
             free: int) -> Plan:
    """The plan on one chip of the group with `free` bytes for the deployment."""
    config = model.config
    tp, chips = settings.tp.value, settings.chips
    shape = kv_shape(config)
    per_token = 0 if kv_note(config) or shape is None else \
        math.ceil(shape.bytes_per_token(tp) / settings.pp.value)
    state = math.ceil(state_bytes(config) / chips) * settings.batch.value
    return Plan(free_bytes=free, weight_bytes=weight_share_bytes(weight_bytes, chips),
                reserve_bytes=int(float(ctx.policy.get("hbm_fit", "runtime_reserve_mb")) * MB),
                kv_bytes_per_token=per_token, max_seq_len=settings.max_seq_len.value,
                batch_size=settings.batch.value, state_bytes=state,
                block_tokens=settings.kv_block_tokens,
                kv_cap_bytes=settings.kv_cap_bytes.value if settings.kv_cap_bytes else None)


@dataclass(frozen=True)
class Sizing:
    """Which weight size applies on these chips, and the other one for a note."""

    judged_bytes: int
    resident_bytes: int | None  # FP8 kept resident (this project's engine); None: not FP8
    lines: tuple[str, ...]


def sizing(ctx: Context, model: Model, chips: list[ChipRow]) -> Sizing:
    weights = model.weights
    assert not isinstance(weights, str)
    if not model.fp8:
        return Sizing(weights.stored_bytes, None, ())
    from checks.builtin.fp8_gate import fp8_gate

    gate = fp8_gate(ctx, [c.name or "" for c in chips])
    if gate.status == "fp8":
        return Sizing(weights.stored_bytes, None,
                      (f"FP8 weights served as FP8 ({gate.reason}): "
                       f"{mb(weights.stored_bytes)}",))
    return Sizing(weights.dequantised_bytes, weights.stored_bytes, (
        f"FP8 checkpoint: {gate.reason}",
        f"judged at its BF16 size, {mb(weights.dequantised_bytes)}: what the weights take once "
        f"converted to BF16 to be served on these chips (as stored: "
        f"{mb(weights.stored_bytes)})",))


def _budget(settings: Deployment, tightest: ChipBudget) -> tuple[int, str]:
    """The tightest chip's bytes for the deployment, capped by --gpu-memory-utilization."""
    fraction = settings.memory_fraction
    if fraction is None:
        return tightest.budget_bytes, tightest.how
    cap = int((tightest.chip.hbm_total_mb or 0) * MB * fraction.value)
    if cap >= tightest.budget_bytes:
        return tightest.budget_bytes, (f"{tightest.how}; {fraction.source} would allow "
                                       f"{mb(cap)}")
    return cap, (f"{fraction.value:g} of {tightest.chip.hbm_total_mb:,} MB ({fraction.source}; "
                 f"{tightest.how})")


def verdict(ctx: Context, model: Model, settings: Deployment, chosen: list[ChipBudget],
            how: str, visible: list[ChipRow]) -> Finding:
    tightest = min(chosen, key=lambda b: b.budget_bytes)
    free, free_how = _budget(settings, tightest)
    chips = [b.chip for b in chosen]
    size = sizing(ctx, model, chips)
    plan = plan_for(ctx, model, settings, size.judged_bytes, free)
    resident = None if size.resident_bytes is None else replace(
        plan, weight_bytes=weight_share_bytes(size.resident_bytes, settings.chips))
    evidence = (*size.lines, *_lines(model, settings, plan, tightest, free_how, how, visible))
    return _finding(ctx, model, settings, plan, resident, chips, evidence)


def _lines(model: Model, settings: Deployment, plan: Plan, tightest: ChipBudget,
           free_how: str, how: str, visible: list[ChipRow]) -> list[str]:
    weights = model.weights
    assert not isinstance(weights, str)
    config = model.config
    stored = f"weights as stored: {mb(weights.stored_bytes)}" + (
        f" ({weights.by_dtype})" if weights.by_dtype else "") + f", from {weights.source}"
    lines = [stored,
             f"tensor parallel {settings.tp.value} ({settings.tp.source}) x pipeline parallel "
             f"{settings.pp.value}: weights split over {settings.chips} chip(s), "
             f"{mb(plan.weight_bytes)} per chip",
             f"chips: {how}, of {names(visible)}; tightest {chip_label(tightest.chip)}: "
             f"{mb(plan.free_bytes)} for the deployment ({free_how})"]
    note = kv_note(config)
    shape = kv_shape(config)
    if note or shape is None:
        lines.append(note)
    else:
        lines.append(
            f"KV cache: {attention_layers(config)[1]} x 2 x {shape.kv_heads} KV heads x "
            f"{shape.head_dim} head_dim x {shape.dtype_bytes} bytes ({config.dtype or 'bfloat16'})"
            f" = {shape.bytes_per_token():,} bytes/token, {plan.kv_bytes_per_token:,} per chip")
        lines.append(
            f"context {tokens(settings.max_seq_len.value)} ({settings.max_seq_len.source}), "
            f"allocated in blocks of {settings.kv_block_tokens} (policy hbm_fit.kv_block_tokens):"
            f" {plan.kv_tokens:,} x batch {plan.batch_size} ({settings.batch.source}) -> "
            f"{mb(plan.kv_bytes)} KV per chip")
    if settings.kv_cap_bytes is not None:
        lines.append(f"KV capped at {mb(settings.kv_cap_bytes.value)} per chip "
                     f"({settings.kv_cap_bytes.source})")
    if plan.state_bytes:
        lines.append(f"linear-attention state: {mb(plan.state_bytes)} per chip for batch "
                     f"{plan.batch_size} (fixed per sequence, on the "
                     f"{(config.num_hidden_layers or 0) - config.full_attention_layers()} "
                     "Gated DeltaNet layers)")
    kv = "" if note else f" + {mb(plan.kv_allocated_bytes)} KV"
    lines += [
        f"runtime reserve {mb(plan.reserve_bytes)} per chip (policy hbm_fit.runtime_reserve_mb)",
        f"per chip: {mb(plan.weight_bytes)} weights + {mb(plan.reserve_bytes)} reserve"
        + (f" + {mb(plan.state_bytes)} state" if plan.state_bytes else "")
        + kv + f" of {mb(plan.free_bytes)} -> "
        f"{mb(plan.headroom_bytes if not note else plan.room_bytes)} left"]
    if not note:
        lines.append(f"largest context that fits: {tokens(plan.largest_context)} at batch "
                     f"{plan.batch_size}")
    lines += [f"note: {n}" for n in settings.notes]
    return lines + engine_plan_lines(config, plan.max_seq_len, plan.batch_size)


def _where(settings: Deployment, chips: list[ChipRow]) -> str:
    return (f"{names(chips)} at tensor parallel {settings.tp.value} "
            f"({settings.tp.origin or settings.tp.source})")


def _context(settings: Deployment) -> str:
    origin = settings.max_seq_len.origin or settings.max_seq_len.source
    return f"{tokens(settings.max_seq_len.value)} ({origin}) x batch {settings.batch.value}"


def _finding(ctx: Context, model: Model, settings: Deployment, plan: Plan,
             resident: Plan | None, chips: list[ChipRow], evidence: tuple[str, ...]) -> Finding:
    weights = model.weights
    assert not isinstance(weights, str)
    where = _where(settings, chips)
    fp8_note = _resident_note(resident)
    weight_text = f"{mb(plan.weight_bytes)} weights ({weights.origin})"
    if plan.room_bytes < 0:
        state = f" + {mb(plan.state_bytes)} state" if plan.state_bytes else ""
        return failed(
            f"weights + reserve do not fit on {where}: {weight_text} + "
            f"{mb(plan.reserve_bytes)} reserve{state} per chip, {mb(plan.free_bytes)} there",
            "use more chips (tensor parallel), a smaller or quantised checkpoint (W8A8), "
            "or free the HBM other processes hold" + fp8_note, *evidence,
            rules=("weights-do-not-fit",))
    note = kv_note(model.config)
    if note:
        return warned(f"weights fit on {where} ({weight_text}, "
                      f"{mb(plan.room_bytes)} left per chip); {note}",
                      "size the KV cache with the serving engine's own estimate before "
                      "serving long contexts", *evidence, rules=("kv-not-estimated",))
    status = judge(plan, float(ctx.policy.get("npu", "hbm_free_warn_mb")))
    cap = settings.kv_cap_bytes
    if status == "fail" and cap is not None and plan.context_fits:
        return failed(
            f"the KV cache MindIE is told to allocate does not fit on {where}: "
            f"{mb(cap.value)} ({cap.source}) beside {weight_text}, "
            f"{mb(plan.reserve_bytes)} reserve; {mb(plan.room_bytes)} is left for it",
            f"lower npuMemSize to {plan.room_bytes // 2**30} or less, or use more chips",
            *evidence, rules=("kv-pool-does-not-fit",))
    if status == "fail":
        return failed(
            f"{_context(settings)} does not fit on {where}: largest context that fits is "
            f"{tokens(plan.largest_context)} ({weight_text})",
            f"serve with --max-model-len {plan.largest_context:,} or less, lower the batch, "
            "use more chips, or an int8 KV cache" + fp8_note, *evidence,
            rules=("context-does-not-fit",))
    summary = (f"{mb(plan.headroom_bytes)} left per chip on {where} after {weight_text}, "
               f"{mb(plan.reserve_bytes)} reserve and the KV cache of {_context(settings)}; "
               f"largest context {tokens(plan.largest_context)}")
    if status == "warn":
        warn_mb = float(ctx.policy.get("npu", "hbm_free_warn_mb"))
        return warned(f"little headroom: {summary} (policy npu.hbm_free_warn_mb "
                      f"{warn_mb:,.0f})",
                      "lower the context or the batch, or use more chips: activations and "
                      "fragmentation need room beyond the KV cache" + fp8_note, *evidence,
                      rules=("little-headroom",))
    if not weights.exact:
        return warned(f"fits by an estimate: {summary}",
                      "put the checkpoint's shards (or its index with metadata.total_size) in "
                      "the model directory for a measured verdict", *evidence,
                      rules=("estimate-only",))
    return passed(f"fits: {summary}", *evidence)


def _resident_note(resident: Plan | None) -> str:
    """For FP8 judged at BF16 size: what keeping FP8 resident would give."""
    if resident is None:
        return ""
    if resident.headroom_bytes >= 0:
        found = f"fits, largest context {tokens(resident.largest_context)}"
    elif resident.kv_room_bytes >= 0:
        found = f"largest context {tokens(resident.largest_context)}"
    else:
        found = "still does not fit"
    return (f"; or keep the FP8 weights resident with this project's engine "
            f"({mb(resident.weight_bytes)} per chip: {found})")
