"""The doctor screen's run: the checks `ascend-doctor` runs, on the context it builds for the same
target (checks.inputs.context, the function `ascend-doctor` itself calls), so that both judge
the same process, environment and model. No textual here.

The model: `ascend-doctor --pid PID` without `--model` judges the directory the target's
command line serves, and so does the console; only where the target names none is the
console's own `--model` directory judged (as `ascend-doctor --model DIR` would).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from checks.inputs import Observed
    from checks.policy import Policy
    from checks.runner import Run
    from console.options import ConsoleOptions
    from probes.http import EndpointTarget


def doctor_model(options: ConsoleOptions, observed: Observed) -> str | None:
    """The `--model` ascend-doctor would be given for this console's target."""
    if observed.target.serving.model_dir is not None:
        return None  # the target's own, as `ascend-doctor --pid` finds it
    spec = options.model
    if spec is None or not spec.path.is_dir():
        return None  # a .gguf file (or nothing): the doctor's checks read a directory
    return str(spec.path)


def run_doctor(options: ConsoleOptions, observed: Observed, policy: Policy,
               endpoint: EndpointTarget | None) -> Run:
    """Every check, as `ascend-doctor [--pid PID] [--root DIR] [--endpoint URL]` runs them."""
    from checks import inputs
    from checks.options import HostOptions
    from checks.policy import apply_output_cap
    from checks.registry import all_checks, select
    from checks.runner import run_checks

    host_options = HostOptions(root=None if options.root == "/" else options.root,
                               pid=options.pid, timeout_s=options.npu_timeout_s)
    apply_output_cap(observed.host, policy)
    ctx = inputs.context(observed, policy, doctor_model(options, observed), host_options,
                         endpoint=endpoint)
    return run_checks(select(all_checks(), [], []), ctx)
