"""baseline.drift: how this machine differs from the baseline it was validated against.

Skips without --baseline. Every difference is listed as `name: baseline -> now`; its weight
comes from the policy (`baseline.<category>_drift_is`: fail, warn or pass), by category:
versions (NPU stack, torch/torch_npu/vLLM, transformers/tokenizers), environment, NPU
inventory, tokenizer fingerprint.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from checks.builtin import facts
from checks.context import Context
from checks.model import NO_BASELINE, Finding, Status, failed, passed, skipped, warned
from probes.words import counted

if TYPE_CHECKING:
    from checks.baseline import Category, Drift

# checks.baseline is imported when there is a --baseline to compare with

VERDICTS = ("fail", "warn", "pass")
REMEDY = ("if the change was intended, validate this machine again and record a new baseline "
          "(`ascend-doctor baseline record -o FILE`); otherwise restore the listed items")
SHOWN_IN_SUMMARY = 3

# The check's rules, by name -> the statuses they give (its playbook lists the same rules under
# "What the check does"; tests/checks/test_check_rules.py). A drift's status is the policy's
# `baseline.<category>_drift_is`; "pass" accepts it.
CHECK_RULES: dict[str, dict[str, str]] = {
    "baseline.drift": {
        "no-baseline": "skip",
        "nothing-compared": "skip",
        "version-drift": "warn/fail",
        "environment-drift": "warn/fail",
        "inventory-drift": "warn/fail",
        "tokenizer-drift": "warn/fail",
    },
}


def _verdicts(ctx: Context) -> dict[Category, Status]:
    from checks.baseline import CATEGORIES

    out: dict[Category, Status] = {}
    for category in CATEGORIES:
        key = f"{category}_drift_is"
        value = ctx.policy.get("baseline", key)
        if value not in VERDICTS:
            raise ValueError(f"policy baseline.{key} is {value!r}; use one of "
                             f"{', '.join(VERDICTS)}")
        out[category] = value
    return out


def baseline_drift(ctx: Context) -> Finding:
    base = ctx.baseline
    if base is None:
        return skipped(NO_BASELINE, rules=("no-baseline",))
    from checks.baseline import compare
    from checks.baseline.record import observe

    verdicts = _verdicts(ctx)
    model = ctx.model_dir if base.tokenizer is not None else None
    drifts, unknown = compare(base, observe(ctx, model))
    origin = f"baseline of {base.host or 'an unnamed host'} recorded {base.recorded_at}"
    evidence = [d.line() + _weight(d, verdicts) for d in drifts]
    evidence += [f"{name}: not compared ({why})" for name, why in unknown.items()]
    evidence.append(facts.judged_environment(ctx))  # whose environment was compared
    judged = [d for d in drifts if verdicts[d.category] != "pass"]
    if not drifts and unknown and not _compared_anything(base, unknown):
        return skipped(f"nothing could be compared with the {origin}", *evidence,
                       rules=("nothing-compared",))
    if not judged:
        note = f" ({len(drifts)} accepted by policy)" if drifts else ""
        partial = f"; {counted(len(unknown), 'item')} not compared" if unknown else ""
        return passed(f"matches the {origin}{note}{partial}", *evidence, origin)
    summary = (f"{counted(len(judged), 'difference')} from the {origin}: "
               + "; ".join(d.line() for d in judged[:SHOWN_IN_SUMMARY])
               + ("; ..." if len(judged) > SHOWN_IN_SUMMARY else ""))
    rules = tuple(dict.fromkeys(f"{d.category}-drift" for d in judged))
    if any(verdicts[d.category] == "fail" for d in judged):
        return failed(summary, REMEDY, *evidence, rules=rules)
    return warned(summary, REMEDY, *evidence, rules=rules)


def _weight(drift: Drift, verdicts: dict[Category, Status]) -> str:
    return f"  [{drift.category} drift: {verdicts[drift.category]}]"


def _compared_anything(base: object, unknown: dict[str, str]) -> bool:
    from checks.baseline import Baseline, flatten

    assert isinstance(base, Baseline)
    return any(name not in unknown for name in flatten(base))
