"""pcie.contention: NPU links trained below capability, shared uplinks, AER counters, and the
NPUs' own network ports (RoCE) on a machine set up for multi-node serving.

A link can train no faster and no wider than the lower of its two ends: the NPU's own
capability (max_link_*) and the upstream port's (the nearest parent bridge). Only a link
below that lower bound is degraded; a card in a slower slot is not. Neighbours are every
function that is not an Ascend NPU (by PCI device id), Huawei's NICs and NVMe drives
included. The NUMA node of each NPU is shown; against the CPUs the target process may run on
it is judged (checks/builtin/affinity.py): a target pinned far from its NPUs warns.

Serving across servers connects the NPUs through their own network ports, cabled with
optical modules (vllm-project/vllm-ascend docs/source/tutorials/hybrid_node.md @
c7a95f9118ff); that guide asks
every port's `hccn_tool -link -g` to be UP and its `-net_health -g` to be success (Init, the
detection still starting, counts healthy as in Huawei's NPU Exporter). They are
read only where /etc/hccn.conf exists (the ports were set up): a single server does not use
them (Ascend/mind-cluster docs/en/scheduling/usage/basic_scheduling/08_elastic_training.md @
0672fe0ac1c5: "NPU network faults do not affect single-server training jobs"). Ports that
could not be read are said to be unjudged in the summary, never passed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from checks.builtin import facts
from checks.builtin.pci_functions import NO_ASCEND_FUNCTION, no_ascend_function, vendors
from checks.context import Context
from checks.model import Finding, passed, skipped, warned
from probes.errors import HostError, NotRecorded
from probes.words import counted

if TYPE_CHECKING:
    from collections.abc import Sequence

    from probes.hccn import PortStatus
    from probes.npu_smi import ChipRow
    from probes.pci import PcieLink, PciFunction

# PCI class codes (PCI-SIG class list): 0x0108 NVM Express, 0x02xx network, 0x0302 3D
# controller, 0x12 processing accelerators.
_BUSY_CLASSES = ("0108", "02", "0302", "12")
_CLASS_NAMES = {"0108": "NVMe", "02": "network", "0302": "GPU", "12": "accelerator"}

# The check's rules, by name -> the statuses they give; its playbook lists the same rules under
# "What the check does" (tests/checks/test_check_rules.py); each tags the findings it decides.
CHECK_RULES: dict[str, dict[str, str]] = {
    "pcie.contention": {
        "no-ascend-function": "skip",  # pcie_contention
        "pci-unreadable": "skip",  # pcie_contention
        "link-degraded": "warn",  # degraded
        "shared-uplink": "warn",  # _sharing
        "aer-correctable": "warn",  # _aer_problems, policy pcie.aer_correctable_warn
        "aer-uncorrectable": "warn",  # _aer_problems, policy pcie.aer_uncorrectable_warn
        "numa-far-from-npus": "warn",  # checks.builtin.affinity.target_affinity
        "roce-link-down": "warn",  # _port_problems
        "roce-net-health": "warn",  # _port_problems
    },
}
# One problem found: the rule that judged it, and what it says.
Problem = tuple[str, str]


def _busy_class(fn: PciFunction) -> str | None:
    code = fn.class_code or ""
    return next((_CLASS_NAMES[p] for p in _BUSY_CLASSES if code.startswith(p)), None)


def _below_root_port(fn: PciFunction) -> set[str]:
    # parents run nearest first, root port last; the root port's own link is not shared
    return {bridge.address for bridge in fn.parents[:-1]}


def _link_text(fn: PciFunction) -> str:
    link = fn.link
    return (f"{link.current_speed_raw or '?'} x{link.current_width or '?'} of "
            f"{link.max_speed_raw or '?'} x{link.max_width or '?'}")


def _lower(a: float | None, b: float | None) -> float | None:
    known = [v for v in (a, b) if v is not None]
    return min(known) if known else None


@dataclass(frozen=True)
class LinkBound:
    """The best a link can train to: the lower of the device's and the upstream port's
    capability; `port_known` False when the port's capability could not be read."""

    speed_gt_s: float | None
    width: int | None
    port_known: bool


def link_bound(fn: PciFunction) -> LinkBound:
    port: PcieLink | None = fn.parents[0].link if fn.parents else None
    port_speed = port.max_speed_gt_s if port else None
    port_width = port.max_width if port else None
    width = _lower(fn.link.max_width, port_width)
    return LinkBound(_lower(fn.link.max_speed_gt_s, port_speed),
                     None if width is None else int(width),
                     port_speed is not None and port_width is not None)


def degraded(fn: PciFunction) -> str | None:
    """Why the link is below what both ends allow, or None (also when it cannot be told)."""
    bound, link = link_bound(fn), fn.link
    slow = (link.current_speed_gt_s is not None and bound.speed_gt_s is not None
            and link.current_speed_gt_s < bound.speed_gt_s)
    narrow = (link.current_width is not None and bound.width is not None
              and link.current_width < bound.width)
    if not (slow or narrow):
        return None
    port = fn.parents[0].address if fn.parents else None
    best = f"{bound.speed_gt_s:g} GT/s x{bound.width}" if bound.speed_gt_s and bound.width \
        else "its capability"
    against = (f"the lower of its own and upstream port {port}'s capability ({best})"
               if bound.port_known else
               f"its own capability ({best}; upstream port capability unknown)")
    return f"{fn.address} link trained at {_link_text(fn)}, below {against}"


def _describe(fn: PciFunction) -> str:
    numa = "unknown" if fn.numa_node is None else str(fn.numa_node)
    port = (f"upstream port {fn.parents[0].address} allows "
            f"{fn.parents[0].link.max_speed_raw or '?'} x{fn.parents[0].link.max_width or '?'}"
            if fn.parents else "upstream port not read")
    return f"{fn.address} {fn.family or fn.device_id}: link {_link_text(fn)}, {port}, " \
        f"NUMA node {numa}"


def _sharing(npu: PciFunction, others: list[PciFunction]) -> list[str]:
    mine = _below_root_port(npu)
    found = []
    for other in others:
        kind = _busy_class(other)
        shared = mine & _below_root_port(other)
        if kind and shared:  # `others` holds no Ascend NPU; Huawei NICs/NVMe do count
            found.append(f"{npu.address} shares the uplink of {sorted(shared)[0]} with "
                         f"{kind} device {other.address}")
    return found


def _aer_problems(fn: PciFunction, ctx: Context) -> list[Problem]:
    limit_cor = int(ctx.policy.get("pcie", "aer_correctable_warn"))
    limit_unc = int(ctx.policy.get("pcie", "aer_uncorrectable_warn"))
    cor = fn.aer.get("aer_dev_correctable", {}).get("TOTAL_ERR_COR", 0)
    fatal = fn.aer.get("aer_dev_fatal", {}).get("TOTAL_ERR_FATAL", 0)
    nonfatal = fn.aer.get("aer_dev_nonfatal", {}).get("TOTAL_ERR_NONFATAL", 0)
    problems: list[Problem] = []
    if cor > limit_cor:
        problems.append(("aer-correctable",
                         f"{fn.address}: {cor} correctable AER errors (policy {limit_cor})"))
    if fatal + nonfatal > limit_unc:
        problems.append(("aer-uncorrectable",
                         f"{fn.address}: {fatal} fatal and {nonfatal} non-fatal AER errors"))
    return problems


# Net health words that are healthy: `Success` (printed in Ascend/mind-cluster
# 08_elastic_training.md after recovery; vllm-ascend hybrid_node.md asks for "success") and
# `Init`, the detection still starting, which Huawei's NPU Exporter counts healthy (Ascend/
# mind-cluster component/ascend-common/devmanager/hccn/hccn_tool.go @ 448fb33a6f6e,
# GetNetworkHealthy). Meanings of the other words we have a source for, by lower-case word;
# any other word is not in our data and is shown as printed.
NET_HEALTH_OK = frozenset({"success", "init"})
NET_HEALTH_MEANINGS = {
    "fault": "the port shows this when its link is down (Ascend/mind-cluster elastic-training "
             "guide)",
    "receive timeout": "no reply from the detect IP; also shown when the detect IP is one of "
                       "the board's internal vNIC addresses (HDK HCCN Tool hccntool_019)",
}


@dataclass(frozen=True)
class PortsRead:
    """What the NPU ports showed: the problems found, one evidence line per port, how many
    ports were judged, and why the ports (or some of them) were not (None: nothing left)."""

    problems: list[Problem]
    evidence: list[str]
    unjudged: str | None
    judged: int
    starting: int = 0  # ports whose net health is Init (healthy, detection still starting)


def _port_problems(port: PortStatus) -> list[Problem]:
    problems: list[Problem] = []
    if port.link is not None and port.link.upper() != "UP":
        problems.append(("roce-link-down", f"NPU port {port.device_id} link {port.link}"))
    health = port.net_health
    if health is not None and health.lower() not in NET_HEALTH_OK:
        meaning = NET_HEALTH_MEANINGS.get(health.lower(), "not in our data")
        problems.append(("roce-net-health",
                         f"NPU port {port.device_id} net health {health} ({meaning})"))
    return problems


def _port_line(port: PortStatus) -> str:
    words = f"link {port.link or 'unread'}, net health {port.net_health or 'unread'}"
    return f"NPU port {port.device_id}: {words}" + (f" ({port.unread})" if port.unread else "")


def port_ids(chips: Sequence[ChipRow]) -> list[int]:
    """hccn_tool's `-i` of each chip: its physical id where the table prints every chip's (the
    NPU Exporter passes the physical id), else 0 up, one per chip, as vllm-ascend's checks
    loop (0-7 on A2, 0-15 on A3)."""
    phy_ids = [chip.phy_id for chip in chips]
    if all(phy_id is not None for phy_id in phy_ids):
        return sorted({phy_id for phy_id in phy_ids if phy_id is not None})
    return list(range(len(chips)))


def read_roce(ctx: Context) -> PortsRead:
    """The NPUs' RoCE ports, where /etc/hccn.conf says they were set up."""
    from probes.hccn import HCCN_CONF, read_ports  # only on a machine with an Ascend function

    try:
        configured = ctx.host.exists(HCCN_CONF)
    except NotRecorded:
        return PortsRead([], [], f"{HCCN_CONF} was not recorded", 0)
    except HostError as exc:
        return PortsRead([], [], f"cannot read {HCCN_CONF}: {exc.reason}", 0)
    if not configured:  # the ports are not set up: a single server, nothing to judge
        return PortsRead([], [], None, 0)
    info = facts.npu(ctx).info
    if info is None or not info.chips:
        return PortsRead([], [], "npu-smi gave no chip table to number the ports by", 0)
    ports = read_ports(ctx.host, port_ids(info.chips), ctx.timeout_s)
    problems = [problem for port in ports for problem in _port_problems(port)]
    unread = [p for p in ports if p.link is None or p.net_health is None]
    unjudged = (f"{len(unread)} of {counted(len(ports), 'NPU port')} not read "
                f"({unread[0].unread})"
                if unread else None)
    starting = sum(1 for p in ports if (p.net_health or "").lower() == "init")
    return PortsRead(problems, [_port_line(p) for p in ports], unjudged,
                     len(ports) - len(unread), starting)


ROCE_REMEDY = ("check each port with `hccn_tool -i N -link -g` and `-net_health -g`, its "
               "cable or optical module (`-optical -g`) and its detect IP (`-netdetect -g`, "
               "/etc/hccn.conf); see the pcie.contention playbook")
LINK_REMEDY = ("reseat the card or move the other device to another root port; an idle link "
               "may train down to save power, so confirm under load with `lspci -vv -s "
               "ADDRESS` (LnkSta vs LnkCap)")


def pcie_contention(ctx: Context) -> Finding:
    early = no_ascend_function(ctx)
    if early is not None:
        return early
    from probes.pci import read_pci_function  # links and bridges: only for an NPU machine

    try:
        # every function, not only Huawei's: the others are what may share an uplink
        functions = [read_pci_function(ctx.host, a, v) for a, v in vendors(ctx).items()]
    except NotRecorded:
        return skipped("/sys/bus/pci was not recorded", rules=("pci-unreadable",))
    except HostError as exc:
        return skipped(f"cannot read /sys/bus/pci/devices: {exc.reason}",
                       rules=("pci-unreadable",))
    npus = [f for f in functions if f.is_huawei and f.family]
    if not npus:
        return skipped(NO_ASCEND_FUNCTION, rules=("no-ascend-function",))
    others = [f for f in functions if f not in npus]
    problems: list[Problem] = [("link-degraded", why) for n in npus
                               for why in [degraded(n)] if why]
    for npu in npus:
        problems += [("shared-uplink", why) for why in _sharing(npu, others)]
        problems += _aer_problems(npu, ctx)
    evidence = [_describe(n) for n in npus]
    from checks.builtin.affinity import REMEDY as AFFINITY_REMEDY
    from checks.builtin.affinity import target_affinity

    pinned = target_affinity(ctx, npus)  # the target's CPUs against its NPUs' NUMA nodes
    evidence += pinned.evidence
    roce = read_roce(ctx)
    problems += roce.problems
    evidence += roce.evidence
    unjudged = [f"RoCE ports not judged: {roce.unjudged}"] if roce.unjudged else []
    if problems or pinned.problems:
        remedy = "; ".join(([LINK_REMEDY] if _pcie_rules(problems) else []) +
                           ([ROCE_REMEDY] if roce.problems else []) +
                           ([AFFINITY_REMEDY] if pinned.problems else []))
        far = ["numa-far-from-npus"] if pinned.problems else []
        rules = tuple(dict.fromkeys([rule for rule, _ in problems] + far))
        return warned("; ".join([why for _, why in problems] + pinned.problems + unjudged),
                      remedy, *evidence, rules=rules)
    starting = f" ({roce.starting} still Init)" if roce.starting else ""
    ports = ([f"{counted(roce.judged, 'NPU port')} link UP and net health Success{starting}"]
             if roce.judged else [])
    return passed("; ".join([f"{counted(len(npus), 'NPU function')} at the best link width and "
                             "speed both ends allow, no shared uplink, AER counters within "
                             "policy",
                             *ports, *unjudged]), *evidence)


def _pcie_rules(problems: list[Problem]) -> bool:
    return any(not rule.startswith("roce-") for rule, _ in problems)
