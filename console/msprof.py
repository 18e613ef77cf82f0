"""Bank-conflict ratios and HBM bandwidth from an msprof output directory (`--msprof DIR`).

These ARE measurements: PMU counters per operator, read by msprof (Ascend/msprof
`docs/en/user_guide/profile_data_file_references.md` @ 9ba1ac7be913, op_summary; Ascend/msopprof
`docs/en/user_guide/msopprof_performance_data.md` @ d6c29dfa6a2e, ResourceConflictRatio). The
conflict ratios (0..1, share of the vector unit's cycles stalled) are about the AI Core's
on-chip Unified Buffer banks, not HBM; `hbm_*.csv` gives HBM read/write MB/s over the
profiled period. Two file families are read:

- `msprof op` (msOpProf): `ResourceConflictRatio*.csv`, one row per block (core) of one
  operator; the operator's name comes from `OpBasicInfo*.csv` beside it, else the directory.
- `msprof --aic-metrics=ResourceConflictRatio`: `op_summary_*.csv`, one row per kernel launch.

Columns are matched by name (`aiv_vec_bank_cflt_ratio`, the unprefixed `vec_bank_cflt_ratio`
of older products, `aic_vec_bank_cflt_ratio` on 310P), never by position.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

MAX_FILES = 2000  # a profile tree bigger than this is not what --msprof expects
MAX_ROWS_PER_FILE = 2_000_000

_CONFLICT_GLOBS = ("ResourceConflictRatio*.csv", "op_summary_*.csv")
_PREFIXES = ("aiv_", "", "aic_")


class MsprofError(Exception):
    """The msprof directory cannot be read; the message names it."""


@dataclass(frozen=True, slots=True)
class OpConflict:
    """One operator's UB bank-conflict ratios (measured, 0..1), cycle-weighted over its rows.

    `rows` is the number of blocks (msprof op) or kernel launches (op_summary) averaged;
    `worst_ratio` is the highest bank or bank-group ratio of any single row.
    """

    operator: str
    source: str  # the CSV file, relative to the directory given
    rows: int
    bank_cflt_ratio: float | None
    bankgroup_cflt_ratio: float | None
    resc_cflt_ratio: float | None
    total_cflt_ratio: float | None  # msprof op only (`aiv_vec_total_cflt_ratio`)
    worst_ratio: float
    op_type: str | None = None

    @property
    def conflict_ratio(self) -> float:
        """The larger of the bank and bank-group ratios: what the panel sorts by."""
        return max(self.bank_cflt_ratio or 0.0, self.bankgroup_cflt_ratio or 0.0)


@dataclass(frozen=True, slots=True)
class HbmBandwidth:
    """HBM read/write bandwidth of one device over the profile (measured, `hbm_*.csv`).

    The chip total is the sum of the per-unit rows; msprof's `Average` row is the mean per
    unit, not the total (Ascend/msprof `analysis/viewer/get_msvp_summary_training.py` @
    9ba1ac7be913, `get_hbm_summary_data`)."""

    device_id: int
    read_mb_s: float
    write_mb_s: float
    units: int
    source: str


@dataclass(frozen=True, slots=True)
class MsprofReport:
    directory: str
    conflicts: tuple[OpConflict, ...]
    hbm: tuple[HbmBandwidth, ...]
    notes: tuple[str, ...] = field(default=())  # files skipped and why, nothing found, ...


def read_profile(directory: str | Path) -> MsprofReport:
    root = _check_dir(directory)
    notes: list[str] = []
    conflicts = _conflicts(root, notes)
    hbm = _hbm(root, notes)
    if not conflicts:
        notes.append(f"{root}: no ResourceConflictRatio data (profile with "
                     "`msprof --aic-metrics=ResourceConflictRatio` or `msprof op`)")
    return MsprofReport(str(root), tuple(conflicts), tuple(hbm), tuple(notes))


def read_conflicts(directory: str | Path) -> list[OpConflict]:
    """Operators sorted worst first (highest bank / bank-group conflict ratio)."""
    return _conflicts(_check_dir(directory), [])


def read_hbm(directory: str | Path) -> list[HbmBandwidth]:
    return _hbm(_check_dir(directory), [])


def _check_dir(directory: str | Path) -> Path:
    root = Path(directory)
    if not root.exists():
        raise MsprofError(f"{root}: no such msprof output directory")
    if not root.is_dir():
        raise MsprofError(f"{root}: not a directory (give the msprof output directory, "
                          "e.g. PROF_xxx or OPPROF_xxx)")
    return root


def _files(root: Path, patterns: Sequence[str]) -> list[Path]:
    found: set[Path] = set()
    for pattern in patterns:
        for path in root.rglob(pattern):
            if path.is_file() and not path.is_symlink():
                found.add(path)
            if len(found) > MAX_FILES:
                raise MsprofError(f"{root}: more than {MAX_FILES} msprof CSV files; "
                                  "point --msprof at one profile directory")
    return sorted(found)


def _readable(root: Path, patterns: Sequence[str], notes: list[str]
              ) -> Iterator[tuple[Path, str, list[str], list[dict[str, str]]]]:
    """(path, path below root, header, rows) of each CSV matching `patterns`; one that cannot
    be read is a note, and the rest are still read."""
    for path in _files(root, patterns):
        source = str(path.relative_to(root))
        try:
            header, rows = _read_csv(path)
        except (OSError, csv.Error, UnicodeDecodeError) as exc:
            notes.append(f"{source}: skipped, unreadable ({exc})")
            continue
        yield path, source, header, rows


# ---------------------------------------------------------------------------------------------
# conflicts


def _conflicts(root: Path, notes: list[str]) -> list[OpConflict]:
    found: list[OpConflict] = []
    for path, source, header, rows in _readable(root, _CONFLICT_GLOBS, notes):
        if _column(header, "vec_bank_cflt_ratio") is None and \
                _column(header, "vec_bankgroup_cflt_ratio") is None:
            if path.name.startswith("ResourceConflictRatio"):
                notes.append(f"{source}: skipped, no *_vec_bank_cflt_ratio column")
            continue  # an op_summary of another --aic-metrics
        if path.name.startswith("ResourceConflictRatio"):
            found.extend(_per_block(path, root, header, rows))
        else:
            found.extend(_per_launch(source, header, rows))
    return sorted(found, key=lambda c: (-c.conflict_ratio, -c.worst_ratio, c.operator))


def _per_block(path: Path, root: Path, header: list[str], rows: list[dict[str, str]]
               ) -> list[OpConflict]:
    if not rows:
        return []
    name, op_type = _op_basic_info(path.parent)
    if name is None:
        name = path.parent.name if path.parent != root else path.stem
    return [_aggregate(name, op_type, str(path.relative_to(root)), header, rows)]


def _per_launch(source: str, header: list[str], rows: list[dict[str, str]]) -> list[OpConflict]:
    name_col = next((c for c in ("Op Name", "Name") if c in header), None)
    type_col = next((c for c in ("OP Type", "Type") if c in header), None)
    groups: dict[str, list[dict[str, str]]] = {}
    for row in rows:
        groups.setdefault(row.get(name_col, "") if name_col else "?", []).append(row)
    return [
        _aggregate(name or "?", _text(group[0].get(type_col)) if type_col else None,
                   source, header, group)
        for name, group in groups.items()
    ]


def _aggregate(name: str, op_type: str | None, source: str, header: list[str],
               rows: list[dict[str, str]]) -> OpConflict:
    weight_col = _column(header, "total_cycles")
    weights = [(_float(r.get(weight_col)) if weight_col else None) or 1.0 for r in rows]

    def mean(metric: str) -> float | None:
        col = _column(header, metric)
        if col is None:
            return None
        pairs = [(v, w) for r, w in zip(rows, weights, strict=True)
                 if (v := _float(r.get(col))) is not None]
        total_w = sum(w for _, w in pairs)
        return sum(v * w for v, w in pairs) / total_w if pairs and total_w else None

    worst = 0.0
    for metric in ("vec_bank_cflt_ratio", "vec_bankgroup_cflt_ratio"):
        col = _column(header, metric)
        if col is not None:
            worst = max([worst, *(v for r in rows if (v := _float(r.get(col))) is not None)])
    return OpConflict(
        operator=name,
        source=source,
        rows=len(rows),
        bank_cflt_ratio=mean("vec_bank_cflt_ratio"),
        bankgroup_cflt_ratio=mean("vec_bankgroup_cflt_ratio"),
        resc_cflt_ratio=mean("vec_resc_cflt_ratio"),
        total_cflt_ratio=mean("vec_total_cflt_ratio"),
        worst_ratio=worst,
        op_type=op_type,
    )


def _op_basic_info(directory: Path) -> tuple[str | None, str | None]:
    for path in sorted(directory.glob("OpBasicInfo*.csv")):
        try:
            _, rows = _read_csv(path)
        except (OSError, csv.Error, UnicodeDecodeError):
            continue
        if rows:
            return _text(rows[0].get("Op Name")), _text(rows[0].get("Op Type"))
    return None, None


def _column(header: Sequence[str], metric: str) -> str | None:
    """The header's spelling of `metric`: `aiv_` prefixed, unprefixed, or `aic_` (310P)."""
    for prefix in _PREFIXES:
        if prefix + metric in header:
            return prefix + metric
    return None


# ---------------------------------------------------------------------------------------------
# HBM


def _hbm(root: Path, notes: list[str]) -> list[HbmBandwidth]:
    found: list[HbmBandwidth] = []
    for _, source, header, rows in _readable(root, ("hbm_*.csv",), notes):
        if not {"Metric", "Read(MB/s)", "Write(MB/s)"} <= set(header):
            notes.append(f"{source}: skipped, not the hbm_*.csv header "
                         "Device_id,Metric,Read(MB/s),Write(MB/s)")
            continue
        found.extend(_hbm_devices(source, rows))
    return found


def _hbm_devices(source: str, rows: list[dict[str, str]]) -> Iterator[HbmBandwidth]:
    per_device: dict[int, list[tuple[float, float]]] = {}
    for row in rows:
        if (row.get("Metric") or "").strip().lower() == "average":
            continue  # mean per unit; the total is the sum of the unit rows
        read, write = _float(row.get("Read(MB/s)")), _float(row.get("Write(MB/s)"))
        if read is None or write is None:
            continue
        device = _int(row.get("Device_id"))
        per_device.setdefault(0 if device is None else device, []).append((read, write))
    for device, units in sorted(per_device.items()):
        yield HbmBandwidth(device, sum(r for r, _ in units), sum(w for _, w in units),
                           len(units), source)


# ---------------------------------------------------------------------------------------------
# CSV cells


def _read_csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open(newline="", encoding="utf-8-sig") as handle:
        reader = csv.DictReader(handle)
        header = [h.strip() for h in reader.fieldnames or []]
        reader.fieldnames = header
        rows: list[dict[str, str]] = []
        for row in reader:
            rows.append(row)
            if len(rows) >= MAX_ROWS_PER_FILE:
                break
    return header, rows


def _text(value: str | None) -> str | None:
    text = (value or "").strip().strip("\t")
    return text if text and text.upper() != "N/A" else None


def _float(value: str | None) -> float | None:
    text = _text(value)
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def _int(value: str | None) -> int | None:
    number = _float(value)
    return None if number is None else int(number)


