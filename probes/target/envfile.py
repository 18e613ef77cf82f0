"""`--env-file FILE`: the environment of a service that is not running yet.

Three shapes, told apart by the first character that is not blank:
- `docker inspect` JSON (`[` or `{`): `Config.Env` of the first object, `NAME=VALUE` strings;
- otherwise a systemd EnvironmentFile (systemd.exec(5), "EnvironmentFile="): one assignment
  per line; empty lines, lines without `=` and lines starting with `#` or `;` are ignored; a
  value in single or double quotes loses them (backslash escapes inside double quotes); a
  trailing backslash continues the line. Plain `KEY=VALUE` lines are the simplest case of it.
  A leading `export ` (shell-style env files) is accepted and noted; each other line systemd
  would ignore is named in the notes.

A shell start script is not an environment file: systemd would ignore its `source`, `.` and
`exec` lines, so what it sets would be read as never set (cann.environment would say
set_env.sh was not sourced when the script sources it). A file that starts with `#!` or
holds a shell command line is refused, naming the line; the doctor runs no script.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from typing import Any

from probes import json_limits
from probes.errors import HostError, PathMissing

MAX_ENV_FILE_BYTES = 1024 * 1024
# first words of a line that make it a shell command, not an assignment or a comment
SHELL_WORDS = frozenset({"source", ".", "exec", "if", "then", "else", "fi", "for", "while",
                         "do", "done", "case", "esac", "cd", "set", "unset", "eval", "exit",
                         "python", "python3", "vllm", "bash", "sh", "nohup", "function"})
NOT_AN_ENV_FILE = ("a shell start script, not an environment file (the doctor runs no "
                   "script, and systemd would ignore this line): give the service's "
                   "EnvironmentFile or `docker inspect` output, or start the service and "
                   "name it with --pid")
SHOWN_LINE_CHARS = 60


class EnvFileError(ValueError):
    """The file cannot be read as an environment; the message names the line or field."""


@dataclass(frozen=True)
class EnvFile:
    """The environment an `--env-file` holds, and in which shape it was written."""

    env: dict[str, str]
    shape: str  # "docker inspect JSON" or "EnvironmentFile lines"
    notes: tuple[str, ...] = ()


def read_env_file(path: str) -> EnvFile:
    """Read and parse a local file. Raises EnvFileError naming the file."""
    from probes.bounded import read_regular

    try:
        data = read_regular(path, max_bytes=MAX_ENV_FILE_BYTES)
    except PathMissing:
        raise EnvFileError(f"{path}: {os.strerror(errno.ENOENT)}") from None
    except HostError as exc:
        raise EnvFileError(str(exc)) from None
    try:
        return parse_env_file(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise EnvFileError(f"{path}: not UTF-8 text") from None
    except EnvFileError as exc:
        raise EnvFileError(f"{path}: {exc}") from None


def parse_env_file(text: str) -> EnvFile:
    stripped = text.lstrip()
    if stripped.startswith(("[", "{")):
        return _docker_inspect(stripped)
    return _environment_file(text)


def _docker_inspect(text: str) -> EnvFile:
    try:
        doc: Any = json_limits.loads(text, "docker inspect JSON")
    except ValueError as exc:
        raise EnvFileError(f"starts like JSON but is not read ({exc})") from None
    notes: list[str] = []
    if isinstance(doc, list):
        if not doc:
            raise EnvFileError("an empty JSON list: no container in this `docker inspect` output")
        if len(doc) > 1:
            notes.append(f"{len(doc)} objects in the `docker inspect` output: the first is read")
        doc = doc[0]
    config = doc.get("Config") if isinstance(doc, dict) else None
    entries = config.get("Env") if isinstance(config, dict) else None
    if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
        raise EnvFileError("no Config.Env list of strings: not a `docker inspect` output")
    env: dict[str, str] = {}
    for entry in entries:
        name, sep, value = entry.partition("=")
        if sep and name:
            env[name] = value
    return EnvFile(env, "docker inspect JSON", tuple(notes))


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, text) with backslash continuations joined."""
    out: list[tuple[int, str]] = []
    pending: list[str] = []
    start = 0
    for number, line in enumerate(text.splitlines(), start=1):
        if not pending:
            start = number
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending.append(line[:-1])
            continue
        pending.append(line)
        out.append((start, "".join(pending)))
        pending = []
    if pending:
        out.append((start, "".join(pending)))
    return out


def _shown(line: str) -> str:
    line = line.strip()
    return line if len(line) <= SHOWN_LINE_CHARS else line[: SHOWN_LINE_CHARS - 1] + "…"


def _shell_line(entry: str) -> bool:
    words = entry.split()
    first = words[0] if words else ""
    return first in SHELL_WORDS or first.endswith(("()", "{")) or \
        (first == "export" and len(words) > 1 and "=" not in words[1])


def _environment_file(text: str) -> EnvFile:
    env: dict[str, str] = {}
    exported = False
    ignored: list[str] = []
    if text.startswith("#!"):
        raise EnvFileError(f"line 1: `{_shown(text.splitlines()[0])}`: {NOT_AN_ENV_FILE}")
    for number, line in _logical_lines(text):
        entry = line.strip()
        if not entry or entry.startswith(("#", ";")):
            continue
        if _shell_line(entry):
            raise EnvFileError(f"line {number}: `{_shown(entry)}`: {NOT_AN_ENV_FILE}")
        if "=" not in entry:
            ignored.append(f"line {number} ignored (no `=`, as systemd ignores it): "
                           f"`{_shown(entry)}`")
            continue
        if entry.startswith("export "):
            exported = True
            entry = entry[len("export "):].lstrip()
        name, _, value = entry.partition("=")
        name = name.strip()
        if not name or any(c.isspace() for c in name):
            raise EnvFileError(f"line {number}: {name!r} is not a variable name")
        env[name] = _unquote(value.strip(), number)
    notes = (("`export ` prefixes were read as plain assignments",) if exported else ()) + \
        tuple(ignored)
    return EnvFile(env, "EnvironmentFile lines", notes)


def _unquote(value: str, number: int) -> str:
    if len(value) >= 2 and value[0] == value[-1] == "'":
        return value[1:-1]
    if len(value) >= 2 and value[0] == value[-1] == '"':
        inner, out, escaped = value[1:-1], [], False
        for char in inner:
            if escaped:
                out.append(char)
                escaped = False
            elif char == "\\":
                escaped = True
            else:
                out.append(char)
        return "".join(out)
    if value[:1] in ("'", '"'):
        raise EnvFileError(f"line {number}: unclosed quote in {value!r}")
    return value
