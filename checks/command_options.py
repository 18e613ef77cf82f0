"""The options of the sub-commands (`npu`, `bundle`, `baseline record`, `ops`, `bench`),
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


@dataclass(frozen=True)
class OpsOptions:
    """`ascend-doctor ops`: the operators one prefill and decode of --model send to a device."""

    model: str  # a model directory on this machine (config.json is enough)
    device: str = "npu"  # npu | cpu | cuda
    torch_npu: str | None = None  # --torch-npu VERSION: predict for that release
    python: str | None = None  # --python PATH: predict for the torch_npu installed there
    dtype: str = "bfloat16"
    fp8: str = "dequantize"  # how the engine would hold FP8 weights
    json: bool = False  # the ascend-doctor-ops/1 document


@dataclass(frozen=True)
class BenchOptions:
    """`ascend-doctor bench`: micro-benchmarks of --model's hot operators at its shapes."""

    model: str
    device: str = "auto"  # auto | npu | cuda | cpu
    dtype: str = "bfloat16"
    fp8: str = "dequantize"
    json: bool = False  # the ascend-doctor-bench/1 document
    output: Path | None = None  # -o FILE: also write the document (for --compare elsewhere)
    compare: Path | None = None  # --compare FILE: another machine's document
    slower_pct: float = 10.0  # --slower-pct: a slowdown above this is reported
    quick: bool = False  # fewer samples and shapes (a smoke run)
