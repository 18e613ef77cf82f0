"""npu.hbm-fit: will the weights, the KV cache, the linear-attention state and a reserve fit in
the HBM of each chip of one tensor-parallel group?

Inputs, each said with its source (checks.builtin.hbm_inputs): the weights from the
safetensors headers (no tensor data is read), the index's `metadata.total_size` when shards are
missing, or an estimate from config.json (said to be one); the tensor-parallel size and the
context from the target's command line, --tp or the policy; the HBM of each chip from
`npu-smi info`. Usable HBM is measured, never assumed: a 64 GB part shows about 61 GiB to
torch_npu (vllm-project/vllm-ascend#1670) and 3-4 GB used at idle (vllm-project/vllm-ascend#975).
A chip the target itself holds is judged against its total HBM less what other processes hold
on it, not against what is free while the target runs.

KV per token = full-attention layers x 2 x KV heads x head_dim x bytes (KV heads split over the
tensor-parallel chips, one per chip at least), allocated in blocks of `hbm_fit.kv_block_tokens`
(vllm-ascend's 128: vllm-project/vllm-ascend vllm_ascend/utils.py refresh_block_size @
182b75ea84ff). Hybrids (Qwen3-Next, Qwen3.5/3.6) keep KV only on their full-attention layers
and a fixed-size Gated DeltaNet state per sequence (probes.model_memory). An attention the
project does not model (DeepSeek-V3's multi-head latent attention) gets no KV figure.

An FP8 checkpoint on a chip without FP8 compute is not served as FP8 (checks.builtin.fp8_gate):
it is judged at its BF16 size, the size after the offline conversion MindIE makes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from checks.builtin import facts
from checks.builtin.checkpoint import is_fp8
from checks.builtin.hbm_inputs import (
    Deployment,
    Setting,
    Weights,
    deployment,
    estimated,
    mb,
    weights,
)
from checks.context import Context
from checks.model import NO_MODEL, Finding, failed, skipped
from probes.errors import HostError, NotRecorded

if TYPE_CHECKING:
    from probes.checkpoint import ModelConfig, ModelDir
    from probes.npu_smi import ChipRow, NpuInfo

MB = 1024 * 1024  # npu-smi's MB are MiB (64 GB parts print 65536)
# model_type values whose attention caches per-head K and V as modelled here
KV_MODELLED = ("llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe",
               "qwen3_next", "qwen3_5_moe", "qwen3_5_moe_text")

CHECK_RULES: dict[str, dict[str, str]] = {
    "npu.hbm-fit": {
        "no-model": "skip",
        "not-recorded": "skip",
        "model-unreadable": "skip",
        "weights-unknown": "skip",
        "no-npu": "skip",
        "no-hbm-figures": "skip",
        "no-chip-visible": "skip",
        "too-few-chips": "fail",
        "weights-do-not-fit": "fail",
        "kv-pool-does-not-fit": "fail",
        "context-does-not-fit": "fail",
        "kv-not-estimated": "warn",
        "little-headroom": "warn",
        "estimate-only": "warn",
    },
}


# -- KV cache and linear-attention state ---------------------------------------------------------


def attention_layers(config: ModelConfig) -> tuple[int, str]:
    """(layers that keep a KV cache, how that was decided)."""
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


def kv_not_modelled(config: ModelConfig) -> str:
    """Why the KV cache of this architecture is not estimated; "" when it is."""
    kind = config.model_type or config.architecture or "this architecture"
    if "kv_lora_rank" in config.raw:
        return (f"KV not estimated for {kind}: multi-head latent attention caches a compressed "
                "latent per token, not per-head K and V")
    if config.model_type not in KV_MODELLED and config.text_model_type not in KV_MODELLED:
        return f"KV not estimated for {kind}: not an attention this project models"
    return ""


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


def state_bytes(config: ModelConfig) -> int:
    """Linear-attention (Gated DeltaNet) state of one sequence; 0 without such layers."""
    from probes.model_memory import state_bytes_per_sequence
    from probes.model_tensors import InventoryError

    try:
        return state_bytes_per_sequence(config, kv_dtype_bytes(config))
    except InventoryError:
        return 0


def rounded_tokens(tokens: int, block: int) -> int:
    """Tokens of KV actually allocated: whole blocks."""
    return math.ceil(tokens / max(block, 1)) * max(block, 1)


# -- the plan per chip ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """Bytes on the tightest chip of one tensor-parallel group."""

    free_bytes: int  # HBM the deployment has on the tightest chip of the group
    weight_bytes: int  # this chip's share of the weights
    reserve_bytes: int
    kv_bytes_per_token: int  # this chip's share, one sequence; 0 when KV is not modelled
    max_seq_len: int
    batch_size: int
    state_bytes: int = 0  # this chip's share of the linear-attention state of the batch
    block_tokens: int = 1
    kv_cap_bytes: int | None = None  # MindIE npuMemSize

    @property
    def room_bytes(self) -> int:
        """What is left after weights, reserve and state (<0: they do not fit)."""
        return self.free_bytes - self.weight_bytes - self.reserve_bytes - self.state_bytes

    @property
    def kv_room_bytes(self) -> int:
        """What the KV cache may take: the room, or MindIE's npuMemSize when smaller."""
        room = self.room_bytes
        return min(room, self.kv_cap_bytes) if self.kv_cap_bytes is not None else room

    @property
    def kv_tokens(self) -> int:
        return rounded_tokens(self.max_seq_len, self.block_tokens)

    @property
    def kv_bytes(self) -> int:
        return self.kv_bytes_per_token * self.kv_tokens * self.batch_size

    @property
    def kv_allocated_bytes(self) -> int:
        """What the KV cache occupies: npuMemSize when MindIE is told one, else what it needs."""
        return self.kv_cap_bytes if self.kv_cap_bytes is not None else self.kv_bytes

    @property
    def headroom_bytes(self) -> int:
        """HBM left on the chip after everything (<0: something does not fit)."""
        return self.room_bytes - self.kv_allocated_bytes

    @property
    def context_fits(self) -> bool:
        return self.kv_bytes <= self.kv_room_bytes

    @property
    def largest_context(self) -> int:
        """The longest sequence that fits at this batch size, in whole blocks (0: none)."""
        per_step = self.kv_bytes_per_token * self.batch_size
        if self.kv_room_bytes <= 0 or per_step <= 0:
            return 0
        tokens = self.kv_room_bytes // per_step
        return tokens - tokens % max(self.block_tokens, 1)


def weight_share_bytes(weight_bytes: int, chips: int) -> int:
    """One chip's share of the weights split over `chips` (tensor x pipeline parallel)."""
    return math.ceil(weight_bytes / max(chips, 1))


def judge(plan: Plan, warn_free_mb: float) -> str:
    """fail / warn / pass for one plan."""
    if plan.room_bytes < 0 or plan.headroom_bytes < 0 or not plan.context_fits:
        return "fail"
    if plan.headroom_bytes < warn_free_mb * MB:
        return "warn"
    return "pass"


# -- chips ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChipBudget:
    """One chip and the HBM a deployment has on it, and why."""

    chip: ChipRow
    budget_bytes: int
    how: str


def chips_used(chips: Sequence[ChipRow], visible_ids: tuple[int, ...] | None) -> list[ChipRow]:
    """The chips the deployment sees: ASCEND_RT_VISIBLE_DEVICES logical ids are positions in
    npu-smi's table; ids past its end are ignored (cann.environment reports them)."""
    if visible_ids is None:
        return list(chips)
    return [chips[i] for i in visible_ids if 0 <= i < len(chips)]


def free_bytes(chip: ChipRow) -> int | None:
    if chip.hbm_total_mb is None or chip.hbm_used_mb is None:
        return None
    return (chip.hbm_total_mb - chip.hbm_used_mb) * MB


def chip_label(chip: ChipRow) -> str:
    part = "" if chip.chip_id is None else f" chip {chip.chip_id}"
    return f"NPU {chip.npu_id}{part}"


def names(chips: Sequence[ChipRow]) -> str:
    found = sorted({c.name or "unknown" for c in chips})
    return f"{len(chips)} x {'/'.join(found)}"


def _same_chip(chip: ChipRow, npu_id: int, chip_id: int | None) -> bool:
    return chip.npu_id == npu_id and (chip.chip_id is None or chip_id is None
                                      or chip.chip_id == chip_id)


def budget(chip: ChipRow, info: NpuInfo, own_pids: frozenset[int]) -> ChipBudget:
    """A chip the target holds: its total less what other processes hold on it. Any other:
    what is free now."""
    total = (chip.hbm_total_mb or 0) * MB
    rows = [p for p in info.processes if _same_chip(chip, p.npu_id, p.chip_id)]
    if own_pids and any(p.pid in own_pids for p in rows):
        others_mb = sum(p.memory_mb or 0 for p in rows if p.pid not in own_pids)
        return ChipBudget(chip, total - others_mb * MB,
                          f"{chip.hbm_total_mb:,} MB total less {others_mb:,} MB other processes "
                          f"hold (the target's own use is its plan)")
    return ChipBudget(chip, free_bytes(chip) or 0,
                      f"{(chip.hbm_total_mb or 0) - (chip.hbm_used_mb or 0):,} MB free now "
                      f"({chip.hbm_used_mb:,} / {chip.hbm_total_mb:,} MB used)")


def group(ctx: Context, info: NpuInfo, visible: list[ChipRow],
          size: int) -> tuple[list[ChipBudget], str]:
    """The chips of one deployment: those the target holds, else the `size` visible chips
    with the most HBM free (the best placement), and how they were chosen."""
    own = frozenset(use.pid for use in ctx.target.npus)
    held = [c for c in visible if any(_same_chip(c, u.npu_id, u.chip_id)
                                      for u in ctx.target.npus)]
    if held:
        return ([budget(c, info, own) for c in held],
                f"the {len(held)} chip(s) the target holds")
    ranked = sorted((budget(c, info, own) for c in visible), key=lambda b: -b.budget_bytes)
    return ranked[:size], (f"the {min(size, len(ranked))} of {len(visible)} visible chip(s) "
                           "with the most free HBM")


# -- rendering ------------------------------------------------------------------------------------


def tokens(n: int) -> str:
    return f"{n:,} tokens"


# -- the check ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Model:
    """What the check knows of the model: config, weights (or why not), and the reading."""

    config: ModelConfig
    weights: Weights | str
    path: str
    read_error: str = ""  # why the weights files could not be read at all
    fp8: bool = False


def read_model(ctx: Context) -> Model | Finding:
    """The model's config and weights; with config.json alone, an estimate."""
    if ctx.model_dir is None:
        return skipped(NO_MODEL, rules=("no-model",))
    from checks.builtin.checkpoint import model_dir
    from probes.checkpoint import CheckpointError, read_config

    path = str(ctx.model_dir)
    try:
        model: ModelDir = model_dir(ctx)
        return Model(model.config, weights(model), path, fp8=is_fp8(model))
    except NotRecorded as exc:
        return skipped(f"the model directory was not recorded ({exc.path})",
                       rules=("not-recorded",))
    except (CheckpointError, HostError) as exc:
        error = str(exc)
    try:
        config = read_config(ctx.host, path)
    except (CheckpointError, HostError) as exc:
        return skipped(f"cannot read the checkpoint: {error}; nor config.json: {exc}",
                       rules=("model-unreadable",))
    return Model(config, estimated(config, f"no weights read ({error})"), path, error,
                 config.quant.is_fp8)


def hbm_fit(ctx: Context) -> Finding:
    found = read_model(ctx)
    if isinstance(found, Finding):
        return found
    if isinstance(found.weights, str):
        return skipped(found.weights, rules=("weights-unknown",))
    settings = deployment(ctx)
    reading = facts.npu(ctx)
    info = None if reading.is_error else reading.info
    if info is None or not info.chips:
        why = f"no NPU: {reading.error_text}" if reading.is_error else \
            "no NPU: npu-smi printed no chips"
        return skipped(why, *need_lines(ctx, found, settings), rules=("no-npu",))
    return _on_chips(ctx, found, settings, info)


def _on_chips(ctx: Context, model: Model, settings: Deployment, info: NpuInfo) -> Finding:
    visible_ids = facts.environment(ctx).visible_devices
    visible = chips_used(info.chips, visible_ids.ids)
    if not visible:
        return skipped(f"ASCEND_RT_VISIBLE_DEVICES={visible_ids.raw!r} leaves no chip visible "
                       "(see the environment checks)", rules=("no-chip-visible",))
    if any(free_bytes(c) is None for c in visible):
        return skipped("no HBM figures in npu-smi", f"chips: {names(visible)} (310P and 310 "
                       "print none)", rules=("no-hbm-figures",))
    chosen, how = group(ctx, info, visible, settings.chips)
    if len(chosen) < settings.chips:
        return failed(f"tensor parallel {settings.tp.value} x pipeline parallel "
                      f"{settings.pp.value} needs {settings.chips} chips; {len(visible)} "
                      f"visible ({names(visible)})",
                      "use fewer chips per instance or make more visible "
                      "(ASCEND_RT_VISIBLE_DEVICES)", *_setting_lines(settings),
                      rules=("too-few-chips",))
    from checks.builtin.hbm_verdict import verdict

    return verdict(ctx, model, settings, chosen, how, visible)


def need_lines(ctx: Context, model: Model, settings: Deployment) -> tuple[str, ...]:
    """Without chips to judge against: what the model needs per chip of the group (CI)."""
    from checks.builtin.hbm_verdict import plan_for

    assert not isinstance(model.weights, str)
    weights_bytes = model.weights.stored_bytes
    plan = plan_for(ctx, model, settings, weights_bytes, free=0)
    kv = "" if kv_not_modelled(model.config) else (
        f" + {mb(plan.kv_bytes)} KV ({plan.kv_tokens:,} tokens x batch {plan.batch_size}, "
        f"{plan.kv_bytes_per_token:,} bytes/token)")
    state = f" + {mb(plan.state_bytes)} linear-attention state" if plan.state_bytes else ""
    total = plan.weight_bytes + plan.reserve_bytes + plan.state_bytes + (0 if not kv else
                                                                          plan.kv_bytes)
    lines = [f"needed per chip at tensor parallel {settings.tp.value} ({settings.tp.source}): "
             f"{mb(plan.weight_bytes)} weights ({model.weights.source}) + "
             f"{mb(plan.reserve_bytes)} reserve{kv}{state} = {mb(total)}"]
    if model.fp8:
        lines.append(f"FP8 weights at their BF16 size (on a chip without FP8 compute): "
                     f"{mb(model.weights.dequantised_bytes)} instead of "
                     f"{mb(model.weights.stored_bytes)}")
    lines += [*_setting_lines(settings), *engine_plan_lines(model.config, plan.max_seq_len,
                                                            plan.batch_size)]
    return tuple(lines)


def _setting_lines(settings: Deployment) -> list[str]:
    return [f"note: {note}" for note in settings.notes]


def engine_plan_lines(config: ModelConfig, max_seq_len: int, batch: int) -> list[str]:
    """This project's engine plan for the language model (probes.model_memory, the lines
    `python -m engine.plan` prints): weights per FP8 mode, KV and linear-attention state."""
    from probes.model_config import FAMILIES
    from probes.model_memory import plan_lines, plan_memory
    from probes.model_tensors import InventoryError

    if config.family not in FAMILIES:
        kind = config.model_type or config.architecture or "this architecture"
        return [f"engine plan: not computed ({kind} is not an architecture this project's "
                "engine runs)"]
    try:
        plan = plan_memory(config, max_seq_len, batch=batch)
    except InventoryError as exc:
        return [f"engine plan: not computed ({exc})"]
    return [f"engine plan: {line}" for line in plan_lines(plan)]


def setting_text(setting: Setting[int]) -> str:
    return f"{setting.value:,} ({setting.origin or setting.source})"
