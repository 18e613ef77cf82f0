"""Parser of the key/value outputs of `npu-smi info -t <type>`.

Their shapes are described in tests/corpus/npu-smi/FORMATS.md §1.7.

Copies in docs and issues lose TABs and blank lines, so block boundaries are taken from the
keys (`Chip ID`, `Chip Name : mcu`, a repeated key), never from blank lines or column offsets.

Covered: board, usages, health, common, memory, ecc, temp, power, pcie-err, and a per-chip
summary of proc-mem. Values stay as printed where a number would lose meaning (hex ids,
versions, serial numbers, error codes); `NA` is kept as the string "NA" for the consumer to judge.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from probes.errors import ParseError
from probes.npu_smi.kvlines import (
    Line,
    as_int,
    classify_all,
    implausible_warning,
    normalise_key,
    parse_value,
    process_of,
    warning,
)
from probes.npu_smi.model import Value
from probes.npu_smi.model_kv import KvBlock, KvOutput, Process

KV_KINDS = (
    "usages",
    "health",
    "board",
    "common",
    "memory",
    "ecc",
    "proc-mem",
    "temp",
    "power",
    "pcie-err",
    "kv",
)

# Kinds whose `Chip ID : n` line closes the chip's fields (25.x `-t temp`/`-t power` too,
# followed by the MCU's sensors closed by `Chip Name : MCU`); every other kind opens with it.
# Where the text shows the order (a field before the first `Chip ID`), the text decides.
_CHIP_ID_AFTER = frozenset({"usages", "ecc", "proc-mem", "temp", "power"})

# Card-level lines: they describe the `-i` card, not a chip block.
_NPU_ID_KEY = "npu_id"
_CHIP_COUNT_KEY = "chip_count"
_CHIP_ID_KEY = "chip_id"
_CHIP_NAME_KEY = "chip_name"
_MCU_NAMES = frozenset({"mcu"})


# ---------------------------------------------------------------------------------------------
# kind


def guess_kv_kind(fields: Iterable[str]) -> str:
    """The `-t` kind from the keys present, in order of appearance (labels or normalised keys).

    Pass `Process id` for proc-mem lines. Returns "kv" when no kind fits.
    """
    keys = [normalise_key(key) for key in fields]
    ids = (_NPU_ID_KEY, _CHIP_COUNT_KEY, _CHIP_ID_KEY, _CHIP_NAME_KEY)
    data = [key for key in keys if key not in ids]
    present = set(keys)

    def any_key(predicate: Any) -> bool:
        return any(predicate(key) for key in data)

    if "process_id" in present or "no_process_in_device" in present:
        return "proc-mem"
    if present & {"health_status", "health", "error_code", "error_information"}:
        return "health"
    if any_key(lambda k: k.endswith(("bit_error_count", "err_cnt", "isolated_pages_count"))):
        return "ecc"
    if any_key(lambda k: k.endswith("error_count") or k == "retry_count"):
        return "pcie-err"
    board_keys = {"software_version", "pcb_id", "bom_id", "chip_version", "board_id"}
    if present & board_keys or any_key(lambda k: k.startswith(("pci_", "subsystem_"))):
        return "board"
    if any_key(lambda k: k.startswith(("aicore_freq", "aicore_cur_freq", "aicore_count"))):
        return "common"
    if any_key(lambda k: k.endswith("clock_speed_mhz") or k == "capacity_mb"):
        return "memory"
    if present & {"hbm_manufacturer_id", "hbm_temperature_c"}:
        return "memory"
    if any_key(lambda k: k.endswith("usage_rate_percent")):
        return _usages_or_common(keys)
    if data and all(key.endswith("_c") for key in data):
        return "temp"  # 25.x adds the MCU's board sensors (`LM75A_TE (C)`) and its `Chip Name`
    if data and all(key.endswith("_w") for key in data):
        return "power"
    if _CHIP_NAME_KEY in present and any_key(lambda k: k.endswith(("_c", "_w"))):
        return "common"  # only the MCU block of `-t common` survived
    return "kv"


def _usages_or_common(keys: Sequence[str]) -> str:
    """Both print usage rates; `-t usages` puts `Chip ID` after them, `-t common` before."""
    if _CHIP_ID_KEY not in keys:
        return "usages"
    first_rate = next(i for i, key in enumerate(keys) if key.endswith("usage_rate_percent"))
    return "common" if keys.index(_CHIP_ID_KEY) < first_rate else "usages"


def _canonical_kind(kind: str) -> str:
    canonical = kind.strip().lower().replace("_", "-")
    if canonical not in KV_KINDS:
        hint = " (use parse_topo)" if canonical == "topo" else ""
        raise ValueError(f"unknown npu-smi key/value kind {kind!r}{hint}; known: {KV_KINDS}")
    return canonical


# ---------------------------------------------------------------------------------------------
# parse_kv


@dataclass
class _BlockBuilder:
    """The block being filled (mutable scratch of one parse_kv call)."""

    chip_id: int | None = None
    name: str | None = None
    fields: dict[str, Value] = field(default_factory=dict)
    has_chip_line: bool = False
    last_key: str | None = None
    processes: list[Process] = field(default_factory=list)
    saw_no_process: bool = False

    @property
    def has_content(self) -> bool:
        return bool(self.fields or self.processes or self.saw_no_process)

    @property
    def is_empty(self) -> bool:
        return not (self.has_content or self.has_chip_line or self.name)

    def build(self, kind: str) -> KvBlock:
        fields = dict(self.fields)
        if kind == "proc-mem":
            fields["process_count"] = len(self.processes)
            memory = [p.memory_mb for p in self.processes]
            if all(m is not None for m in memory):
                fields["process_memory_mb"] = sum(m for m in memory if m is not None)
        return KvBlock(self.chip_id, self.name, MappingProxyType(fields))


@dataclass
class _KvState:
    """What the walk over a `-t` output has seen so far; only parse_kv builds it."""

    kind: str
    chip_id_after: bool
    current: _BlockBuilder = field(default_factory=_BlockBuilder)
    blocks: list[KvBlock] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    npu_id: int | None = None
    chip_count: int | None = None
    saw_npu_id: bool = False

    def close(self) -> None:
        if not self.current.is_empty:
            self.blocks.append(self.current.build(self.kind))
        self.current = _BlockBuilder()


def _chip_id_after(kind: str, lines: Sequence[Line]) -> bool:
    """Whether `Chip ID` closes a chip's fields: the text says so when it has both a field
    and a `Chip ID` line (`-t usages` and `-t common` differ only in this); else the kind."""
    first_data = next((ln.line_no for ln in lines if _is_data(ln)), None)
    first_chip = next((ln.line_no for ln in lines if ln.key == _CHIP_ID_KEY), None)
    if first_data is None or first_chip is None:
        return kind in _CHIP_ID_AFTER
    return first_data < first_chip


def _is_data(line: Line) -> bool:
    ids = (_NPU_ID_KEY, _CHIP_COUNT_KEY, _CHIP_ID_KEY, _CHIP_NAME_KEY)
    return line.kind == "kv" and line.key not in ids


def parse_kv(text: str, kind: str | None = None) -> KvOutput:
    """Parse `npu-smi info -t <kind>` key/value output; `kind` None guesses it from the keys."""
    given = None if kind is None else _canonical_kind(kind)
    lines = classify_all(text)
    if not any(line.kind in ("kv", "proc", "noproc") for line in lines):
        raise ParseError(f"npu-smi info -t {given or '<type>'}", _no_kv_reason(lines))
    if given is None:
        guess_keys = [line.key or _PSEUDO_KEYS.get(line.kind, "") for line in lines]
        resolved = guess_kv_kind(key for key in guess_keys if key)
    else:
        resolved = given
    state = _KvState(resolved, _chip_id_after(resolved, lines))
    for line in lines:
        _feed(state, line)
    state.close()
    return KvOutput(
        kind=resolved,
        npu_id=state.npu_id,
        blocks=tuple(state.blocks),
        warnings=tuple(state.warnings),
        chip_count=state.chip_count,
    )


def _no_kv_reason(lines: Sequence[Line]) -> str:
    if not lines:
        return "empty output, no `key : value` line"
    return f"no `key : value` line; it starts with {lines[0].text.strip()[:120]!r}"


_PSEUDO_KEYS = {"proc": "process_id", "noproc": "no_process_in_device"}


def _feed(state: _KvState, line: Line) -> None:
    if line.kind == "kv":
        _feed_kv(state, line)
    elif line.kind == "cont":
        _feed_continuation(state, line)
    elif line.kind == "proc":
        _feed_process(state, line)
    elif line.kind == "noproc":
        state.current.saw_no_process = True
    else:
        state.warnings.append(warning(line, "not understood"))


def _feed_kv(state: _KvState, line: Line) -> None:
    value = parse_value(line.value, line.key)
    implausible = implausible_warning(line)
    if implausible is not None:
        state.warnings.append(implausible)
    if line.key == _NPU_ID_KEY:
        _feed_npu_id(state, line, value)
    elif line.key == _CHIP_COUNT_KEY:
        state.chip_count = as_int(value)
    elif line.key == _CHIP_ID_KEY:
        _feed_chip_id(state, line, value)
    elif line.key == _CHIP_NAME_KEY and line.value.lower() in _MCU_NAMES:
        _feed_mcu_name(state)
    else:
        if line.key in state.current.fields:
            state.close()  # a repeated key: the copy lost the line that separated two blocks
        state.current.fields[line.key] = value
        state.current.last_key = line.key


def _feed_mcu_name(state: _KvState) -> None:
    """`Chip Name : mcu` opens the MCU block (`-t common`); where `Chip ID` closes a chip's
    fields, it closes the MCU's (25.x `-t temp`: the LM75 board sensors come before it)."""
    if state.chip_id_after:
        state.current.name = "mcu"
        state.close()
        return
    state.close()
    state.current.name = "mcu"


def _feed_npu_id(state: _KvState, line: Line, value: Value) -> None:
    npu_id = as_int(value)
    if state.saw_npu_id and npu_id != state.npu_id:
        reason = f"a second card in one output; kept NPU ID {state.npu_id}"
        state.warnings.append(warning(line, reason))
        state.close()
        return
    if npu_id is None:
        state.warnings.append(warning(line, "NPU ID is not an integer"))
    state.npu_id = npu_id
    state.saw_npu_id = True


def _feed_chip_id(state: _KvState, line: Line, value: Value) -> None:
    chip_id = as_int(value)
    if chip_id is None:
        state.warnings.append(warning(line, "Chip ID is not an integer"))
    current = state.current
    if state.chip_id_after:
        # Closes the chip even when its fields were cut off: they belong to no other chip.
        if current.has_chip_line:
            state.close()
        state.current.chip_id, state.current.has_chip_line = chip_id, True
        state.close()
        return
    if not current.is_empty:
        state.close()
    state.current.chip_id, state.current.has_chip_line = chip_id, True


def _feed_continuation(state: _KvState, line: Line) -> None:
    key = state.current.last_key
    if key is None:
        state.warnings.append(warning(line, "continuation line without a key before it"))
        return
    if line.value:
        state.current.fields[key] = f"{state.current.fields[key]}\n{line.value}"


def _feed_process(state: _KvState, line: Line) -> None:
    process = process_of(line)
    if process is None:
        state.warnings.append(warning(line, "process id is not an integer"))
    else:
        state.current.processes.append(process)
