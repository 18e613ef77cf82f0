"""The inputs of npu.hbm-fit, each with where it came from: the deployment's settings (the
target's command line, --tp, the policy) and the weights (the safetensors headers, the index's
total_size, or an estimate from config.json).

Settings, in order of precedence:
- tensor-parallel size: --tp N (given by the user), the target's vLLM `-tp` /
  `--tensor-parallel-size` or MindIE `worldSize`, the policy (`hbm_fit.tensor_parallel_size`);
  pipeline parallelism multiplies the chips (vLLM `-pp`);
- context: vLLM `--max-model-len`, MindIE `maxSeqLen`, the policy (`hbm_fit.max_seq_len`);
  without either, a vLLM target sizes for the model's own max_position_embeddings
  (checks.builtin.hbm_engine), anything else for the policy's;
- vLLM `--gpu-memory-utilization` / MindIE `NPU_MEMORY_FRACTION`: the share of each chip's
  memory the engine plans within, the engine's default when unset
  (checks/data/engine_memory.yaml); no share for a target that is not a known engine;
- MindIE `npuMemSize`: the KV cache per NPU in GB (-1 leaves it to MindIE);
- vLLM `--data-parallel-size` (replicas, each on its own TP x PP chips) and
  `--enable-expert-parallel` (experts split over TP x DP chips), `--enforce-eager` (no graph
  capture).
Sources: vllm/engine/arg_utils.py (EngineArgs) and the MindIE configuration reference, as read
by probes.target.serving and probes.target.memory_args.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Generic, TypeVar

from checks.builtin.hbm_engine import default_source, engine_default, model_max_context
from checks.context import Context
from probes.model.safetensors_header import FP8_DTYPES
from probes.words import counted

if TYPE_CHECKING:
    from probes.model.config import ConfigFacts
    from probes.model.reader import ModelDir
    from probes.target.memory_args import MemoryArgs
    from probes.target.model import ServingArgs
    from probes.target.parts import Sourced

V = TypeVar("V", int, float)
GB = 1024**3  # MindIE's npuMemSize GB are GiB


@dataclass(frozen=True)
class Setting(Generic[V]):
    """A number the plan uses, where it came from in full, and in a word for the summary."""

    value: V
    source: str  # "`-tp 2` on the command line", "policy hbm_fit.max_seq_len"
    origin: str  # "command line", "--tp", "policy", "MindIE config"


def _policy(ctx: Context, key: str) -> Setting[int]:
    return Setting(max(1, int(float(ctx.policy.get("hbm_fit", key)))), f"policy hbm_fit.{key}",
                   "policy")


def _served(found: Sourced[int] | None, server: str) -> Setting[int] | None:
    if found is None or found.value <= 0:
        return None
    origin = "MindIE config" if server == "mindie" else "command line"
    return Setting(int(found.value), found.source, origin)


@dataclass(frozen=True)
class Deployment:
    """How the model is to be served, per setting with its source."""

    tp: Setting[int]
    pp: Setting[int]
    max_seq_len: Setting[int]
    batch: Setting[int]
    kv_block_tokens: int
    memory_fraction: Setting[float] | None = None  # given, or the engine's default
    kv_cap_bytes: Setting[int] | None = None  # MindIE npuMemSize, per NPU
    notes: tuple[str, ...] = ()
    dp: Setting[int] = Setting(1, "default", "")
    expert_parallel: Setting[int] | None = None  # 1: experts split over TP x DP chips
    graph_mode: Setting[int] | None = None  # 1: graph capture; None: not known
    engine: str = ""  # vllm, mindie; "" when the target is not a known server
    swap_space_gib: Setting[float] | None = None  # vLLM --swap-space, host RAM per device
    cpu_offload_gib: Setting[float] | None = None  # vLLM --cpu-offload-gb, weights per device

    dp_local: Setting[int] | None = None  # vLLM --data-parallel-size-local: replicas here
    context_auto: str = ""  # where `--max-model-len auto` was read; "" when not given

    @property
    def chips(self) -> int:
        """Chips of the deployment on this node: every data-parallel replica here has its
        own (all of them unless --data-parallel-size-local says fewer)."""
        replicas = self.dp_local.value if self.dp_local is not None else self.dp.value
        return self.tp.value * self.pp.value * replicas

    @property
    def weight_chips(self) -> int:
        """Chips one copy of the non-expert weights is split over."""
        return self.tp.value * self.pp.value

    @property
    def expert_chips(self) -> int:
        """Chips the experts are split over: TP x DP x PP with expert parallelism (vLLM's EP
        size is TP x DP, over every node), else those of the other weights."""
        if self.expert_parallel is not None and self.expert_parallel.value:
            return self.weight_chips * self.dp.value
        return self.weight_chips


def _tp(ctx: Context, notes: list[str]) -> Setting[int]:
    serving = ctx.target.serving
    served = _served(serving.tensor_parallel_size or serving.world_size, serving.server)
    if ctx.tensor_parallel is not None:
        if served is not None and served.value != ctx.tensor_parallel:
            notes.append(f"the target serves with tensor parallel {served.value} "
                         f"({served.source}); planned for --tp {ctx.tensor_parallel} as given")
        return Setting(ctx.tensor_parallel, f"--tp {ctx.tensor_parallel}", "--tp")
    return served or _policy(ctx, "tensor_parallel_size")


def _fraction(serving: ServingArgs, args: MemoryArgs) -> Setting[float] | None:
    """The share of each chip the engine plans within: given, else the engine's default."""
    given = serving.gpu_memory_utilization if serving.server == "vllm" else \
        args.npu_memory_fraction
    if given is not None and 0 < given.value <= 1:
        origin = "command line" if serving.server == "vllm" else "environment"
        return Setting(float(given.value), given.source, origin)
    row = engine_default(serving.server)
    if row is None:
        return None
    return Setting(row.default_fraction, default_source(row), f"{row.engine} default")


def _switch(found: Sourced[int] | None, default: int, why: str) -> Setting[int]:
    if found is not None:
        return Setting(found.value, found.source, "command line")
    return Setting(default, why, "default")


def deployment(ctx: Context) -> Deployment:
    from probes.target.memory_args import memory_args

    serving = ctx.target.serving
    proc = ctx.target.process
    args = memory_args(proc.cmdline if proc else (), ctx.host.env, serving.server)
    notes: list[str] = [*args.notes]
    tp = _tp(ctx, notes)
    pp = _served(serving.pipeline_parallel_size, serving.server) or Setting(1, "default", "")
    dp = _served(serving.data_parallel_size, serving.server) or Setting(1, "default", "")
    cap = serving.npu_mem_size_gb
    kv_cap = (Setting(int(cap.value) * GB, cap.source, "MindIE config")
              if cap is not None and cap.value > 0 else None)
    vllm = serving.server == "vllm"
    eager = _switch(args.enforce_eager, 0, "no --enforce-eager") if vllm else None
    return Deployment(
        tp=tp, pp=pp, dp=dp,
        max_seq_len=_served(serving.max_model_len, serving.server)
        or _policy(ctx, "max_seq_len"),
        batch=_policy(ctx, "batch_size"),
        kv_block_tokens=_policy(ctx, "kv_block_tokens").value,
        memory_fraction=_fraction(serving, args), kv_cap_bytes=kv_cap,
        expert_parallel=_switch(args.expert_parallel, 0, "no --enable-expert-parallel")
        if vllm else None,
        graph_mode=None if eager is None else Setting(1 - eager.value, eager.source,
                                                      eager.origin),
        engine=serving.server if row_known(serving.server) else "",
        swap_space_gib=_gib(args.swap_space_gib), cpu_offload_gib=_gib(args.cpu_offload_gib),
        dp_local=_count(args.data_parallel_local),
        context_auto=args.max_model_len_auto.source if args.max_model_len_auto else "",
        notes=(*notes, *serving.notes))


def _count(found: Sourced[float] | None) -> Setting[int] | None:
    if found is None or found.value < 1 or found.value != int(found.value):
        return None
    return Setting(int(found.value), found.source, "command line")


def _gib(found: Sourced[float] | None) -> Setting[float] | None:
    return None if found is None else Setting(float(found.value), found.source, "command line")


def row_known(server: str) -> bool:
    return engine_default(server) is not None


def for_model(settings: Deployment, config: ConfigFacts) -> Deployment:
    """A vLLM target without --max-model-len sizes for the model's own maximum context."""
    if settings.engine != "vllm" or settings.max_seq_len.origin != "policy":
        return settings
    if settings.context_auto:
        return replace(settings, notes=(*settings.notes, f"{settings.context_auto}: vLLM picks "
                                        "the context; sized for the policy's "
                                        f"{settings.max_seq_len.value:,} tokens"))
    found = model_max_context(config)
    if found is None:
        return replace(settings, notes=(*settings.notes, "no --max-model-len and no "
                                        "max_position_embeddings in config.json: sized for "
                                        f"the policy's {settings.max_seq_len.value:,} tokens, "
                                        "not what vLLM will size for"))
    value, source = found
    return replace(settings, max_seq_len=Setting(value, source, "the model's maximum"))


# -- the weights ----------------------------------------------------------------------------------



@dataclass(frozen=True)
class Weights:
    """The weights' bytes as stored, how many of them are 8-bit floats, and how they are known."""

    stored_bytes: int
    fp8_bytes: int  # FP8 elements (one byte each) among them
    source: str  # one line: where the figure came from
    exact: bool  # read from every header, or declared by the index; False: an estimate
    origin: str  # in a word or two, for the summary
    by_dtype: str = ""  # "F8_E4M3 29,000 MB, BF16 1,200 MB" when read from headers
    expert_bytes: int = 0  # routed experts' tensors among them (0: none, or not known)

    @property
    def dequantised_bytes(self) -> int:
        """After converting the FP8 weights to BF16 (one byte to two; scales dropped)."""
        return self.stored_bytes + self.fp8_bytes

    @property
    def expert_ratio(self) -> float:
        """The routed experts' share of the weights (what expert parallelism splits)."""
        return self.expert_bytes / self.stored_bytes if self.stored_bytes else 0.0


def is_expert_tensor(name: str) -> bool:
    """A routed expert's tensor (Qwen-MoE, Mixtral, DeepSeek naming: `.experts.`); the shared
    expert (`.shared_expert.`) is replicated like any other weight."""
    return ".experts." in name


def mb(n_bytes: float) -> str:
    """Bytes as npu-smi's MB (MiB), two decimals below 10."""
    value_mb = n_bytes / 2**20
    return f"{value_mb:,.0f} MB" if abs(value_mb) >= 10 else f"{value_mb:.2f} MB"


def from_headers(model: ModelDir) -> Weights:
    by_dtype: dict[str, int] = {}
    for tensor in model.tensors.values():
        by_dtype[tensor.dtype] = by_dtype.get(tensor.dtype, 0) + tensor.nbytes
    text = ", ".join(f"{d} {mb(n)}" for d, n in sorted(by_dtype.items(), key=lambda i: -i[1]))
    experts = sum(t.nbytes for name, t in model.tensors.items() if is_expert_tensor(name))
    return Weights(sum(by_dtype.values()), sum(by_dtype.get(d, 0) for d in FP8_DTYPES),
                   f"the safetensors headers of {counted(len(model.shards), 'shard')} in "
                   f"{model.path}",
                   True, "safetensors headers", text, experts)


def estimated(config: ConfigFacts, why: str) -> Weights | str:
    """The weights config.json implies (the language model as probes.model.tensors lays it
    out), or why they cannot be estimated."""
    from probes.model.config import FAMILIES
    from probes.model.memory import config_weight_elements, dtype_bytes
    from probes.model.tensors import InventoryError

    if config.family not in FAMILIES:
        kind = config.model_type or config.architecture or "this architecture"
        return f"{kind} is not an architecture this project lays out"
    try:
        elements = config_weight_elements(config)
    except InventoryError as exc:
        return str(exc)
    plain = elements.plain * dtype_bytes(config.dtype)
    scales = elements.scales * 4  # float32 (BF16 in some releases): an upper bound
    params = (elements.fp8 + elements.plain) / 1e9
    return Weights(elements.fp8 + scales + plain, elements.fp8,
                   f"estimated from config.json ({params:,.1f} B parameters of the language "
                   f"model; vision towers and MTP heads not counted): {why}", False,
                   "estimated from config.json")


def weights(model: ModelDir) -> Weights | str:
    """Every shard read: the headers. Shards missing or unreadable: the index's total_size,
    else an estimate from config.json, else why nothing can be said."""
    broken = len(model.missing_shards) + len(model.unreadable_shards)
    if not broken:
        return from_headers(model)
    total = broken + len(model.shards)
    read = from_headers(model)
    missing = f"{broken} of {total} shards missing or unreadable (see checkpoint.format)"
    declared = model.index_total_size
    if declared and declared >= read.stored_bytes:
        return Weights(declared, _fp8_share(model, read, declared),
                       f"the index's metadata.total_size; {missing}", True,
                       "the index's total_size",
                       expert_bytes=declared * read.expert_bytes // max(read.stored_bytes, 1))
    why = (f"{missing}, and the index gives no usable total_size" if declared is None
           or declared < read.stored_bytes else missing)
    found = estimated(model.config, why)
    if isinstance(found, str):
        return f"cannot judge: {why}; nor can config.json say ({found})"
    return found


def _fp8_share(model: ModelDir, read: Weights, declared: int) -> int:
    """FP8 bytes of the whole checkpoint: from config.json when it lays the model out, else
    in the proportion of the shards read."""
    if not model.config.quant.is_fp8 and not read.fp8_bytes:
        return 0
    found = estimated(model.config, "")
    if not isinstance(found, str) and found.fp8_bytes <= declared:
        return found.fp8_bytes
    return declared * read.fp8_bytes // max(read.stored_bytes, 1)


# -- the model --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Model:
    """What the check knows of the model: config, weights (or why not), and the reading."""

    config: ConfigFacts
    weights: Weights | str
    path: str
    read_error: str = ""  # why the weights files could not be read at all
    fp8: bool = False
