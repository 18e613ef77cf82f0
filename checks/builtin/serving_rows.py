"""The rows of the `support`, `known_issues` and `flags` topics (checks/data/*.yaml), and the
one question every row answers: does it hold for this engine release, model and chip?

Releases compare in the order `probes.versions` gives (v0.8.4rc1 < v0.8.4rc2 < v0.8.4); a range
is `since` (included) to `until` (excluded), either end open when empty. Model types are the
`model_type` of config.json; chip families are those `fp8_gate.chip_family` names (A2, A3, 310P,
A5_950). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

from probes.versions import try_parse_version


@dataclass(frozen=True)
class Scope:
    """Where a row applies: an engine, a release range, model types and chip families."""

    engine: str
    since: str = ""
    until: str = ""
    releases: tuple[str, ...] = ()  # exact releases, instead of a range
    model_types: tuple[str, ...] = ()  # empty: any model
    except_models: tuple[str, ...] = ()
    chips: tuple[str, ...] = ()  # empty: any chip family


@dataclass(frozen=True)
class SupportRow:
    """Engine releases x model x chip x feature -> supported (`yes`, `experimental`) or not."""

    id: str
    engine: str
    support: str  # yes, experimental, no
    says: str  # one line a person reads
    sources: tuple[str, ...]
    model_types: tuple[str, ...] = ()
    chips: tuple[str, ...] = ()
    feature: str = ""  # "": the model or chip itself
    since: str = ""
    until: str = ""

    @property
    def scope(self) -> Scope:
        return Scope(self.engine, self.since, self.until, (), self.model_types, (), self.chips)


@dataclass(frozen=True)
class KnownIssueRow:
    """A release's known problem with a model, chip or feature, as its notes or threads say."""

    id: str
    engine: str
    releases: tuple[str, ...]
    severity: str  # warn, fail
    symptom: str
    sources: tuple[str, ...]
    model_types: tuple[str, ...] = ()
    chips: tuple[str, ...] = ()
    features: tuple[str, ...] = ()  # all of them in use for it to apply
    fixed_in: str = ""

    @property
    def scope(self) -> Scope:
        return Scope(self.engine, "", "", self.releases, self.model_types, (), self.chips)


@dataclass(frozen=True)
class Condition:
    """One fact of the deployment a flag rule looks at (`env.HCCL_BUFFSIZE`,
    `additional_config.torchair_graph_config.enabled`, `arg.--enable-expert-parallel`,
    `model.quantized`): present or absent, equal to a value, or one of several."""

    fact: str
    present: bool | None = None
    equals: str | None = None
    not_equals: str | None = None


@dataclass(frozen=True)
class FlagRow:
    """A rule over the serving command line and environment: where it applies, what it
    looks for (every condition holds), and what it says."""

    id: str
    engine: str  # vllm-ascend, mindie, or any
    status: str  # warn, fail
    says: str
    remedy: str
    when: tuple[Condition, ...]
    sources: tuple[str, ...]
    since: str = ""
    until: str = ""
    model_types: tuple[str, ...] = ()
    except_models: tuple[str, ...] = ()
    chips: tuple[str, ...] = ()

    @property
    def scope(self) -> Scope:
        return Scope(self.engine, self.since, self.until, (), self.model_types,
                     self.except_models, self.chips)


def in_range(release: str, since: str, until: str) -> bool | None:
    """Is `release` in [since, until)? None when a version does not parse."""
    have = try_parse_version(release)
    if have is None:
        return None
    low = try_parse_version(since) if since else None
    high = try_parse_version(until) if until else None
    if (since and low is None) or (until and high is None):
        return None
    return (low is None or have >= low) and (high is None or have < high)


def same_release(release: str, other: str) -> bool:
    a, b = try_parse_version(release), try_parse_version(other)
    return a is not None and b is not None and a.sort_key == b.sort_key


def release_matches(scope: Scope, release: str) -> bool:
    if scope.releases:
        return any(same_release(release, r) for r in scope.releases)
    return bool(in_range(release, scope.since, scope.until))


def model_matches(scope: Scope, model_type: str | None) -> bool:
    if model_type is not None and model_type in scope.except_models:
        return False
    return not scope.model_types or model_type in scope.model_types


def chips_match(scope: Scope, chips: tuple[str, ...]) -> bool:
    return not scope.chips or any(chip in scope.chips for chip in chips)


def applies(scope: Scope, engine: str, release: str, model_type: str | None,
            chips: tuple[str, ...]) -> bool:
    """Does a row with this scope hold for this deployment?"""
    return (scope.engine in (engine, "any") and release_matches(scope, release)
            and model_matches(scope, model_type) and chips_match(scope, chips))


def cite(sources: tuple[str, ...]) -> str:
    return "; ".join(sources)
