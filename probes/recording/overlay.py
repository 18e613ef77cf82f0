"""A recorded machine with one model directory read from this one: `--from RECORDING --model
DIR` plans a model that was never on the recorded machine (npu.hbm-fit with --tp N, the
checkpoint checks) against the machine the recording describes.

Every question goes to the recording, except those about a path at or below the model
directory, which this machine answers (its own `/`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from probes.host import (
    DEFAULT_TIMEOUT_S,
    CommandResult,
    DiskUsage,
    Host,
    PathKind,
    PythonEnvironment,
)
from probes.live import local_files


class ModelOverlay:
    """`recorded` for everything, `model_dir` (a path on this machine) from this machine."""

    def __init__(self, recorded: Host, model_dir: str) -> None:
        self.recorded = recorded
        self.model_dir = model_dir.rstrip("/") or "/"
        self.local = local_files()

    def __getattr__(self, name: str) -> Any:
        # recording, path, manifest: what callers read of a SnapshotHost
        return getattr(self.recorded, name)

    def answering(self, path: str) -> Host:
        """The host that answers for `path`: this machine inside the model directory."""
        inside = path == self.model_dir or path.startswith(self.model_dir + "/")
        return self.local if inside else self.recorded

    @property
    def description(self) -> str:
        return (f"{self.recorded.description}; the model {self.model_dir} read from this "
                "machine")

    @property
    def env(self) -> Mapping[str, str]:
        return self.recorded.env

    def run(self, argv: Sequence[str], timeout_s: float = DEFAULT_TIMEOUT_S) -> CommandResult:
        return self.recorded.run(argv, timeout_s)

    def read_text(self, path: str) -> str:
        return self.answering(path).read_text(path)

    def read_bytes(self, path: str, offset: int = 0, length: int | None = None) -> bytes:
        return self.answering(path).read_bytes(path, offset, length)

    def list_dir(self, path: str) -> list[str]:
        return self.answering(path).list_dir(path)

    def file_size(self, path: str) -> int:
        return self.answering(path).file_size(path)

    def disk_usage(self, path: str) -> DiskUsage:
        return self.answering(path).disk_usage(path)

    def exists(self, path: str) -> bool:
        return self.answering(path).exists(path)

    def kind(self, path: str) -> PathKind:
        return self.answering(path).kind(path)

    def realpath(self, path: str) -> str:
        return self.answering(path).realpath(path)

    def python_packages(self) -> PythonEnvironment:
        return self.recorded.python_packages()
