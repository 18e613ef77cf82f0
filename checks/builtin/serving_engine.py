"""The serving engine a deployment runs and its release, read from the shared facts (the judged
interpreter's packages, MindIE's version.info) without the support and flag tables: a machine
with neither a serving engine nor a serving process is told so before those are imported."""

from __future__ import annotations

from dataclasses import dataclass

from checks.builtin import facts
from checks.context import Context
from probes.errors import NotRecorded

# the settings serving.flags reads beside the command line
CONFIG_ENV = ("PYTORCH_NPU_ALLOC_CONF", "TASK_QUEUE_ENABLE", "CPU_AFFINITY_CONF")
WATCHED_ENV = ("HCCL_", "VLLM_ASCEND_", "VLLM_ENABLE_", "VLLM_LLMDD_", "USE_OPTIMIZED_MODEL",
               *CONFIG_ENV)


@dataclass(frozen=True)
class Engine:
    """The serving engine judged and its release; `name` "" when none was found."""

    name: str = ""  # vllm-ascend, mindie
    release: str = ""
    source: str = ""
    why_none: str = ""


def engine(ctx: Context) -> Engine:
    return ctx.fact("serving.engine", lambda: read_engine(ctx))


def nothing_to_lint(ctx: Context) -> str | None:
    """Why serving.flags has nothing to judge: no serving process (so no command line), no
    serving engine whose release keys the rules, and none of the settings it reads set in the
    environment; None when there is any of them (or the environment cannot be told)."""
    if ctx.target.process is not None or ctx.target.environment_unknown() is not None:
        return None
    try:
        watched = [name for name in ctx.host.env if name.startswith(WATCHED_ENV)]
    except NotRecorded:
        return None
    found = engine(ctx)
    if found.name or watched:
        return None
    return ("nothing to lint: no serving process, none of HCCL_*, VLLM_ASCEND_*, ... set, and "
            f"no serving engine: {found.why_none}")


def read_engine(ctx: Context) -> Engine:
    """vLLM-Ascend when the target runs vLLM or its interpreter holds vllm_ascend; MindIE when
    the target runs MindIE or only MindIE is installed."""
    server = ctx.target.serving.server
    py = facts.python(ctx)
    vllm_ascend = None if py.error else py.version_of("vllm_ascend")
    mindie = _mindie_release(ctx)
    where = py.interpreter or "the judged interpreter"
    if server != "mindie" and vllm_ascend:
        return Engine("vllm-ascend", vllm_ascend, f"package vllm_ascend in {where}")
    if server != "vllm" and mindie is not None:
        return Engine("mindie", mindie[0], mindie[1])
    if server == "vllm":
        why = py.error or f"the target runs vLLM but {where} holds no vllm_ascend"
        return Engine(why_none=why)
    return Engine(why_none=f"no vllm_ascend in {where} ({py.error or 'not installed'}) and no "
                  "MindIE version.info found")


def _mindie_release(ctx: Context) -> tuple[str, str] | None:
    found = facts.stack(ctx).mindie
    if found.value is None or not found.value.version:
        return None
    return found.value.version, f"MindIE {found.path}"
