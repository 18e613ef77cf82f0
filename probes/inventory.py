"""One entry point for any npu-smi output: detect what it is, parse it, give JSON.

Used by `ascend-doctor npu` for live machines, recordings and pasted outputs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from probes.errors import ParseError
from probes.host import DEFAULT_TIMEOUT_S, CommandResult, Host

if TYPE_CHECKING:
    from probes.npu_smi import NpuInfo, NpuSmiError, ParseResult

# The parsers (the probes.npu_smi package) are imported when there is an output to parse: a
# machine without npu-smi, and a doctor run that never reaches them, skip their import.

SCHEMA = "ascend-npu/1"

# npu-smi must not run from several threads at once (a restriction of the npu-smi documentation,
# docs/sources.md): the doctor's checks, a bundle and the console's sampler all call it through
# run_npu_smi.
NPU_SMI_LOCK = threading.Lock()


@dataclass(frozen=True)
class NpuReading:
    """What one npu-smi output says, as the JSON contract of docs/npu-inventory.md."""

    kind: str  # info, mapping, list, watch, error, a -t kind, or "unavailable"
    document: dict[str, Any]
    noise: tuple[str, ...] = ()
    parsed: ParseResult | None = None  # the parser's dataclass (NpuInfo, NpuSmiError, ...)
    command: CommandResult | None = None  # set when npu-smi could not give an output

    @property
    def info(self) -> NpuInfo | None:
        """The main table, when this reading is one."""
        if self.parsed is None:
            return None
        from probes.npu_smi import NpuInfo

        return self.parsed if isinstance(self.parsed, NpuInfo) else None

    @property
    def error(self) -> NpuSmiError | None:
        """The error npu-smi printed instead of an output, when this reading is one."""
        if self.parsed is None:
            return None
        from probes.npu_smi import NpuSmiError

        return self.parsed if isinstance(self.parsed, NpuSmiError) else None

    @property
    def error_text(self) -> str:
        return str(self.document.get("error", "")) if self.is_error else ""

    @property
    def is_error(self) -> bool:
        return self.kind in ("error", "unavailable")


def parse_output(text: str, what: str = "npu-smi output") -> NpuReading:
    """Detect the kind of an npu-smi output and parse it. Raises ParseError."""
    from probes import npu_smi

    parsed = npu_smi.parse(text, what)
    doc = _with_schema(npu_smi.to_json(parsed.result))
    if parsed.noise:
        doc.setdefault("warnings", [])
        doc["noise"] = list(parsed.noise)
    return NpuReading(str(doc.get("kind", parsed.kind)), doc, parsed.noise, parsed.result)


def _with_schema(doc: dict[str, Any]) -> dict[str, Any]:
    return {"schema": SCHEMA, **{k: v for k, v in doc.items() if k != "schema"}}


def unavailable(result: CommandResult, hint: str) -> NpuReading:
    """The reading of a machine where npu-smi could not give a table."""
    doc = {"schema": SCHEMA, "kind": "error", "error": f"{result.describe()}; {hint}"}
    return NpuReading("unavailable", doc, command=result)


def run_npu_smi(host: Host, args: Sequence[str],
                timeout_s: float = DEFAULT_TIMEOUT_S) -> CommandResult:
    """`npu-smi ARGS`, one call at a time in this process; waiting for another call counts
    against `timeout_s`, so a hung npu-smi elsewhere costs a caller no more than its timeout."""
    argv = ("npu-smi", *args)
    began = time.monotonic()
    if not NPU_SMI_LOCK.acquire(timeout=timeout_s):
        return CommandResult(argv, "timeout", duration_s=time.monotonic() - began,
                             error=f"another npu-smi call was still running after {timeout_s:g} s")
    try:
        left_s = max(0.0, timeout_s - (time.monotonic() - began))
        return host.run(list(argv), timeout_s=left_s)
    finally:
        NPU_SMI_LOCK.release()


def read_live(host: Host, timeout_s: float = DEFAULT_TIMEOUT_S) -> NpuReading:
    """Run `npu-smi info` on the host and parse what it printed."""
    result = run_npu_smi(host, ["info"], timeout_s)
    if result.outcome != "exited":
        return unavailable(result, _hint_for(result))
    text = result.stdout if result.stdout.strip() else result.stderr
    if result.exit_code != 0 and result.stderr.strip():
        text = result.stdout + "\n" + result.stderr
    try:
        return parse_output(text, "`npu-smi info`")
    except ParseError as exc:
        message = str(exc)
        if result.exit_code != 0:
            first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "no output")
            message = f"{result.describe()}: {first}"
        doc = {"schema": SCHEMA, "kind": "error", "error": message}
        return NpuReading("error", doc)


def _hint_for(result: CommandResult) -> str:
    if result.outcome == "not_found":
        return "no NPU driver tools here (in a container, mount /usr/local/bin/npu-smi)"
    if result.outcome == "timeout":
        return "npu-smi hung; the driver or a device may be stuck (see `dmesg`)"
    if result.outcome == "output_limit":
        return "npu-smi printed without end; the driver or a device may be stuck (see `dmesg`)"
    if result.outcome == "not_recorded":
        return "the recording holds no `npu-smi info` output"
    return "check that npu-smi is executable by this user"
