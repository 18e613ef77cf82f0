"""The pairing tables of checks/data/compat.yaml, and the lookups versions.parity makes in them.

Pure: the tables are read once (from the JSON copy, see checks.datafiles); every function
here is a question about them. Judging (pass/warn/fail) is in checks.builtin.versions.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from checks import datafiles
from probes.versions import same_release, try_parse_version

Row = Mapping[str, Any]
# complete: every HDK declared for the CANN; minimum: any HDK from the one named on;
# partial: pairings for some products only; community: seen together in public reports
HdkKind = Literal["complete", "minimum", "partial", "community"]


@dataclass(frozen=True)
class HdkRow:
    """The HDK (driver) releases one CANN version is paired with, and how sure that is."""

    cann: str
    kind: HdkKind
    entries: tuple[tuple[str, str], ...]  # (HDK release, the product it is for, or "")
    source: str


@dataclass(frozen=True)
class CompatData:
    """The pairing tables of checks/data/compat.yaml that the judging reads."""

    torch_npu_rows: tuple[Row, ...]  # torch_npu.active + historical
    extension_ranges: Mapping[str, tuple[str, ...]]  # pytorch_extension_compat_ranges
    vllm_rows: tuple[Row, ...]  # vllm_ascend.rows
    mindie_rows: tuple[Row, ...]  # mindie_compat.rows
    hdk_rows: tuple[HdkRow, ...]  # cann_to_hdk.declared, as code reads it
    recommended: tuple[tuple[str, str], ...] = ()  # (CANN, driver): the install helper's pairs

    @property
    def known_cann(self) -> tuple[str, ...]:
        """Every CANN version any table names: outside these, the data cannot judge."""
        names = [str(r["cann"]) for r in (*self.torch_npu_rows, *self.vllm_rows,
                                          *self.mindie_rows)]
        names += [c for cs in self.extension_ranges.values() for c in cs]
        return tuple(names)


@functools.lru_cache(maxsize=1)
def compat_data() -> CompatData:
    raw = datafiles.load("data/compat.yaml")
    npu = raw["torch_npu"]
    return CompatData(
        torch_npu_rows=tuple(npu["active"]) + tuple(npu["historical"]),
        extension_ranges={str(k): tuple(str(c) for c in v)
                          for k, v in raw["pytorch_extension_compat_ranges"].items()},
        vllm_rows=tuple(raw["vllm_ascend"]["rows"]),
        mindie_rows=tuple(raw["mindie_compat"]["rows"]),
        hdk_rows=hdk_rows(raw["cann_to_hdk"]["declared"]),
        recommended=tuple((str(r["cann"]), helper_driver(str(r["driver"])))
                          for r in raw["cann_to_hdk"]["recommended_download_pairs_910b"]),
    )


def helper_driver(text: str) -> str:
    """The install helper's driver as an HDK entry: `25.0.rc1(.1)` -> `25.0.rc1`."""
    return text.split("(", 1)[0].strip()


def recommended_driver(cann: str) -> str | None:
    """The driver the install helper pairs with this CANN (910B), or None."""
    return next((d for c, d in compat_data().recommended if same(c, cann)), None)


def newer_than_all(driver: str, entries: Sequence[str]) -> bool:
    """Is `driver` a later HDK than every listed entry (an `X` counts as 0)?"""
    have = try_parse_version(driver)
    wants = [try_parse_version(e.lower().replace(".x", ".0")) for e in entries]
    return have is not None and all(w is not None and have > w for w in wants)


def hdk_rows(declared: Sequence[Row]) -> tuple[HdkRow, ...]:
    """cann_to_hdk.declared as code reads it; rows with nothing machine-readable are left out."""
    by_cann = {str(r["cann"]): r for r in declared}
    rows = []
    for cann, row in by_cann.items():
        lists = row.get("hdk")
        if "same_as" in row:
            lists = by_cann[str(row["same_as"])].get("hdk")
        source = str(row.get("source") or row.get("hdk") or row.get("note") or "")
        if isinstance(lists, list):
            rows.append(HdkRow(cann, "complete", tuple((str(h), "") for h in lists), source))
        elif isinstance(row.get("hdk_min"), str):
            rows.append(HdkRow(cann, "minimum", ((str(row["hdk_min"]), ""),), source))
        elif isinstance(row.get("hdk_by_product"), Mapping):
            entries = tuple((str(h), str(product))
                            for product, hdks in row["hdk_by_product"].items() for h in hdks)
            rows.append(HdkRow(cann, "partial", entries, str(row.get("extra") or source)))
        elif isinstance(row.get("hdk_seen_with"), list):
            rows.append(HdkRow(cann, "community",
                               tuple((str(h), "") for h in row["hdk_seen_with"]),
                               str(row.get("note") or "community evidence")))
    return tuple(rows)


def same(a: str | None, b: str | None) -> bool:
    """Same release (build and local labels ignored); False when either does not parse."""
    pa, pb = try_parse_version(a), try_parse_version(b)
    return pa is not None and pb is not None and same_release(pa, pb)


def row_for(rows: Sequence[Row], key: str, version: str) -> Row | None:
    return next((r for r in rows if same(str(r[key]), version)), None)


def dev_base(version: str) -> str | None:
    """The release a development build comes before (`0.11.0rc1.dev0+g1a2b` -> `0.11.0rc1`),
    None for any other version. PEP 440 orders `X.devN` before X, so such a build is judged by
    X's rows: the nearest declared release, not one the rows name."""
    parsed = try_parse_version(version)
    if parsed is None or parsed.dev is None or parsed.post is not None:
        return None
    text = version.strip().partition("+")[0]
    return text[:text.lower().rfind("dev")].rstrip(".-_")


def dev_build_words(version: str, base: str) -> str:
    return (f"{version} is a development build before {base}: judged as {base}'s rows, "
            "not declared by them")


def release_row(rows: Sequence[Row], key: str, version: str) -> tuple[Row | None, str]:
    """The row of `version`, or of the release a development build precedes; the second
    item says so for a development build ("" otherwise)."""
    row = row_for(rows, key, version)
    base = dev_base(version) if row is None else None
    if base is None:
        return row, ""
    return row_for(rows, key, base), dev_build_words(version, base)


def listed(version: str, names: Sequence[str]) -> bool:
    return any(same(version, n) for n in names)


def hdk_matches(driver: str, entry: str) -> bool:
    """Is driver `driver` the HDK release `entry` names? Case-insensitive, dotted parts:
    `X` matches any part, and the driver may carry more parts (a patch or build) after the
    entry's: 25.5.X holds 25.5.1; 25.5.1 holds 25.5.1.2 and 25.5.1.b010; 26.0.RC1 holds
    26.0.rc1.1; 25.5.1 does not hold 25.5.10."""
    have = driver.strip().lower().split(".")
    want = entry.strip().lower().split(".")
    if len(have) < len(want):
        return False
    return all(w == "x" or h == w for h, w in zip(have, want, strict=False))


def hdk_row(cann: str) -> HdkRow | None:
    return next((r for r in compat_data().hdk_rows if same(r.cann, cann)), None)


def product_of(torch_npu_row: Row) -> str:
    """The Ascend Extension for PyTorch release of a torch_npu row (`v2.6.0-7.3.0` -> 7.3.0)."""
    return str(torch_npu_row["branch"]).rsplit("-", 1)[-1]


def mindie_pairing(product: str, cann: str) -> Row | None:
    """The MindIE release row that pairs this Ascend Extension for PyTorch with this CANN."""
    return next((r for r in compat_data().mindie_rows
                 if str(r.get("pytorch_extension")) == product and same(str(r["cann"]), cann)),
                None)


def vllm_pairing(torch_npu: str, cann: str) -> Row | None:
    """The vllm-ascend release row that tested this torch_npu with this CANN."""
    return next((r for r in compat_data().vllm_rows
                 if same(str(r["torch_npu"]), torch_npu) and same(str(r["cann"]), cann)), None)


def vllm_tested_cann(torch_npu: str) -> tuple[str, ...]:
    """The CANN versions vllm-ascend rows tested this torch_npu with."""
    found = [str(r["cann"]) for r in compat_data().vllm_rows if same(str(r["torch_npu"]),
                                                                      torch_npu)]
    return tuple(dict.fromkeys(found))
