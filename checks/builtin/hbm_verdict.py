"""npu.hbm-fit's verdict on the chips of one deployment: the plan per chip, the FP8 size that
applies on these chips, and the finding, every number with its source (checks.builtin.hbm_fit
says what is counted and why)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from checks.builtin.hbm_chips import ChipBudget, chip_label, names, total_mb
from checks.builtin.hbm_inputs import Deployment, Model, mb
from checks.builtin.hbm_plan import (
    MB,
    Plan,
    attention_layers,
    engine_plan_lines,
    judge,
    kv_not_modelled,
    kv_size,
    mla_text,
    tokens,
    weight_share_bytes,
)
from checks.context import Context
from checks.model import Finding, failed, passed, warned
from probes.words import counted

if TYPE_CHECKING:
    from probes.model.config import ConfigFacts
    from probes.npu_smi import ChipRow


def kv_note(config: ConfigFacts) -> str:
    """Why no KV figure is given for this model; "" when one is."""
    size = kv_size(config)
    return f"KV not estimated: {size.note}" if size.note else kv_not_modelled(config)


def plan_for(ctx: Context, model: Model, settings: Deployment, weight_bytes: int,
             free: int) -> Plan:
    """The plan on one chip of the group with `free` bytes for the deployment."""
    config = model.config
    tp, chips = settings.tp.value, settings.weight_chips
    size = kv_size(config, tp)
    per_token = 0 if kv_note(config) else math.ceil(size.kv_bytes_per_token / settings.pp.value)
    state = math.ceil(size.state_bytes_per_sequence / chips) * settings.batch.value
    return Plan(free_bytes=free, weight_bytes=chip_weights(model, settings, weight_bytes),
                reserve_bytes=int(float(ctx.policy.get("hbm_fit", "runtime_reserve_mb")) * MB),
                kv_bytes_per_token=per_token, max_seq_len=settings.max_seq_len.value,
                batch_size=settings.batch.value, state_bytes=state,
                block_tokens=settings.kv_block_tokens,
                kv_cap_bytes=settings.kv_cap_bytes.value if settings.kv_cap_bytes else None)


def chip_weights(model: Model, settings: Deployment, weight_bytes: int) -> int:
    """One chip's weights: split over TP x PP, the routed experts over TP x DP x PP with
    expert parallelism."""
    weights = model.weights
    ratio = 0.0 if isinstance(weights, str) else weights.expert_ratio
    split = settings.expert_chips != settings.weight_chips
    share = weight_share_bytes(weight_bytes, settings.weight_chips, ratio,
                               settings.expert_chips if split else None)
    offload = settings.cpu_offload_gib
    # --cpu-offload-gb keeps that many GiB of each device's weights in host RAM
    return max(share - int(offload.value * 2**30), 0) if offload else share


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


@dataclass(frozen=True)
class Pool:
    """The tightest chip's bytes for the engine's pool, and the room left outside it."""

    pool_bytes: int
    outside_bytes: int | None  # None: no engine share known, nothing is kept outside
    how: str


def _budget(settings: Deployment, tightest: ChipBudget) -> Pool:
    """What the engine plans within on the tightest chip: its share of the chip's total
    (given or the engine's default), never more than is measured usable there."""
    usable, fraction = tightest.budget_bytes, settings.memory_fraction
    if fraction is None:
        return Pool(usable, None, tightest.how + "; no engine share applied (the target is "
                    "not a vLLM or MindIE server)")
    total = tightest.runtime_total_bytes or total_mb(tightest.chip) * MB
    share = int(total * fraction.value)
    of = f"{fraction.value:g} of the {mb(total)} the runtime sees"
    if share >= usable:
        return Pool(usable, 0, f"{tightest.how}; {fraction.source}: {of} = {mb(share)}, more "
                    "than is usable there")
    return Pool(share, usable - share, f"{of} ({fraction.source}); {tightest.how}")


@dataclass(frozen=True)
class Judged:
    """Everything one verdict is made of."""

    ctx: Context
    model: Model
    settings: Deployment
    plan: Plan
    resident: Plan | None  # FP8 kept resident, for the remedy; None: not FP8 judged as BF16
    where: str  # "8 x 910B4 at tensor parallel 8 (command line)"
    evidence: tuple[str, ...]
    outside_bytes: int | None = None  # usable HBM the engine's share leaves outside its pool

    @property
    def weight_text(self) -> str:
        weights = self.model.weights
        assert not isinstance(weights, str)
        return f"{mb(self.plan.weight_bytes)} weights ({weights.origin})"


def verdict(ctx: Context, model: Model, settings: Deployment, chosen: list[ChipBudget],
            how: str, visible: list[ChipRow]) -> Finding:
    tightest = min(chosen, key=lambda b: b.budget_bytes)
    pool = _budget(settings, tightest)
    free, free_how = pool.pool_bytes, pool.how
    chips = [b.chip for b in chosen]
    size = sizing(ctx, model, chips)
    plan = plan_for(ctx, model, settings, size.judged_bytes, free)
    resident = None if size.resident_bytes is None else replace(
        plan, weight_bytes=chip_weights(model, settings, size.resident_bytes))
    evidence = (*size.lines, *_weight_lines(model, settings, plan),
                f"chips: {how}, of {names(visible)}; tightest {chip_label(tightest.chip)}: "
                f"{mb(plan.free_bytes)} for the deployment ({free_how})",
                *_kv_lines(model, settings, plan), *_total_lines(model, settings, plan),
                *_outside_lines(settings, pool))
    held = " (held by the target: judged against what was free before it started)" \
        if "target holds" in how else ""
    where = (f"{names(chips)}{held} at tensor parallel {settings.tp.value} "
             f"({settings.tp.origin or settings.tp.source}){_layout(settings)}")
    judged = Judged(ctx, model, settings, plan, resident, where, evidence, pool.outside_bytes)
    return _failure(judged) or _fit(judged)


def _layout(settings: Deployment) -> str:
    dp = f" x data parallel {settings.dp.value}" if settings.dp.value > 1 else ""
    ep = ", experts split over " + f"{settings.expert_chips} chips (expert parallel)" \
        if settings.expert_chips != settings.weight_chips else ""
    return dp + ep


def _outside_lines(settings: Deployment, pool: Pool) -> list[str]:
    if pool.outside_bytes is None:
        return []
    mode = settings.graph_mode
    graph = "" if mode is None else (
        f"; graph capture on ({mode.source})" if mode.value else f"; eager ({mode.source})")
    return [f"outside the engine's pool: {mb(pool.outside_bytes)} usable for graph capture, "
            f"HCCL buffers and allocations the engine does not count{graph}"]


def _weight_lines(model: Model, settings: Deployment, plan: Plan) -> list[str]:
    weights = model.weights
    assert not isinstance(weights, str)
    stored = f"weights as stored: {mb(weights.stored_bytes)}" + (
        f" ({weights.by_dtype})" if weights.by_dtype else "") + f", from {weights.source}"
    lines = [stored,
             f"tensor parallel {settings.tp.value} ({settings.tp.source}) x pipeline parallel "
             f"{settings.pp.value}: weights split over {counted(settings.weight_chips, 'chip')}, "
             f"{mb(plan.weight_bytes)} per chip"]
    if settings.dp.value > 1:
        here = "" if settings.dp_local is None else \
            f", {settings.dp_local.value} of them on this node ({settings.dp_local.source})"
        lines.append(f"data parallel {settings.dp.value} ({settings.dp.source}{here}): "
                     f"{settings.chips} chips here, each replica with its own weights and KV "
                     "cache")
    ep = settings.expert_parallel
    if ep is not None and ep.value:
        share = f"{weights.expert_ratio:.0%} of the weights" if weights.expert_bytes else \
            "no routed-expert tensors found (`.experts.`): nothing split further"
        lines.append(f"expert parallel ({ep.source}): routed experts ({share}) split over "
                     f"TP x DP = {settings.expert_chips} chips "
                     "(https://docs.vllm.ai/en/latest/serving/expert_parallel_deployment/)")
    return lines


def _kv_lines(model: Model, settings: Deployment, plan: Plan) -> list[str]:
    config = model.config
    note = kv_note(config)
    if note:
        lines = [note]
    else:
        lines = [_kv_size_line(config, plan),
                 f"context {tokens(settings.max_seq_len.value)} ({settings.max_seq_len.source}), "
                 f"allocated in blocks of {settings.kv_block_tokens} (policy "
                 f"hbm_fit.kv_block_tokens): {plan.kv_tokens:,} x batch {plan.batch_size} "
                 f"({settings.batch.source}) -> {mb(plan.kv_bytes)} KV per chip"]
    if settings.kv_cap_bytes is not None:
        lines.append(f"KV capped at {mb(settings.kv_cap_bytes.value)} per chip "
                     f"({settings.kv_cap_bytes.source})")
    if plan.state_bytes:
        lines.append(f"linear-attention state: {mb(plan.state_bytes)} per chip for batch "
                     f"{plan.batch_size} (fixed per sequence, on the "
                     f"{(config.num_hidden_layers or 0) - config.full_attention_layers()} "
                     "Gated DeltaNet layers)")
    return lines


def _kv_size_line(config: ConfigFacts, plan: Plan) -> str:
    size = kv_size(config)
    dtype = config.dtype or "bfloat16"
    total = f"{size.kv_bytes_per_token:,} bytes/token, {plan.kv_bytes_per_token:,} per chip"
    if mla_text(config):
        return (f"KV cache: {size.full_attention_layers} layers x one MLA latent of "
                f"{size.head_dim} values (kv_lora_rank + qk_rope_head_dim) x "
                f"{size.value_bytes} bytes ({dtype}) = {total} (the latent is not split "
                "across chips)")
    return (f"KV cache: {attention_layers(config)[1]} x 2 x {size.kv_heads} KV heads x "
            f"{size.head_dim} head_dim x {size.value_bytes} bytes ({dtype}) = {total}")


def _total_lines(model: Model, settings: Deployment, plan: Plan) -> list[str]:
    note = kv_note(model.config)
    kv = "" if note else f" + {mb(plan.kv_allocated_bytes)} KV"
    state = f" + {mb(plan.state_bytes)} state" if plan.state_bytes else ""
    left = plan.room_bytes if note else plan.headroom_bytes
    lines = [f"runtime reserve {mb(plan.reserve_bytes)} per chip (policy "
             "hbm_fit.runtime_reserve_mb)",
             f"per chip: {mb(plan.weight_bytes)} weights + {mb(plan.reserve_bytes)} reserve"
             f"{state}{kv} of {mb(plan.free_bytes)} -> {mb(left)} left"]
    if not note:
        lines.append(f"largest context that fits: {tokens(plan.largest_context)} at batch "
                     f"{plan.batch_size}")
    lines += [f"note: {n}" for n in settings.notes]
    return lines + engine_plan_lines(model.config, plan.max_seq_len, plan.batch_size)


def _context(settings: Deployment) -> str:
    origin = settings.max_seq_len.origin or settings.max_seq_len.source
    return f"{tokens(settings.max_seq_len.value)} ({origin}) x batch {settings.batch.value}"


def _failure(j: Judged) -> Finding | None:
    """The finding when something does not fit (or KV cannot be judged); None when it fits."""
    plan, fp8_note = j.plan, _resident_note(j.resident)
    if plan.room_bytes < 0:
        state = f" + {mb(plan.state_bytes)} state" if plan.state_bytes else ""
        return failed(
            f"weights + reserve do not fit on {j.where}: {j.weight_text} + "
            f"{mb(plan.reserve_bytes)} reserve{state} per chip, {mb(plan.free_bytes)} there",
            "use more chips (tensor parallel), a smaller or quantised checkpoint (W8A8), "
            "or free the HBM other processes hold" + fp8_note, *j.evidence,
            rules=("weights-do-not-fit",))
    note = kv_note(j.model.config)
    if note:
        return warned(f"weights fit on {j.where} ({j.weight_text}, {mb(plan.room_bytes)} left "
                      f"per chip); {note}", "size the KV cache with the serving engine's own "
                      "estimate before serving long contexts", *j.evidence,
                      rules=("kv-not-estimated",))
    cap = j.settings.kv_cap_bytes
    if plan.context_fits and plan.headroom_bytes < 0 and cap is not None:
        return failed(
            f"the KV cache MindIE is told to allocate does not fit on {j.where}: "
            f"{mb(cap.value)} ({cap.source}) beside {j.weight_text}, "
            f"{mb(plan.reserve_bytes)} reserve; {mb(plan.room_bytes)} is left for it",
            f"lower npuMemSize to {plan.room_bytes // 2**30} or less, or use more chips",
            *j.evidence, rules=("kv-pool-does-not-fit",))
    if not plan.context_fits or plan.headroom_bytes < 0:
        return failed(
            f"{_context(j.settings)} does not fit on {j.where}: largest context that fits is "
            f"{tokens(plan.largest_context)} ({j.weight_text}){_mla_note(j)}",
            f"serve with --max-model-len {plan.largest_context:,} or less, lower the batch, "
            "use more chips, or an int8 KV cache" + fp8_note, *j.evidence,
            rules=("context-does-not-fit",))
    return None


def _mla_note(j: Judged) -> str:
    text = mla_text(j.model.config)
    return f"; {text}" if text else ""


def plan_text(plan: Plan) -> str:
    """The plan on one chip in one line: what goes into the pool and what is left."""
    state = f" + {mb(plan.state_bytes)} state" if plan.state_bytes else ""
    return (f"per chip {mb(plan.weight_bytes)} weights + {mb(plan.kv_allocated_bytes)} KV + "
            f"{mb(plan.reserve_bytes)} reserve{state} of {mb(plan.free_bytes)} -> "
            f"{mb(plan.headroom_bytes)} left")


def _fit(j: Judged) -> Finding:
    """It fits: how much is left, and whether that is measured."""
    plan = j.plan
    weights = j.model.weights
    origin = "" if isinstance(weights, str) else f"; weights from {weights.origin}"
    summary = (f"{plan_text(plan)} on {j.where}; context {_context(j.settings)}, largest "
               f"{tokens(plan.largest_context)}{origin}{_mla_note(j)}")
    warn_mb = float(j.ctx.policy.get("npu", "hbm_free_warn_mb"))
    if judge(plan, warn_mb) == "warn":
        return warned(f"little headroom: {summary} (policy npu.hbm_free_warn_mb "
                      f"{warn_mb:,.0f})",
                      "lower the context or the batch, or use more chips: activations and "
                      "fragmentation need room beyond the KV cache" + _resident_note(j.resident),
                      *j.evidence, rules=("little-headroom",))
    outside = _outside_finding(j, summary)
    if outside is not None:
        return outside
    weights = j.model.weights
    if not isinstance(weights, str) and not weights.exact:
        return warned(f"fits by an estimate: {summary}",
                      "put the checkpoint's shards (or its index with metadata.total_size) in "
                      "the model directory for a measured verdict", *j.evidence,
                      rules=("estimate-only",))
    return passed(f"fits: {summary}", *j.evidence)


def _outside_finding(j: Judged, summary: str) -> Finding | None:
    """Graph capture, HCCL buffers and PyTorch's own allocations live outside the engine's
    pool: too little usable memory left there is a warning (policy
    hbm_fit.outside_pool_headroom_mb, a project default)."""
    mode = j.settings.graph_mode
    if j.outside_bytes is None or (mode is not None and not mode.value):
        return None
    need_mb = float(j.ctx.policy.get("hbm_fit", "outside_pool_headroom_mb"))
    if j.outside_bytes >= need_mb * MB:
        return None
    fraction = j.settings.memory_fraction
    named = fraction.source if fraction else "the engine's share"
    return warned(f"little room outside the engine's pool: {mb(j.outside_bytes)} usable beside "
                  f"it (policy hbm_fit.outside_pool_headroom_mb {need_mb:,.0f}); {summary}",
                  f"lower the engine's share ({named}) so that graph capture and HCCL buffers "
                  "fit beside the pool, or serve with --enforce-eager to capture no graphs",
                  *j.evidence, rules=("little-room-outside-pool",))


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
