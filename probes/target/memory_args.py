"""The memory-planning settings of a serving command line and environment that
probes.target.serving does not read: expert parallelism, eager (no graph capture) mode, and
MindIE's NPU_MEMORY_FRACTION. Pure: a command line and an environment in, settings out.

Sources a reader can open:
- vLLM `--enable-expert-parallel` (EP size = TP x DP), `--enforce-eager`,
  `--data-parallel-size-local` (the replicas on this node):
  https://docs.vllm.ai/en/latest/serving/expert_parallel_deployment/ and
  https://docs.vllm.ai/en/latest/cli/serve.html (boolean flags; `--no-...` turns one off).
- MindIE `NPU_MEMORY_FRACTION`: the share of each NPU's memory for weights, KV cache and
  workspace, (0, 1], 0.8 when unset in MindIE LLM (Ascend/MindIE-LLM
  docs/zh/user_guide/user_manual/environment_variable.md @ 5b52f59d9e94).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from probes.target.cmdline import program_args
from probes.target.parts import Sourced


@dataclass(frozen=True)
class MemoryArgs:
    """Settings that decide how the engine lays memory out, each with where it was read."""

    expert_parallel: Sourced[int] | None = None  # 1: experts split over TP x DP chips
    enforce_eager: Sourced[int] | None = None  # 1: no graph capture
    npu_memory_fraction: Sourced[float] | None = None  # MindIE's env setting
    notes: tuple[str, ...] = ()
    swap_space_gib: Sourced[float] | None = None  # vLLM --swap-space: host RAM per device
    cpu_offload_gib: Sourced[float] | None = None  # vLLM --cpu-offload-gb: weights per device
    data_parallel_local: Sourced[float] | None = None  # vLLM --data-parallel-size-local
    max_model_len_auto: Sourced[str] | None = None  # `--max-model-len auto` (or -1)


def bool_flag(args: Sequence[str], name: str) -> Sourced[int] | None:
    """The last of `--name` / `--no-name` (argparse's BooleanOptionalAction), as 1 or 0."""
    found: Sourced[int] | None = None
    negative = "--no-" + name.removeprefix("--")
    for raw in args:
        spelled = raw.replace("_", "-") if raw.startswith("--") else raw
        if spelled == name:
            found = Sourced(1, f"`{raw}` on the command line")
        elif spelled == negative:
            found = Sourced(0, f"`{raw}` on the command line")
    return found


def memory_fraction_env(env: Mapping[str, str]) -> tuple[Sourced[float] | None, str]:
    """NPU_MEMORY_FRACTION as MindIE reads it, or why it is not used ("" when unset)."""
    raw = env.get("NPU_MEMORY_FRACTION")
    if raw is None:
        return None, ""
    try:
        value = float(raw)
    except ValueError:
        return None, f"NPU_MEMORY_FRACTION={raw[:40]!r}: not a number (MindIE refuses it)"
    if not 0 < value <= 1:
        return None, f"NPU_MEMORY_FRACTION={value:g}: outside (0, 1] (MindIE refuses it)"
    return Sourced(value, f"NPU_MEMORY_FRACTION={raw} in the environment"), ""


def memory_args(cmdline: Sequence[str], env: Mapping[str, str], server: str) -> MemoryArgs:
    """What `server`'s command line and environment say about its memory layout."""
    if server == "mindie":
        fraction, why = memory_fraction_env(env)
        return MemoryArgs(npu_memory_fraction=fraction, notes=(why,) if why else ())
    if server != "vllm":
        return MemoryArgs()
    _, args = program_args(cmdline)
    notes: list[str] = []
    return MemoryArgs(expert_parallel=bool_flag(args, "--enable-expert-parallel"),
                      enforce_eager=bool_flag(args, "--enforce-eager"),
                      swap_space_gib=gib_flag(args, "--swap-space", notes),
                      cpu_offload_gib=gib_flag(args, "--cpu-offload-gb", notes),
                      data_parallel_local=gib_flag(args, "--data-parallel-size-local", notes),
                      max_model_len_auto=_auto_len(args), notes=tuple(notes))


def _auto_len(args: Sequence[str]) -> Sourced[str] | None:
    """`--max-model-len auto` / `-1`: the engine picks the context (vllm-project/vllm#19407
    asked for it; later vLLM fits it to the memory left), not a number to plan with."""
    from probes.target.serving import flag

    found = flag(args, ["--max-model-len"])
    if found is None or found[0].strip() not in ("auto", "-1"):
        return None
    return Sourced(found[0].strip(), f"`{found[1]}` on the command line")


def gib_flag(args: Sequence[str], name: str, notes: list[str]) -> Sourced[float] | None:
    """A number flag (`--swap-space 16`, `--cpu-offload-gb=10` in GiB; a replica count)."""
    from probes.target.serving import flag

    found = flag(args, [name])
    if found is None:
        return None
    try:
        value = float(found[0])
    except ValueError:
        notes.append(f"`{found[1]}` on the command line: not a number")
        return None
    return Sourced(value, f"`{found[1]}` on the command line") if value >= 0 else None


def quantization_flag(cmdline: Sequence[str]) -> Sourced[str] | None:
    """vLLM's `--quantization` / `-q` as written on the command line (the last one wins)."""
    from probes.target.serving import flag

    _, args = program_args(cmdline)
    found = flag(args, ["--quantization", "-q"])
    return None if found is None else Sourced(found[0], f"`{found[1]}` on the command line")
