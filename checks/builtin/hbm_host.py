"""npu.hbm-fit's host-RAM questions: what a vLLM deployment asks of the host's memory per
node, by the rules vLLM itself applies.

- `--swap-space` (GiB of host RAM per device, for preempted KV blocks): vLLM refuses to start
  when swap space x tensor-parallel size exceeds 0.7 of the host's total memory and warns
  above 0.4 ("Too large swap space"), assuming the TP group shares one node;
- `--cpu-offload-gb` (GiB of weights per device kept in host RAM): the host must hold them for
  every device of the node.
Source: vllm-project/vllm vllm/config/cache.py @ c1d86421174a (CacheConfig.swap_space,
cpu_offload_gb, verify_with_parallel_config). How much host RAM loading a checkpoint takes
beyond these is not in our data: the evidence says so, no verdict rests on it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from checks.context import Context
from checks.model import Finding, Status

if TYPE_CHECKING:
    from checks.builtin.hbm_inputs import Deployment

GIB = 1024**3
SWAP_REFUSED = 0.7  # vLLM raises "Too large swap space" above this share of host memory
SWAP_WARNED = 0.4  # vLLM logs "Possibly too large swap space" above this share
SOURCE = "vllm-project/vllm vllm/config/cache.py @ c1d86421174a"


@dataclass(frozen=True)
class HostVerdict:
    status: Status  # pass, warn, fail
    text: str
    remedy: str
    rule: str
    lines: tuple[str, ...]


def _gib(n_bytes: float) -> str:
    return f"{n_bytes / GIB:,.1f} GiB"


def host_ram(ctx: Context, settings: Deployment) -> HostVerdict:
    """The host-RAM verdict of this deployment (pass with evidence when nothing is asked)."""
    from probes.host_memory import read_host_memory

    memory = ctx.fact("host_memory", lambda: read_host_memory(ctx.host))
    if isinstance(memory, str):
        return HostVerdict("pass", "", "", "", (f"host RAM not judged: {memory}",))
    available = "" if memory.available_bytes is None else \
        f", {_gib(memory.available_bytes)} available"
    lines = [f"host RAM: {_gib(memory.total_bytes)} total{available} (/proc/meminfo)"]
    tp = settings.tp.value
    swap, offload = settings.swap_space_gib, settings.cpu_offload_gib
    if swap is not None:
        need = swap.value * GIB * tp
        share = need / memory.total_bytes
        said = f"swap space {swap.value:g} GiB x tensor parallel {tp} = {_gib(need)} of host " \
               f"RAM ({share:.0%} of {_gib(memory.total_bytes)}; {swap.source})"
        if share > SWAP_REFUSED:
            return HostVerdict("fail", f"{said}: vLLM refuses more than 70% ({SOURCE})",
                               "lower --swap-space (GiB per device)", "host-ram-swap",
                               tuple(lines))
        lines.append(said)
        if share > SWAP_WARNED:
            return HostVerdict("warn", f"{said}: vLLM warns above 40% ({SOURCE})",
                               "lower --swap-space (GiB per device)", "host-ram-swap",
                               tuple(lines))
    if offload is not None and offload.value > 0:
        need = offload.value * GIB * tp
        said = f"CPU offload {offload.value:g} GiB x tensor parallel {tp} = {_gib(need)} of " \
               f"weights in host RAM ({offload.source})"
        if memory.available_bytes is not None and need > memory.available_bytes:
            return HostVerdict("fail", f"{said}, {_gib(memory.available_bytes)} available",
                               "lower --cpu-offload-gb or free host memory",
                               "host-ram-offload", tuple(lines))
        lines.append(said)
    lines.append("host RAM for loading the checkpoint itself: not in our data (no vendor "
                 "figure), not judged")
    return HostVerdict("pass", "", "", "", tuple(lines))


def with_host(finding: Finding, host: HostVerdict) -> Finding:
    """The HBM finding with the host-RAM verdict folded in: the worse one leads."""
    evidence = (*finding.evidence, *host.lines)
    order = {"pass": 0, "warn": 1, "fail": 2}
    if host.status == "pass" or order.get(finding.status, 2) >= order[host.status]:
        return replace(finding, evidence=evidence)
    return Finding(host.status, host.text, (finding.summary, *evidence), host.remedy,
                   (host.rule,))
