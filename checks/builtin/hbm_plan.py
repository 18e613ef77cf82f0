"""npu.hbm-fit's arithmetic: the KV cache and linear-attention state of a config, and the plan on
one chip of a tensor-parallel group (pure functions over bytes, tested without a checkpoint or an
NPU; checks.builtin.hbm_fit says what is counted and why)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from probes.model.families import KV_MODEL_TYPES

if TYPE_CHECKING:
    from probes.model.config import ConfigFacts
    from probes.model.memory import KvStateSize

MB = 1024 * 1024  # npu-smi's MB are MiB (64 GB parts print 65536)
# model_type values whose attention caches per-head K and V as modelled here


# -- KV cache and linear-attention state ---------------------------------------------------------


def attention_layers(config: ConfigFacts) -> tuple[int, str]:
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


def kv_size(config: ConfigFacts, tp: int = 1) -> KvStateSize:
    """KV per token and linear-attention state per sequence on one chip of a tensor-parallel
    group of `tp`, at the config's dtype: probes.model.memory.kv_state_size, the arithmetic the
    engine sizes its cache with and engine.tools.plan prints."""
    from probes.model.memory import dtype_bytes, kv_state_size

    return kv_state_size(config, dtype_bytes(config.dtype), tp=tp)


def kv_not_modelled(config: ConfigFacts) -> str:
    """Why the KV cache of this architecture is not judged; "" when it is (per-head K and V of
    an attention listed above, or a multi-head latent, which kv_state_size sizes)."""
    from probes.model.memory import MLA

    if kv_size(config).kind == MLA:
        return ""
    if config.model_type not in KV_MODEL_TYPES and config.text_model_type not in KV_MODEL_TYPES:
        kind = config.model_type or config.architecture or "this architecture"
        return f"KV not estimated for {kind}: not an attention this project models"
    return ""


def mla_text(config: ConfigFacts) -> str:
    """How an MLA model's KV is sized, for its summary; "" for any other model."""
    from probes.model.memory import MLA, MLA_SOURCE

    size = kv_size(config)
    if size.kind != MLA:
        return ""
    return ("KV as MLA latent: kv_lora_rank + qk_rope_head_dim per token and layer, not split "
            f"across chips ({size.head_dim} values x {size.full_attention_layers} layers, as "
            f"vLLM sizes it: {MLA_SOURCE})")


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


def weight_share_bytes(weight_bytes: int, chips: int, expert_ratio: float = 0.0,
                       expert_chips: int | None = None) -> int:
    """One chip's share of the weights split over `chips` (tensor x pipeline parallel); with
    expert parallelism the routed experts (`expert_ratio` of the bytes) are split over
    `expert_chips` instead."""
    experts = int(weight_bytes * expert_ratio) if expert_chips else 0
    rest = math.ceil((weight_bytes - experts) / max(chips, 1))
    return rest + (math.ceil(experts / max(expert_chips or 1, 1)) if experts else 0)


def judge(plan: Plan, warn_free_mb: float) -> str:
    """fail / warn / pass for one plan."""
    if plan.room_bytes < 0 or plan.headroom_bytes < 0 or not plan.context_fits:
        return "fail"
    if plan.headroom_bytes < warn_free_mb * MB:
        return "warn"
    return "pass"


def tokens(n: int) -> str:
    return f"{n:,} tokens"


def engine_plan_lines(config: ConfigFacts, max_seq_len: int, batch: int) -> list[str]:
    """This project's engine plan for the language model (probes.model.memory, the lines
    `python -m engine.tools.plan` prints): weights per FP8 mode, KV and linear-attention state."""
    from probes.model.config import FAMILIES
    from probes.model.memory import plan_lines, plan_memory
    from probes.model.tensors import InventoryError

    if config.family not in FAMILIES:
        kind = config.model_type or config.architecture or "this architecture"
        return [f"engine plan: not computed ({kind} is not an architecture this project's "
                "engine runs)"]
    try:
        plan = plan_memory(config, max_seq_len, batch=batch)
    except InventoryError as exc:
        return [f"engine plan: not computed ({exc})"]
    return [f"engine plan: {line}" for line in plan_lines(plan)]
