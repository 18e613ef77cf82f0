"""devices.nodes: the device nodes a process needs to reach its NPUs (PATHS.md §4)."""

from __future__ import annotations

from checks.builtin import facts
from checks.context import Context
from checks.model import Finding, failed, passed, skipped, warned
from probes.environment import DeviceNode
from probes.errors import HostError, NotRecorded

# davinci_manager is mandatory; devmm_svm and hisi_hdc are the manager nodes of 910/910B/910_93
# (mind-cluster CDI generator devnode.go; vllm-ascend installation.md docker run).
REQUIRED_SHARED = ("davinci_manager", "devmm_svm", "hisi_hdc")
DOCKER_HINT = ("pass every node: --device /dev/davinciN (one per card) --device "
               "/dev/davinci_manager --device /dev/devmm_svm --device /dev/hisi_hdc")


def _describe(node: DeviceNode) -> str:
    return f"{node.path}: {node.kind.replace('_', ' ')}"


def device_nodes(ctx: Context) -> Finding:
    try:
        nodes = facts.device_nodes(ctx)
    except NotRecorded:
        return skipped("the /dev listing was not recorded")
    except HostError as exc:
        return skipped(f"cannot list /dev: {exc.reason}")
    reading = facts.npu(ctx)
    chips = facts.chip_count(ctx)
    if not nodes.davinci and reading.is_error:
        return skipped("no /dev/davinci* nodes and no usable npu-smi: not an NPU machine",
                       reading.document.get("error", ""))
    evidence = [_describe(n) for n in [*nodes.davinci.values(), *nodes.shared.values()]]
    missing = [f"/dev/{n}" for n in REQUIRED_SHARED if not nodes.shared[n].present]
    if chips is not None and len(nodes.davinci) < chips:
        missing.append(f"{chips - len(nodes.davinci)} of {chips} /dev/davinci<N> nodes")
    if missing:
        return failed("missing " + ", ".join(missing), DOCKER_HINT, *evidence)
    wrong = [_describe(n) for n in [*nodes.davinci.values(), *nodes.shared.values()]
             if n.present and n.kind != "char_device" and not n.path.endswith("dvpp_cmdlist")]
    if wrong:
        return warned("not character devices: " + "; ".join(wrong),
                      "device nodes come from the driver; in a container pass them with "
                      "--device, do not bind-mount files", *evidence)
    return passed(f"{len(nodes.davinci)} davinci node(s) and the manager nodes are present",
                  *evidence)
