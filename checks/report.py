"""Machine reports of a doctor run: JSON (ascend-doctor/1) and JUnit XML.

The terminal report is in checks.report_terminal (it needs rich; these do not).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from checks.model import Result
from checks.runner import Run
from probes.textsafe import xml_text

if TYPE_CHECKING:
    import datetime as dt
    import xml.etree.ElementTree as ET

SCHEMA = "ascend-doctor/1"
TOOL_VERSION = "0.1.0"

@dataclass(frozen=True)
class HostInfo:
    """What a report says about where it ran: machine, interpreter, policy, model."""

    description: str  # live / live under DIR / recording of HOST taken T
    python: str  # the interpreter whose packages were inspected, or why none
    policy: str
    model: str | None = None


def to_json(run: Run, host: HostInfo, now: dt.datetime | None = None) -> dict[str, Any]:
    import datetime as dt  # the terminal report has no timestamp

    stamp = (now or dt.datetime.now(dt.timezone.utc)).isoformat(timespec="seconds")
    return {
        "schema": SCHEMA,
        "tool_version": TOOL_VERSION,
        "generated_at": stamp,
        "host": asdict(host),
        "results": [_result_json(r) for r in run.results],
        "counts": run.counts(),
        "exit_code": run.exit_code(),
        "duration_ms": round(run.duration_ms, 1),
    }


def _result_json(result: Result) -> dict[str, Any]:
    doc = asdict(result)
    doc["evidence"] = list(result.evidence)
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
    for key, value in asdict(host).items():
        ET.SubElement(props, "property", {"name": f"host.{key}",
                                          "value": xml_text(str(value or ""))})
    for result in run.results:
        _junit_case(suite, result)
    ET.indent(suite)
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"


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
