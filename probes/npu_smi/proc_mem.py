"""Parser of `npu-smi info -t proc-mem -i N`: per chip, its processes and their device memory.

    \tProcess id:1234 Process name:python      Process memory(MB):7746
    \tChip ID                        : 0

A chip's process lines (or `No process in device.`) come before its `Chip ID` line (#061).
"""

from __future__ import annotations

from collections.abc import Sequence

from probes.errors import ParseError
from probes.npu_smi.kvlines import Line, as_int, classify_all, parse_value, process_of, warning
from probes.npu_smi.model_kv import ChipProcesses, Process, ProcMem

_NPU_ID_KEY = "npu_id"
_CHIP_COUNT_KEY = "chip_count"
_CHIP_ID_KEY = "chip_id"


def _no_process_reason(lines: Sequence[Line]) -> str:
    if not lines:
        return "empty output, no process line"
    first = lines[0].text.strip()[:120]
    return f"no process line and no `No process in device.`; it starts with {first!r}"


def parse_proc_mem(text: str) -> ProcMem:
    """`npu-smi info -t proc-mem -i N`: per chip, the processes and their device memory."""
    lines = classify_all(text)
    # Every chip prints a process line or `No process in device.`; without one this is
    # some other output (its `Chip ID` lines alone would pass for empty chips).
    if not any(line.kind in ("proc", "noproc") for line in lines):
        raise ParseError("npu-smi info -t proc-mem", _no_process_reason(lines))
    chips: list[ChipProcesses] = []
    processes: list[Process] = []
    pending = False  # lines seen since the last `Chip ID`: a chip without its id line
    warnings: list[str] = []
    npu_id: int | None = None
    for line in lines:
        if line.kind == "proc":
            process = process_of(line)
            if process is None:
                warnings.append(warning(line, "process id is not an integer"))
            else:
                processes.append(process)
            pending = True
        elif line.kind == "noproc":
            pending = True
        elif line.kind == "kv" and line.key == _CHIP_ID_KEY:
            chips.append(ChipProcesses(as_int(parse_value(line.value)), tuple(processes)))
            processes, pending = [], False
        elif line.kind == "kv" and line.key == _NPU_ID_KEY:
            npu_id = as_int(parse_value(line.value))
        elif line.kind == "kv" and line.key == _CHIP_COUNT_KEY:
            continue
        else:
            # `Get pid name failed.` among others: kept for the reader, never dropped.
            warnings.append(warning(line, "not a process line"))
    if pending:
        chips.append(ChipProcesses(None, tuple(processes)))
    return ProcMem(npu_id=npu_id, chips=tuple(chips), warnings=tuple(warnings))
