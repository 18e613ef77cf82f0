"""The `Requires-Dist` lines of one installed distribution, read from its `*.dist-info/METADATA`
through a Host, without running the interpreter that owns it (core metadata specification:
https://packaging.python.org/en/latest/specifications/core-metadata/#requires-dist-multiple-use).

Only the header is read (it ends at the first blank line; the long description follows), and
at most MAX_HEADER_BYTES of it. An `.egg-info` keeps its requirements in `requires.txt`, not
in its header: it is reported as not read.
"""

from __future__ import annotations

import posixpath

from probes.errors import HostError, NotRecorded
from probes.host import Host, normalise_dist_name

# A project default: the headers of torch, vllm and vllm-ascend hold well under 16 KiB of
# fields; the rest of a METADATA file is the long description, never needed here.
MAX_HEADER_BYTES = 256 * 1024


def dist_info_dir(host: Host, entry: str, name: str) -> str | None:
    """The `<name>-<version>.dist-info` directory of distribution `name` in sys.path entry
    `entry`, or None. HostError propagates."""
    want = normalise_dist_name(name)
    for child in sorted(host.list_dir(entry)):
        if not child.lower().endswith(".dist-info"):
            continue
        stem = child[: -len(".dist-info")].partition("-")[0]
        if normalise_dist_name(stem) == want:
            return posixpath.join(entry, child)
    return None


def requires_dist(host: Host, entry: str, name: str) -> tuple[str, ...] | str:
    """The Requires-Dist values of `name` installed in `entry`, in file order; a one-line
    reason (a str) when they could not be read. NotRecorded propagates."""
    try:
        meta = dist_info_dir(host, entry, name)
        if meta is None:
            return f"no {name} *.dist-info in {entry}"
        path = posixpath.join(meta, "METADATA")
        data = host.read_bytes(path, 0, MAX_HEADER_BYTES)
    except NotRecorded:
        raise
    except HostError as exc:
        return str(exc)
    return parse_requires(data.decode("utf-8", errors="replace"))


def parse_requires(text: str) -> tuple[str, ...]:
    """The Requires-Dist values of a METADATA header (pure); the header ends at the first
    blank line."""
    found: list[str] = []
    for line in text.splitlines():
        if not line.strip():
            break
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() == "requires-dist" and value.strip():
            found.append(value.strip())
    return tuple(found)
