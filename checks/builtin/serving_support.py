"""serving.support: does the engine release support this model type, on these chips, with the
features the command line turns on, and does the release have a known issue with them?

Each of the model, every chip family in use and every judged feature is looked up in the
`support` rows (checks/data/support.yaml) for the engine's release: a row saying `no` fails,
with its source in the evidence; a known issue of that release (known_issues.yaml) warns or
fails as the row says; one that no row speaks of is "not in our data" (warn), never a pass.
An input that cannot be read (no engine, no npu-smi) is a skip with the reason; without a
model the chips and features are still judged (an offline script names its model inside it),
and the check skips only when none of them is flagged.

The judged interpreter's `transformers` is compared with the first release that knows the
model's `model_type` (the `transformers` rows of support.yaml): vLLM reads config.json through
it, so an older one refuses the model type. A development build of the engine is judged by the
rows of the release it precedes, and says so (warn).

The architectures vLLM looks up (config.json's, or those of `--hf-overrides`) are looked up in
what the judged interpreter's own vLLM and vLLM-Ascend register, read from their installed
source (probes.model.vllm_registry): none registered warns, as vLLM then refuses the model
("Model architectures [...] are not supported for now") unless its Transformers backend serves
it (registry.py's `inspect_model_cls`, vllm-project/vllm @ 0002bff0b6cb); it fails when that
backend is ruled out too (`--model-impl vllm`, or a transformers that does not know the model
type). A registry that cannot be read is "not judged" in the evidence and changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from checks import data
from checks.builtin import facts
from checks.builtin.compat import dev_base, dev_build_words
from checks.builtin.serving import support_front
from checks.builtin.serving_inputs import (
    FAMILY_WORDS,
    Deployment,
    deployment,
    served_architectures,
)
from checks.builtin.serving_rows import (
    KnownIssueRow,
    SupportRow,
    applies,
    cite,
    features_hold,
    release_matches,
)
from checks.context import Context
from checks.model import Finding, Status, skipped, worst
from probes.host import normalise_dist_name
from probes.versions import order_key

if TYPE_CHECKING:
    from probes.model.vllm_registry import Registrations

CHECK_ID = "serving.support"
CHECK_RULES: dict[str, dict[str, str]] = {
    CHECK_ID: {
        "no-engine": "skip",
        "no-model": "skip",
        "no-npu": "skip",
        "unsupported": "fail",
        "known-issue": "warn/fail",
        "not-in-our-data": "warn",
        "architecture-not-registered": "warn/fail",
    },
}
# Features always judged ("not in our data" without a row); any other (pooling, LoRA, a
# reasoning parser) only where a row for the deployment names it. A speculative method is
# judged too, except the MTP ones, whose verdict `mtp` carries.
JUDGED_FEATURES = ("quantization:", "expert-parallel", "data-parallel", "mtp",
                   "graph:full_decode_only", "speculative:")
REMEDY_UNKNOWN = ("Check the engine's release notes and supported-models page for this "
                  "combination before serving; the doctor's data says nothing of it.")


@dataclass(frozen=True)
class Verdict:
    status: Status
    text: str
    rule: str
    remedy: str = ""
    evidence: str = ""


def serving_support(ctx: Context) -> Finding:
    early = support_front(ctx)
    if early is not None:
        return early
    found = deployment(ctx)
    missing = _missing_input(found)
    if missing is not None:
        return missing
    registry, why_not = read_registry(ctx, found)
    verdicts = judge(found) + judge_architectures(found, registry)
    notes = [f"not judged: the engine's model registry: {why_not}"] if why_not else []
    if found.model.model_type is None and all(v.status == "pass" for v in verdicts):
        why = found.model.problem or "config.json names no model_type"
        lines = [f"{'ok' if v.status == 'pass' else v.status}: {v.text}" for v in verdicts]
        return skipped(f"model not judged: {why}", _engine_line(found), *lines, *notes,
                       rules=("no-model",))
    return _finding(found, verdicts, notes)


def _missing_input(d: Deployment) -> Finding | None:
    if not d.chip_names:
        return skipped(f"chips not judged: {d.chips_problem}", _engine_line(d),
                       rules=("no-npu",))
    return None


def judge(d: Deployment) -> list[Verdict]:
    """Every verdict on this deployment (pure: the tests feed it deployments). Without a
    model type only the chip, feature and model-free known-issue rows are judged."""
    rows = data.load("support", SupportRow)
    verdicts = _dev_build(d)
    if d.model.model_type is not None:
        verdicts.append(_subject(d, rows, "model", f"model type {d.model.model_type}"))
        verdicts += _transformers(d, rows)
    for chip in d.chips:
        words = FAMILY_WORDS.get(chip, "") if chip else ""
        if not words:
            verdicts.append(Verdict("warn", "a chip the doctor cannot place in a family: "
                                    "support not in our data", "not-in-our-data",
                                    REMEDY_UNKNOWN))
            continue
        verdicts.append(_subject(d, rows, f"chip:{chip}", f"chip family {words}"))
    for feature in _judged_features(d, rows):
        verdicts.append(_subject(d, rows, f"feature:{feature}", f"feature {feature}"))
    verdicts += _known_issues(d)
    return verdicts


def _judged_features(d: Deployment, rows: tuple[SupportRow, ...]) -> list[str]:
    """The deployment's features a verdict speaks of, in their order."""
    named = {r.feature for r in _matching(d, rows) if r.feature}
    return [feature for feature in d.features if _judged(feature, named)]


def _judged(feature: str, named: set[str]) -> bool:
    """A feature is judged when it is one the doctor always judges (unknown: "not in our
    data") or when a row for this release, model and chip speaks of it; a quantization
    sub-type (`quantization:ascend:W8A8`) only then, its method carrying the verdict
    otherwise."""
    if feature in named:
        return True
    if feature.startswith("speculative:") and "mtp" in feature:
        return False
    return feature.startswith(JUDGED_FEATURES) and feature.count(":") < 2


def _dev_build(d: Deployment) -> list[Verdict]:
    base = dev_base(d.engine.release)
    if base is None:
        return []
    return [Verdict("warn", f"{d.engine.name} {dev_build_words(d.engine.release, base)}",
                    "not-in-our-data", "Serve with a released build; a development build "
                    "may differ from the release its rows describe.")]


def _transformers(d: Deployment, rows: tuple[SupportRow, ...]) -> list[Verdict]:
    """The interpreter's transformers against the first release that knows the model type;
    nothing without a row for the type or without transformers (the evidence says which)."""
    about = [r for r in rows if r.engine == "transformers" and d.model.model_type in r.model_types]
    if not about or not d.transformers:
        return []
    refused = [r for r in about if r.support == "no" and release_matches(r, d.transformers)]
    if not refused:
        return [Verdict("pass", f"transformers {d.transformers} knows model type "
                        f"{d.model.model_type}", "", evidence=f"support row {about[0].id}: "
                        f"{cite(about[0].sources)}")]
    row = refused[0]
    return [Verdict("fail", f"transformers {d.transformers} does not know model type "
                    f"{d.model.model_type}: {row.says}", "unsupported",
                    f"Install a transformers that knows it ({row.says}), as the engine "
                    "release allows.", f"support row {row.id}: {cite(row.sources)}")]


def _matching(d: Deployment, rows: tuple[SupportRow, ...]) -> list[SupportRow]:
    model, release = d.model.model_type, d.engine.release
    return [r for r in rows if applies(r, d.engine.name, release, model, d.chips)]


def _about(row: SupportRow, subject: str, d: Deployment) -> bool:
    """Does the row speak of this subject (the model, one chip family, one feature)?"""
    kind, _, name = subject.partition(":")
    if kind == "feature":
        return row.feature == name
    if row.feature:
        return False
    if kind == "chip":  # rows about a model on a chip are the model's
        return name in row.chips and not row.model_types
    return d.model.model_type in row.model_types


def _subject(d: Deployment, rows: tuple[SupportRow, ...], subject: str, words: str) -> Verdict:
    about = [r for r in _matching(d, rows) if _about(r, subject, d)]
    release = f"{d.engine.name} {d.engine.release}"
    refused = [r for r in about if r.support == "no"]
    if refused:
        row = refused[0]
        return Verdict("fail", f"{release} does not support {words}: {row.says}", "unsupported",
                       f"Use a release that supports it ({row.says}).",
                       f"support row {row.id}: {cite(row.sources)}")
    if not about:
        return Verdict("warn", f"{words} on {release}: not in our data", "not-in-our-data",
                       REMEDY_UNKNOWN)
    row = about[0]
    kind = "experimental" if row.support == "experimental" else "supported"
    return Verdict("pass", f"{words}: {kind} ({row.says})", "",
                   evidence=f"support row {row.id}: {cite(row.sources)}")


def _known_issues(d: Deployment) -> list[Verdict]:
    rows = [row for row in data.load("known_issues", KnownIssueRow)
            if applies(row, d.engine.name, d.engine.release, d.model.model_type, d.chips)
            and features_hold(row.features, d.features)]
    remedy = _known_issue_remedy(rows)
    found = []
    for row in rows:
        fixed = f" (fixed in {row.fixed_in})" if row.fixed_in else ""
        status: Status = "fail" if row.severity == "fail" else "warn"
        found.append(Verdict(status, f"known issue of {d.engine.name} {d.engine.release}: "
                             f"{row.symptom}{fixed}", "known-issue", remedy,
                             f"known issue {row.id}: {cite(row.sources)}"))
    return found


def _known_issue_remedy(rows: list[KnownIssueRow]) -> str:
    """One remedy for all the release's known issues: the releases that list their fixes,
    newest first (the newest carries every listed fix), and the rest to avoid."""
    fixes = sorted({row.fixed_in for row in rows if row.fixed_in}, key=order_key, reverse=True)
    unfixed = any(not row.fixed_in for row in rows)
    words = []
    if fixes:
        words.append(f"Move to {fixes[0]} or later: " + (
            "its notes list the fix." if len(fixes) == 1 else
            f"the fixes are listed in {', '.join(reversed(fixes))}."))
    if unfixed or not fixes:
        words.append(("For the others, avoid" if fixes else "Avoid") + " the combination in this "
                     "release or move to another release (see the source).")
    return " ".join(words)


def _engine_line(d: Deployment) -> str:
    return f"engine: {d.engine.name} {d.engine.release} ({d.engine.source})"


def _finding(d: Deployment, verdicts: list[Verdict], notes: list[str]) -> Finding:
    status = worst([v.status for v in verdicts])
    problems = [v for v in verdicts if v.status != "pass"]
    model = f"{d.model.model_type} ({d.model.source})" if d.model.model_type else \
        f"not judged ({d.model.problem or 'config.json names no model_type'})"
    evidence = [_engine_line(d), f"model: {model}", f"chips: {d.chip_words}",
                f"transformers: {d.transformers or 'not found in the judged interpreter'}",
                f"features: {', '.join(d.features) or 'none on the command line'}"]
    evidence += [f"{'ok' if v.status == 'pass' else v.status}: {v.text}" for v in verdicts]
    evidence += [v.evidence for v in verdicts if v.evidence] + notes
    if not problems:
        return Finding("pass", _supported(d), tuple(evidence))
    summary = "; ".join(v.text for v in problems)
    remedy = " ".join(dict.fromkeys(v.remedy for v in problems if v.remedy))
    rules = tuple(dict.fromkeys(v.rule for v in problems))
    return Finding(status, summary, tuple(evidence), remedy, rules)


def _supported(d: Deployment) -> str:
    """The pass summary: what was judged supported, and the features no row speaks of (listed,
    not claimed)."""
    judged = _judged_features(d, data.load("support", SupportRow))
    unjudged = [f for f in d.features if f not in judged and not f.startswith("tp:")]
    words = f"{d.engine.name} {d.engine.release} supports {d.model.model_type} on {d.chip_words}"
    if judged:
        words += f" with {', '.join(judged)}"
    if unjudged:
        words += f"; not judged (no row speaks of them): {', '.join(unjudged)}"
    return words


# -- the architectures the engine registers ------------------------------------------------------


@dataclass(frozen=True)
class Registry:
    """What the judged interpreter's vLLM and vLLM-Ascend register, and where it was read."""

    found: Registrations
    vllm: str  # "vllm 0.11.0"
    where: str  # the vllm distribution's location
    names: tuple[str, ...]  # the architectures vLLM looks up (served_architectures)
    source: str  # where they come from: config.json or --hf-overrides


def read_registry(ctx: Context, d: Deployment) -> tuple[Registry | None, str]:
    """The registry of a vLLM-Ascend deployment with a model, or why it was not read ("" when
    there is nothing to judge: another engine, no model)."""
    if d.engine.name != "vllm-ascend" or not d.model.source:
        return None, ""
    names, source = served_architectures(d)
    if not names:
        return None, "config.json names no architectures"
    if _model_impl(d) == "transformers":
        return None, "--model-impl transformers serves the model through the Transformers backend"
    py = facts.python(ctx)
    where = py.locations.get(normalise_dist_name("vllm"))
    if py.error or not where:
        return None, f"no vllm distribution found in {py.interpreter or 'the judged interpreter'}"
    from probes.model.vllm_registry import read_registrations

    ascend_at = py.locations.get(normalise_dist_name("vllm-ascend"))
    found = read_registrations(ctx.host, where, ascend_at)
    if found.problem:
        return None, f"vllm's registry not read: {found.problem}"
    vllm = f"vllm {py.version_of('vllm') or '(version unknown)'}"
    return Registry(found, vllm, where, names, source), ""


def _model_impl(d: Deployment) -> str | None:
    if not d.args:
        return None
    from probes.target.argv import value_of

    return value_of(d.args, "--model-impl")


def judge_architectures(d: Deployment, registry: Registry | None) -> list[Verdict]:
    """A pass when the engine registers one of the architectures vLLM looks up; otherwise warn,
    or fail when the Transformers backend is ruled out as well."""
    if registry is None or registry.found.vllm is None:
        return []
    from probes.model.vllm_registry import VLLM_REGISTRY, served_as

    names, source = registry.names, registry.source
    ascend, vllm = registry.found.ascend, registry.found.vllm
    read = (f"{len(vllm.architectures)} architectures registered in {registry.where}/"
            f"{VLLM_REGISTRY}, {len(ascend)} by vllm-ascend {d.engine.release}")
    for name in names:
        if name in ascend:
            return [Verdict("pass", f"vllm-ascend {d.engine.release} registers {name}", "",
                            evidence=read)]
        base = served_as(name, vllm.architectures)
        if base is not None:
            how = "registers" if base == name else f"serves {name} as its registered"
            return [Verdict("pass", f"{registry.vllm} {how} {base}", "", evidence=read)]
    return [_not_registered(d, registry, names, source, read)]


def _not_registered(d: Deployment, registry: Registry, names: tuple[str, ...], source: str,
                    read: str) -> Verdict:
    removed = registry.found.vllm.removed if registry.found.vllm else {}
    text = (f"{registry.vllm} registers none of the architectures {source} names "
            f"({', '.join(names)}), nor does vllm-ascend {d.engine.release}")
    text += "".join(f"; vLLM served {n} until {removed[n]}" for n in names if n in removed)
    remedy = ("Serve it with a vLLM and vLLM-Ascend release that registers the architecture "
              "(see their supported-models pages), or make sure the Transformers backend "
              "serves it (--model-impl transformers) before relying on it.")
    ruled_out = _backend_ruled_out(d)
    if ruled_out:
        return Verdict("fail", f"{text}, and {ruled_out}: vLLM refuses the model at start",
                       "architecture-not-registered", remedy, read)
    installed = f"transformers {d.transformers}" if d.transformers else "no transformers found"
    return Verdict("warn", f"{text}: vLLM refuses the model at start unless its Transformers "
                   f"backend serves it ({installed} in the judged interpreter; the class must be "
                   "in transformers or in the checkpoint's own code)",
                   "architecture-not-registered", remedy, read)


def _backend_ruled_out(d: Deployment) -> str:
    """Why the Transformers backend cannot take the model either, or ""."""
    if _model_impl(d) == "vllm":
        return "--model-impl vllm rules out the Transformers backend"
    refused = [v for v in _transformers(d, data.load("support", SupportRow)) if v.status == "fail"]
    if refused:
        return (f"transformers {d.transformers} does not know model type {d.model.model_type}, "
                "so the Transformers backend cannot serve it")
    return ""
