"""LiveHost: the real machine, optionally seen through a root directory (like --sysroot).

Under a root every absolute path on the observed machine is read below that directory, and
symlinks are resolved *inside* it: an absolute target is re-rooted, a relative target (sysfs
uses `../../../devices/...`) is followed component by component, and `..` stops at the root.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace

from probes.bounded import MAX_READ_BYTES, Owner, check_owner, read_ranges, read_regular
from probes.errors import HostError, PathMissing, PathUnreadable
from probes.host import (
    DEFAULT_MAX_OUTPUT_BYTES,
    DEFAULT_TIMEOUT_S,
    CommandResult,
    DiskUsage,
    PathKind,
    PythonEnvironment,
)
from probes.pyenv import inspect_current, inspect_python

# Linux gives up with ELOOP after 40 links; so do we.
MAX_SYMLINKS = 40
NO_PYTHON_UNDER_ROOT = "under --root, name the deployment's interpreter with --python PATH"


class LiveHost:
    """The machine this process runs on, or a tree mounted at `root`.

    Programs: with root "/" a bare name is looked up on `PATH` from `env` (the observed
    environment, not necessarily this process's). Under another root a bare name is looked
    up on the `PATH` entries re-rooted below it (a fake root's `usr/local/bin/npu-smi` is
    found) and an absolute argv[0] is re-rooted too, so the live machine's own programs are
    never run by mistake. The program itself still runs on this kernel (a script's `#!` line
    uses this machine's interpreter).
    """

    def __init__(
        self,
        root: str = "/",
        env: Mapping[str, str] | None = None,
        python: str | None = None,
        default_timeout_s: float = DEFAULT_TIMEOUT_S,
        max_output_bytes: int | None = None,
        owner: Owner | None = None,
    ) -> None:
        self.root = os.path.abspath(root)
        # files are read with this user's rights (a target's owner); None: the doctor's own
        self.owner = owner
        self.max_read_bytes = MAX_READ_BYTES
        self._env: dict[str, str] = dict(os.environ if env is None else env)
        self.python = python
        self.default_timeout_s = default_timeout_s
        # stdout and stderr of one program together; more kills it (probes.spawn)
        self.max_output_bytes = max_output_bytes or DEFAULT_MAX_OUTPUT_BYTES

    @property
    def under_root(self) -> bool:
        return self.root != "/"

    @property
    def description(self) -> str:
        return f"live under {self.root}" if self.under_root else "live"

    @property
    def env(self) -> Mapping[str, str]:
        return self._env

    # -- paths -------------------------------------------------------------------------

    def host_path(self, path: str) -> str:
        """The path on this machine that holds the observed `path`. Under a root, symlinks are
        resolved here, so that none leads out of it; at `/` nothing can, and the kernel
        resolves them as it opens the path (a walk per component would cost more than the
        read)."""
        if not self.under_root:
            if not path.startswith("/"):
                raise PathUnreadable(path, "not an absolute path")
            return path
        return self._on_host(self._resolve(path))

    def _on_host(self, observed: str) -> str:
        return os.path.join(self.root, observed.lstrip("/")) if self.under_root else observed

    def _resolve(self, path: str) -> str:
        if not path.startswith("/"):
            raise PathUnreadable(path, "not an absolute path")
        return resolve_inside(self.root, path)

    def realpath(self, path: str) -> str:
        return self._resolve(path)

    def kind(self, path: str) -> PathKind:
        try:
            mode = os.stat(self.host_path(path)).st_mode
        except (FileNotFoundError, NotADirectoryError):
            return "missing"
        except OSError as exc:
            raise unreadable(path, exc) from exc
        return kind_of_mode(mode)

    def exists(self, path: str) -> bool:
        try:
            return self.kind(path) != "missing"
        except HostError:
            return False  # a loop or an unreadable parent: nothing usable is there

    def read_text(self, path: str) -> str:
        return self.read_bytes(path).decode("utf-8", errors="replace")

    def read_bytes(self, path: str, offset: int = 0, length: int | None = None) -> bytes:
        if offset < 0 or (length is not None and length < 0):
            raise ValueError(f"{path}: offset and length must be >= 0")
        return read_regular(self.host_path(path), offset, length, max_bytes=self.max_read_bytes,
                            owner=self.owner, root=self.root, shown=path)

    def read_ranges(self, path: str, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        """read_bytes of each `(offset, length)`, the file opened once (probes.bounded)."""
        return read_ranges(self.host_path(path), ranges, owner=self.owner, root=self.root,
                           shown=path)

    def file_size(self, path: str) -> int:
        try:
            info = os.stat(self.host_path(path))
        except OSError as exc:
            raise host_error(path, exc) from exc
        if stat.S_ISDIR(info.st_mode):
            raise PathUnreadable(path, os.strerror(errno.EISDIR))  # as read_text says
        return info.st_size

    def disk_usage(self, path: str) -> DiskUsage:
        try:
            fs = os.statvfs(self.host_path(path))
        except OSError as exc:
            raise host_error(path, exc) from exc
        return DiskUsage(
            total_bytes=fs.f_blocks * fs.f_frsize, free_bytes=fs.f_bavail * fs.f_frsize, path=path
        )

    def list_dir(self, path: str) -> list[str]:
        host = self.host_path(path)
        try:
            if self.owner is not None and os.path.isdir(host):  # names too, with its rights
                check_owner(host, self.root, self.owner, path)
            return sorted(os.listdir(host))
        except NotADirectoryError as exc:
            if os.path.exists(host):  # the path is a file; ENOTDIR above it means missing
                raise PathUnreadable(path, "not a directory") from exc
            raise PathMissing(path) from exc
        except OSError as exc:
            raise host_error(path, exc) from exc

    # -- programs ----------------------------------------------------------------------

    def run(self, argv: Sequence[str], timeout_s: float | None = None) -> CommandResult:
        argv = tuple(argv)
        limit_s = self.default_timeout_s if timeout_s is None else timeout_s
        if not argv or not argv[0]:
            return CommandResult(argv=argv, outcome="error", error="empty command line")
        try:
            program = self.find_program(argv[0])
        except HostError as exc:
            return CommandResult(argv=argv, outcome="error", error=str(exc))
        if program is None:
            return CommandResult(argv=argv, outcome="not_found", error=f"{argv[0]} not found")
        from probes.spawn import spawn  # subprocess only loads when a program runs

        return spawn(argv, limit_s, self._env, executable=program,
                     max_output_bytes=self.max_output_bytes)

    def find_program(self, name: str) -> str | None:
        """The path on this machine of the program `name` names, or None."""
        if "/" not in name:
            return self._search_path(name)
        if not name.startswith("/"):
            if self.under_root:
                raise PathUnreadable(name, "give an absolute program path under --root")
            return name if is_executable_file(name) else None
        host = self.host_path(name)
        return host if is_executable_file(host) else None

    def _search_path(self, name: str) -> str | None:
        for entry in self._env.get("PATH", os.defpath).split(os.pathsep):
            if not self.under_root:
                candidate = os.path.join(entry, name)  # as shutil.which: "" is the cwd
            elif not entry.startswith("/"):
                continue  # a relative entry means the doctor's cwd, not the observed machine
            else:
                try:
                    candidate = self.host_path(f"{entry.rstrip('/')}/{name}")
                except HostError:
                    continue
            if is_executable_file(candidate):
                return candidate
        return None

    # -- python ------------------------------------------------------------------------

    def python_packages(self) -> PythonEnvironment:
        if self.python is None and self.under_root:
            return PythonEnvironment(interpreter="", error=NO_PYTHON_UNDER_ROOT)
        if self.python is None and self._same_python_environment():
            return inspect_current()
        asked = self.python or sys.executable
        try:
            program = self.find_program(asked)
            started_as = self._started_as(asked, program) if program else ""
        except HostError as exc:
            return PythonEnvironment(interpreter=asked, error=str(exc))
        if program is None:
            return PythonEnvironment(interpreter=asked, error=f"{asked}: interpreter not found")
        found = inspect_python(started_as, self._env,
                               run=lambda argv, timeout_s: self._run_file(program, argv,
                                                                          timeout_s))
        return self._as_observed(replace(found, interpreter=asked))

    def _started_as(self, asked: str, program: str) -> str:
        """argv[0] for the interpreter: Python looks for its virtual environment (pyvenv.cfg)
        beside the path it was started as, not beside the file a venv's bin/python links to.
        Under a root the path is re-rooted with its directories resolved inside the root."""
        if not self.under_root:
            return asked if "/" in asked else program
        if not asked.startswith("/"):
            return program
        parent, name = os.path.split(asked)
        named = os.path.join(self.host_path(parent), name)
        beside = (os.path.dirname(named), os.path.dirname(os.path.dirname(named)))
        return named if any(os.path.isfile(os.path.join(d, "pyvenv.cfg")) for d in beside) \
            else program

    def _same_python_environment(self) -> bool:
        """This interpreter, started with this environment: its own sys.path is the answer."""
        return not self.under_root and all(
            self._env.get(name) == os.environ.get(name)
            for name in ("PYTHONPATH", "PYTHONHOME", "PYTHONNOUSERSITE", "PYTHONUSERBASE"))

    def _run_file(self, program: str, argv: Sequence[str], timeout_s: float) -> CommandResult:
        from probes.spawn import spawn

        return spawn(tuple(argv), timeout_s, self._env, executable=program,
                     max_output_bytes=self.max_output_bytes)

    def _as_observed(self, found: PythonEnvironment) -> PythonEnvironment:
        """Strip the root prefix from package locations: they are paths on this machine."""
        if not self.under_root:
            return found
        prefix = self.root.rstrip("/")
        locations = {
            name: where[len(prefix) :] if where.startswith(prefix + "/") else where
            for name, where in found.locations.items()
        }
        return replace(found, locations=locations)


# -- path resolution inside a root ---------------------------------------------------------


def local_files() -> LiveHost:
    """This machine's files as a Host, with no environment: the one way to open a model
    directory given on this machine's command line (the engine's loader, the console's model,
    the plan, a recording's overlay)."""
    return LiveHost(root="/", env={})


def resolve_inside(root: str, path: str) -> str:
    """`path` with every symlink resolved, never leaving `root`; returns the observed path.

    Missing components are kept as they are (like os.path.realpath without strict).
    Raises PathUnreadable after MAX_SYMLINKS links (a loop).
    """
    if root == "/":
        fast = _realpath_strict(path)
        if fast is not None:
            return fast
    pending = list(reversed(path.split("/")))
    resolved: list[str] = []
    links = 0
    while pending:
        part = pending.pop()
        if part in ("", "."):
            continue
        if part == "..":
            if resolved:
                resolved.pop()  # at the root, `..` is the root itself
            continue
        target = _read_link(root, [*resolved, part])
        if target is None:
            resolved.append(part)
            continue
        links += 1
        if links > MAX_SYMLINKS:
            raise PathUnreadable(path, "too many levels of symbolic links (a loop?)")
        if target.startswith("/"):
            resolved = []  # absolute targets are re-rooted
        pending.extend(reversed(target.split("/")))
    return "/" + "/".join(resolved)


def _realpath_strict(path: str) -> str | None:
    """The kernel-speed answer for the real root, when every component exists.

    Nothing can escape `/`, so os.path.realpath agrees with the walk below; a missing
    component or a loop returns None and the walk gives its own answer (or error).
    """
    try:
        return os.path.realpath(path, strict=True)
    except OSError:
        return None


def _read_link(root: str, parts: list[str]) -> str | None:
    """The target of the link at `parts` under `root`, or None when it is not a link."""
    try:
        return os.readlink(os.path.join(root, *parts))
    except OSError:
        return None  # not a link, missing, or not a directory above: keep the name


# -- small helpers -------------------------------------------------------------------------


def kind_of_mode(mode: int) -> PathKind:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISCHR(mode):
        return "char_device"
    if stat.S_ISBLK(mode):
        return "block_device"
    return "other"


def is_executable_file(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def host_error(path: str, exc: OSError) -> HostError:
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return PathMissing(path)
    return unreadable(path, exc)


def unreadable(path: str, exc: OSError) -> PathUnreadable:
    return PathUnreadable(path, exc.strerror or str(exc))
