"""The options of the sub-commands that list or record (`npu`, `bundle`, `baseline record`),
as frozen objects built once by `checks.cli` (beside `checks.options`, which a run of the
checks takes, so that a run never builds these)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from checks.options import HostOptions

# Bounded so a box with years of unrotated plogs still gives a bundle that mails: the newest
# files hold the incident; 20 x 256 KiB is at most 5 MiB before compression.
PLOG_FILES = 20
PLOG_TAIL_BYTES = 256 * 1024


@dataclass(frozen=True)
class NpuOptions:
    """`ascend-doctor npu`: the NPU inventory, observed or from a pasted npu-smi output."""

    host: HostOptions = field(default_factory=HostOptions)
    from_file: str | None = None  # a pasted npu-smi output; "-" for stdin
    json: bool = False  # the ascend-npu/1 document


@dataclass(frozen=True)
class BundleOptions:
    """`ascend-doctor bundle`: record this machine (never a recording) into one .tar.gz."""

    host: HostOptions = field(default_factory=HostOptions)
    model: str | None = None
    policy: Path | None = None
    output: Path | None = None  # None: ascend-bundle-HOST-TIME.tar.gz here
    include_logs: bool = True  # the tails of the newest CANN plog files
    metrics: Path | None = None  # the console recording to include (a local file)
    find_metrics: bool = True  # without `metrics`: the newest one in the default place
    redact_hostnames: bool = False
    plog_files: int = PLOG_FILES
    plog_tail_bytes: int = PLOG_TAIL_BYTES


@dataclass(frozen=True)
class BaselineRecordOptions:
    """`ascend-doctor baseline record`: the YAML baseline of a validated machine."""

    host: HostOptions = field(default_factory=HostOptions)
    model: str | None = None  # also fingerprint this model directory's tokenizer
    output: Path | None = None  # None (or -): stdout
