"""What the command line decided, as frozen objects built once by `checks.cli`: here what a
run of the checks takes (the sub-commands' own options are in `checks.command_options`, built
only when one of them is asked for).

Commands, bundles, baselines and reports read these and nothing of argparse. Paths are kept
as given: `--model` names a directory on the *observed* machine (under --root, in a recording),
which only a Host can resolve (`checks.inputs.model_dir`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from probes.host import DEFAULT_TIMEOUT_S


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
