"""Find and read the Ascend version files of one machine through a Host.

No layout is hard-coded: each item has an ordered list of candidate paths (install
pointers, environment variables, the legacy `ascend-toolkit/latest` layout, the CANN 8.5+
`cann-<ver>` / `cann` layout, non-root `$HOME/Ascend` installs) and the first one that
reads and parses wins. Every outcome says which paths were tried; a question a recording
never saw is kept apart from "missing", because the doctor reports it as skip, not pass.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from probes.errors import HostError, NotRecorded, ParseError, PathMissing
from probes.host import Host
from probes.versions import order_key

if TYPE_CHECKING:
    from probes.version_files import (
        AscendInstallInfo,
        DriverVersionInfo,
        FirmwareVersionInfo,
        InstallInfo,
        MindieVersionInfo,
        NnalVersionInfo,
        VersionCfg,
    )

T = TypeVar("T")

DEFAULT_ROOT = "/usr/local/Ascend"
ASCEND_INSTALL_INFO = "/etc/ascend_install.info"
CANN_INSTALL_INFO = "/etc/Ascend/ascend_cann_install.info"
ARCHES = ("aarch64", "x86_64")
TOOLKIT_ENV_VARS = ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME")

FoundState = Literal["found", "missing", "unreadable", "invalid", "not_recorded"]


@dataclass(frozen=True)
class Found(Generic[T]):
    """The outcome of looking for one file: the parsed value and where it came from.

    `problems` lists (path, reason) for candidates that exist but could not be read or
    parsed; `not_recorded` is True when nothing was found and at least one candidate (or a
    listing needed to make candidates) was never recorded: the answer is unknown.
    """

    value: T | None = None
    path: str | None = None  # the file the value came from
    tried: tuple[str, ...] = ()  # every candidate asked, in order
    problems: tuple[tuple[str, str], ...] = ()
    not_recorded: bool = False

    @property
    def found(self) -> bool:
        return self.value is not None

    @property
    def state(self) -> FoundState:
        if self.value is not None:
            return "found"
        if self.not_recorded:
            return "not_recorded"
        if any(reason.startswith("parse:") for _, reason in self.problems):
            return "invalid"
        if self.problems:
            return "unreadable"
        return "missing"

    @property
    def error(self) -> str:
        """Why there is no value, one line; empty when found."""
        if self.value is not None:
            return ""
        if self.problems:
            path, reason = self.problems[0]
            return f"{path}: {reason}"
        if self.not_recorded:
            return "not recorded: " + ", ".join(self.tried)
        return "not found; tried " + ", ".join(self.tried)


@dataclass(frozen=True)
class StackVersions:
    """Every Ascend version file found on one machine."""

    install_info: Found[AscendInstallInfo]
    driver: Found[DriverVersionInfo]
    firmware: Found[FirmwareVersionInfo]
    toolkit: Found[InstallInfo]
    version_cfg: Found[VersionCfg]
    nnal: Found[NnalVersionInfo]
    mindie: Found[MindieVersionInfo]


@dataclass(frozen=True)
class _Listing:
    """The entries of one directory, and whether the listing was never recorded."""

    names: tuple[str, ...]
    not_recorded: bool


def _parser(name: str) -> Callable[[str], Any]:
    """A parser of probes.version_files, imported with the first file found: a machine
    without Ascend software (a CI runner checking a checkpoint) never loads them."""

    def parse(text: str) -> Any:
        from probes import version_files

        return getattr(version_files, name)(text)

    return parse


def read_stack(host: Host) -> StackVersions:
    """Find and parse the driver, firmware, CANN, NNAL and MindIE version files."""
    env = host.env
    install: Found[AscendInstallInfo] = find_first(
        host, [ASCEND_INSTALL_INFO], _parser("parse_ascend_install_info"))
    driver_roots = _roots(install.value.driver_install_path if install.value else None)
    fw_roots = _roots(install.value.firmware_install_path if install.value else None)
    # An unrecorded pointer or listing could have named another place: unknown, not missing.
    driver = _unknown_if(install.not_recorded, find_first(
        host, [posixpath.join(r, "driver", "version.info") for r in driver_roots],
        _parser("parse_driver_version_info"),
    ))
    firmware = _unknown_if(install.not_recorded, find_first(
        host, [posixpath.join(r, "firmware", "version.info") for r in fw_roots],
        _parser("parse_firmware_version_info"),
    ))
    prefixes, prefix_unknown = _install_prefixes(host, env)
    toolkit_dirs, listing_unknown = _toolkit_dirs(host, env, prefixes)
    toolkit: Found[InstallInfo] = _unknown_if(
        prefix_unknown or listing_unknown,
        find_first(host, _toolkit_candidates(toolkit_dirs), _parser("parse_install_info")),
    )
    version_cfg = _unknown_if(toolkit.not_recorded, find_first(
        host, _version_cfg_candidates(toolkit.path, toolkit_dirs), _parser("parse_version_cfg")
    ))
    nnal = _unknown_if(prefix_unknown, find_first(
        host, _nnal_candidates(env, prefixes), _parser("parse_nnal_version_info")
    ))
    mindie = _unknown_if(prefix_unknown, find_first(
        host, _mindie_candidates(env, prefixes), _parser("parse_mindie_version_info")
    ))
    return StackVersions(
        install_info=install, driver=driver, firmware=firmware, toolkit=toolkit,
        version_cfg=version_cfg, nnal=nnal, mindie=mindie,
    )


def find_first(host: Host, candidates: Iterable[str], parse: Callable[[str], T]) -> Found[T]:
    """Read candidates in order; the first that reads and parses wins."""
    tried: list[str] = []
    problems: list[tuple[str, str]] = []
    not_recorded = False
    for path in _unique(candidates):
        tried.append(path)
        try:
            text = host.read_text(path)
        except PathMissing:
            continue
        except NotRecorded:
            not_recorded = True
            problems.append((path, "not recorded"))
            continue
        except HostError as exc:
            problems.append((path, exc.reason))
            continue
        try:
            value = parse(text)
        except ParseError as exc:
            problems.append((path, f"parse: {exc}"))
            continue
        return Found(value, path, tuple(tried), tuple(problems))
    return Found(None, None, tuple(tried), tuple(problems), not_recorded)


def _unknown_if(unknown: bool, found: Found[T]) -> Found[T]:
    if not unknown or found.value is not None:
        return found
    return Found(found.value, found.path, found.tried, found.problems, True)


def _norm(path: str) -> str:
    return posixpath.normpath(path.strip()) if path.strip() else ""


def _unique(paths: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for raw in paths:
        path = _norm(raw)
        if path.startswith("/") and path not in seen:
            seen.add(path)
            out.append(path)
    return out


def _roots(param: str | None) -> list[str]:
    return _unique([param or "", DEFAULT_ROOT])


def _home_ascend(env: Mapping[str, str]) -> list[str]:
    home = env.get("HOME", "")
    return [posixpath.join(home, "Ascend")] if home.startswith("/") else []


def _install_prefixes(host: Host, env: Mapping[str, str]) -> tuple[list[str], bool]:
    """Install prefixes: CANN's install pointer, /usr/local/Ascend, $HOME/Ascend."""
    pointer = find_first(host, [CANN_INSTALL_INFO], _parse_cann_install_path)
    first = [pointer.value] if pointer.value else []
    return _unique([*first, DEFAULT_ROOT, *_home_ascend(env)]), pointer.not_recorded


def _parse_cann_install_path(text: str) -> str:
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip().lower() == "install_path" and value.strip():
            return value.strip()
    raise ParseError(CANN_INSTALL_INFO, "no Install_Path= line")


def _list(host: Host, path: str) -> _Listing:
    try:
        return _Listing(tuple(host.list_dir(path)), False)
    except NotRecorded:
        return _Listing((), True)
    except HostError:
        return _Listing((), False)


def _cann_versioned_dirs(host: Host, prefix: str) -> tuple[list[str], bool]:
    """`<prefix>/cann-<ver>` directories, newest version first."""
    listing = _list(host, prefix)
    names = [n for n in listing.names if n.startswith("cann-")]

    names.sort(key=lambda name: order_key(name[len("cann-"):]), reverse=True)
    return [posixpath.join(prefix, n) for n in names], listing.not_recorded


def _toolkit_dirs(
    host: Host, env: Mapping[str, str], prefixes: list[str]
) -> tuple[list[str], bool]:
    """Toolkit directories in the order a user's environment would pick them."""
    dirs = [env.get(name, "") for name in TOOLKIT_ENV_VARS]
    not_recorded = False
    for prefix in prefixes:
        dirs.append(posixpath.join(prefix, "ascend-toolkit", "latest"))
        dirs.append(posixpath.join(prefix, "cann"))
        versioned, unknown = _cann_versioned_dirs(host, prefix)
        dirs += versioned
        not_recorded = not_recorded or unknown
    return _unique(dirs), not_recorded


def _toolkit_candidates(toolkit_dirs: list[str]) -> list[str]:
    out: list[str] = []
    for d in toolkit_dirs:
        out += [
            posixpath.join(d, f"{arch}-linux", "ascend_toolkit_install.info") for arch in ARCHES
        ]
        # ASCEND_HOME_PATH may already name the <arch>-linux directory
        out.append(posixpath.join(d, "ascend_toolkit_install.info"))
    return out


def _version_cfg_candidates(toolkit_file: str | None, toolkit_dirs: list[str]) -> list[str]:
    """version.cfg beside the found install.info's `<arch>-linux` dir first, then the rest."""
    first: list[str] = []
    if toolkit_file:
        arch_dir = posixpath.dirname(toolkit_file)
        first = [posixpath.join(posixpath.dirname(arch_dir), "version.cfg"),
                 posixpath.join(arch_dir, "version.cfg")]
    return first + [posixpath.join(d, "version.cfg") for d in toolkit_dirs]


def _nnal_candidates(env: Mapping[str, str], prefixes: list[str]) -> list[str]:
    out: list[str] = []
    atb_home = _norm(env.get("ATB_HOME_PATH", ""))
    # ATB_HOME_PATH = <nnal>/atb/latest/atb/cxx_abi_<n>; version.info sits in `latest`
    if atb_home.startswith("/"):
        latest = posixpath.dirname(posixpath.dirname(atb_home))
        out.append(posixpath.join(latest, "version.info"))
    for prefix in prefixes:
        out.append(posixpath.join(prefix, "nnal", "atb", "latest", "version.info"))
    for prefix in prefixes:
        out.append(posixpath.join(prefix, "atb", "latest", "version.info"))  # 7.0-era ATB
    return out


def _mindie_candidates(env: Mapping[str, str], prefixes: list[str]) -> list[str]:
    out: list[str] = []
    llm_home = _norm(env.get("MINDIE_LLM_HOME_PATH", ""))
    # MINDIE_LLM_HOME_PATH = <mindie>/latest/mindie-service (or mindie-llm)
    if llm_home.startswith("/"):
        out.append(posixpath.join(posixpath.dirname(llm_home), "version.info"))
    for prefix in prefixes:
        out.append(posixpath.join(prefix, "mindie", "latest", "version.info"))
    return out


def toolkit_dir(toolkit_file: str) -> str:
    """The toolkit directory of an `ascend_toolkit_install.info` path (above `<arch>-linux`)."""
    parent = posixpath.dirname(toolkit_file)
    return posixpath.dirname(parent) if parent.endswith("-linux") else parent
