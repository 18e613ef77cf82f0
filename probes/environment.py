"""The Ascend-related environment of a process, and its device nodes.

Rules come from the CANN environment-variable reference and Ascend/mind-cluster's device list
(docs/sources.md, "Install paths, version files and environment", "Logging"). These are
observations with the problems the documented grammar finds; judging is for the checks.

`ascend_environment(env)` is pure; `read_device_nodes(host)` goes through a Host (library
directories are in probes.libraries). NotRecorded policy: when the listing of /dev itself was
not recorded it re-raises (nothing about device nodes is known); a single node whose answer was
not recorded gets the kind "not_recorded", distinct from "missing".
"""

from __future__ import annotations

import itertools
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from probes.errors import NotRecorded
from probes.host import Host, PathKind

# Prefixes of the families the doctor reports (CANN environment variables; TORCH_NPU_ and
# PYTORCH_NPU_ for torch_npu, LCCL_ for the ATB set_env tuning variables).
VARIABLE_PREFIXES = (
    "ASCEND_",
    "ATB_",
    "HCCL_",
    "LCCL_",
    "MINDIE_",
    "MIES_",
    "TORCH_NPU_",
    "PYTORCH_NPU_",
)
# Single names of the CANN/torch_npu/MindIE environment that no prefix above covers.
VARIABLE_NAMES = frozenset(
    {
        "LD_LIBRARY_PATH",
        "PYTHONPATH",
        "TOOLCHAIN_HOME",
        "BISHENG_INSTALL_PATH",
        "TASK_QUEUE_ENABLE",
        "CPU_AFFINITY_CONF",
        "SOC_VERSION",
        "VLLM_VERSION",
    }
)

# ASCEND_GLOBAL_LOG_LEVEL (hiascend canncommercial/800 envref_07_0122): unset, empty or
# illegal all mean the default.
LOG_LEVEL_NAMES: Mapping[int, str] = {0: "DEBUG", 1: "INFO", 2: "WARNING", 3: "ERROR", 4: "NULL"}
DEFAULT_LOG_LEVEL = 3
# ASCEND_HOST_LOG_FILE_NUM (hiascend canncommercial/800 envref_07_0126): log files kept per
# process in each of plog/ and device-<id>/, 1..1000, default 10; each file at most 20 MB.
LOG_FILE_NUM_RANGE = (1, 1000)
DEFAULT_LOG_FILE_NUM = 10
LOG_FILE_MAX_MB = 20

# Ascend/mind-cluster component/ascend-common/cdi/devnode.go: davinci_manager is mandatory;
# devmm_svm and hisi_hdc are the common manager nodes (950 needs only hisi_hdc of the two);
# dvpp_cmdlist is media, optional for LLM serving.
SHARED_DEVICE_NODES = ("davinci_manager", "devmm_svm", "hisi_hdc", "dvpp_cmdlist")

_DAVINCI = re.compile(r"^davinci(\d+)$")

NodeKind = Literal["file", "dir", "char_device", "block_device", "other", "missing", "not_recorded"]
LogDirSource = Literal["ASCEND_PROCESS_LOG_PATH", "ASCEND_WORK_PATH", "HOME"]
_LOG_DIR_VARIABLES: tuple[LogDirSource, ...] = ("ASCEND_PROCESS_LOG_PATH", "ASCEND_WORK_PATH")


# ----------------------------------------------------------------------------- env: pure


@dataclass(frozen=True)
class VisibleDevices:
    """ASCEND_RT_VISIBLE_DEVICES as the runtime reads it.

    `ids` None: the variable is unset (every device visible). Otherwise the logical ids the
    documented grammar accepts, in the order written.
    """

    raw: str | None
    ids: tuple[int, ...] | None
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class LogLevel:
    """ASCEND_GLOBAL_LOG_LEVEL as set, and the level the runtime will use."""

    raw: str | None  # None: unset
    level: int  # the level in effect: the default when unset or illegal
    problems: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return LOG_LEVEL_NAMES[self.level]


@dataclass(frozen=True)
class LogFileNum:
    """ASCEND_HOST_LOG_FILE_NUM as set, and the per-process file count in effect."""

    raw: str | None  # None: unset
    count: int  # files kept per process in plog/ and in device-<id>/
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class LogDir:
    """Where CANN application logs go, by the documented precedence.

    From ASCEND_WORK_PATH this is its `log/` subdirectory: ASCEND_WORK_PATH is the base of
    every component's files, and the logs go to `${ASCEND_WORK_PATH}/log` (CANN
    environment-variable reference, page envref_07_0007).
    """

    path: str | None  # None when nothing resolves (no variable set and HOME unset)
    source: LogDirSource | None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class AscendEnvironment:
    """The variables that shape an Ascend process, parsed by their documented grammars."""

    variables: Mapping[str, str]  # the selected variables, name -> value, sorted by name
    ld_library_path: tuple[str, ...]  # non-empty entries, in order
    ld_library_path_has_empty_entry: bool  # `a::b`, leading/trailing `:`: ld.so reads cwd
    pythonpath: tuple[str, ...]
    visible_devices: VisibleDevices
    log_level: LogLevel
    log_dir: LogDir
    log_file_num: LogFileNum


def is_ascend_variable(name: str) -> bool:
    return name in VARIABLE_NAMES or name.startswith(VARIABLE_PREFIXES)


def split_path_list(value: str | None) -> tuple[str, ...]:
    """`a::b:` -> ("a", "b"): colon-separated entries, empty ones dropped."""
    if not value:
        return ()
    return tuple(part for part in value.split(":") if part)


def has_empty_entry(value: str | None) -> bool:
    return value is not None and value != "" and "" in value.split(":")


def parse_visible_devices(raw: str | None, device_count: int | None = None) -> VisibleDevices:
    """Parse ASCEND_RT_VISIBLE_DEVICES by the documented grammar (HIA envref_07_0028).

    Comma-separated logical ids; only the ids before the first character that is not an ASCII
    digit or a comma are read, and reading stops at the first invalid id (`>= device_count`,
    when the count is known): `1, 2,3` -> (1,); `1,3,8` on 8 devices -> (1, 3);
    `1,2,-1,3` -> (1, 2); `1;2` -> (1,). The documentation supports ascending ids only but
    does not say that reading stops at an out-of-order id, so such ids are kept and the order
    is reported as a problem.
    """
    if raw is None:
        return VisibleDevices(raw=None, ids=None)
    if raw == "":
        return VisibleDevices(raw=raw, ids=(), problems=("set but empty: no device is visible",))
    problems: list[str] = []
    readable = _before_invalid_character(raw, problems)
    ids = _read_ids(raw, readable, device_count, problems)
    problems.extend(_order_problems(ids))
    if not ids:
        problems.append(f"no device id could be read from {raw!r}: no device is visible")
    return VisibleDevices(raw=raw, ids=tuple(ids), problems=tuple(problems))


def _before_invalid_character(raw: str, problems: list[str]) -> str:
    """The part of `raw` before the first character other than an ASCII digit or a comma."""
    for offset, char in enumerate(raw):
        if char != "," and not (char.isascii() and char.isdigit()):
            problems.append(
                f"invalid character {char!r} at offset {offset} of {raw!r}: "
                "only the ids before it are read"
            )
            return raw[:offset]
    return raw


def _read_ids(raw: str, readable: str, device_count: int | None, problems: list[str]) -> list[int]:
    ids: list[int] = []
    tokens = readable.split(",")
    for index, token in enumerate(tokens):
        if token == "":
            if index < len(tokens) - 1:
                problems.append(f"empty id in {raw!r}: the ids after it are ignored")
            elif readable == raw and index > 0:  # the value itself ends with a comma
                problems.append(f"trailing ',' in {raw!r}")
            break
        if device_count is not None and int(token) >= device_count:
            problems.append(
                f"device id {int(token)} is not valid with {device_count} devices "
                f"(ids 0..{device_count - 1}): it and the ids after it are ignored"
            )
            break
        ids.append(int(token))
    return ids


def _order_problems(ids: list[int]) -> list[str]:
    for before, after in itertools.pairwise(ids):
        if after <= before:
            return [f"ids {ids} are not in strictly ascending order; only ascending is supported"]
    return []


def parse_log_level(raw: str | None) -> LogLevel:
    """ASCEND_GLOBAL_LOG_LEVEL: exactly `0`..`4`; unset or empty is the default (3, ERROR);
    anything else is illegal and the default applies."""
    if raw is None or raw == "":
        return LogLevel(raw=raw, level=DEFAULT_LOG_LEVEL)
    if raw in {str(level) for level in LOG_LEVEL_NAMES}:
        return LogLevel(raw=raw, level=int(raw))
    problem = (
        f"ASCEND_GLOBAL_LOG_LEVEL={raw!r} is not one of 0 (DEBUG), 1 (INFO), 2 (WARNING), "
        f"3 (ERROR), 4 (NULL): the default 3 (ERROR) applies"
    )
    return LogLevel(raw=raw, level=DEFAULT_LOG_LEVEL, problems=(problem,))


def parse_log_file_num(raw: str | None) -> LogFileNum:
    """ASCEND_HOST_LOG_FILE_NUM: an integer 1..1000; unset or empty is the default (10);
    anything else is illegal and the default applies."""
    if raw is None or raw == "":
        return LogFileNum(raw=raw, count=DEFAULT_LOG_FILE_NUM)
    low, high = LOG_FILE_NUM_RANGE
    if raw.isascii() and raw.isdigit() and low <= int(raw) <= high:
        return LogFileNum(raw=raw, count=int(raw))
    problem = (f"ASCEND_HOST_LOG_FILE_NUM={raw!r} is not an integer {low}..{high}: the "
               f"default {DEFAULT_LOG_FILE_NUM} applies")
    return LogFileNum(raw=raw, count=DEFAULT_LOG_FILE_NUM, problems=(problem,))


def resolve_log_dir(env: Mapping[str, str]) -> LogDir:
    """ASCEND_PROCESS_LOG_PATH > ASCEND_WORK_PATH > $HOME/ascend/log (HIA envref_07_0120).

    A variable set to the empty string is treated as unset, and noted.
    """
    notes: list[str] = []
    chosen: tuple[str, LogDirSource] | None = None
    for name in _LOG_DIR_VARIABLES:
        value = env.get(name)
        if value is None:
            continue
        if value == "":
            notes.append(f"{name} is set but empty; ignored")
        elif chosen is None:
            chosen = (value, name)
        else:
            notes.append(f"{name}={value} is overridden by {chosen[1]}")
    if chosen is not None:
        path, source = chosen
        if source == "ASCEND_WORK_PATH":
            # the base of every component's files; application logs go to its log/ (CANN
            # environment-variable reference, page envref_07_0007, table "LOG")
            path = posixpath.join(path, "log")
            notes.append("ASCEND_WORK_PATH is a base directory: the logs are in its log/")
        return LogDir(path=path, source=source, notes=tuple(notes))
    home = env.get("HOME")
    if not home:
        notes.append("HOME is not set: the default $HOME/ascend/log cannot be resolved")
        return LogDir(path=None, source=None, notes=tuple(notes))
    return LogDir(path=posixpath.join(home, "ascend", "log"), source="HOME", notes=tuple(notes))


def ascend_environment(
    env: Mapping[str, str], device_count: int | None = None
) -> AscendEnvironment:
    """Everything the doctor reads from a process environment, parsed; pure."""
    ld_path = env.get("LD_LIBRARY_PATH")
    return AscendEnvironment(
        variables={name: env[name] for name in sorted(env) if is_ascend_variable(name)},
        ld_library_path=split_path_list(ld_path),
        ld_library_path_has_empty_entry=has_empty_entry(ld_path),
        pythonpath=split_path_list(env.get("PYTHONPATH")),
        visible_devices=parse_visible_devices(env.get("ASCEND_RT_VISIBLE_DEVICES"), device_count),
        log_level=parse_log_level(env.get("ASCEND_GLOBAL_LOG_LEVEL")),
        log_dir=resolve_log_dir(env),
        log_file_num=parse_log_file_num(env.get("ASCEND_HOST_LOG_FILE_NUM")),
    )


# ----------------------------------------------------------------------------- device nodes


@dataclass(frozen=True)
class DeviceNode:
    """One /dev node and what kind of file the observed machine has there."""

    path: str
    kind: NodeKind  # char_device expected; judged by the checks

    @property
    def present(self) -> bool:
        return self.kind not in ("missing", "not_recorded")


@dataclass(frozen=True)
class DeviceNodes:
    """The per-chip and shared NPU device nodes of the observed machine."""

    davinci: Mapping[int, DeviceNode]  # N -> /dev/davinci<N>, in numeric order of N
    shared: Mapping[str, DeviceNode]  # davinci_manager, devmm_svm, hisi_hdc, dvpp_cmdlist

    @property
    def davinci_ids(self) -> tuple[int, ...]:
        return tuple(self.davinci)


def davinci_ids(names: list[str]) -> tuple[int, ...]:
    """Numbers N of `davinci<N>` entries, numerically sorted (`davinci10` after `davinci9`)."""
    found = (_DAVINCI.match(name) for name in names)
    return tuple(sorted(int(m.group(1)) for m in found if m))


def path_kind(host: Host, path: str) -> NodeKind:
    try:
        kind: PathKind = host.kind(path)
    except NotRecorded:
        return "not_recorded"
    return kind


def read_device_nodes(host: Host) -> DeviceNodes:
    """/dev/davinci<N> and the shared nodes with their kinds. Listing errors propagate."""
    davinci = {
        n: DeviceNode(f"/dev/davinci{n}", path_kind(host, f"/dev/davinci{n}"))
        for n in davinci_ids(host.list_dir("/dev"))
    }
    shared = {
        name: DeviceNode(f"/dev/{name}", path_kind(host, f"/dev/{name}"))
        for name in SHARED_DEVICE_NODES
    }
    return DeviceNodes(davinci=davinci, shared=shared)
