"""hccn_tool, the Ascend driver's tool for the NPUs' own network ports (RoCE): each port's link
state and network health, read through the Host with a timeout and output cap.

What it prints, one line each, as shown in vendor documents (samples in tests/data/hccn/):

- `hccn_tool -i N -link -g`: `link status: UP` (hiascend MindX DL 6.0.RC2 fault-diag guide,
  mindxdlFDUG017), `link status: DOWN` (Ascend/mind-cluster
  component/ascend-common/devmanager/hccn/hccn_tool.go @ 448fb33a6f6e, the NPU Exporter's
  reader, which passes the chip's physical id as N);
- `hccn_tool -i N -net_health -g`: `net health status: Init` (mindxdlFDUG017), `Fault` after
  `-link -s down` and `Success` after recovery (Ascend/mind-cluster
  docs/en/scheduling/usage/basic_scheduling/08_elastic_training.md @ 0672fe0ac1c5),
  `Receive timeout` (HDK A3 HCCN Tool reference hccntool_019).

Only the word after the colon is read; what it means is the checks' (checks/builtin/pcie.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from probes.errors import ParseError
from probes.host import CommandResult, Host
from probes.textsafe import one_line

# where the driver installs it (mindxdlFDUG017 runs it by this path; vllm-ascend's container
# examples mount this path)
HCCN_TOOL = "/usr/local/Ascend/driver/tools/hccn_tool"
# the NPU ports' configuration (IP, detect IP, gateway): present where they were set up
HCCN_CONF = "/etc/hccn.conf"

# hccn_tool does not support concurrent calls (HCCN Tool reference, EDOC1100303313, as quoted
# in hiascend forum thread-0262137853467356029): one call at a time in this process
HCCN_LOCK = threading.Lock()

# field -> (the option that asks for it, the label of the line that answers)
_FIELDS = {"link": ("-link", "link status"), "net_health": ("-net_health", "net health status")}
# a call outcome that the next call would repeat: stop asking
_STOPS = frozenset({"not_found", "timeout", "output_limit", "not_recorded"})


@dataclass(frozen=True)
class PortStatus:
    """One NPU port: its link word and net health word as printed (None when unread), and why
    a word is missing."""

    device_id: int
    link: str | None
    net_health: str | None
    unread: str | None = None


def parse_status(text: str, field: str) -> str:
    """The word after `link status:` (field "link") or `net health status:` ("net_health").
    Raises ParseError when no such line is in `text`."""
    option, label = _FIELDS[field]
    for line in text.splitlines():
        key, colon, word = line.partition(":")
        if colon and " ".join(key.split()).lower() == label and word.strip():
            return " ".join(word.split())
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "no output")
    raise ParseError(f"`hccn_tool {option} -g` output",
                     f"no `{label}:` line (it printed: {one_line(first)[:120]})")


def run_hccn_tool(host: Host, args: Sequence[str], timeout_s: float) -> CommandResult:
    """`hccn_tool ARGS`, one call at a time; waiting for another call counts against
    `timeout_s`."""
    argv = (HCCN_TOOL, *args)
    began = time.monotonic()
    if not HCCN_LOCK.acquire(timeout=timeout_s):
        return CommandResult(argv, "timeout", duration_s=time.monotonic() - began,
                             error=f"another hccn_tool call was still running after "
                                   f"{timeout_s:g} s")
    try:
        return host.run(list(argv), timeout_s=max(0.0, timeout_s - (time.monotonic() - began)))
    finally:
        HCCN_LOCK.release()


def read_ports(host: Host, device_ids: Sequence[int], timeout_s: float) -> tuple[PortStatus, ...]:
    """Link and net health of each port; after a call that the next would repeat (tool
    missing, hung, not recorded) the remaining ports are unread with that reason."""
    found: list[PortStatus] = []
    stop: str | None = None
    for device_id in device_ids:
        if stop is not None:
            found.append(PortStatus(device_id, None, None, stop))
            continue
        words: dict[str, str | None] = {}
        why: list[str] = []
        for field in _FIELDS:
            word, problem, stopped = _read_field(host, device_id, field, timeout_s)
            words[field] = word
            why += [problem] if problem else []
            stop = stop or stopped
        found.append(PortStatus(device_id, words["link"], words["net_health"],
                                "; ".join(why) or None))
    return tuple(found)


def _read_field(host: Host, device_id: int, field: str,
                timeout_s: float) -> tuple[str | None, str | None, str | None]:
    """(word, why unread, why to stop asking) of one `-g` call."""
    option, _ = _FIELDS[field]
    result = run_hccn_tool(host, ["-i", str(device_id), option, "-g"], timeout_s)
    if not result.ok:
        reason = one_line(result.describe())
        return None, reason, reason if result.outcome in _STOPS else None
    try:
        return parse_status(result.stdout, field), None, None
    except ParseError as exc:
        return None, one_line(exc.reason), None
