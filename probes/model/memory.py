"""One memory arithmetic for the engine's plan and the doctor's npu.hbm-fit.

What a sequence costs besides the weights:
- KV cache: only full-attention layers keep one; per token K and V of every KV head:
  `layers x 2 x kv_heads x head_dim x bytes` (int8: one byte per value plus a float32 scale
  per token and head).
- linear-attention (Gated DeltaNet) layers keep a fixed-size state per sequence instead: the
  causal conv's last `kernel - 1` inputs of its conv_dim channels (compute dtype) and the
  recurrent state `value_heads x key_dim x value_dim` in float32.

Weights per FP8 mode: `dequantize` widens every FP8 weight to the compute dtype at load;
`resident` keeps FP8 bytes (1 per element) plus float32 scales and only the rest in the compute
dtype. All arithmetic is on Python ints from the config (or the safetensors headers), so a
config claiming 10**12 experts is priced, never allocated.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from probes.model.config import ConfigFacts, QuantFormat
from probes.model.formats import FP8_MODES
from probes.model.tensors import (
    TensorSpec,
    deltanet_shape,
    global_tensors,
    layer_kind_counts,
    layer_tensors,
    require_known_family,
)

DTYPE_BYTES: dict[str, int] = {
    "bfloat16": 2, "bf16": 2, "float16": 2, "fp16": 2, "half": 2,
    "float32": 4, "fp32": 4, "float": 4,
}
DEFAULT_DTYPE_BYTES = 2  # BF16 when a config is silent
SCALE_BYTES = 4  # resident FP8 scales are kept in float32
INT8_SCALE_BYTES = 4  # one float32 scale per (token, KV head) row of an int8 cache
RECURRENT_STATE_BYTES = 4  # the DeltaNet state is float32 (mamba_ssm_dtype)
# Room the engine leaves free for activations, logits and the allocator.
HEADROOM_FRACTION = 0.10
GIB = 2**30


def dtype_bytes(name: str | None) -> int:
    return DTYPE_BYTES.get(str(name or "").lower(), DEFAULT_DTYPE_BYTES)


@dataclass(frozen=True)
class WeightElements:
    """Elements of the weights by how they are stored."""

    fp8: int = 0  # FP8 weights (1 byte each when resident)
    scales: int = 0  # their scale elements
    plain: int = 0  # everything else (in the compute dtype once loaded)

    def __add__(self, other: WeightElements) -> WeightElements:
        return WeightElements(self.fp8 + other.fp8, self.scales + other.scales,
                              self.plain + other.plain)

    def times(self, n: int) -> WeightElements:
        return WeightElements(self.fp8 * n, self.scales * n, self.plain * n)

    def bytes(self, mode: str, compute_bytes: int) -> int:
        """Resident bytes once loaded in `mode` ("dequantize" or "resident")."""
        if mode == "resident":
            return self.fp8 + self.scales * SCALE_BYTES + self.plain * compute_bytes
        return (self.fp8 + self.plain) * compute_bytes


def scale_elements(shape: tuple[int, ...], quant: QuantFormat) -> int:
    """Scale elements of one FP8 weight [.., out, in] under the checkpoint's scheme."""
    *lead, rows, cols = shape if len(shape) >= 2 else (1, *shape)
    count = math.prod(lead)
    if quant.scheme == "block" and quant.block_size:
        return count * math.ceil(rows / quant.block_size[0]) * math.ceil(cols / quant.block_size[1])
    if quant.scheme == "channel":
        return count * rows
    return count


def _spec_elements(spec: TensorSpec, config: ConfigFacts, layer_prefix: str) -> WeightElements:
    module = (layer_prefix + spec.name).removesuffix(".weight")
    fp8 = config.quant.is_fp8 and spec.quantisable and not config.quant.skips(module)
    if fp8:
        return WeightElements(fp8=spec.numel, scales=scale_elements(spec.shape, config.quant)
                              ).times(spec.copies)
    return WeightElements(plain=spec.numel * spec.copies)


def config_weight_elements(config: ConfigFacts) -> WeightElements:
    """The language model's weights as its config implies them (vision towers and MTP heads
    are not loaded, so not counted)."""
    total = WeightElements()
    for spec in global_tensors(config):
        total = total + _spec_elements(spec, config, "")
    for kind, layers in layer_kind_counts(config).items():
        per_layer = WeightElements()
        for spec in layer_tensors(config, kind):
            per_layer = per_layer + _spec_elements(spec, config, "layers.")
        total = total + per_layer.times(layers)
    return total


# -- per sequence -----------------------------------------------------------------------------


def kv_bytes_per_token(config: ConfigFacts, compute_bytes: int, int8: bool = False) -> int:
    """K and V of one token on every full-attention layer (0 when the config lacks the shape)."""
    heads = config.num_key_value_heads or config.num_attention_heads or 0
    head_dim = config.head_dim or 0
    per_layer = 2 * heads * (head_dim + INT8_SCALE_BYTES if int8 else head_dim * compute_bytes)
    return config.full_attention_layers() * per_layer


def state_bytes_per_sequence(config: ConfigFacts, compute_bytes: int) -> int:
    """Conv state plus float32 recurrent state of every linear-attention layer."""
    linear = (config.num_hidden_layers or 0) - config.full_attention_layers()
    if linear <= 0:
        return 0
    d = deltanet_shape(config)
    conv = d.conv_dim * (d.kernel - 1) * compute_bytes
    recurrent = d.value_heads * d.key_dim * d.value_dim * RECURRENT_STATE_BYTES
    return linear * (conv + recurrent)


# -- the plan ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class MemoryPlan:
    """What one model needs on one device for `batch` sequences of `max_seq_len` tokens."""

    weights: WeightElements
    is_fp8: bool
    compute_bytes: int
    kv_bytes_per_token: int
    state_bytes_per_sequence: int
    max_seq_len: int
    batch: int = 1
    full_attention_layers: int = 0
    linear_attention_layers: int = 0

    def weight_bytes(self, mode: str = "dequantize") -> int:
        return self.weights.bytes(mode, self.compute_bytes)

    @property
    def kv_bytes(self) -> int:
        return self.kv_bytes_per_token * self.max_seq_len * self.batch

    @property
    def state_bytes(self) -> int:
        return self.state_bytes_per_sequence * self.batch

    @property
    def sequence_bytes(self) -> int:
        """KV cache plus linear-attention state for the whole batch."""
        return self.kv_bytes + self.state_bytes

    def total_bytes(self, mode: str = "dequantize") -> int:
        return self.weight_bytes(mode) + self.sequence_bytes

    def fits(self, device_bytes: int, mode: str = "dequantize") -> bool:
        """Within the device memory less the engine's headroom."""
        return self.total_bytes(mode) <= usable_bytes(device_bytes)


def usable_bytes(device_bytes: int) -> int:
    return int(device_bytes * (1 - HEADROOM_FRACTION))


def plan_memory(config: ConfigFacts, max_seq_len: int, compute_bytes: int | None = None,
                batch: int = 1, int8_kv: bool = False,
                weights: WeightElements | None = None) -> MemoryPlan:
    """The plan from the config (or from measured `weights`, e.g. the headers)."""
    require_known_family(config)
    compute = compute_bytes or dtype_bytes(config.dtype)
    layers = config.num_hidden_layers or 0
    full = config.full_attention_layers()
    return MemoryPlan(
        weights=weights if weights is not None else config_weight_elements(config),
        is_fp8=config.quant.is_fp8, compute_bytes=compute,
        kv_bytes_per_token=kv_bytes_per_token(config, compute, int8_kv),
        state_bytes_per_sequence=state_bytes_per_sequence(config, compute),
        max_seq_len=max_seq_len, batch=batch, full_attention_layers=full,
        linear_attention_layers=layers - full)


# -- words ------------------------------------------------------------------------------------


def human_bytes(n_bytes: int) -> str:
    """Bytes with a binary unit a person reads at once: 4.1 TiB, 22.0 GiB, 61.4 MiB."""
    value = float(n_bytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(value) < 1024 or unit == "PiB":
            return f"{n_bytes:,} B" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def plan_lines(plan: MemoryPlan, device_bytes: int | None = None) -> list[str]:
    """The plan as lines a person reads (the engine's `python -m engine.tools.plan` and the doctor's
    npu.hbm-fit print these same lines)."""
    modes = FP8_MODES if plan.is_fp8 else ("dequantize",)
    lines = []
    for mode in modes:
        label = {"dequantize": " (fp8=dequantize: FP8 widened at load)",
                 "resident": " (fp8=resident: FP8 bytes + float32 scales)"}[mode] \
            if plan.is_fp8 else ""
        lines.append(f"weights{label}: {plan.weight_bytes(mode):,} bytes "
                     f"({human_bytes(plan.weight_bytes(mode))})")
    lines.append(f"KV cache: {plan.kv_bytes_per_token:,} bytes/token on "
                 f"{plan.full_attention_layers} full-attention layers; "
                 f"{plan.kv_bytes:,} bytes for {plan.max_seq_len:,} tokens x batch {plan.batch}")
    if plan.linear_attention_layers:
        lines.append(f"linear-attention state: {plan.state_bytes_per_sequence:,} bytes/sequence "
                     f"on {plan.linear_attention_layers} layers (conv + float32 recurrent)")
    lines.append(f"KV + state: {plan.sequence_bytes:,} bytes ({human_bytes(plan.sequence_bytes)})")
    if device_bytes is not None:
        for mode in modes:
            verdict = "fits" if plan.fits(device_bytes, mode) else "does not fit"
            usable = human_bytes(usable_bytes(device_bytes))
            lines.append(f"{mode if plan.is_fp8 else 'total'}: "
                         f"{human_bytes(plan.total_bytes(mode))} of {human_bytes(device_bytes)} "
                         f"({usable} usable after {HEADROOM_FRACTION:.0%} headroom): {verdict}")
    return lines
