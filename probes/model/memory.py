"""One memory arithmetic for the engine (its cache sizing and its plan) and the doctor's
npu.hbm-fit.

What a sequence costs besides the weights is `kv_state_size`, the one home of that arithmetic:
- KV cache: only full-attention layers keep one; per token K and V of every KV head:
  `layers x 2 x kv_heads x head_dim x bytes` (int8: one byte per value plus a float32 scale
  per token and head); multi-head latent attention one latent per token and layer.
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
    InventoryError,
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

KV = "kv"  # per-head keys and values on every full-attention layer
MLA = "mla"  # one compressed latent per token and layer (multi-head latent attention)
NO_KV = "none"  # the config does not give the shape
# Where MLA's sizing comes from, for the lines that print an MLA figure.
MLA_SOURCE = ("vllm-project/vllm vllm/v1/kv_cache_interface.py MLAAttentionSpec @ bc8282e61df2, "
              "vllm/transformers_utils/model_arch_config_convertor.py get_head_size @ "
              "00bb6f59a0c7")


@dataclass(frozen=True)
class KvStateSize:
    """What a sequence keeps besides the weights, on one chip: KV per token on the layers that
    keep one, and a fixed state per sequence on the linear-attention layers."""

    kind: str  # KV, MLA or NO_KV
    full_attention_layers: int
    linear_attention_layers: int
    kv_bytes_per_token_per_layer: int
    conv_state_bytes_per_layer: int = 0
    recurrent_state_bytes_per_layer: int = 0
    int8: bool = False
    note: str = ""  # why KV is not sized (kind NO_KV)
    state_note: str = ""  # why the linear-attention state is not sized ("" when it is)
    kv_heads: int = 0  # the model's, before a tensor-parallel split (MLA: its one latent)
    head_dim: int = 0  # values per head (MLA: kv_lora_rank + qk_rope_head_dim)
    value_bytes: int = 0  # bytes per cached value (int8: 1, plus the scales)

    @property
    def kv_bytes_per_token(self) -> int:
        return self.full_attention_layers * self.kv_bytes_per_token_per_layer

    @property
    def state_bytes_per_sequence(self) -> int:
        return self.linear_attention_layers * (self.conv_state_bytes_per_layer
                                               + self.recurrent_state_bytes_per_layer)

    def kv_bytes(self, tokens: int, sequences: int = 1) -> int:
        return self.kv_bytes_per_token * tokens * sequences

    def bytes(self, tokens: int, sequences: int = 1) -> int:
        """KV for `tokens` per sequence plus the state, for `sequences` sequences."""
        return self.kv_bytes(tokens, sequences) + self.state_bytes_per_sequence * sequences


def kv_state_size(config: ConfigFacts, kv_dtype_bytes: int, *, int8: bool = False,
                  tp: int = 1) -> KvStateSize:
    """The one KV/state arithmetic: this project's engine sizes its cache with it, the engine's
    plan prints it and npu.hbm-fit judges it.

    Per-head KV: each of the full-attention layers keeps K and V of its KV heads,
    `2 x kv_heads x head_dim x kv_dtype_bytes` per token (int8: one byte per value plus a
    float32 scale per token and head). Under tensor parallelism each chip keeps
    ceil(kv_heads / tp) heads: split, and replicated once there are more chips than heads.
    MLA (a config with `kv_lora_rank`): one latent of `kv_lora_rank + qk_rope_head_dim` values
    per token and layer, no separate K and V, the same on every tensor-parallel chip -- vLLM
    sizes it so (head size: vllm-project/vllm
    vllm/transformers_utils/model_arch_config_convertor.py `get_head_size` @ 00bb6f59a0c7;
    one KV head and no factor 2: vllm/v1/kv_cache_interface.py `MLAAttentionSpec` @
    bc8282e61df2). Linear-attention (Gated DeltaNet) layers keep the causal conv's last
    `kernel - 1` inputs of its conv_dim channels (kv_dtype_bytes, the compute dtype) and the
    float32 recurrent state `value_heads x key_dim x value_dim`."""
    layers = config.num_hidden_layers or 0
    full = config.full_attention_layers()
    if "kv_lora_rank" in config.raw:
        return _mla_size(config, layers, kv_dtype_bytes)
    conv, recurrent, state_note = _state_per_layer(config, kv_dtype_bytes) if layers > full \
        else (0, 0, "")
    heads = config.num_key_value_heads or config.num_attention_heads
    head_dim = config.head_dim
    if head_dim is None and config.hidden_size and config.num_attention_heads:
        head_dim = config.hidden_size // config.num_attention_heads
    if not full or not heads or not head_dim:
        return KvStateSize(NO_KV, full, layers - full, 0, conv, recurrent, int8,
                           "config.json does not give the KV cache shape "
                           "(num_hidden_layers, num_key_value_heads, head_dim)", state_note)
    heads_per_chip = math.ceil(heads / max(tp, 1))
    per_head = head_dim + INT8_SCALE_BYTES if int8 else head_dim * kv_dtype_bytes
    return KvStateSize(KV, full, layers - full, 2 * heads_per_chip * per_head, conv, recurrent,
                       int8, state_note=state_note, kv_heads=heads, head_dim=head_dim,
                       value_bytes=1 if int8 else kv_dtype_bytes)


def _mla_size(config: ConfigFacts, layers: int, kv_dtype_bytes: int) -> KvStateSize:
    rank, rope = config.raw.get("kv_lora_rank"), config.raw.get("qk_rope_head_dim")
    if not isinstance(rank, int) or not isinstance(rope, int) or rank < 1 or rope < 0:
        return KvStateSize(NO_KV, layers, 0, 0, note="config.json's kv_lora_rank and "
                           "qk_rope_head_dim are not both whole numbers")
    return KvStateSize(MLA, layers, 0, (rank + rope) * kv_dtype_bytes, kv_heads=1,
                       head_dim=rank + rope, value_bytes=kv_dtype_bytes)


def _state_per_layer(config: ConfigFacts, conv_bytes: int) -> tuple[int, int, str]:
    """(conv, recurrent) bytes of one linear-attention layer, or zeros and why (a missing
    linear_* field)."""
    try:
        d = deltanet_shape(config)
    except InventoryError as exc:
        return 0, 0, str(exc)
    return (d.conv_dim * (d.kernel - 1) * conv_bytes,
            d.value_heads * d.key_dim * d.value_dim * RECURRENT_STATE_BYTES, "")


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
    size = kv_state_size(config, compute, int8=int8_kv)
    if size.state_note:
        raise InventoryError(size.state_note)
    return MemoryPlan(
        weights=weights if weights is not None else config_weight_elements(config),
        is_fp8=config.quant.is_fp8, compute_bytes=compute,
        kv_bytes_per_token=size.kv_bytes_per_token,
        state_bytes_per_sequence=size.state_bytes_per_sequence,
        max_seq_len=max_seq_len, batch=batch, full_attention_layers=size.full_attention_layers,
        linear_attention_layers=size.linear_attention_layers)


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
