"""What the command line decided, as frozen objects built once by `checks.cli`.

Commands, bundles, baselines and reports read these and nothing of argparse. Paths are kept
as given: `--model` names a directory on the *observed* machine (under --root, in a recording),
which only a Host can resolve (`checks.inputs.model_dir`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from probes.host import DEFAULT_TIMEOUT_S

# Bounded so a box with years of unrotated plogs still gives a bundle that mails: the newest
# files hold the incident; 20 x 256 KiB is at most 5 MiB before compression.
PLOG_FILES = 20
PLOG_TAIL_BYTES = 256 * 1024


@dataclass(frozen=True)
class HostOptions:
    """Which machine is observed, and how: this one (its files under `root`) or a recording.

    What is judged on it belongs here too: the deployment's interpreter (`python`) and the
    target, the process (`pid`) or environment file (`env_file`) whose deployment is judged;
    with neither, a live run discovers the serving process (probes.target).
    """

    root: str | None = None  # --root DIR; None: /
    from_path: str | None = None  # --from RECORDING (directory or .tar.gz)
    python: str | None = None  # --python PATH: the deployment's interpreter
    timeout_s: float = DEFAULT_TIMEOUT_S  # --timeout: each command on the observed machine
    pid: int | None = None  # --pid PID: the serving process to judge
    env_file: str | None = None  # --env-file FILE: the environment of a service not running

    @property
    def is_live(self) -> bool:
        """Observed here and now, at / (paths given on the command line are this shell's)."""
        return not self.root and not self.from_path

    @property
    def discovers(self) -> bool:
        """No target named and this machine observed at /: look for the serving process."""
        return self.is_live and self.pid is None and self.env_file is None


@dataclass(frozen=True)
class EndpointOptions:
    """`--endpoint URL` and its companions: a serving endpoint for the endpoint.* checks."""

    url: str
    model: str | None = None  # --endpoint-model: the name /v1/models must list
    api_key_env: str | None = None  # --endpoint-api-key-env: the variable holding the key
    metrics_url: str | None = None  # --endpoint-metrics; None: /metrics at the server's root


@dataclass(frozen=True)
class RunOptions:
    """`ascend-doctor` (no command): run the checks and report."""

    host: HostOptions = HostOptions()
    model: str | None = None  # --model DIR, on the observed machine
    tp: int | None = None  # --tp N: tensor-parallel size for npu.hbm-fit (over the target's)
    policy: Path | None = None  # --policy FILE; None: the built-in defaults
    only: tuple[str, ...] = ()  # check ids
    skip: tuple[str, ...] = ()
    json: bool = False  # the ascend-doctor/1 JSON report instead of the terminal one
    junit: Path | None = None  # also write JUnit XML here
    verbose: bool = False  # evidence of passing checks too
    baseline: Path | None = None  # compare with this baseline (adds baseline.drift)
    prometheus: Path | None = None  # also write node_exporter's textfile here
    endpoint: EndpointOptions | None = None  # adds the endpoint.* checks


@dataclass(frozen=True)
class NpuOptions:
    """`ascend-doctor npu`: the NPU inventory, observed or from a pasted npu-smi output."""

    host: HostOptions = HostOptions()
    from_file: str | None = None  # a pasted npu-smi output; "-" for stdin
    json: bool = False  # the ascend-npu/1 document


@dataclass(frozen=True)
class BundleOptions:
    """`ascend-doctor bundle`: record this machine (never a recording) into one .tar.gz."""

    host: HostOptions = HostOptions()
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

    host: HostOptions = HostOptions()
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
