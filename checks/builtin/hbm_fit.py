"""npu.hbm-fit: will the weights, the KV cache, the linear-attention state and a reserve fit in
the HBM of each chip of a deployment, planned the way its engine plans it?

Inputs, each said with its source (checks.builtin.hbm_inputs): the weights from the
safetensors headers (no tensor data is read), the index's `metadata.total_size` when shards are
missing, or an estimate from config.json (said to be one); the tensor-, pipeline- and
data-parallel sizes, expert parallelism and the context from the target's command line, --tp
or the policy (a vLLM target without --max-model-len is sized for the model's own maximum:
checks.builtin.hbm_engine); the memory of each chip from `npu-smi info` (HBM-Usage, or 310P's
Memory-Usage). Inside a container the chips its ASCEND_RT_VISIBLE_DEVICES names are found
through its /dev/davinci<N> nodes (probes.target.devices), or not judged. Usable memory is
measured, never assumed, the same way whether the target runs or not (checks.builtin.hbm_chips):
a 64 GB part shows about 61 GiB to torch_npu (vllm-project/vllm-ascend#1670) because 3-4 GB
are used at idle (vllm-project/vllm-ascend#975).
The engine plans within its share of that (vLLM --gpu-memory-utilization, MindIE
NPU_MEMORY_FRACTION, or their defaults); what the share leaves outside holds graph capture and
HCCL buffers (a warning when small). Host RAM is judged by vLLM's own swap-space and CPU-offload
rules (checks.builtin.hbm_host).

KV per token = full-attention layers x 2 x KV heads x head_dim x bytes (KV heads split over the
tensor-parallel chips, one per chip at least; probes.model.memory.kv_state_size, the arithmetic
this project's engine sizes its cache with), allocated in blocks of `hbm_fit.kv_block_tokens`
(vllm-ascend's 128: vllm-project/vllm-ascend vllm_ascend/utils.py refresh_block_size @
182b75ea84ff). Hybrids (Qwen3-Next, Qwen3.5/3.6) keep KV only on their full-attention layers
and a fixed-size Gated DeltaNet state per sequence (probes.model.memory). Multi-head latent
attention (DeepSeek-V3) keeps one latent of kv_lora_rank + qk_rope_head_dim values per token
and layer, not split across chips, as vLLM sizes it (the same function). A config without
the shape gets no KV figure and says so.

An FP8 checkpoint on a chip without FP8 compute is not served as FP8 (checks.builtin.fp8_gate):
it is judged at its BF16 size, the size after the offline conversion MindIE makes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from checks.builtin import facts
from checks.builtin.checkpoint import is_fp8, model_dir
from checks.builtin.hbm_chips import chips_used, free_bytes, group, names
from checks.builtin.hbm_inputs import (
    Deployment,
    Model,
    deployment,
    estimated,
    for_model,
    mb,
    weights,
)
from checks.builtin.hbm_plan import engine_plan_lines
from checks.context import Context
from checks.model import NO_MODEL, Finding, failed, skipped
from probes.errors import HostError, NotRecorded

if TYPE_CHECKING:
    from probes.model.reader import ModelDir
    from probes.npu_smi import NpuInfo

CHECK_RULES: dict[str, dict[str, str]] = {
    "npu.hbm-fit": {
        "no-model": "skip",
        "not-recorded": "skip",
        "model-unreadable": "skip",
        "weights-unknown": "skip",
        "no-npu": "skip",
        "no-hbm-figures": "skip",
        "no-chip-visible": "skip",
        "container-chips-unmapped": "skip",
        "too-few-chips": "fail",
        "weights-do-not-fit": "fail",
        "kv-pool-does-not-fit": "fail",
        "context-does-not-fit": "fail",
        "kv-not-estimated": "warn",
        "little-headroom": "warn",
        "little-room-outside-pool": "warn",
        "host-ram-swap": "warn/fail",  # checks.builtin.hbm_host
        "host-ram-offload": "fail",
        "estimate-only": "warn",
    },
}


# -- the check ------------------------------------------------------------------------------------


def read_model(ctx: Context) -> Model | Finding:
    """The model's config and weights; with config.json alone, an estimate."""
    if ctx.model_dir is None:
        return skipped(NO_MODEL, rules=("no-model",))
    from probes.model.reader import CheckpointError, read_config

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
    settings = for_model(deployment(ctx), found.config)
    reading = facts.npu(ctx)
    info = None if reading.is_error else reading.info
    if info is None or not info.chips:
        why = f"no NPU: {reading.error_text}" if reading.is_error else \
            "no NPU: npu-smi printed no chips"
        return skipped(why, *need_lines(ctx, found, settings), rules=("no-npu",))
    return _on_chips(ctx, found, settings, info)


def _on_chips(ctx: Context, model: Model, settings: Deployment, info: NpuInfo) -> Finding:
    from probes.target.devices import container_rows, in_container

    visible_ids = facts.environment(ctx).visible_devices
    mapped = ""
    if in_container(ctx.target.process):
        rows, mapped = container_rows(ctx.host, visible_ids.ids, visible_ids.raw,
                                      [c.phy_id for c in info.chips])
        if rows is None:
            return skipped(mapped, *need_lines(ctx, model, settings),
                           rules=("container-chips-unmapped",))
        visible = [info.chips[i] for i in rows]
    else:
        visible = chips_used(info.chips, visible_ids.ids)
    if not visible:
        return skipped(f"ASCEND_RT_VISIBLE_DEVICES={visible_ids.raw!r} leaves no chip visible "
                       "(see the environment checks)", rules=("no-chip-visible",))
    if any(free_bytes(c) is None for c in visible):
        return skipped("no HBM or Memory-Usage figures in npu-smi", f"chips: {names(visible)}",
                       rules=("no-hbm-figures",))
    chosen, how = group(ctx, info, visible, settings.chips)
    if len(chosen) < settings.chips:
        dp = f" x data parallel {settings.dp.value}" if settings.dp.value > 1 else ""
        return failed(f"tensor parallel {settings.tp.value} x pipeline parallel "
                      f"{settings.pp.value}{dp} needs {settings.chips} chips; {len(visible)} "
                      f"visible ({names(visible)})",
                      "use fewer chips per instance or make more visible "
                      "(ASCEND_RT_VISIBLE_DEVICES)", *_setting_lines(settings),
                      rules=("too-few-chips",))
    from checks.builtin.hbm_host import host_ram, with_host
    from checks.builtin.hbm_verdict import verdict

    how = f"{how} ({mapped})" if mapped else how
    return with_host(verdict(ctx, model, settings, chosen, how, visible), host_ram(ctx, settings))


def need_lines(ctx: Context, model: Model, settings: Deployment) -> tuple[str, ...]:
    """Without chips to judge against: what the model needs per chip of the group (CI)."""
    from checks.builtin.hbm_verdict import kv_note, plan_for

    assert not isinstance(model.weights, str)
    weights_bytes = model.weights.stored_bytes
    plan = plan_for(ctx, model, settings, weights_bytes, free=0)
    kv = "" if kv_note(model.config) else (
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
