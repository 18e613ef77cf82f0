"""serving.flags: the serving command line (vllm serve arguments, with the JSON of
--additional-config and --compilation-config) and environment (HCCL_*, VLLM_ASCEND_*, ...)
against the rules of checks/data/flags.yaml, each keyed by engine release, model type and chip
family, each with its source.

A rule whose scope cannot be told (no engine release, no model, no chips where it needs them)
is not judged, and the evidence says which and why. A setting no rule speaks of is listed as
seen, not judged: the data knows nothing of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeGuard

from checks import data
from checks.builtin import facts
from checks.builtin.serving import flags_front
from checks.builtin.serving_engine import CONFIG_ENV, WATCHED_ENV
from checks.builtin.serving_inputs import Deployment, deployment
from checks.builtin.serving_rows import (
    Condition,
    FlagRow,
    chips_match,
    cite,
    model_matches,
    release_matches,
)
from checks.context import Context
from checks.model import Finding, Status, skipped, worst
from probes.textsafe import one_line

CHECK_ID = "serving.flags"
NO_RELEASE = "no engine release"


def _rules() -> dict[str, str]:
    rules = {"no-engine": "skip", "environment-unreadable": "skip", "json-unreadable": "warn",
             "mindie-config-unreadable": "warn", "release-unknown": "warn"}
    rules.update({row.id: row.status for row in data.load("flags", FlagRow)})
    return rules


CHECK_RULES: dict[str, dict[str, str]] = {CHECK_ID: _rules()}


@dataclass(frozen=True)
class Outcome:
    """One rule judged: fired (with its row), quiet, or not judged (and why)."""

    row: FlagRow
    fired: bool = False
    not_judged: str = ""


def serving_flags(ctx: Context) -> Finding:
    early = flags_front(ctx)
    if early is not None:
        return early
    d = deployment(ctx)
    if d.env_problem:
        return skipped(f"the environment could not be read: {d.env_problem}",
                       rules=("environment-unreadable",))
    outcomes = judge(d)
    return facts.about_target(ctx, _finding(d, outcomes))


def judge(d: Deployment) -> list[Outcome]:
    """Every rule of flags.yaml against this deployment (pure)."""
    return [_judge_row(d, row) for row in data.load("flags", FlagRow)]


def _judge_row(d: Deployment, row: FlagRow) -> Outcome:
    if d.mindie_config is None and _reads_mindie(row):
        if d.engine.name == "mindie" and release_matches(row, d.engine.release):
            return Outcome(row, not_judged=d.mindie_problem)
        return Outcome(row)  # not a MindIE deployment (or not this rule's releases)
    facts_of = [(c, d.fact(c.fact)) for c in row.when]
    if not all(_holds(c, v, d.fact(c.other_fact) if c.other_fact else None)
               for c, v in facts_of if not _model_unknown(c, v)):
        return Outcome(row)
    engine_unknown = row.engine != "any" and not d.engine.name
    if row.engine != "any" and not engine_unknown and (
            d.engine.name != row.engine or not release_matches(row, d.engine.release)):
        return Outcome(row)
    model_needed = row.model_types or row.except_models or \
        any(_model_unknown(c, v) for c, v in facts_of)
    if model_needed and d.model.model_type is None:
        return Outcome(row, not_judged=f"model unknown ({d.model.problem})")
    if not model_matches(row, d.model.model_type):
        return Outcome(row)
    absent = [c.fact for c, v in facts_of if _model_unknown(c, v)]
    if absent:  # the model is known, its config.json lacks the field
        return Outcome(row, not_judged=f"config.json gives no {', '.join(absent)}")
    if row.chips and not d.chip_names:
        return Outcome(row, not_judged=f"chips unknown ({d.chips_problem})")
    if engine_unknown:  # said only where a setting of the deployment points at the rule
        why = f"{NO_RELEASE} ({d.engine.why_none})" if _pointed(facts_of) else ""
        return Outcome(row, not_judged=why if chips_match(row, d.chips) else "")
    return Outcome(row, fired=chips_match(row, d.chips))


def _reads_mindie(row: FlagRow) -> bool:
    """Does the rule read MindIE's config.json? Without it the rule is not judged, never
    passed: its conditions would only see absent keys."""
    return any(name.startswith("mindie.") for c in row.when
               for name in (c.fact, c.other_fact or ""))


def _pointed(facts_of: list[tuple[Condition, Any]]) -> bool:
    """Does a setting that is there (not merely absent or defaulted) make the rule apply?"""
    return any(c.present is True or (v is not None and (c.equals is not None or
                                                         c.below is not None or
                                                         c.above is not None or
                                                         c.other_fact is not None))
               for c, v in facts_of if not c.fact.startswith("model."))


def _model_unknown(condition: Condition, value: Any) -> bool:
    """A condition on the model whose fact could not be read (no model, no config.json)."""
    return condition.fact.startswith("model.") and value is None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value).strip()


def _holds(condition: Condition, value: Any, other: Any = None) -> bool:
    """Does the condition hold for this value (`other`: the value of its `below_fact`)?"""
    text = _text(value)
    if condition.present is not None and (text is not None) != condition.present:
        return False
    if condition.equals is not None and (text is None or
                                         text.lower() != condition.equals.lower()):
        return False
    if condition.not_equals is not None and text is not None and \
            text.lower() == condition.not_equals.lower():
        return False
    if condition.below_fact is not None:
        number, bound = _number(text), _number(_text(other))
        return number is not None and bound is not None and number < bound
    if condition.not_divisible_by_fact is not None:
        number, divisor = _number(text), _number(_text(other))
        return _whole(number) and _whole(divisor) and divisor > 0 and number % divisor != 0
    return _outside(condition, text)


def _outside(condition: Condition, text: str | None) -> bool:
    """A range condition holds for a number below `below` or above `above`; a value that is
    not a number is not judged by it (the evidence lists the setting as seen)."""
    if condition.below is None and condition.above is None:
        return True
    number = _number(text)
    if number is None:
        return False
    return (condition.below is not None and number < condition.below) or \
        (condition.above is not None and number > condition.above)


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def _whole(number: float | None) -> TypeGuard[float]:
    return number is not None and number.is_integer()


def _seen(d: Deployment) -> list[str]:
    """The watched settings, as evidence: values only of the variables a rule reads (others
    may hold anything, a token included), and the keys of the JSON flags."""

    judged = {c.fact.partition(".")[2] for row in data.load("flags", FlagRow) for c in row.when
              if c.fact.startswith("env.")} | set(CONFIG_ENV)
    env = sorted(f"{k}={one_line(v)[:80]}" if k in judged else k
                 for k, v in d.env.items() if k.startswith(WATCHED_ENV))
    lines = [f"environment: {', '.join(env) or 'none of HCCL_*, VLLM_ASCEND_*, ... set'}"]
    for name, found in d.json.items():
        keys = ", ".join(one_line(str(k))[:60] for k in (found.value or {}))
        lines.append(f"{name}: {'keys ' + keys if found.value is not None else found.problem}")
    if d.mindie_config is not None:  # keys no rule reads are seen, not judged
        keys = ", ".join(one_line(str(k))[:60] for k in d.mindie_config)
        lines.append(f"MindIE config.json: keys {keys}")
    elif d.engine.name == "mindie":
        lines.append(f"MindIE config.json: {one_line(d.mindie_problem)[:200]}")
    return lines


def _finding(d: Deployment, outcomes: list[Outcome]) -> Finding:
    fired = [o.row for o in outcomes if o.fired]
    evidence = [f"engine: {d.engine.name or 'unknown'} {d.engine.release}".rstrip(),
                f"model type: {d.model.model_type or 'unknown'}",
                f"chips: {d.chip_words or d.chips_problem}", *_seen(d)]
    unread = [o.row.id for o in outcomes if o.not_judged and _reads_mindie(o.row)
              and d.mindie_config is None]
    if unread:  # one reason for them all: said once
        evidence.append(f"not judged: {', '.join(unread)}: MindIE's config.json not read")
    evidence += [f"not judged: {o.row.id}: {o.not_judged}" for o in outcomes
                 if o.not_judged and o.row.id not in unread]
    evidence += [f"rule {row.id}: {cite(row.sources)}" for row in fired]
    unreadable = [f for f in d.json.values() if f.problem]
    statuses: list[Status] = ["warn" if row.status == "warn" else "fail" for row in fired]
    texts = [row.says for row in fired]
    rules = [row.id for row in fired]
    remedies = [row.remedy for row in fired]
    for found in unreadable:
        statuses.append("warn")
        texts.append(f"{found.name} not read: {found.problem}")
        rules.append("json-unreadable")
        remedies.append(f"Give {found.name} a JSON object, as vLLM expects.")
    unscoped = [o.row.id for o in outcomes if o.not_judged.startswith(NO_RELEASE)]
    if unscoped:  # the settings match; only the release that scopes the rules is unknown
        statuses.append("warn")
        texts.append(f"the settings match {', '.join(unscoped)}, rules of particular engine "
                     f"releases, but the engine release is unknown ({d.engine.why_none})")
        rules.append("release-unknown")
        remedies.append("Run the doctor where it can read the serving engine's release (the "
                        "interpreter with vllm_ascend, MindIE's version.info), then read each "
                        "rule's source for the releases it names.")
    if d.mindie_server and d.mindie_config is None:
        statuses.append("warn")
        texts.append(f"MindIE's config.json not read, its rules not judged: {d.mindie_problem}")
        rules.append("mindie-config-unreadable")
        remedies.append("Give MindIE a readable config.json (a JSON object, under 1 MiB) at "
                        "$MIES_CONFIG_JSON_PATH, else $MINDIE_LLM_HOME_PATH/conf/config.json.")
    if not statuses:
        return Finding("pass", "no rule of checks/data/flags.yaml fired on the command line "
                       "and environment", tuple(evidence))
    return Finding(worst(statuses), "; ".join(texts), tuple(evidence),
                   " ".join(dict.fromkeys(remedies)), tuple(dict.fromkeys(rules)))

