"""The target of a run, as frozen facts, and its JSON form (docs/doctor-json.md, `target`).

The JSON form is also what a bundle records (`target.json`), so `from_json` reads hostile
input: every field is checked, and a bad one is a ValueError naming it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from probes.errors import NotRecorded

if TYPE_CHECKING:
    from probes.target.parts import Candidate, NpuUse, ProcessInfo, Rank, Sourced

TargetKind = Literal["process", "env_file", "shell"]
TARGET_KINDS: tuple[TargetKind, ...] = ("process", "env_file", "shell")


class TargetUnreadable(NotRecorded):
    """A fact of the target that could not be read (its environment, permission denied).

    A NotRecorded, so that a check which does not handle it is a skip with this reason,
    never a pass built on nothing.
    """

    def __init__(self, what: str, reason: str) -> None:
        super().__init__(what)
        self.reason = reason
        self.args = (f"{what}: {reason}",)

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


@dataclass(frozen=True)
class ServingArgs:
    """What the server's command line (or MindIE's config.json) says it serves, and how."""

    server: str = ""  # vllm, mindie, torchrun; "" when not a known server
    model: Sourced[str] | None = None  # as written: a path or a hub id
    model_dir: Sourced[str] | None = None  # the directory it loads, on the target's machine
    tensor_parallel_size: Sourced[int] | None = None  # vLLM --tensor-parallel-size / -tp
    pipeline_parallel_size: Sourced[int] | None = None  # vLLM --pipeline-parallel-size / -pp
    data_parallel_size: Sourced[int] | None = None  # vLLM --data-parallel-size / -dp
    world_size: Sourced[int] | None = None  # MindIE worldSize: the cards of one instance
    max_model_len: Sourced[int] | None = None  # vLLM --max-model-len; MindIE maxSeqLen
    gpu_memory_utilization: Sourced[float] | None = None  # vLLM: fraction of device memory
    npu_mem_size_gb: Sourced[int] | None = None  # MindIE npuMemSize: KV cache cap per NPU, GB
    config_file: str | None = None  # MindIE's config.json that was read
    # MindIE's config.json as parsed (serving.flags reads any key of it), or why it was not
    config_doc: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)
    config_problem: str = ""
    notes: tuple[str, ...] = ()  # what was seen but not read (a --config file, "auto")


@dataclass(frozen=True)
class Target:
    """Whose deployment the run judges, where each of its facts came from, and what could
    not be read."""

    kind: TargetKind
    label: str  # one line naming it
    chosen: str  # how it was chosen, one line
    environment: str  # where the environment comes from, one line
    environment_error: str = ""  # non-empty: the environment is unknown (why, what to run)
    process: ProcessInfo | None = None
    env_file: str | None = None
    serving: ServingArgs = field(default_factory=ServingArgs)
    npus: tuple[NpuUse, ...] = ()  # what npu-smi shows it (and its children) holding
    npus_known: bool = False  # whether npu-smi's process table could be read
    candidates: tuple[Candidate, ...] = ()
    problems: tuple[str, ...] = ()  # facts of it that could not be read, one line each
    ranks: tuple[Rank, ...] = ()  # a multi-process server's processes, the judged one first

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    @property
    def files_root(self) -> str:
        return self.process.files_root if self.process else "/"

    def environment_unknown(self) -> TargetUnreadable | None:
        """The error to raise where the environment is needed but could not be read."""
        if not self.environment_error:
            return None
        return TargetUnreadable(f"the environment of {self.label}", self.environment_error)


SHELL_NOTE = "no serving process found"


def shell_target(chosen: str = SHELL_NOTE, candidates: tuple[Candidate, ...] = ()) -> Target:
    """This shell: the doctor's own environment and interpreter."""
    return Target("shell", "this shell", chosen, "this shell's environment",
                  candidates=candidates)


# -- JSON ----------------------------------------------------------------------------------


def to_json(target: Target) -> dict[str, Any]:
    """The `target` object of the JSON report and of a bundle's target.json."""
    proc = target.process
    return {
        "kind": target.kind,
        "label": target.label,
        "chosen": target.chosen,
        "environment": target.environment,
        "environment_error": target.environment_error,
        "pid": target.pid,
        "process": None if proc is None else _process_json(proc),
        "env_file": target.env_file,
        "serving": _serving_json(target.serving),
        "npus": [_npu_json(n) for n in target.npus],
        "npus_known": target.npus_known,
        "candidates": [{"pid": c.pid, "label": c.label, "why": c.why, "server": c.server,
                        "npus": [_npu_json(n) for n in c.npus]} for c in target.candidates],
        "problems": list(target.problems),
        "ranks": [{"pid": r.pid, "role": r.role, "environment": r.environment,
                   "differs": list(r.differs)} for r in target.ranks],
    }


def _process_json(proc: ProcessInfo) -> dict[str, Any]:
    return {
        "pid": proc.pid, "cmdline": list(proc.cmdline), "name": proc.name, "exe": proc.exe,
        "cwd": proc.cwd, "uid": proc.uid, "gids": list(proc.gids), "ppid": proc.ppid,
        "ns_pid": proc.ns_pid,
        "cpus_allowed": None if proc.cpus_allowed is None else list(proc.cpus_allowed),
        "mems_allowed": None if proc.mems_allowed is None else list(proc.mems_allowed),
        "mount_namespace": proc.mount_ns, "files_root": proc.files_root,
        "start_ticks": proc.start_ticks,
    }


def _npu_json(use: NpuUse) -> dict[str, Any]:
    return {"npu": use.npu_id, "chip": use.chip_id, "pid": use.pid, "memory_mb": use.memory_mb}


SETTINGS = ("model", "model_dir", "tensor_parallel_size", "pipeline_parallel_size",
            "data_parallel_size", "world_size", "max_model_len", "gpu_memory_utilization",
            "npu_mem_size_gb")


def _serving_json(args: ServingArgs) -> dict[str, Any]:
    doc: dict[str, Any] = {"server": args.server}
    for name in SETTINGS:
        setting = getattr(args, name)
        doc[name] = None if setting is None else {"value": setting.value,
                                                  "source": setting.source}
    doc["config_file"] = args.config_file
    doc["notes"] = list(args.notes)
    return doc


def from_json(doc: Any) -> Target:
    """The Target a `to_json` document describes. Raises ValueError naming the bad field."""
    obj = _obj(doc, "target")
    kind = _str(obj, "kind")
    if kind not in TARGET_KINDS:
        raise ValueError(f"target.kind: {kind!r} is not one of {', '.join(TARGET_KINDS)}")
    process = obj.get("process")
    return Target(
        kind=kind,  # checked against TARGET_KINDS above
        label=_str(obj, "label"), chosen=_str(obj, "chosen"),
        environment=_str(obj, "environment"),
        environment_error=_str(obj, "environment_error", ""),
        process=None if process is None else _process(_obj(process, "target.process")),
        env_file=_opt(obj, "env_file", str),
        serving=_serving(_obj(obj.get("serving", {}), "target.serving")),
        npus=tuple(_npu(n) for n in _list(obj, "npus")),
        npus_known=bool(_opt(obj, "npus_known", bool)),
        candidates=tuple(_candidate(c) for c in _list(obj, "candidates")),
        problems=tuple(_strs(obj, "problems")),
        ranks=tuple(_rank(r) for r in _list(obj, "ranks")),
    )


def _rank(raw: Any) -> Rank:
    from probes.target.parts import Rank

    obj = _obj(raw, "target.ranks[]")
    return Rank(_int(obj, "pid"), _str(obj, "role"), _str(obj, "environment"),
                tuple(_strs(obj, "differs")))


def _process(obj: Mapping[str, Any]) -> ProcessInfo:
    from probes.target.parts import MOUNT_NS, ProcessInfo

    mount_ns = _str(obj, "mount_namespace", "unknown")
    if mount_ns not in MOUNT_NS:
        raise ValueError(f"target.process.mount_namespace: {mount_ns!r} is not one of "
                         f"{', '.join(MOUNT_NS)}")
    cpus, mems = obj.get("cpus_allowed"), obj.get("mems_allowed")
    return ProcessInfo(
        pid=_int(obj, "pid"), cmdline=tuple(_strs(obj, "cmdline")), name=_str(obj, "name", ""),
        exe=_opt(obj, "exe", str), cwd=_opt(obj, "cwd", str), uid=_opt(obj, "uid", int),
        gids=tuple(_ints(obj, "gids")) if "gids" in obj else (), ppid=_opt(obj, "ppid", int),
        ns_pid=_opt(obj, "ns_pid", int),
        cpus_allowed=None if cpus is None else tuple(_ints(obj, "cpus_allowed")),
        mems_allowed=None if mems is None else tuple(_ints(obj, "mems_allowed")),
        mount_ns=mount_ns,  # checked against MOUNT_NS above
        files_root=_str(obj, "files_root", "/"), start_ticks=_opt(obj, "start_ticks", int))


def _serving(obj: Mapping[str, Any]) -> ServingArgs:
    from probes.target.parts import Sourced

    kinds: dict[str, type] = {
        "model": str, "model_dir": str, "gpu_memory_utilization": float}
    values: dict[str, Any] = {}
    for name in SETTINGS:
        raw = obj.get(name)
        if raw is None:
            continue
        setting = _obj(raw, f"target.serving.{name}")
        want = kinds.get(name, int)
        value = setting.get("value")
        if want is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, want) or isinstance(value, bool):
            raise ValueError(f"target.serving.{name}.value: not a {want.__name__}")
        values[name] = Sourced(value, _str(setting, "source"))
    return ServingArgs(server=_str(obj, "server", ""), config_file=_opt(obj, "config_file", str),
                       notes=tuple(_strs(obj, "notes")), **values)


def _npu(raw: Any) -> NpuUse:
    from probes.target.parts import NpuUse

    obj = _obj(raw, "target.npus[]")
    return NpuUse(_int(obj, "npu"), _opt(obj, "chip", int), _int(obj, "pid"),
                  _opt(obj, "memory_mb", int))


def _candidate(raw: Any) -> Candidate:
    from probes.target.parts import Candidate

    obj = _obj(raw, "target.candidates[]")
    return Candidate(_int(obj, "pid"), _str(obj, "label"), _str(obj, "why"),
                     _str(obj, "server", ""), tuple(_npu(n) for n in _list(obj, "npus")))


# -- checked access --------------------------------------------------------------------------


def _obj(raw: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: not a JSON object")
    return raw


def _str(obj: Mapping[str, Any], key: str, default: str | None = None) -> str:
    value = obj.get(key, default)
    if not isinstance(value, str):
        raise ValueError(f"target {key}: not a string")
    return value


def _int(obj: Mapping[str, Any], key: str) -> int:
    value = obj.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"target {key}: not an integer")
    return value


def _opt(obj: Mapping[str, Any], key: str, kind: type) -> Any:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ValueError(f"target {key}: not a {kind.__name__}")
    return value


def _list(obj: Mapping[str, Any], key: str) -> list[Any]:
    value = obj.get(key, [])
    if not isinstance(value, list):
        raise ValueError(f"target {key}: not a list")
    return value


def _strs(obj: Mapping[str, Any], key: str) -> list[str]:
    items = _list(obj, key)
    if not all(isinstance(item, str) for item in items):
        raise ValueError(f"target {key}: not a list of strings")
    return items


def _ints(obj: Mapping[str, Any], key: str) -> list[int]:
    items = _list(obj, key)
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in items):
        raise ValueError(f"target {key}: not a list of integers")
    return items
