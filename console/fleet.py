"""The fleet model: every node's NPU-Exporter chips, read through Prometheus, ranked by their
worst chip. Headless: the screen (console/ui/screens/fleet.py) only draws what this builds.

Metric names and labels are NPU-Exporter's (Ascend/mind-cluster `docs/en/scheduling/api/
npu_exporter/01_prometheus_metrics_api.md` @ 22bb3d987bc0; HBM ECC names from
`component/npu-exporter/collector/metrics/collector_for_hbm.go`): one chip per `id` label;
health 1 healthy, 0 unhealthy, anything else unknown; link status 1 up, 0 down; a value the
exporter could not read is not emitted, so it is shown as unknown here, never as fine.

A node is the `node` label where the scrape configuration sets one (relabelled from the
Kubernetes node name, say), else the host part of `instance`, so the NPU-Exporter (:8082) and
node_exporter (:9100, carrying the doctor's `--prometheus FILE` results through its textfile
collector) of one machine meet. A node seen in the last `SEEN_WINDOW` but not now is shown as
gone, first, never dropped.

Temperatures are judged by the doctor's own rule (checks.thermal: a chip well above its node's
peers warns; no chip limit is published) and HBM use by the console's policy percentages;
the distance to the fleet's median is shown and ranks, but judges nothing.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal

from checks.thermal import ThermalLimits, judge_by_key, thermal_limits
from probes.prometheus_api import (
    Answer,
    Limits,
    PromAPIError,
    RangeAnswer,
    Series,
    host_of,
    instant,
    range_query,
)
from probes.words import counted

if TYPE_CHECKING:
    import httpx

    from checks.policy import Policy

Level = Literal["gone", "fail", "warn", "unknown", "ok"]
RANK: dict[Level, int] = {"gone": 4, "fail": 3, "warn": 2, "unknown": 1, "ok": 0}
SEEN_WINDOW = "15m"  # a node that stops exporting stays listed (as gone) this long at least
GROUP = "instance, job, node, id"

# field -> (NPU-Exporter metric, aggregation over duplicate series of one chip)
CHIP_METRICS: dict[str, tuple[str, str]] = {
    "health": ("npu_chip_info_health_status", "min"),
    "temperature_c": ("npu_chip_info_temperature", "max"),
    "hbm_used_mb": ("npu_chip_info_hbm_used_memory", "max"),
    "hbm_total_mb": ("npu_chip_info_hbm_total_memory", "max"),
    "aicore_percent": ("npu_chip_info_utilization", "max"),
    "link_status": ("npu_chip_info_link_status", "min"),
    "network_status": ("npu_chip_info_network_status", "min"),
    "error_code": ("npu_chip_info_error_code", "max"),
    "ecc_double_bit": ("npu_chip_info_hbm_ecc_double_bit_error_cnt", "max"),
}
SEEN_QUERY = f"max by (instance, job, node) (last_over_time(machine_npu_nums[{SEEN_WINDOW}]))"
# the doctor's metric names (checks/prom.py), from node_exporter's textfile collector
DOCTOR_CHECKS = "ascend_doctor_checks"
DOCTOR_LAST_RUN = "ascend_doctor_last_run_timestamp_seconds"


@dataclass(frozen=True)
class HbmLimits:
    warn_percent: float
    fail_percent: float


@dataclass(frozen=True)
class FleetLimits:
    thermal: ThermalLimits
    hbm: HbmLimits


def fleet_limits(policy: Policy) -> FleetLimits:

    return FleetLimits(thermal_limits(policy), HbmLimits(
        float(policy.get("console", "hbm_used_warn_percent")),
        float(policy.get("console", "hbm_used_fail_percent"))))


@dataclass(frozen=True)
class Chip:
    npu_id: int
    level: Level
    reasons: tuple[str, ...]
    values: Mapping[str, float | None]  # CHIP_METRICS field -> value (None: not exported)
    above_fleet_c: float | None = None  # temperature minus the fleet's median

    def value(self, name: str) -> float | None:
        return self.values.get(name)

    @property
    def hbm_percent(self) -> float | None:
        used, total = self.value("hbm_used_mb"), self.value("hbm_total_mb")
        return None if used is None or not total else 100.0 * used / total


@dataclass(frozen=True)
class Doctor:
    """The node's last doctor run, from its `--prometheus FILE` results."""

    counts: Mapping[str, int]  # status -> checks
    last_run_s: float | None

    def line(self, now_s: float) -> str:
        shown = [f"{self.counts[s]} {s}" for s in ("fail", "error", "warn")
                 if self.counts.get(s)]
        age = "" if self.last_run_s is None else f", {_age(now_s - self.last_run_s)} ago"
        return f"doctor: {', '.join(shown) or 'no problem'}{age}"


@dataclass(frozen=True)
class Node:
    name: str
    level: Level
    reasons: tuple[str, ...]
    chips: tuple[Chip, ...]  # worst first
    selector: str = ""  # the PromQL label matchers of its exporter series
    doctor: Doctor | None = None

    @property
    def hottest_c(self) -> float | None:
        temps = [c.value("temperature_c") for c in self.chips]
        return max((t for t in temps if t is not None), default=None)

    @property
    def worst_hbm_percent(self) -> float | None:
        return max((p for c in self.chips if (p := c.hbm_percent) is not None), default=None)


@dataclass(frozen=True)
class Fleet:
    nodes: tuple[Node, ...]  # worst first
    taken_at_s: float
    error: str = ""  # why this read failed ("" when it did not)
    notes: tuple[str, ...] = ()  # series dropped, server warnings

    def counts(self) -> dict[Level, int]:
        out: dict[Level, int] = dict.fromkeys(RANK, 0)
        for node in self.nodes:
            out[node.level] += 1
        return out


# --- the pure part ----------------------------------------------------------------------------


def node_name(series: Series) -> str:
    return series.label("node") or host_of(series.label("instance") or "?")


def build_fleet(by_field: Mapping[str, Sequence[Series]], seen: Sequence[Series],
                doctor: Sequence[Series], limits: FleetLimits, now_s: float,
                notes: tuple[str, ...] = ()) -> Fleet:
    """The fleet from one read: chip values per field, the nodes seen lately, doctor results."""
    values: dict[str, dict[int, dict[str, float | None]]] = defaultdict(dict)
    selectors: dict[str, str] = {}
    names: dict[tuple[str | None, str | None], str] = {}  # (node, instance) -> node name
    for name, series_list in by_field.items():
        for series in series_list:
            labels = dict(series.labels)
            chip = _chip_number(labels.get("id"))
            if chip is None:
                continue
            key = (labels.get("node"), labels.get("instance"))
            node = names.get(key) or names.setdefault(key, node_name(series))
            values[node].setdefault(chip, {})[name] = series.value
            if node not in selectors:
                selectors[node] = selector(series)
    fleet_median = _median([t for chips in values.values() for v in chips.values()
                            if (t := v.get("temperature_c")) is not None])
    doctors = doctor_by_node(doctor)
    nodes = [_node(name, chips, selectors[name], doctors.get(name), fleet_median, limits)
             for name, chips in values.items()]
    nodes += [_gone(name, doctors.get(name)) for name in _names(seen) - values.keys()]
    return Fleet(tuple(sorted(nodes, key=_node_rank)), now_s, notes=notes)


def judge_chip(values: Mapping[str, float | None], thermal: tuple[Level, tuple[str, ...]],
               hbm: HbmLimits) -> tuple[Level, tuple[str, ...]]:
    """One chip's level and reasons, from its exported values and its thermal verdict."""
    found: list[tuple[Level, str]] = [(thermal[0], r) for r in thermal[1]]
    health = values.get("health")
    if health is None:
        found.append(("unknown", "health not exported"))
    elif health == 0:
        found.append(("fail", "unhealthy (health status 0)"))
    elif health != 1:
        found.append(("warn", f"health unknown (status {health:g})"))
    found += _hbm_findings(values, hbm)
    if values.get("link_status") == 0:
        found.append(("warn", "link down"))
    if values.get("network_status") == 0:
        found.append(("warn", "network unhealthy"))
    code = values.get("error_code")
    if code:
        found.append(("warn", f"error code 0x{int(code):08X}"))
    ecc = values.get("ecc_double_bit")
    if ecc:
        found.append(("warn", f"{ecc:g} HBM double-bit ECC errors"))
    level: Level = max((lvl for lvl, _ in found), key=RANK.__getitem__, default="ok")
    return level, tuple(reason for lvl, reason in found if lvl != "ok")


def _hbm_findings(values: Mapping[str, float | None],
                  hbm: HbmLimits) -> list[tuple[Level, str]]:
    used, total = values.get("hbm_used_mb"), values.get("hbm_total_mb")
    if used is None or not total:
        return []
    percent = 100.0 * used / total
    if percent >= hbm.fail_percent:
        return [("fail", f"HBM {percent:.0f}% used (fail at {hbm.fail_percent:g}%)")]
    if percent >= hbm.warn_percent:
        return [("warn", f"HBM {percent:.0f}% used (warn at {hbm.warn_percent:g}%)")]
    return []


def _node(name: str, chips: Mapping[int, Mapping[str, float | None]], node_selector: str,
          doctor: Doctor | None, fleet_median: float | None, limits: FleetLimits) -> Node:
    temps = {str(chip): v.get("temperature_c") for chip, v in chips.items()}
    verdicts = judge_by_key(temps, limits.thermal)
    built = []
    for chip_id, chip_values in chips.items():
        verdict = verdicts[str(chip_id)]
        level, reasons = judge_chip(chip_values, (verdict.level, verdict.reasons), limits.hbm)
        temp = chip_values.get("temperature_c")
        above = None if temp is None or fleet_median is None else temp - fleet_median
        built.append(Chip(chip_id, level, reasons, dict(chip_values), above))
    ordered = tuple(sorted(built, key=_chip_rank))
    reasons = tuple(f"NPU {c.npu_id}: {r}" for c in ordered if c.level in ("fail", "warn")
                    for r in c.reasons)
    level = ordered[0].level if ordered else "unknown"
    doctor_level, doctor_reason = _doctor_finding(doctor)
    if RANK[doctor_level] > RANK[level]:
        level = doctor_level
    if doctor_reason:
        reasons += (doctor_reason,)
    return Node(name, level, reasons, ordered, node_selector, doctor)


def _gone(name: str, doctor: Doctor | None) -> Node:
    return Node(name, "gone", ("no NPU-Exporter series now: exporter or node down?",), (), "",
                doctor)


def _doctor_finding(doctor: Doctor | None) -> tuple[Level, str]:
    if doctor is None:
        return "ok", ""
    failed = doctor.counts.get("fail", 0) + doctor.counts.get("error", 0)
    if failed:
        return "fail", f"doctor: {counted(failed, 'check')} failed"
    if doctor.counts.get("warn", 0):
        return "warn", f"doctor: {counted(doctor.counts['warn'], 'warning')}"
    return "ok", ""


def doctor_by_node(series_list: Iterable[Series]) -> dict[str, Doctor]:
    counts: dict[str, dict[str, int]] = defaultdict(dict)
    last: dict[str, float | None] = {}
    for series in series_list:
        node, name = node_name(series), series.label("__name__")
        if name == DOCTOR_LAST_RUN:
            last[node] = series.value
        elif name == DOCTOR_CHECKS and series.value is not None:
            counts[node][series.label("status") or "?"] = int(series.value)
    return {node: Doctor(counts.get(node, {}), last.get(node))
            for node in counts.keys() | last.keys()}


def selector(series: Series) -> str:
    """Label matchers naming the exporter behind `series` (its instance and job)."""
    pairs = [(k, series.label(k)) for k in ("instance", "job", "node")]
    return ",".join(f'{k}="{_escape(v)}"' for k, v in pairs if v)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _names(series_list: Iterable[Series]) -> set[str]:
    return {node_name(s) for s in series_list}


def _chip_number(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() else None


def _chip_rank(chip: Chip) -> tuple[int, float, int]:
    temp = chip.value("temperature_c")
    return -RANK[chip.level], -(temp if temp is not None else -1e9), chip.npu_id


def _node_rank(node: Node) -> tuple[int, float, float, str]:
    hot, hbm = node.hottest_c, node.worst_hbm_percent
    return (-RANK[node.level], -(hot if hot is not None else -1e9),
            -(hbm if hbm is not None else -1.0), node.name)


def _median(values: Sequence[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{max(0, round(seconds))} s"
    if seconds < 7200:
        return f"{round(seconds / 60)} min"
    return f"{round(seconds / 3600)} h"


# --- the reading (I/O) ------------------------------------------------------------------------


def chip_query(field_name: str) -> str:
    metric, how = CHIP_METRICS[field_name]
    return f"{how} by ({GROUP}) ({metric})"


DOCTOR_QUERY = f'{{__name__=~"{DOCTOR_CHECKS}|{DOCTOR_LAST_RUN}"}}'


@dataclass
class FleetReader:
    """Reads the fleet from one Prometheus server; remembers nodes to mark the ones that go."""

    http_client: httpx.Client
    base: str
    limits: FleetLimits
    api_limits: Limits = field(default_factory=Limits)
    clock: Callable[[], float] = time.time
    _known: dict[str, Node] = field(default_factory=dict)

    def read(self) -> Fleet:
        """One fleet; a failed read is a Fleet with `error` and the nodes as last read (what
        Prometheus cannot answer says nothing about the nodes)."""
        now = self.clock()
        try:
            fleet = self._read(now)
        except PromAPIError as exc:
            return Fleet(tuple(sorted(self._known.values(), key=_node_rank)), now,
                         error=str(exc))
        for node in fleet.nodes:
            self._known[node.name] = node
        return _with_remembered(fleet, self._known)

    def _read(self, now: float) -> Fleet:
        started = time.monotonic()
        notes: list[str] = []
        by_field = {}
        for name in CHIP_METRICS:
            answer = self._ask(chip_query(name), started)
            by_field[name] = answer.series
            notes += _notes(answer.dropped, answer.warnings, name)
        seen = self._ask(SEEN_QUERY, started)
        doctor = self._ask(DOCTOR_QUERY, started)
        return build_fleet(by_field, seen.series, doctor.series, self.limits, now,
                           tuple(dict.fromkeys(notes)))

    def _ask(self, query: str, started: float) -> Answer:
        """One instant query within what is left of the whole read's deadline."""
        left = self.api_limits.deadline_s - (time.monotonic() - started)
        if left <= 0:
            raise PromAPIError(f"{self.base}/api/v1/query: the fleet read took longer than "
                               f"{self.api_limits.deadline_s:g} s; is Prometheus overloaded?")
        return instant(self.http_client, self.base, query, None,
                       replace(self.api_limits, deadline_s=left))

    def history(self, node: Node, field_name: str = "temperature_c", minutes: int = 30,
                step_s: float = 30.0) -> dict[int, list[float]]:
        """A chip's recent values (per NPU id) for sparklines; {} when there are none."""
        metric, how = CHIP_METRICS[field_name]
        if not node.selector:
            return {}
        query = f"{how} by (id) ({metric}{{{node.selector}}})"
        end = self.clock()
        answer: RangeAnswer = range_query(self.http_client, self.base, query,
                                          end - minutes * 60, end, step_s, self.api_limits)
        out: dict[int, list[float]] = {}
        for series in answer.series:
            chip = series.label("id")
            if chip is not None and chip.isdigit():
                out[int(chip)] = [v for _, v in series.points if v is not None]
        return out


def _with_remembered(fleet: Fleet, known: Mapping[str, Node]) -> Fleet:
    """Nodes this reader saw before that are absent now (even past SEEN_WINDOW) stay, as gone."""
    present = {n.name for n in fleet.nodes}
    missing = [_gone(name, node.doctor) for name, node in known.items() if name not in present]
    if not missing:
        return fleet
    nodes = tuple(sorted((*fleet.nodes, *missing), key=_node_rank))
    return Fleet(nodes, fleet.taken_at_s, fleet.error, fleet.notes)


def _notes(dropped: int, warnings: Sequence[str], what: str) -> list[str]:
    notes = [f"{what}: {dropped} series past the cap not read"] if dropped else []
    return notes + [f"Prometheus: {w}" for w in warnings]
