"""Which distributions a process's interpreter sees, without running anything in its place.

For a process (`--pid`, maybe in a container) the doctor must not start a program inside the
deployment; it derives `sys.path` the way CPython does at start-up and reads the metadata
through a Host (under the process's root):

1. the executable: argv[0] when it names the same file as /proc/PID/exe (a virtual
   environment's `bin/python` is a symlink the kernel resolves away), else the exe itself
   (Modules/getpath.py: sys.executable from argv[0], searched on PATH);
2. a virtual environment: `pyvenv.cfg` beside the executable or one directory up (PEP 405),
   with `home` naming the base interpreter and `include-system-site-packages`;
3. the prefix: PYTHONHOME, else the first directory upwards holding `lib/pythonX.Y/os.py`
   (or `lib64/...`), the landmark getpath searches for;
4. sys.path: the script's directory (or the working directory for `-m`), PYTHONPATH, the
   standard library, then site.py's order: the venv's site-packages, the user site
   (~/.local/lib/pythonX.Y/site-packages or $PYTHONUSERBASE), the prefix's site-packages
   (lib64 first where the stdlib is there; Debian's dist-packages directories), each followed
   by the directories its `.pth` files name. `import` lines of .pth files and sitecustomize
   are code, which is not run: they are named in `notes`. -E, -I, -s, -S and
   PYTHONNOUSERSITE are honoured.

The metadata scan is probes/pyenv_scan.py's (first distribution per PEP 503 name wins, the
same dist-info/egg-info candidates), with reads through the Host.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from probes.errors import HostError
from probes.host import Host, PythonEnvironment, normalise_dist_name
from probes.pyenv_scan import header, norm

HEADER_CHUNK_BYTES = 8192
MAX_HEADER_BYTES = 256 * 1024
MAX_PTH_BYTES = 1024 * 1024
_VERSION = re.compile(r"python(\d+\.\d+)")
_FLAG_WITH_VALUE = ("-W", "-X", "--check-hash-based-pycs")


@dataclass(frozen=True)
class Flags:
    """The interpreter options that change sys.path."""

    ignore_env: bool = False  # -E (and -I)
    isolated: bool = False  # -I: no script directory, no user site, no PYTHON* variables
    no_user_site: bool = False  # -s
    no_site: bool = False  # -S
    path0: str | None = None  # the script, "-m" or "-c" (what sys.path[0] is made of)


def parse_flags(argv: Sequence[str]) -> Flags:
    """The options before the script / -m / -c of an interpreter command line."""
    letters: set[str] = set()
    rest = list(argv[1:])
    path0: str | None = None
    while rest:
        arg = rest.pop(0)
        if arg in ("-m", "-c"):
            path0 = arg
            break
        if arg in _FLAG_WITH_VALUE:
            rest = rest[1:]
        elif arg.startswith("--"):
            continue
        elif arg.startswith("-") and len(arg) > 1:
            letters.update(arg[1:])
        else:
            path0 = arg
            break
    isolated = "I" in letters
    return Flags(ignore_env=isolated or "E" in letters, isolated=isolated,
                 no_user_site=isolated or "s" in letters, no_site="S" in letters, path0=path0)


@dataclass(frozen=True)
class DerivedPath:
    """sys.path as the interpreter would build it, and how each part was decided."""

    interpreter: str  # the executable, as a path on the observed machine
    version: str  # X.Y, or X.Y.Z when pyvenv.cfg says
    prefix: str
    base_prefix: str
    entries: tuple[str, ...]
    how: tuple[str, ...] = ()  # one line per decision (venv, prefix, PYTHONPATH, .pth)
    notes: tuple[str, ...] = ()  # what was not followed (code in .pth files, zips)


class Derivation:
    """One derivation: the Host, the process's environment and working directory."""

    def __init__(self, host: Host, env: Mapping[str, str], cwd: str | None,
                 flags: Flags) -> None:
        self.host = host
        self.env: Mapping[str, str] = {} if flags.ignore_env else env
        self.home = env.get("HOME")
        self.cwd = cwd
        self.flags = flags
        self.how: list[str] = []
        self.notes: list[str] = []
        self.entries: list[str] = []

    # -- files ---------------------------------------------------------------------------

    def is_dir(self, path: str) -> bool:
        try:
            return self.host.kind(path) == "dir"
        except HostError:
            return False

    def is_file(self, path: str) -> bool:
        try:
            return self.host.kind(path) == "file"
        except HostError:
            return False

    def realpath(self, path: str) -> str:
        try:
            return self.host.realpath(path)
        except HostError:
            return path

    def absolute(self, path: str) -> str:
        if path.startswith("/") or not self.cwd:
            return posixpath.normpath(path)
        return posixpath.normpath(posixpath.join(self.cwd, path))

    def add(self, entry: str) -> None:
        if entry not in self.entries:
            self.entries.append(entry)


def choose_executable(host: Host, exe: str, argv0: str, env: Mapping[str, str],
                      cwd: str | None) -> str:
    """argv[0] (searched on PATH when bare) when it is the same file as `exe`, else `exe`."""
    if not argv0 or not is_python_name(argv0):
        return exe
    candidates: list[str] = []
    if "/" in argv0:
        candidates.append(argv0 if argv0.startswith("/") or not cwd
                          else posixpath.normpath(posixpath.join(cwd, argv0)))
    else:
        candidates += [posixpath.join(d, argv0) for d in env.get("PATH", "").split(":")
                       if d.startswith("/")]
    try:
        real_exe = host.realpath(exe)
        for candidate in candidates:
            if host.kind(candidate) == "file" and host.realpath(candidate) == real_exe:
                return candidate
    except HostError:
        pass
    return exe


def is_python_name(path: str) -> bool:
    return bool(re.match(r"^python[0-9.]*$", posixpath.basename(path)))


def read_pyvenv_cfg(host: Host, executable: str) -> tuple[str, dict[str, str]] | None:
    """(the venv directory, its pyvenv.cfg keys) when `executable` belongs to a venv."""
    bin_dir = posixpath.dirname(executable)
    for where in (bin_dir, posixpath.dirname(bin_dir)):
        path = posixpath.join(where, "pyvenv.cfg")
        try:
            text = host.read_text(path)
        except HostError:
            continue
        keys = {}
        for line in text.splitlines():
            key, sep, value = line.partition("=")
            if sep:
                keys[key.strip().lower()] = value.strip()
        return where, keys
    return None


def version_of(executable: str, real: str, cfg: Mapping[str, str]) -> str | None:
    """X.Y from the interpreter's name, X.Y.Z when pyvenv.cfg states the same X.Y."""
    stated = next((m.group(0) for key in ("version", "version_info")
                   if (m := re.match(r"(\d+\.\d+)(\.\d+)?", cfg.get(key, "")))), None)
    for name in (real, executable):
        match = _VERSION.search(posixpath.basename(name))
        if match:
            xy = match.group(1)
            return stated if stated and stated.startswith(xy + ".") else xy
    return stated


def find_prefix(d: Derivation, start: str, xy: str) -> str | None:
    """The first directory from `start` upwards holding the standard library."""
    current = posixpath.normpath(start)
    while True:
        for lib in ("lib", "lib64"):
            if d.is_file(posixpath.join(current, lib, f"python{xy}", "os.py")):
                return current
        if current == "/":
            return None
        current = posixpath.dirname(current)


def platlibdir(d: Derivation, prefix: str, xy: str) -> str:
    """`lib64` where the standard library really is there (Fedora, RHEL), else `lib`; a
    lib64 that is a link to lib (a venv's) is lib."""
    lib64 = posixpath.join(prefix, "lib64", f"python{xy}")
    lib = posixpath.join(prefix, "lib", f"python{xy}")
    if d.is_file(posixpath.join(lib64, "os.py")) and d.realpath(lib64) != d.realpath(lib):
        return "lib64"
    return "lib"


def site_dirs(d: Derivation, prefix: str, xy: str, platlib: str) -> list[str]:
    """site.getsitepackages for one prefix, as upstream and Debian's patch list them."""
    dirs = [posixpath.join(prefix, lib, f"python{xy}", "site-packages")
            for lib in dict.fromkeys((platlib, "lib"))]
    dirs += [posixpath.join(prefix, "local", "lib", f"python{xy}", "dist-packages"),
             posixpath.join(prefix, "lib", "python3", "dist-packages"),
             posixpath.join(prefix, "lib", f"python{xy}", "dist-packages")]
    return [p for p in dirs if d.is_dir(p)]


def add_site_dir(d: Derivation, site: str) -> None:
    """The directory, then what its .pth files name (site.addsitedir), in name order."""
    d.add(site)
    try:
        names = d.host.list_dir(site)
    except HostError:
        return
    for name in names:
        if name.endswith(".pth") and not name.startswith("."):
            _read_pth(d, site, name)


def _read_pth(d: Derivation, site: str, name: str) -> None:
    path = posixpath.join(site, name)
    try:
        text = d.host.read_bytes(path, 0, MAX_PTH_BYTES).decode("utf-8", errors="replace")
    except HostError as exc:
        d.notes.append(f"{path}: not read ({exc.reason})")
        return
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        if line.startswith(("import ", "import\t")):
            d.notes.append(f"{path}: an `import` line is code, not run here")
            continue
        entry = posixpath.normpath(posixpath.join(site, line.rstrip()))
        if d.is_dir(entry) or d.is_file(entry):
            d.add(entry)
            d.how.append(f"{entry} from {path}")


def _path0(d: Derivation) -> None:
    """sys.path[0]: the script's directory (symlinks resolved), the working directory for -m;
    nothing for -c (the empty entry is the doctor's cwd, not the deployment's)."""
    path0 = d.flags.path0
    if d.flags.isolated or path0 is None or path0 == "-c":
        return
    if path0 == "-m":
        if d.cwd:
            d.add(d.cwd)
        return
    d.add(posixpath.dirname(d.realpath(d.absolute(path0))))


def _user_site(d: Derivation, xy: str) -> None:
    base = d.env.get("PYTHONUSERBASE") or (
        posixpath.join(d.home, ".local") if d.home else None)
    if base is None:
        return
    site = posixpath.join(base, "lib", f"python{xy}", "site-packages")
    if d.is_dir(site):
        d.how.append(f"user site {site}")
        add_site_dir(d, site)


def derive_sys_path(host: Host, exe: str, argv: Sequence[str], env: Mapping[str, str],
                    cwd: str | None) -> DerivedPath:
    """sys.path of the interpreter `exe` started as `argv` in `env`. Raises ValueError when
    `exe` is not an interpreter whose standard library can be found."""
    flags = parse_flags(argv)
    d = Derivation(host, env, cwd, flags)
    executable = choose_executable(host, exe, argv[0] if argv else "", env, cwd)
    real = d.realpath(executable)
    venv = read_pyvenv_cfg(host, executable)
    cfg = venv[1] if venv else {}
    xy_full = version_of(executable, real, cfg)
    if xy_full is None:
        raise ValueError(f"{exe}: not a CPython interpreter the doctor can read "
                         "(no pythonX.Y in its name or pyvenv.cfg)")
    xy = ".".join(xy_full.split(".")[:2])
    base_start = cfg.get("home") or posixpath.dirname(real)
    home = d.env.get("PYTHONHOME")
    if home:
        base_prefix = home.split(":")[0]
        d.how.append(f"prefix {base_prefix} from PYTHONHOME")
    else:
        found = find_prefix(d, base_start, xy)
        if found is None:
            raise ValueError(f"{exe}: no standard library (lib/python{xy}/os.py) above "
                             f"{base_start}")
        base_prefix = found
        d.how.append(f"prefix {base_prefix} (lib/python{xy}/os.py found)")
    prefix = venv[0] if venv else base_prefix
    if venv:
        d.how.append(f"virtual environment {venv[0]} (pyvenv.cfg, home={cfg.get('home', '?')})")
    _path0(d)
    for entry in d.env.get("PYTHONPATH", "").split(":"):
        if entry:
            d.add(d.absolute(entry))
            d.how.append(f"{d.absolute(entry)} from PYTHONPATH")
    platlib = platlibdir(d, base_prefix, xy)
    stdlib = posixpath.join(base_prefix, platlib, f"python{xy}")
    d.add(stdlib)
    d.add(posixpath.join(stdlib, "lib-dynload"))
    if not flags.no_site:
        _site(d, venv[0] if venv else None, cfg, base_prefix, xy, platlib)
    if not flags.no_site:
        d.notes.append("sitecustomize/usercustomize, if any, are code: not run here")
    return DerivedPath(executable, xy_full, prefix, base_prefix, tuple(d.entries),
                       tuple(d.how), tuple(d.notes))


def _site(d: Derivation, venv: str | None, cfg: Mapping[str, str], base_prefix: str,
          xy: str, platlib: str) -> None:
    """site.main(): the venv first, then the user site, then the prefixes."""
    user = not d.flags.no_user_site and not d.env.get("PYTHONNOUSERSITE")
    prefixes = [base_prefix]
    if venv is not None:
        for site in site_dirs(d, venv, xy, platlib):
            add_site_dir(d, site)
        if cfg.get("include-system-site-packages", "false").lower() != "true":
            prefixes, user = [], False
    if user:
        _user_site(d, xy)
    for prefix in prefixes:
        for site in site_dirs(d, prefix, xy, platlib):
            add_site_dir(d, site)


# -- the metadata scan through a Host -------------------------------------------------------


def _candidates(host: Host, entry: str) -> list[str]:
    """probes.pyenv_scan.candidates over a Host listing."""
    groups: dict[str, list[str]] = {}
    eggs: list[str] = []
    base = posixpath.basename(entry).lower()
    for child in host.list_dir(entry):
        low = child.lower()
        if low.endswith((".dist-info", ".egg-info")):
            key = re.sub(r"[-_.]+", "-", low.rpartition(".")[0].partition("-")[0])
            groups.setdefault(key.replace("-", "_"), []).append(posixpath.join(entry, child))
        elif base.endswith(".egg") and low == "egg-info":
            eggs.append(posixpath.join(entry, "EGG-INFO"))
    return [path for group in groups.values() for path in group] + eggs


def _head(host: Host, path: str) -> tuple[str, str] | None:
    """Name and Version from a metadata file's header, reading only as far as needed."""
    data = b""
    while len(data) < MAX_HEADER_BYTES:
        try:
            chunk = host.read_bytes(path, len(data), HEADER_CHUNK_BYTES)
        except HostError:
            return None if not data else header(_lines(data))
        data += chunk
        name, version = header(_lines(data))
        ended = b"\n\n" in data or b"\r\n\r\n" in data
        if (name and version) or ended or len(chunk) < HEADER_CHUNK_BYTES:
            return name, version
    return header(_lines(data))


def _lines(data: bytes) -> list[str]:
    return data.decode("utf-8", errors="replace").splitlines()


def _head_dir(host: Host, meta_dir: str) -> tuple[str, str]:
    for filename in ("METADATA", "PKG-INFO"):
        found = _head(host, posixpath.join(meta_dir, filename))
        if found is not None:
            return found
    return "", ""


def scan(host: Host, entries: Sequence[str]) -> dict[str, tuple[str, str]]:
    """normalised name -> (version, the sys.path entry it was found in); first one wins."""
    seen: dict[str, tuple[str, str]] = {}
    for entry in entries:
        try:
            if host.kind(entry) != "dir":
                continue
            paths = _candidates(host, entry)
        except HostError:
            continue
        for meta in paths:
            name, version = _head_dir(host, meta)
            if name and norm(name) not in seen:
                seen[norm(name)] = (version, entry)
    return seen


@dataclass(frozen=True)
class StaticInspection:
    """The packages and the derivation that found them."""

    environment: PythonEnvironment
    derived: DerivedPath | None = None
    how: tuple[str, ...] = field(default_factory=tuple)


def inspect_static(host: Host, exe: str, argv: Sequence[str], env: Mapping[str, str],
                   cwd: str | None) -> StaticInspection:
    """The PythonEnvironment of a process, read without running it. Never raises: an
    interpreter that cannot be derived is an `error` in one line."""
    try:
        derived = derive_sys_path(host, exe, argv, env, cwd)
    except ValueError as exc:
        return StaticInspection(PythonEnvironment(interpreter=exe, error=str(exc)))
    found = scan(host, derived.entries)
    packages = {normalise_dist_name(k): v for k, (v, _) in found.items()}
    locations = {normalise_dist_name(k): where for k, (_, where) in found.items()}
    environment = PythonEnvironment(interpreter=derived.interpreter,
                                    python_version=derived.version, packages=packages,
                                    locations=locations)
    return StaticInspection(environment, derived, derived.how + derived.notes)
