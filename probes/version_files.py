"""Parsers of Ascend version and install files (text -> frozen record).

Each parser keeps keys it does not know in `extra`, reports malformed lines in `warnings`
(with 1-based line numbers) and raises ParseError only when no line at all is recognised.
Keys are matched case-insensitively: real files mix `Version=` and `Innerversion=`.
Formats: Ascend/mind-cluster docs/en/faultdiag/user_guide/03_collecting_logs.md @ 22bb3d987bc0,
tests/corpus/npu-smi/FORMATS.md §3.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from probes.errors import ParseError
from probes.host import normalise_dist_name
from probes.versions import AscendVersion, try_parse_version

_BRACKETS = re.compile(r"\[([^\]]*)\]")
_FAMILY = re.compile(r"(V\d+R\d+C\d+)", re.ASCII)
_REQUIREMENT = re.compile(
    r'^required_package_(?P<pkg>\w+?)_version\s*(?P<op>>=|<=|==|!=|=|>|<)\s*"?(?P<ver>[^"]*)"?$',
    re.IGNORECASE,
)


@dataclass(frozen=True)
class _Line:
    """One `key<sep>value` line of a version file."""

    key: str  # lower-cased, stripped
    value: str  # stripped
    line_no: int


@dataclass(frozen=True)
class _Lines:
    """The key/value lines of a version file and what was not understood."""

    lines: tuple[_Line, ...]
    warnings: tuple[str, ...]


def _split_lines(text: str, sep: str) -> _Lines:
    """key<sep>value lines; blank and `#` lines are skipped, others are warnings."""
    out: list[_Line] = []
    warnings: list[str] = []
    for no, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, found, value = line.partition(sep)
        if not found or not key.strip():
            warnings.append(f"line {no}: not `key{sep}value`: {line[:80]!r}")
            continue
        out.append(_Line(key.strip().lower(), value.strip(), no))
    return _Lines(tuple(out), tuple(warnings))


def _bracket_groups(value: str) -> tuple[tuple[str, ...], ...]:
    """`[a],[b,c]` -> (("a",), ("b", "c"))."""
    return tuple(
        tuple(item.strip() for item in group.split(",") if item.strip())
        for group in _BRACKETS.findall(value)
    )


def _require_some(what: str, recognised: int, lines: _Lines) -> None:
    if recognised == 0:
        detail = lines.warnings[0] if lines.warnings else "no key=value line"
        raise ParseError(what, f"not a recognisable file ({detail})")


def _known_count(lines: _Lines, extra: Mapping[str, str]) -> int:
    return sum(1 for ln in lines.lines if ln.key not in extra)


def innerversion_family(innerversion: str) -> str | None:
    """`V100R001C21SPC001B238` -> `V100R001C21` (the CANN family a driver accepts)."""
    match = _FAMILY.match(innerversion.strip().upper())
    return match.group(1) if match else None


def _pairs(value: str, what: str, line_no: int, warnings: list[str]) -> tuple[tuple[str, str], ...]:
    pairs: list[tuple[str, str]] = []
    for group in _bracket_groups(value):
        if len(group) == 2:
            pairs.append((group[0], group[1]))
        else:
            warnings.append(f"line {line_no}: {what} entry {list(group)} is not [low,high]")
    return tuple(pairs)


# --- /etc/ascend_install.info -----------------------------------------------------------


@dataclass(frozen=True)
class AscendInstallInfo:
    """`/etc/ascend_install.info`: where the driver and firmware were installed."""

    driver_install_path: str | None = None
    firmware_install_path: str | None = None
    extra: Mapping[str, str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()


def parse_ascend_install_info(text: str) -> AscendInstallInfo:
    what = "/etc/ascend_install.info"
    lines = _split_lines(text, "=")
    _require_some(what, len(lines.lines), lines)
    known = {ln.key: ln.value for ln in lines.lines}
    return AscendInstallInfo(
        driver_install_path=known.pop("driver_install_path_param", None) or None,
        firmware_install_path=known.pop("firmware_install_path_param", None) or None,
        extra=known,
        warnings=lines.warnings,
    )


# --- driver/version.info ----------------------------------------------------------------


@dataclass(frozen=True)
class DriverVersionInfo:
    """`<driver_root>/driver/version.info`."""

    version: str | None = None  # `Version=`
    package_version: str | None = None  # newer files; the HDK package version
    innerversion: str | None = None
    compatible_families: tuple[str, ...] = ()  # CANN innerversion families accepted
    compatible_fw_ranges: tuple[tuple[str, str], ...] = ()  # [(min_fw, max_fw), ...]
    components: Mapping[str, str] = field(default_factory=dict)  # ascendhal_version, ...
    extra: Mapping[str, str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    @property
    def driver_version(self) -> str | None:
        """package_version when present: in some packages `Version=` is a component's."""
        return self.package_version or self.version

    @property
    def parsed(self) -> AscendVersion | None:
        return try_parse_version(self.driver_version)


def parse_driver_version_info(text: str) -> DriverVersionInfo:
    what = "driver/version.info"
    lines = _split_lines(text, "=")
    warnings = list(lines.warnings)
    values: dict[str, str | None] = {"version": None, "package_version": None, "innerversion": None}
    families: list[str] = []
    fw_ranges: tuple[tuple[str, str], ...] = ()
    components: dict[str, str] = {}
    extra: dict[str, str] = {}
    for ln in lines.lines:
        if ln.key in values:
            values[ln.key] = ln.value or None
        elif ln.key == "compatible_version":
            families += [item for group in _bracket_groups(ln.value) for item in group]
        elif ln.key == "compatible_version_fw":
            fw_ranges = _pairs(ln.value, "compatible_version_fw", ln.line_no, warnings)
        elif ln.key.endswith("_version"):
            components[ln.key] = ln.value
        else:
            extra[ln.key] = ln.value
    _require_some(what, _known_count(lines, extra), lines)
    return DriverVersionInfo(
        version=values["version"], package_version=values["package_version"],
        innerversion=values["innerversion"], compatible_families=tuple(families),
        compatible_fw_ranges=fw_ranges, components=components, extra=extra,
        warnings=tuple(warnings),
    )


# --- firmware/version.info --------------------------------------------------------------


@dataclass(frozen=True)
class FirmwareVersionInfo:
    """`<driver_root>/firmware/version.info`."""

    version: str | None = None  # e.g. 7.1.0.11.220
    firmware_version: str | None = None
    package_version: str | None = None  # the HDK package, e.g. 23.0.7
    compatible_drv: tuple[tuple[str, str], ...] = ()  # [(low, high-prefix), ...]
    extra: Mapping[str, str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    @property
    def parsed(self) -> AscendVersion | None:
        return try_parse_version(self.version)


def parse_firmware_version_info(text: str) -> FirmwareVersionInfo:
    what = "firmware/version.info"
    lines = _split_lines(text, "=")
    warnings = list(lines.warnings)
    values: dict[str, str | None] = {
        "version": None, "firmware_version": None, "package_version": None,
    }
    drv: tuple[tuple[str, str], ...] = ()
    extra: dict[str, str] = {}
    for ln in lines.lines:
        if ln.key in values:
            values[ln.key] = ln.value or None
        elif ln.key == "compatible_version_drv":
            drv = _pairs(ln.value, "compatible_version_drv", ln.line_no, warnings)
        else:
            extra[ln.key] = ln.value
    _require_some(what, _known_count(lines, extra), lines)
    return FirmwareVersionInfo(
        version=values["version"], firmware_version=values["firmware_version"],
        package_version=values["package_version"], compatible_drv=drv, extra=extra,
        warnings=tuple(warnings),
    )


def firmware_in_driver_range(
    fw_version: str | AscendVersion, driver_info: DriverVersionInfo
) -> bool | None:
    """Is the firmware inside one of the driver's `compatible_version_fw` ranges?

    Numeric comparison, both ends inclusive ([7.0.0,7.1.99] holds 7.1.0.11.220).
    None when the driver file has no range or a version does not parse (cannot tell).
    """
    if not driver_info.compatible_fw_ranges:
        return None
    fw = fw_version if isinstance(fw_version, AscendVersion) else try_parse_version(fw_version)
    if fw is None:
        return None
    decided = False
    for low_text, high_text in driver_info.compatible_fw_ranges:
        low, high = try_parse_version(low_text), try_parse_version(high_text)
        if low is None or high is None:
            continue
        decided = True
        if low <= fw <= high:
            return True
    return False if decided else None


def driver_accepted_by_firmware(
    driver_version: str | AscendVersion, firmware_info: FirmwareVersionInfo
) -> bool | None:
    """Does the driver version match an entry of the firmware's `compatible_version_drv`?

    An entry `[23.0.rc3,23.0.rc3.]` accepts 23.0.rc3 itself and everything that starts
    with `23.0.rc3.` (case-insensitive prefix, as checks/data/compat.yaml's
    installed_file_crosschecks describes). An entry whose low end is a final `X.Y.0`
    (`[23.0.0,23.0.0.]`) also accepts the later final patches X.Y.Z of that line: the
    vendor ships firmware 23.0.7 listing only `[23.0.0,23.0.0.]` beside driver 23.0.7
    (corpus samples 033/034), so the strict prefix reading would reject a vendor-paired
    install. None when the firmware file has no such field.
    """
    if not firmware_info.compatible_drv:
        return None
    raw = driver_version.raw if isinstance(driver_version, AscendVersion) else driver_version
    text = raw.strip().lower()
    parsed = try_parse_version(text)
    for low, high in firmware_info.compatible_drv:
        low_l, high_l = low.strip().lower(), high.strip().lower()
        if text == low_l or text == high_l.rstrip("."):
            return True
        if high_l.endswith(".") and text.startswith(high_l):
            return True
        if parsed is not None and _same_final_line(parsed, low_l):
            return True
    return False


def _same_final_line(driver: AscendVersion, low_text: str) -> bool:
    low = try_parse_version(low_text)
    if low is None or low.base != (low.major, low.minor, 0) or low.is_prerelease:
        return False
    return (
        driver.major == low.major and driver.minor == low.minor
        and driver.line == low.line and driver.pre is None
    )


# --- ascend_*_install.info --------------------------------------------------------------


@dataclass(frozen=True)
class InstallInfo:
    """`ascend_toolkit_install.info`, `ascend_nnae_install.info`, ... (one schema)."""

    package_name: str | None = None
    version: str | None = None
    innerversion: str | None = None
    compatible_groups: tuple[tuple[str, ...], ...] = ()  # as written: [a],[b,c]
    arch: str | None = None
    os: str | None = None
    path: str | None = None
    extra: Mapping[str, str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    @property
    def compatible_families(self) -> tuple[str, ...]:
        """Every family named in compatible_version, flattened."""
        return tuple(item for group in self.compatible_groups for item in group)

    @property
    def family(self) -> str | None:
        return innerversion_family(self.innerversion) if self.innerversion else None

    @property
    def parsed(self) -> AscendVersion | None:
        return try_parse_version(self.version)


_INSTALL_KEYS = ("package_name", "version", "innerversion", "arch", "os", "path")


def parse_install_info(text: str, what: str = "ascend_toolkit_install.info") -> InstallInfo:
    lines = _split_lines(text, "=")
    values: dict[str, str | None] = dict.fromkeys(_INSTALL_KEYS)
    groups: tuple[tuple[str, ...], ...] = ()
    extra: dict[str, str] = {}
    for ln in lines.lines:
        if ln.key in values:
            values[ln.key] = ln.value or None
        elif ln.key == "compatible_version":
            groups = _bracket_groups(ln.value)
        else:
            extra[ln.key] = ln.value
    _require_some(what, _known_count(lines, extra), lines)
    return InstallInfo(
        package_name=values["package_name"], version=values["version"],
        innerversion=values["innerversion"], compatible_groups=groups, arch=values["arch"],
        os=values["os"], path=values["path"], extra=extra, warnings=lines.warnings,
    )


# --- CANN version.cfg -------------------------------------------------------------------


@dataclass(frozen=True)
class CfgBuild:
    """One `[<internal build>:<CANN version>]` item of version.cfg."""

    inner: str  # e.g. 7.7.T20.0.B210
    version: str  # e.g. 8.1.RC1


@dataclass(frozen=True)
class VersionCfg:
    """`<toolkit>/version.cfg`: per-component running / upgrade / installed builds."""

    running: Mapping[str, CfgBuild] = field(default_factory=dict)
    upgrade: Mapping[str, CfgBuild] = field(default_factory=dict)
    installed: Mapping[str, tuple[CfgBuild, ...]] = field(default_factory=dict)
    extra: Mapping[str, str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    @property
    def running_version(self) -> str | None:
        """The toolkit's running CANN version, else any component's."""
        build = self.running.get("toolkit") or next(iter(self.running.values()), None)
        return build.version if build else None


_CFG_SUFFIXES = (("_running_version", "running"), ("_upgrade_version", "upgrade"),
                 ("_installed_version", "installed"))


def _cfg_builds(value: str) -> tuple[CfgBuild, ...] | None:
    items = _BRACKETS.findall(value)
    builds: list[CfgBuild] = []
    for item in items:
        inner, colon, version = item.partition(":")
        if not colon or not version.strip():
            return None
        builds.append(CfgBuild(inner.strip(), version.strip()))
    return tuple(builds) if builds else None


def parse_version_cfg(text: str) -> VersionCfg:
    what = "version.cfg"
    lines = _split_lines(text, "=")
    warnings = list(lines.warnings)
    tables: dict[str, dict[str, tuple[CfgBuild, ...]]] = {
        "running": {}, "upgrade": {}, "installed": {},
    }
    extra: dict[str, str] = {}
    for ln in lines.lines:
        kind = next(((suffix, name) for suffix, name in _CFG_SUFFIXES if ln.key.endswith(suffix)),
                    None)
        if kind is None:
            extra[ln.key] = ln.value
            continue
        builds = _cfg_builds(ln.value)
        if builds is None:
            warnings.append(f"line {ln.line_no}: {ln.key} is not [<inner>:<version>]...")
            continue
        tables[kind[1]][ln.key[: -len(kind[0])]] = builds
    recognised = sum(len(t) for t in tables.values())
    if recognised == 0:
        raise ParseError(what, "no <component>_running/_upgrade/_installed_version line")
    return VersionCfg(
        running={k: v[-1] for k, v in tables["running"].items()},
        upgrade={k: v[-1] for k, v in tables["upgrade"].items()},
        installed=tables["installed"], extra=extra, warnings=tuple(warnings),
    )


# --- required_package_<name>_version constraints ----------------------------------------


@dataclass(frozen=True)
class PackageRequirement:
    """`required_package_toolkit_version>="8.2"`: package, operator, version."""

    package: str
    op: str  # >=, <=, ==, !=, =, >, <
    version: str


def requirement_satisfied(req: PackageRequirement, installed: str) -> bool | None:
    """Evaluate a requirement; `=`/`==` match by prefix (8.2 holds 8.2.RC1). None if unparsable."""
    want, have = req.version.strip().lower(), installed.strip().lower()
    if req.op in ("=", "=="):
        return have == want or have.startswith(want + ".")
    if req.op == "!=":
        return not (have == want or have.startswith(want + "."))
    want_v, have_v = try_parse_version(want), try_parse_version(have)
    if want_v is None or have_v is None:
        return None
    return {
        ">=": have_v >= want_v, "<=": have_v <= want_v, ">": have_v > want_v, "<": have_v < want_v,
    }[req.op]


def _requirement(line: str) -> PackageRequirement | None:
    match = _REQUIREMENT.match(line.strip())
    if match is None:
        return None
    return PackageRequirement(match["pkg"].lower(), match["op"], match["ver"].strip())


# --- NNAL / ATB version.info ------------------------------------------------------------


@dataclass(frozen=True)
class NnalVersionInfo:
    """NNAL/ATB `version.info`, installed (`key : value`) or source-tree (`key=value`) shape."""

    shape: Literal["installed", "source"]
    package: str | None = None  # e.g. Ascend-cann-atb
    version: str | None = None  # e.g. 8.2.RC2
    full_version: str | None = None  # with build, e.g. 8.2.RC2.B030
    platform: str | None = None
    branch: str | None = None
    commit_id: str | None = None
    requirements: tuple[PackageRequirement, ...] = ()
    extra: Mapping[str, str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    @property
    def parsed(self) -> AscendVersion | None:
        return try_parse_version(self.version or self.full_version)


def _colon_or_equals(line: str) -> str:
    eq, colon = line.find("="), line.find(":")
    if eq >= 0 and (colon < 0 or eq < colon):
        return "="
    return ":"


def parse_nnal_version_info(text: str) -> NnalVersionInfo:
    what = "nnal/atb version.info"
    fields: dict[str, str | None] = {
        "package": None, "version": None, "full_version": None, "platform": None,
        "branch": None, "commit_id": None,
    }
    requirements: list[PackageRequirement] = []
    extra: dict[str, str] = {}
    warnings: list[str] = []
    equals_lines = colon_lines = 0
    for no, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        req = _requirement(line)
        if req is not None:
            requirements.append(req)
            equals_lines += 1
            continue
        sep = _colon_or_equals(line)
        key, found, value = line.partition(sep)
        key, value = key.strip().lower(), value.strip()
        if not found or not key:
            warnings.append(f"line {no}: not `key : value` or `key=value`: {line[:80]!r}")
            continue
        if sep == "=":
            equals_lines += 1
        else:
            colon_lines += 1
        _nnal_field(key, value, fields, extra)
    if equals_lines + colon_lines == 0:
        raise ParseError(what, "no `key : value` or `key=value` line")
    return NnalVersionInfo(
        shape="source" if equals_lines > colon_lines else "installed",
        package=fields["package"], version=fields["version"],
        full_version=fields["full_version"], platform=fields["platform"],
        branch=fields["branch"], commit_id=fields["commit_id"],
        requirements=tuple(requirements), extra=extra, warnings=tuple(warnings),
    )


def _nnal_field(key: str, value: str, fields: dict[str, str | None], extra: dict[str, str]) -> None:
    if key.startswith("ascend-") and key.endswith(" version"):
        fields["full_version"] = value or None
        fields["package"] = fields["package"] or key[: -len(" version")].strip()
    elif key.startswith("ascend-"):
        fields["version"] = value or None
        fields["package"] = key
    elif key == "version":
        fields["version"] = value or None
    elif key in ("platform", "branch"):
        fields[key] = value or None
    elif key in ("commit id", "commit_id", "commitid"):
        fields["commit_id"] = value or None
    else:
        extra[key] = value


# --- MindIE latest/version.info ---------------------------------------------------------


@dataclass(frozen=True)
class MindieVersionInfo:
    """MindIE `latest/version.info`: `Ascend-mindie : MindIE 2.1.RC2.B080` and components."""

    version: str | None = None  # e.g. 2.1.RC2.B080
    components: Mapping[str, str] = field(default_factory=dict)  # mindie-rt -> version
    platform: str | None = None
    extra: Mapping[str, str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    @property
    def parsed(self) -> AscendVersion | None:
        return try_parse_version(self.version)


def _last_word(value: str) -> str | None:
    """`MindIE 2.1.RC2.B080` -> `2.1.RC2.B080`."""
    words = value.split()
    return words[-1] if words else None


def parse_mindie_version_info(text: str) -> MindieVersionInfo:
    what = "mindie version.info"
    lines = _split_lines(text, ":")
    version: str | None = None
    platform: str | None = None
    components: dict[str, str] = {}
    extra: dict[str, str] = {}
    for ln in lines.lines:
        if ln.key == "ascend-mindie":
            version = _last_word(ln.value)
        elif ln.key.startswith("mindie"):
            components[ln.key] = _last_word(ln.value) or ""
        elif ln.key == "platform":
            platform = ln.value or None
        else:
            extra[ln.key] = ln.value
    _require_some(what, _known_count(lines, extra), lines)
    return MindieVersionInfo(
        version=version, components=components, platform=platform, extra=extra,
        warnings=lines.warnings,
    )


# --- pip list / collect_env -------------------------------------------------------------


@dataclass(frozen=True)
class PipPackages:
    """name -> version from pasted `pip list` or collect_env `[pip3] name==ver` output."""

    packages: Mapping[str, str] = field(default_factory=dict)  # PEP 503 names
    warnings: tuple[str, ...] = ()

    def version_of(self, name: str) -> str | None:
        return self.packages.get(normalise_dist_name(name))


_PIN = re.compile(r"^(?:\[(?:pip3?|conda)\]\s*)?(?P<name>[A-Za-z0-9][\w.\-]*)\s*==\s*(?P<ver>\S+)$")
_CONDA = re.compile(r"^\[conda\]\s*(?P<name>[A-Za-z0-9][\w.\-]*)\s+(?P<ver>\S+)(?:\s.*)?$")
_COLUMNS = re.compile(r"^(?P<name>[A-Za-z0-9][\w.\-]*)\s+(?P<ver>v?\d\S*)(?:\s+\S.*)?$")
_PIP_NOISE = re.compile(r"^(?:\$|#|>|Package\s+Version|-{3,}|WARNING|\[notice\]|DEPRECATION)")


def parse_pip_packages(text: str) -> PipPackages:
    what = "pip list output"
    packages: dict[str, str] = {}
    warnings: list[str] = []
    for no, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or _PIP_NOISE.match(line):
            continue
        match = _PIN.match(line) or _CONDA.match(line) or _COLUMNS.match(line)
        if match is None:
            warnings.append(f"line {no}: not `name version` or `name==version`: {line[:80]!r}")
            continue
        packages[normalise_dist_name(match["name"])] = match["ver"]
    if not packages:
        raise ParseError(what, "no `name version` or `name==version` line")
    return PipPackages(packages=packages, warnings=tuple(warnings))
