"""devices.nodes: the device nodes a process needs to reach its NPUs, per NPU family.

Which shared nodes a family needs follows Huawei's container-device generator
(Ascend/mind-cluster component/ascend-common/cdi/devnode.go): /dev/davinci_manager always;
devmm_svm and hisi_hdc for every family except Ascend 950 (hisi_hdc only), the 310B and the
Atlas 200 modules (neither). The family comes from the PCI device ids (hicann/driver
ascend_bug_report.sh) or, without them, from the chip names npu-smi prints; when neither
names it, the check says so and judges only what every family needs.
"""

from __future__ import annotations

from dataclasses import dataclass

from checks.builtin import facts
from checks.builtin.dev_nodes import not_an_npu_machine
from checks.context import Context
from checks.model import Finding, failed, passed, warned
from probes.environment import DeviceNode, DeviceNodes
from probes.errors import HostError, NotRecorded
from probes.words import counted

MANAGER = "davinci_manager"
COMMON = ("devmm_svm", "hisi_hdc")

# The check's rules, by name -> the statuses they give (its playbook lists the same rules under
# "What the check does"; tests/checks/test_check_rules.py).
CHECK_RULES: dict[str, dict[str, str]] = {
    "devices.nodes": {
        "dev-unreadable": "skip",
        "not-an-npu-machine": "skip",
        "missing-shared-node": "fail",
        "missing-davinci-node": "fail",
        "not-a-character-device": "warn",
        "missing-usual-node": "warn",
    },
}


@dataclass(frozen=True)
class NodeRule:
    """The shared nodes one NPU family needs (missing: fail) or usually has (missing: warn)."""

    name: str  # the rule's family group, as the summary says it
    required: tuple[str, ...]
    expected: tuple[str, ...] = ()
    note: str = ""


RULES = {
    "910": NodeRule("Ascend 910/910B/910_93", (MANAGER, *COMMON)),
    "310P": NodeRule("Ascend 310P", (MANAGER, *COMMON)),
    "310": NodeRule("Ascend 310", (MANAGER,), COMMON,
                    "Atlas 200 modules (Ascend 310) have no devmm_svm or hisi_hdc"),
    "950": NodeRule("Ascend 950", (MANAGER, "hisi_hdc")),
    "310B": NodeRule("Ascend 310B", (MANAGER,), (),
                     "the 310B's own manager nodes (svm0, ts_aisle, ...) are not judged"),
}
UNKNOWN = NodeRule("NPU family unknown", (MANAGER,), COMMON,
                   "NPU family unknown: devmm_svm and hisi_hdc are needed on every family "
                   "but Ascend 950, 310B and Atlas 200")

# probes.pci_ids family names -> rule
_PCI_FAMILY_RULE = {
    "Ascend 310": "310",
    "Ascend 310P": "310P",
    "Ascend 910": "910",
    "Ascend 910B (A2)": "910",
    "Ascend 910_93 (A3)": "910",
    "Ascend 950": "950",
}


def rule_of_chip_name(name: str) -> str | None:
    """The rule for a chip name as npu-smi prints it (`910B4`, `Ascend910`, `310P3`, ...)."""
    bare = name.strip().removeprefix("Ascend").strip()
    if "950" in bare:
        return "950"
    for prefix in ("310B", "310P", "310", "910"):
        if bare.startswith(prefix):
            return prefix
    return None


@dataclass(frozen=True)
class Families:
    """The NPU families of this machine and where they were read."""

    rules: tuple[str, ...]  # keys of RULES; empty when unknown
    source: str  # evidence line


def _from_pci(ctx: Context) -> Families | None:
    from probes.pci_ids import ascend_families

    try:
        found = ascend_families(ctx.host)
    except (NotRecorded, HostError):
        return None
    if not found:
        return None
    names = sorted(set(found.values()))
    return Families(tuple(sorted({_PCI_FAMILY_RULE[n] for n in names})),
                    f"NPU family {', '.join(names)} from the PCI device ids of "
                    f"{counted(len(found), 'function')}")


def _from_npu_smi(ctx: Context) -> Families | None:
    reading = facts.npu(ctx)
    if reading.is_error or reading.kind != "info":
        return None
    names = sorted({str(c.get("name") or "") for c in reading.document.get("chips", [])} - {""})
    rules = {rule_of_chip_name(n) for n in names}
    if not names or None in rules:
        return None
    return Families(tuple(sorted(r for r in rules if r)),
                    f"NPU family from npu-smi chip names {', '.join(names)}")


def families(ctx: Context) -> Families:
    return (_from_pci(ctx) or _from_npu_smi(ctx)
            or Families((), "NPU family unknown: no Ascend PCI device id and no npu-smi "
                            "chip name the doctor knows"))


def combined_rule(found: Families) -> NodeRule:
    """One rule for every family present (a mixed box needs the union)."""
    rules = [RULES[key] for key in found.rules] or [UNKNOWN]
    if len(rules) == 1:
        return rules[0]
    required = tuple(dict.fromkeys(n for r in rules for n in r.required))
    expected = tuple(dict.fromkeys(n for r in rules for n in r.expected if n not in required))
    notes = "; ".join(r.note for r in rules if r.note)
    return NodeRule(" + ".join(r.name for r in rules), required, expected, notes)


def docker_hint(rule: NodeRule) -> str:
    shared = " ".join(f"--device /dev/{n}" for n in (*rule.required, *rule.expected))
    return f"pass every node: --device /dev/davinciN (one per card) {shared}"


def _describe(node: DeviceNode) -> str:
    return f"{node.path}: {node.kind.replace('_', ' ')}"


def _missing(nodes: DeviceNodes, names: tuple[str, ...]) -> list[str]:
    return [f"/dev/{n}" for n in names if not nodes.shared[n].present]


def device_nodes(ctx: Context) -> Finding:
    early = not_an_npu_machine(ctx)
    if early is not None:
        return early
    nodes = facts.device_nodes(ctx)
    chips = facts.chip_count(ctx)
    found = families(ctx)
    rule = combined_rule(found)
    evidence = [*facts.files_seen(ctx), found.source, *([rule.note] if rule.note else []),
                *(_describe(n) for n in [*nodes.davinci.values(), *nodes.shared.values()])]
    missing = _missing(nodes, rule.required)
    rules = ["missing-shared-node"] if missing else []
    if chips is not None and len(nodes.davinci) < chips:
        missing.append(f"{chips - len(nodes.davinci)} of {chips} /dev/davinci<N> nodes")
        rules.append("missing-davinci-node")
    if missing:
        return failed(f"missing {', '.join(missing)} ({rule.name})", docker_hint(rule),
                      *evidence, rules=tuple(rules))
    judged = [*nodes.davinci.values(),
              *(nodes.shared[n] for n in (*rule.required, *rule.expected))]
    wrong = [_describe(n) for n in judged if n.present and n.kind != "char_device"]
    if wrong:
        return warned("not character devices: " + "; ".join(wrong),
                      "device nodes come from the driver; in a container pass them with "
                      "--device, do not bind-mount files", *evidence,
                      rules=("not-a-character-device",))
    absent = _missing(nodes, rule.expected)
    if absent:
        return warned(f"missing {', '.join(absent)} ({rule.note})", docker_hint(rule),
                      *evidence, rules=("missing-usual-node",))
    shared = ", ".join(rule.required)
    summary = f"{counted(len(nodes.davinci), 'davinci node')} and {shared} present ({rule.name})"
    return passed(summary, *evidence)
