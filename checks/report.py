"""Machine reports of a doctor run: JSON (ascend-doctor/1) and JUnit XML.

The terminal report is in checks.cli.report_terminal (it needs rich; these do not).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from checks import TOOL_VERSION
from checks.model import Result
from checks.runner import Run
from probes.target.model import Target, shell_target
from probes.target.model import to_json as target_json
from probes.textsafe import cut, cut_lines, xml_text

if TYPE_CHECKING:
    import datetime as dt
    import xml.etree.ElementTree as ET

SCHEMA = "ascend-doctor/1"

@dataclass(frozen=True)
class HostInfo:
    """What a report says about where it ran: machine, target, interpreter, policy, model."""

    description: str  # live / live under DIR / recording of HOST taken T
    python: str  # the interpreter whose packages were inspected, or why none
    policy: str
    model: str | None = None
    target: Target = field(default_factory=shell_target)  # whose deployment was judged
    replay: bool = False  # judged from a recording (--from), not a live machine

    def __post_init__(self) -> None:
        # a recording names its host and interpreter: cut once, for every output

        for name in ("description", "python", "policy"):
            object.__setattr__(self, name, cut(getattr(self, name)))
        if self.model is not None:
            object.__setattr__(self, "model", cut(self.model))

    def host_json(self) -> dict[str, Any]:
        """The `host` object: everything but the target (which has its own)."""
        return {"description": self.description, "python": self.python,
                "policy": self.policy, "model": self.model}


def target_lines(target: Target, replay: bool = False) -> list[str]:
    """The target as a report's header says it: what, how chosen, and what it gave. In a
    replay the shell is the recorded one, and --pid/--env-file are refused."""
    label = "the recorded shell" if replay and target.kind == "shell" else target.label
    lines = [f"target: {label} — {target.chosen}"]
    proc = target.process
    if target.kind == "shell" and replay:
        lines.append("  environment-based verdicts judge what the recording holds of its shell; "
                     "to judge a service, record it with `ascend-doctor bundle --pid PID`")
    elif target.kind == "shell":
        lines.append("  environment-based verdicts judge this shell's environment; name the "
                     "service with --pid PID or --env-file FILE")
    else:
        facts = [f"environment: {target.environment}"]
        if proc is not None and proc.cpus_allowed is not None:
            from probes.target.proc import format_cpu_list

            facts.append(f"CPUs: {format_cpu_list(proc.cpus_allowed)}")
        if target.npus:
            facts.append("NPUs: " + ", ".join(str(n) for n in sorted({u.npu_id
                                                                     for u in target.npus})))
        lines.append("  " + "   ".join(facts))
    if target.environment_error:
        lines.append(f"  ! environment not read: {target.environment_error}")
    others = [c for c in target.candidates if c.pid != target.pid]
    if others:
        lines.append("  other candidates: " + "; ".join(f"{c.pid} {c.label}" for c in others))
    lines += [f"  ! {problem}" for problem in target.problems]

    return list(cut_lines(tuple(cut(line) for line in lines), max_lines=64))


def to_json(run: Run, host: HostInfo, now: dt.datetime | None = None) -> dict[str, Any]:
    stamp = now.isoformat(timespec="seconds") if now is not None else _utc_now()
    return {
        "schema": SCHEMA,
        "tool_version": TOOL_VERSION,
        "generated_at": stamp,
        "host": host.host_json(),
        "target": target_json(host.target),
        "results": [_result_json(r) for r in run.results],
        "counts": run.counts(),
        "exit_code": run.exit_code(),
        "duration_ms": round(run.duration_ms, 1),
    }


def _utc_now() -> str:
    """Now in UTC, as datetime's isoformat(timespec="seconds") writes it (without importing
    datetime, which costs more than writing the report). From time.time(): gmtime() with no
    argument reads C's time(), a coarse clock that can still show the previous second."""
    return time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(time.time()))


def _result_json(result: Result) -> dict[str, Any]:
    doc = asdict(result)
    doc["evidence"] = list(result.evidence)
    doc["rules"] = list(result.rules)
    doc["duration_ms"] = round(result.duration_ms, 1)
    if not result.waiver:
        doc.pop("waiver")
    return doc


def to_junit(run: Run, host: HostInfo) -> str:
    import xml.etree.ElementTree as ET  # only for --junit

    counts = run.counts()
    suite = ET.Element("testsuite", {
        "name": "ascend-doctor", "tests": str(len(run.results)),
        "failures": str(counts["fail"]), "errors": str(counts["error"]),
        "skipped": str(counts["skip"]), "time": f"{run.duration_ms / 1000:.3f}",
    })
    props = ET.SubElement(suite, "properties")
    for key, value in [*host.host_json().items(), *_target_properties(host.target)]:
        ET.SubElement(props, "property", {"name": f"host.{key}" if "." not in key else key,
                                          "value": xml_text(str(value or ""))})
    for result in run.results:
        _junit_case(suite, result)
    ET.indent(suite)
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"


def _target_properties(target: Target) -> list[tuple[str, object]]:
    """The target as flat JUnit properties: target.kind, target.pid, ..."""
    doc = target_json(target)
    serving = doc["serving"]
    props: list[tuple[str, object]] = [
        (f"target.{key}", doc[key])
        for key in ("kind", "label", "chosen", "pid", "environment", "environment_error")]
    for name in ("model", "tensor_parallel_size", "max_model_len"):
        if serving.get(name):
            props.append((f"target.serving.{name}", serving[name]["value"]))
    if target.candidates:
        props.append(("target.candidates", ", ".join(f"{c.pid} ({c.label})"
                                                     for c in target.candidates)))
    return props


def _junit_case(suite: ET.Element, result: Result) -> None:
    import xml.etree.ElementTree as ET

    # every value passes xml_text: a recorded error may hold characters XML 1.0 forbids
    case = ET.SubElement(suite, "testcase", {
        "classname": xml_text(f"ascend-doctor.{result.category}"), "name": xml_text(result.id),
        "time": f"{result.duration_ms / 1000:.3f}",
    })
    detail = xml_text("\n".join([*result.evidence,
                                 f"fix: {result.remedy}" if result.remedy else "",
                                 f"see: ascend-doctor explain {result.playbook}"]).strip())
    summary = xml_text(result.summary)
    tag = {"fail": "failure", "error": "error", "skip": "skipped"}.get(result.status)
    if result.waiver:
        tag = None
    if tag is not None:
        node = ET.SubElement(case, tag, {"message": summary})
        if tag != "skipped":
            node.text = detail
    if result.status == "warn" or result.waiver:
        case_props = ET.SubElement(case, "properties")
        ET.SubElement(case_props, "property", {"name": "status", "value": result.status})
        if result.waiver:
            ET.SubElement(case_props, "property", {"name": "waiver",
                                                   "value": xml_text(result.waiver)})
        out = ET.SubElement(case, "system-out")
        out.text = f"{result.status.upper()}: {summary}\n{detail}"
