"""Parser of `npu-smi info -t topo`: the link matrix, CPU affinity per device, the legend.

    \t   NPU0       NPU1       CPU Affinity
    NPU0       X          HCCS       144-167
    NPU1       HCCS       X          144-167

The header line is the schema: device labels are `NPU<n>` or, on A3, `Phy-ID<n>`; the
`CPU Affinity` column is absent on some products (A3 on ARM). Link names differ by version
(`HCCS`, `SYS`, `PIX`, ... up to 25.x; `XLink`, `SIO`, `UB` later) and are kept as printed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from types import MappingProxyType

from probes.errors import ParseError
from probes.npu_smi.model_kv import Topology

_DEVICE_LABEL = re.compile(r"^([A-Za-z][A-Za-z_-]*)\d+$")
_AFFINITY_HEADER = re.compile(r"\bCPU\s+Affinity\b", re.IGNORECASE)
_LEGEND_TITLE = re.compile(r"^\s*Legend\s*:?\s*$", re.IGNORECASE)
_LEGEND_LINE = re.compile(r"^\s*(?P<code>[A-Za-z_][A-Za-z0-9_-]*)\s*=(?P<text>.*)$")


def topo_header(line: str) -> tuple[tuple[str, ...], bool] | None:
    """(device labels, has affinity column) when the line is the matrix header: labels of one
    prefix (`NPU0 NPU1`, `Phy-ID0 Phy-ID1`), two or more of them or one and `CPU Affinity`."""
    has_affinity = _AFFINITY_HEADER.search(line) is not None
    tokens = _AFFINITY_HEADER.sub(" ", line).split()
    prefixes = set()
    for token in tokens:
        match = _DEVICE_LABEL.match(token)
        if match is None:
            return None
        prefixes.add(match.group(1))
    if len(prefixes) != 1 or (len(tokens) < 2 and not has_affinity):
        return None
    return tuple(tokens), has_affinity


def looks_like_topo(lines: Sequence[str]) -> bool:
    """A matrix header followed by a row that starts with one of its labels."""
    for start, line in enumerate(lines):
        header = topo_header(line)
        if header is not None:
            labels = set(header[0])
            return any(row.split(None, 1)[:1] and row.split(None, 1)[0] in labels
                       for row in lines[start + 1 :])
    return False


def parse_topo(text: str) -> Topology:
    """`npu-smi info -t topo`: the link matrix, CPU affinity per device and the legend."""
    devices: tuple[str, ...] = ()
    has_affinity = False
    links: dict[tuple[str, str], str] = {}
    affinity: dict[str, str | None] = {}
    legend: dict[str, str] = {}
    warnings: list[str] = []
    seen_rows: set[str] = set()
    for line_no, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip() or _LEGEND_TITLE.match(raw):
            continue
        tokens = raw.split()
        if devices and tokens[0] in devices:
            if tokens[0] in seen_rows:
                warnings.append(f"line {line_no}: repeated row, kept the first: {raw.strip()!r}")
                continue
            seen_rows.add(tokens[0])
            row_warning = _topo_row(tokens, devices, has_affinity, links, affinity)
            if row_warning:
                warnings.append(f"line {line_no}: {row_warning}: {raw.strip()!r}")
            continue
        header = None if devices else topo_header(raw)
        if header is not None:
            devices, has_affinity = header
            affinity = dict.fromkeys(devices)
            continue
        legend_line = _LEGEND_LINE.match(raw)
        if legend_line is not None:
            legend[legend_line.group("code")] = legend_line.group("text").strip()
            continue
        warnings.append(f"line {line_no}: not understood: {raw.strip()!r}")
    if not devices:
        first = next((w for w in warnings), "empty output")
        raise ParseError("npu-smi info -t topo", f"no matrix header (NPU0 NPU1 ...); {first}")
    return Topology(
        devices=devices,
        links=MappingProxyType(links),
        cpu_affinity=MappingProxyType(affinity),
        legend=MappingProxyType(legend),
        warnings=tuple(warnings),
    )


def _topo_row(
    tokens: Sequence[str],
    devices: Sequence[str],
    has_affinity: bool,
    links: dict[tuple[str, str], str],
    affinity: dict[str, str | None],
) -> str | None:
    """Record one matrix row; returns a warning when the row is cut or has extra cells."""
    row, rest = tokens[0], tokens[1:]
    cells, extra = rest[: len(devices)], rest[len(devices) :]
    for column, cell in zip(devices, cells, strict=False):
        links[(row, column)] = cell
    if has_affinity and extra:
        affinity[row] = " ".join(extra)
    if len(cells) < len(devices):
        return f"row has {len(cells)} of {len(devices)} link cells"
    if extra and not has_affinity:
        return "cells beyond the header"
    return None
