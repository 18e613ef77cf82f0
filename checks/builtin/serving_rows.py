"""The rows of the `support`, `known_issues` and `flags` topics (checks/data/*.yaml), and the
one question every row answers: does it hold for this engine release, model and chip?

Releases compare in the order `probes.versions` gives (v0.8.4rc1 < v0.8.4rc2 < v0.8.4); a range
is `since` (included) to `until` (excluded), either end open when empty; a development build
(`0.11.0rc1.dev0`) is judged as the release it precedes. Model types are the
`model_type` of config.json; chip families are those `fp8_gate.chip_family` names (A2, A3, 310P,
A5_950). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

from checks.builtin.compat import dev_base
from probes.versions import try_parse_version


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
    # model types the issue spares (a release note that names the models it validated)
    except_models: tuple[str, ...] = ()


@dataclass(frozen=True)
class Condition:
    """One fact of the deployment a flag rule looks at (`env.HCCL_BUFFSIZE`,
    `additional_config.torchair_graph_config.enabled`, `arg.--enable-expert-parallel`,
    `model.quantized`): present or absent, equal to a value, not equal to one, a number
    outside a documented range (below `below` or above `above`), a number below the number
    another fact holds (`below_fact`), or a whole number that another fact's whole number
    does not divide (`not_divisible_by_fact`)."""

    fact: str
    present: bool | None = None
    equals: str | None = None
    not_equals: str | None = None
    below: float | None = None
    above: float | None = None
    below_fact: str | None = None
    not_divisible_by_fact: str | None = None

    @property
    def other_fact(self) -> str | None:
        """The fact this condition compares its own with, if any."""
        return self.below_fact or self.not_divisible_by_fact


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
    releases: tuple[str, ...] = ()  # instead of since/until: exactly these releases
    model_types: tuple[str, ...] = ()
    except_models: tuple[str, ...] = ()
    chips: tuple[str, ...] = ()



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


def release_matches(row: SupportRow | KnownIssueRow | FlagRow, release: str) -> bool:
    """Is `release` one of the row's `releases`, or in its [since, until) range? A development
    build is judged as the release it precedes (compat.dev_base; the check says so)."""
    release = dev_base(release) or release
    releases: tuple[str, ...] = getattr(row, "releases", ())
    if releases:
        return any(same_release(release, r) for r in releases)
    return bool(in_range(release, getattr(row, "since", ""), getattr(row, "until", "")))


def model_matches(row: SupportRow | KnownIssueRow | FlagRow, model_type: str | None) -> bool:
    if model_type is not None and model_type in getattr(row, "except_models", ()):
        return False
    return not row.model_types or model_type in row.model_types


def chips_match(row: SupportRow | KnownIssueRow | FlagRow, chips: tuple[str, ...]) -> bool:
    return not row.chips or any(chip in row.chips for chip in chips)


def features_hold(wanted: tuple[str, ...], in_use: list[str] | tuple[str, ...]) -> bool:
    """Every feature a row names is on, and every `!FEATURE` it names is off (a workaround
    the sources give, such as an explicit --dtype, spares the deployment)."""
    return all((f[1:] not in in_use) if f.startswith("!") else (f in in_use) for f in wanted)


def applies(row: SupportRow | KnownIssueRow | FlagRow, engine: str, release: str,
            model_type: str | None, chips: tuple[str, ...]) -> bool:
    """Does the row hold for this deployment?"""
    return (row.engine in (engine, "any") and release_matches(row, release)
            and model_matches(row, model_type) and chips_match(row, chips))


def cite(sources: tuple[str, ...]) -> str:
    return "; ".join(sources)
