"""LD_LIBRARY_PATH on the observed machine: each entry's kind, and where each library is.

Read through a Host; an entry or file whose answer was not recorded is kept apart from
"missing" (the variable: CANN environment-variable reference, page envref_07_0002; the
libraries' places: docs/sources.md, "Install paths").
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field

from probes.environment import NodeKind, path_kind, split_path_list
from probes.errors import NotRecorded
from probes.host import Host

LIBRARIES = ("libascendcl.so", "libatb.so")


@dataclass(frozen=True)
class LibraryDir:
    """One LD_LIBRARY_PATH entry and what it is on the observed machine."""

    path: str
    kind: NodeKind | None  # None: a relative entry, resolved against an unknown cwd

    @property
    def is_dir(self) -> bool:
        return self.kind == "dir"


@dataclass(frozen=True)
class LibraryLookup:
    """Where the dynamic loader would find one library on LD_LIBRARY_PATH."""

    name: str  # `libascendcl.so`
    found_in: str | None  # the first LD_LIBRARY_PATH entry holding it (the one ld.so uses)
    unknown_in: tuple[str, ...] = ()  # entries that could not be looked at (not recorded)

    @property
    def found(self) -> bool | None:
        """True found; False looked everywhere and absent; None absent where looked, unknown
        elsewhere."""
        if self.found_in is not None:
            return True
        return None if self.unknown_in else False


@dataclass(frozen=True)
class LdLibraryDirs:
    """The LD_LIBRARY_PATH entries and the libraries looked up in them."""

    dirs: tuple[LibraryDir, ...]
    libraries: Mapping[str, LibraryLookup] = field(default_factory=dict)


def _lookup(host: Host, name: str, dirs: tuple[LibraryDir, ...]) -> LibraryLookup:
    unknown: list[str] = []
    for entry in dirs:
        if entry.kind == "not_recorded":
            unknown.append(entry.path)
            continue
        if not entry.is_dir:
            continue
        try:
            if host.exists(posixpath.join(entry.path, name)):
                return LibraryLookup(name, entry.path, tuple(unknown))
        except NotRecorded:
            unknown.append(entry.path)
    return LibraryLookup(name, None, tuple(unknown))


def read_ld_library_dirs(
    host: Host, env: Mapping[str, str], libraries: tuple[str, ...] = LIBRARIES
) -> LdLibraryDirs:
    """Each LD_LIBRARY_PATH entry's kind on the observed machine, and where each library is.

    `exists` follows symlinks, so a dangling `libascendcl.so` link counts as absent.
    """
    dirs = tuple(
        LibraryDir(path, path_kind(host, path) if path.startswith("/") else None)
        for path in split_path_list(env.get("LD_LIBRARY_PATH"))
    )
    return LdLibraryDirs(
        dirs=dirs, libraries={name: _lookup(host, name, dirs) for name in libraries}
    )
