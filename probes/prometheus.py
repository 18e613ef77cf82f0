"""The Prometheus text exposition format, parsed with prometheus_client's parser into samples.

Pure. A line the parser refuses is listed in `problems` (with its number) and the rest of the
text still counts: one odd line from an exporter must not blank a panel. Sample timestamps
are seconds (the format's milliseconds, converted by the parser).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice

from probes.textsafe import one_line

MAX_PROBLEMS = 20
# The doctor's bound, not the format's: the endpoints and exporters it reads expose hundreds
# to thousands of series; 700,000 took 9 s and 270 MB to parse here, every scrape.
MAX_SAMPLES = 100_000
_SUFFIXES = ("_bucket", "_count", "_sum", "_total", "_created", "_info")


@dataclass(frozen=True, slots=True)
class Sample:
    name: str
    labels: tuple[tuple[str, str], ...]  # sorted by label name
    value: float
    timestamp_s: float | None = None

    def label(self, key: str) -> str | None:
        return next((v for k, v in self.labels if k == key), None)


@dataclass(frozen=True)
class Exposition:
    """Every sample of one scrape, the declared TYPE of each family, and lines not understood."""

    samples: tuple[Sample, ...]
    types: dict[str, str] = field(default_factory=dict)
    problems: tuple[str, ...] = ()

    def named(self, name: str) -> list[Sample]:
        return [s for s in self.samples if s.name == name]

    @property
    def names(self) -> frozenset[str]:
        return frozenset(s.name for s in self.samples)

    def type_of(self, sample_name: str) -> str | None:
        """The declared TYPE of the family a sample name belongs to."""
        if sample_name in self.types:
            return self.types[sample_name]
        for suffix in _SUFFIXES:
            if sample_name.endswith(suffix) and sample_name[: -len(suffix)] in self.types:
                return self.types[sample_name[: -len(suffix)]]
        return None


def parse(text: str, max_samples: int = MAX_SAMPLES) -> Exposition:
    """The samples of `text`, at most `max_samples` (a problem says when more were left);
    raises nothing."""
    types = _declared_types(text.splitlines())
    try:
        samples = tuple(islice(_samples(text), max_samples + 1))
        return Exposition(samples[:max_samples], types, _over(len(samples), max_samples))
    except ValueError:
        pass  # one bad line stops the parser: parse line by line to keep the rest
    samples_list: list[Sample] = []
    problems: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if len(samples_list) > max_samples:
            break
        if not line.strip() or line.startswith("#"):
            continue
        try:
            samples_list.extend(_samples(line + "\n"))
        except ValueError:
            if len(problems) < MAX_PROBLEMS:
                problems.append(f"line {number}: not a Prometheus sample: {one_line(line[:120])}")
    over = _over(len(samples_list), max_samples)
    return Exposition(tuple(samples_list[:max_samples]), types, (*problems, *over))


def _over(count: int, max_samples: int) -> tuple[str, ...]:
    return (f"more than {max_samples:,} samples: the rest not read",) \
        if count > max_samples else ()


def _samples(text: str) -> Iterator[Sample]:
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(text):
        for s in family.samples:
            yield Sample(s.name, tuple(sorted(s.labels.items())), float(s.value),
                         None if s.timestamp is None else float(s.timestamp))


def _declared_types(lines: Iterable[str]) -> dict[str, str]:
    types: dict[str, str] = {}
    for line in lines:
        parts = line.split()
        if len(parts) >= 4 and parts[0] == "#" and parts[1] == "TYPE":
            types[parts[2]] = parts[3]
    return types
