"""The doctor's one face: `run(observed, policy, request)` judges a target (as
probes.target.find observed it) and returns the Run with the context it was judged in. The CLI
(with --baseline and --prometheus), bundles and the console's doctor screen all call it, and
nothing else calls the runner (tests/checks/test_doctor_face.py), so every face judges the
same target, model and checks the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from checks import inputs
from checks.errors import UsageError
from checks.policy import Policy, apply_output_cap
from checks.registry import all_checks, select
from checks.runner import Run, run_checks

if TYPE_CHECKING:
    from checks.baseline.model import Baseline
    from checks.context import Context
    from checks.model import Check
    from checks.options import HostOptions
    from checks.report import HostInfo
    from probes.http import EndpointTarget
    from probes.target.find import Observed


@dataclass(frozen=True)
class Request:
    """What a run judges beyond the target: the model (None: the target's own), the checks,
    the tensor-parallel size, a baseline, an endpoint."""

    host: HostOptions
    model: str | None = None
    only: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()
    tensor_parallel: int | None = None
    baseline: Baseline | None = None
    endpoint: EndpointTarget | None = None


@dataclass(frozen=True)
class Judged:
    """A run, the context its checks shared, and what the report says it judged."""

    run: Run
    ctx: Context
    info: HostInfo


def check_selection(request: Request) -> tuple[Check, ...]:
    """The checks `request` selects; an unknown id is a UsageError (callers ask before they
    observe anything, so a typo costs no npu-smi run)."""
    try:
        checks = select(all_checks(), list(request.only), list(request.skip))
    except KeyError as exc:
        raise UsageError(f"unknown check id {exc.args[0]}{_did_you_mean(exc.args[0])} "
                         "(see `ascend-doctor list`)") from None
    if not checks:  # "no problems found" about nothing would read as a pass
        raise UsageError("--only and --skip leave no check to run (see `ascend-doctor list`)")
    return checks


def _did_you_mean(check_id: str) -> str:
    """`: did you mean npu.health?` for a typo of a check id; empty when nothing is close."""
    import difflib  # only on this error path: a bare run does not load difflib

    close = difflib.get_close_matches(check_id, [c.id for c in all_checks()], n=1, cutoff=0.6)
    return f": did you mean {close[0]}?" if close else ""


def run(observed: Observed, policy: Policy, request: Request) -> Judged:
    """Judge `observed` (a machine and its target) against `policy` as `request` asks."""
    checks = check_selection(request)
    apply_output_cap(observed.host, policy)
    ctx = inputs.context(observed, policy, request.model, request.host,
                         baseline=request.baseline, endpoint=request.endpoint,
                         requested=frozenset(request.only),
                         tensor_parallel=request.tensor_parallel)
    result = run_checks(checks, ctx)
    ctx.target = inputs.still_there(observed, result)
    return Judged(result, ctx, inputs.host_info(ctx, request.model, policy.source))
