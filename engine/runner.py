"""Device choice and the memory plan: what the weights and the cache need, checked before
anything is allocated (the arithmetic is probes.model.memory, shared with the doctor)."""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Mapping
from typing import Any

import torch

from engine.cache import CacheShape, KVCache, StateShape, element_bytes
from engine.cpu_decode import DecodeSteps
from engine.errors import EngineError, OutOfMemoryPlan
from engine.model import Decoder
from engine.models import FAMILIES
from engine.ops import in_use, select_fused_ops
from engine.options import DEVICES
from probes.model.config import FULL_ATTENTION
from probes.model.memory import (
    HEADROOM_FRACTION,
    KvStateSize,
    human_bytes,
    kv_state_size,
    plan_memory,
)
from probes.model.tensors import InventoryError

DTYPES: dict[str, torch.dtype] = {
    "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
    "float16": torch.float16, "fp16": torch.float16, "half": torch.float16,
    "float32": torch.float32, "fp32": torch.float32, "float": torch.float32,
}


def parse_dtype(name: str | torch.dtype) -> torch.dtype:
    if isinstance(name, torch.dtype):
        return name
    if name not in DTYPES:
        raise EngineError(f"dtype {name!r} is not supported; use one of "
                          f"{', '.join(sorted(set(DTYPES)))}")
    return DTYPES[name]


def npu_available() -> bool:
    """torch_npu imports and sees at least one device."""
    try:
        importlib.import_module("torch_npu")
    except Exception:
        return False
    npu = getattr(torch, "npu", None)
    return bool(npu is not None and npu.is_available() and npu.device_count() > 0)


def auto_device_type() -> str:
    """"npu" when torch_npu sees a device, then "cuda", then "cpu"."""
    if npu_available():
        return "npu"
    return "cuda" if torch.cuda.is_available() else "cpu"


def pick_device(device: str) -> torch.device:
    """The torch device for "auto", "npu", "cuda", "cpu" (with an optional ":index")."""
    if device == "auto":
        kind = auto_device_type()
        return torch.device(kind) if kind == "cpu" else torch.device(kind, 0)
    kind = device.split(":")[0]
    if kind not in DEVICES:
        raise EngineError(f"device {device!r} is not supported; use auto, npu, cuda or cpu")
    if kind == "npu" and not npu_available():
        raise EngineError("device 'npu' requested but torch_npu is missing or sees no device; "
                          "run `ascend-doctor` to find out why")
    if kind == "cuda" and not torch.cuda.is_available():
        raise EngineError("device 'cuda' requested but torch sees no CUDA device")
    return torch.device(device)


def available_memory_bytes(device: torch.device) -> int:
    """Free memory on the device now (host RAM available for cpu)."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    if device.type == "npu":
        return int(torch.npu.mem_get_info(device)[0])  # type: ignore[attr-defined]
    import psutil

    return int(psutil.virtual_memory().available)


def cache_size(config: Any, dtype: torch.dtype, int8: bool) -> KvStateSize:
    """What the cache holds per token and per sequence: probes.model.memory's one arithmetic
    on the config's facts (the numbers the doctor's npu.hbm-fit and engine.tools.plan use)."""
    return kv_state_size(config.facts, element_bytes(dtype), int8=int8)


def rotary_bytes_per_token(config: Any, dtype: torch.dtype) -> int:
    """The rotary cos/sin tables the decoder keeps per position of max_seq_len."""
    return 2 * config.head_dim * element_bytes(dtype)


def plan_bytes(size: KvStateSize, rotary_per_token: int, max_seq_len: int) -> int:
    """What the runner allocates for the cache: KV (full-attention layers) plus the rotary
    tables per max_seq_len, plus the fixed linear-attention state."""
    return size.bytes(max_seq_len) + rotary_per_token * max_seq_len


def largest_fitting_seq_len(size: KvStateSize, rotary_per_token: int, budget_bytes: int) -> int:
    per_token = size.kv_bytes_per_token + rotary_per_token
    return max(0, (budget_bytes - size.state_bytes_per_sequence) // per_token)


def check_kv_plan(size: KvStateSize, rotary_per_token: int, max_seq_len: int,
                  device: torch.device, free_bytes: int | None = None) -> int:
    """Bytes the cache needs; OutOfMemoryPlan (with the largest max_seq_len) if it won't fit."""
    need = plan_bytes(size, rotary_per_token, max_seq_len)
    free = available_memory_bytes(device) if free_bytes is None else free_bytes
    budget = int(free * (1 - HEADROOM_FRACTION))
    if need > budget:
        fits = largest_fitting_seq_len(size, rotary_per_token, budget)
        raise OutOfMemoryPlan(
            f"KV cache for max_seq_len={max_seq_len} needs {need / 2**20:.1f} MiB but "
            f"only {budget / 2**20:.1f} MiB of {device} memory is usable "
            f"({free / 2**20:.1f} MiB free, {HEADROOM_FRACTION:.0%} kept as headroom); "
            f"the largest max_seq_len that fits is {fits}"
            + ("" if size.int8 else " (kv_cache='int8' needs about half)"))
    return need


def check_cache_plan(config: Any, max_seq_len: int, dtype: torch.dtype, int8: bool,
                     device: torch.device, free_bytes: int | None = None) -> int:
    """check_kv_plan for this config's cache."""
    return check_kv_plan(cache_size(config, dtype, int8), rotary_bytes_per_token(config, dtype),
                         max_seq_len, device, free_bytes)


def cache_shape(config: Any, max_seq_len: int) -> CacheShape:
    """KV on the full-attention layers only (all layers of a non-hybrid model)."""
    layers = config.full_attention_layers or config.num_layers
    return CacheShape(layers, 1, max_seq_len, config.num_kv_heads, config.head_dim)


def state_shape(config: Any) -> StateShape | None:
    """The linear-attention layers' state, None when the model has none."""
    if config.linear is None or config.full_attention_layers >= config.num_layers:
        return None
    d = config.linear
    return StateShape(config.num_layers - config.full_attention_layers, 1, d.conv_dim,
                      d.kernel - 1, d.value_heads, d.key_dim, d.value_dim)


def check_model_plan(config: Any, max_seq_len: int, dtype: torch.dtype, fp8: str, int8: bool,
                     device: torch.device, free_bytes: int | None = None,
                     weights_only: bool = False) -> int:
    """Refuse a model whose weights (+ cache), as its config implies them, exceed the device
    memory -- before a byte is allocated or a tensor read ("needs 4.1 TiB, 22.0 GiB
    available"). Returns the planned bytes."""
    facts = getattr(config, "facts", None)
    if facts is None:
        return 0
    try:
        plan = plan_memory(facts, max_seq_len, element_bytes(dtype), int8_kv=int8)
    except InventoryError:
        return 0  # the config resolution already named the missing field
    need = plan.weight_bytes(fp8) if weights_only else plan.total_bytes(fp8)
    free = available_memory_bytes(device) if free_bytes is None else free_bytes
    usable = int(free * (1 - HEADROOM_FRACTION))
    if need > usable:
        raise OutOfMemoryPlan(
            f"{facts.source}: this model needs {human_bytes(need)} (weights "
            f"{human_bytes(plan.weight_bytes(fp8))} as {str(dtype).removeprefix('torch.')}"
            f"{', fp8=' + fp8 if plan.is_fp8 else ''}, KV + state "
            f"{human_bytes(plan.sequence_bytes)} for max_seq_len {max_seq_len:,}) but "
            f"{human_bytes(usable)} of {device} memory is usable ({human_bytes(free)} free, "
            f"{HEADROOM_FRACTION:.0%} kept as headroom); check config.json, or use a "
            "smaller model, fp8='resident', a lower max_seq_len or a larger device")
    return need


def weight_bytes(weights: Mapping[str, Any]) -> int:
    """Resident bytes of the weights (tied tensors counted once; FP8 bytes plus scales)."""
    seen: set[int] = set()
    total = 0
    for value in weights.values():
        if id(value) in seen:
            continue
        seen.add(id(value))
        total += int(value.numel() * value.element_size()) if isinstance(value, torch.Tensor) \
            else int(value.nbytes)
    return total


class ModelRunner:
    """Owns the device memory: the model's weights, the KV cache and the admitted fused ops."""

    def __init__(self, config: Any, weights: Mapping[str, Any], device: torch.device,
                 dtype: torch.dtype, max_seq_len: int, int8_kv: bool = False,
                 free_bytes: int | None = None) -> None:
        self.device, self.dtype, self.max_seq_len = device, dtype, max_seq_len
        self.weight_bytes = weight_bytes(weights)
        check_cache_plan(config, max_seq_len, dtype, int8_kv, device, free_bytes)
        shape, state = cache_shape(config, max_seq_len), state_shape(config)
        family = FAMILIES[config.architecture]
        self.fused = in_use(select_fused_ops(device, dtype), family.norm_offset)
        self.model = Decoder(config, weights, max_seq_len, device, dtype, family,
                             self.fused.rms_norm,
                             kernel_layers="cpu_kernel_rms_norm" in self.fused.active)
        self.weight_bytes += self.model.relayout_bytes
        kinds = [config.layer_kind(i) == FULL_ATTENTION for i in range(config.num_layers)]
        self.cache = KVCache.allocate(shape, dtype, device, int8_kv, state, kinds)
        self._token = torch.zeros(1, 1, dtype=torch.int64, device=device)
        self._decode_step: Callable[[], contextlib.AbstractContextManager[object]] = (
            DecodeSteps(dtype) if device.type == "cpu" else contextlib.nullcontext)

    @torch.inference_mode()
    def prefill(self, ids: list[int], last_only: bool = True) -> torch.Tensor:
        """float32 logits [T or 1, vocab] for the prompt, from a reset cache."""
        batch = torch.tensor([ids], dtype=torch.int64, device=self.device)
        return self.model.prefill(batch, self.cache, last_only)[0]

    @torch.inference_mode()
    def decode(self, token_id: int) -> torch.Tensor:
        """float32 logits [vocab] for the token at the next cache position."""
        self._token.fill_(token_id)
        with self._decode_step():  # the CPU's decode fast path (engine.cpu_decode)
            return self.model.decode(self._token, self.cache)[0]

    @property
    def positions_left(self) -> int:
        return self.max_seq_len - self.cache.tokens_used
