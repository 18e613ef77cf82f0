"""The doctor screen's run: `ascend-doctor`'s own face (checks.doctor.run) for the same target,
so that both judge the same process, environment, model and checks. No textual here.

The model: `ascend-doctor --pid PID` without `--model` judges the directory the target's
command line serves, and so does the console; only where the target names none is the
console's own `--model` directory judged (as `ascend-doctor --model DIR` would).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from checks.policy import Policy
    from checks.runner import Run
    from console.options import ConsoleOptions
    from probes.http import EndpointTarget
    from probes.target.find import Observed


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
    from checks import doctor
    from checks.options import HostOptions

    host_options = HostOptions(root=None if options.root == "/" else options.root,
                               pid=options.pid, timeout_s=options.npu_timeout_s)
    request = doctor.Request(host_options, doctor_model(options, observed), endpoint=endpoint)
    return doctor.run(observed, policy, request).run
