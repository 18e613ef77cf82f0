"""Redaction of a recording before it leaves the machine: pure functions, no I/O.

What is masked (values only; names and kinds are kept and listed, never the values):

- environment variables whose *name* looks secret (TOKEN, SECRET, PASSWORD, KEY, AK/SK, ...);
- credentials in URLs (`https://user:pass@host` -> `https://<redacted>@host`);
- `Authorization:` headers and `Bearer`/`Basic` tokens in captured text;
- `--token=...` / `--password x` arguments and `HF_TOKEN=...` / `password: x` assignments;
- every secret value found above, wherever else it appears (a token echoed in a log);
- optionally (`hostnames=True`) the machine's host name, URL hosts and IP addresses, each
  replaced consistently (`host-1`, `ip-1`, ...) so a reader can still follow them.

Byte ranges (`read_bytes` answers: plog tails, safetensors headers) are masked in place with
masks of the same length, so offsets and sizes in the recording stay true. Paths, directory
listings and resolved links are kept as asked: a replay looks answers up by them.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from checks.secret_names import REDACTED, is_secret_name
from probes.host import CommandResult, PythonEnvironment
from probes.recording import (
    CommandRecord,
    FileRecord,
    Manifest,
    RangeRecord,
    RecordedError,
    Recording,
)

# A secret value shorter than this is not searched for elsewhere: "1" or "true" would mask
# half the recording. Long values (tokens, passwords) are.
MIN_LITERAL_LEN = 6


# -- what was redacted ---------------------------------------------------------------------


@dataclass(frozen=True, order=True)
class Redaction:
    """One kind of secret masked in one place. Never holds the value."""

    kind: str  # secret-env, url-credentials, authorization, bearer-token, secret-argument,
    #            secret-assignment, known-secret, hostname, ip-address
    where: str  # `env HF_TOKEN`, `command \`pip config list\` stdout`, `file /etc/x`, ...


# -- text rules ----------------------------------------------------------------------------

Mask = Callable[[str], str]  # the secret part -> what replaces it

_URL_CREDENTIALS = re.compile(
    r"(?i)\b([a-z][a-z0-9+.-]*://)([^\s/@'\"<>]+(?::[^\s/@'\"<>]*)?)@(?=[^\s@/]+)")
_AUTHORIZATION = re.compile(r"(?i)\b((?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?)([^\r\n\"']+)")
_BEARER = re.compile(r"(?i)\b(bearer\s+)([A-Za-z0-9._~+/=-]{8,})")
# `Basic` is also an English word: only base64-looking values (a digit, `+/=`, or an upper-case
# letter after the first).
_BASIC = re.compile(r"\b(Basic\s+)(?=[A-Za-z0-9+/]*[0-9=+/]|[A-Za-z0-9+/]+[A-Z])"
                    r"([A-Za-z0-9+/]{8,}={0,2})")
_FLAG = re.compile(r"(?<![\w-])(--?[A-Za-z][A-Za-z0-9_.-]*)(=|[ \t]+)(?!-)"
                   r"(\"[^\"]*\"|'[^']*'|[^\s\"']+)")
_ASSIGNMENT = re.compile(
    r"(?<![\w.-])([A-Za-z_][A-Za-z0-9_]*)=(\"[^\"\n]*\"|'[^'\n]*'|[^\s\"'\x00;&|]+)")
_QUOTED_KEY = re.compile(
    r"([\"'])([A-Za-z_][A-Za-z0-9_.-]*)\1\s*:\s*\"((?:[^\"\\\n]|\\.)*)\"")
_YAML_KEY = re.compile(r"(?m)^([ \t]*-?[ \t]*)([A-Za-z_][A-Za-z0-9_.-]*)([ \t]*:[ \t]+)"
                       r"(?![\"'{\[|>])([^\s#][^\n]*?)[ \t]*$")
_IPV4 = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?![\w]|\.\d)")
_IPV6 = re.compile(r"(?<![\w:.])(?=[0-9A-Fa-f:]*:[0-9A-Fa-f:]*:)[0-9A-Fa-f:]{2,39}(?![\w:])")
_URL_HOST = re.compile(r"(?i)\b[a-z][a-z0-9+.-]*://(?:<redacted>@)?([a-z0-9-]+(?:\.[a-z0-9-]+)+)")


def _unquote(value: str) -> tuple[str, str, str]:
    """(opening quote, inner value, closing quote)."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[0], value[1:-1], value[-1]
    return "", value, ""


@dataclass
class _Scan:
    """One pass over a text: what was found (kinds, secret values) and the masks to use."""

    mask: Mask
    kinds: set[str] = field(default_factory=set)
    secrets: set[str] = field(default_factory=set)

    def hide(self, kind: str, secret: str) -> str:
        if not secret or secret == REDACTED or set(secret) <= {"*"}:
            return secret
        self.kinds.add(kind)
        self.secrets.add(secret)
        return self.mask(secret)


def _apply_rules(text: str, scan: _Scan) -> str:
    text = _URL_CREDENTIALS.sub(
        lambda m: m.group(1) + scan.hide("url-credentials", m.group(2)) + "@", text)
    text = _AUTHORIZATION.sub(lambda m: m.group(1) + scan.hide("authorization", m.group(2)),
                              text)
    text = _BEARER.sub(lambda m: m.group(1) + scan.hide("bearer-token", m.group(2)), text)
    text = _BASIC.sub(lambda m: m.group(1) + scan.hide("bearer-token", m.group(2)), text)
    text = _FLAG.sub(lambda m: _named(m, 1, 3, "secret-argument", scan), text)
    text = _ASSIGNMENT.sub(lambda m: _named(m, 1, 2, "secret-assignment", scan), text)
    text = _QUOTED_KEY.sub(lambda m: _quoted_key(m, scan), text)
    return _YAML_KEY.sub(lambda m: _named(m, 2, 4, "secret-assignment", scan), text)


def _named(m: re.Match[str], name_group: int, value_group: int, kind: str, scan: _Scan) -> str:
    whole = m.group(0)
    if not is_secret_name(m.group(name_group).lstrip("-")):
        return whole
    start = m.start(value_group) - m.start(0)
    opening, inner, closing = _unquote(m.group(value_group))
    return whole[:start] + opening + scan.hide(kind, inner) + closing


def _quoted_key(m: re.Match[str], scan: _Scan) -> str:
    whole = m.group(0)
    if not is_secret_name(m.group(2)):
        return whole
    start = m.start(3) - m.start(0)
    return whole[:start] + scan.hide("secret-assignment", m.group(3)) + '"'


# -- host names and addresses ----------------------------------------------------------------


class Pseudonyms:
    """Consistent replacements: the same host or address always gets the same name."""

    def __init__(self, hostnames: Iterable[str] = ()) -> None:
        self.hosts: dict[str, str] = {}  # lower-cased name -> host-N
        self.addresses: dict[str, str] = {}  # address as written -> ip-N
        for name in hostnames:
            self.host(name)

    def host(self, name: str) -> str:
        return self.hosts.setdefault(name.lower(), f"host-{len(self.hosts) + 1}")

    def ip(self, address: str) -> str:
        return self.addresses.setdefault(address, f"ip-{len(self.addresses) + 1}")


def _keep_address(text: str, v6: bool) -> bool:
    """Not an address, or one that says nothing about the site (loopback, unspecified)."""
    try:
        address = ipaddress.IPv6Address(text) if v6 else ipaddress.IPv4Address(text)
    except ValueError:
        return True
    return address.is_loopback or address.is_unspecified


def _pseudonymise(text: str, names: Pseudonyms, fit: Callable[[str, str], str],
                  kinds: set[str]) -> str:
    lowered = text.lower()
    for host in list(names.hosts):
        if host in lowered:
            pattern = re.compile(rf"(?i)(?<![\w.-]){re.escape(host)}(?![\w-])")
            text, count = pattern.subn(lambda m: fit(m.group(0), names.host(m.group(0))), text)
            if count:
                kinds.add("hostname")

    def url_host(m: re.Match[str]) -> str:
        if _IPV4.fullmatch(m.group(1)) or m.group(1).lower() == "localhost":
            return m.group(0)  # addresses have their own rule below
        kinds.add("hostname")
        start = m.start(1) - m.start(0)
        return m.group(0)[:start] + fit(m.group(1), names.host(m.group(1)))

    def address(v6: bool) -> Callable[[re.Match[str]], str]:
        def swap(m: re.Match[str]) -> str:
            if _keep_address(m.group(0), v6):
                return m.group(0)
            kinds.add("ip-address")
            return fit(m.group(0), names.ip(m.group(0)))
        return swap

    text = _URL_HOST.sub(url_host, text)
    text = _IPV4.sub(address(False), text)
    return _IPV6.sub(address(True), text)


# -- the redactor --------------------------------------------------------------------------


def _same_length(secret: str) -> str:
    n = len(secret)
    return (REDACTED + "*" * n)[:n] if n >= len(REDACTED) else "*" * n


def _fit_same_length(original: str, pseudonym: str) -> str:
    n = len(original)
    return (pseudonym + "_" * n)[:n]


@dataclass
class Redactor:
    """Masks text and bytes; collects what it masked, by kind and place."""

    known: set[str] = field(default_factory=set)  # secret values to mask wherever they appear
    pseudonyms: Pseudonyms | None = None
    redactions: set[Redaction] = field(default_factory=set)
    _patterns: dict[bool, re.Pattern[str]] = field(default_factory=dict)
    _literal_for: frozenset[str] = frozenset()

    def learn(self, text: str) -> None:
        """First pass: collect secret values so that their echoes elsewhere are masked too."""
        scan = _Scan(mask=lambda s: REDACTED)
        _apply_rules(text, scan)
        self.known |= {s for s in scan.secrets if len(s) >= MIN_LITERAL_LEN}

    def text(self, text: str, where: str) -> str:
        return self._redact(text, where, lambda s: REDACTED, lambda o, p: p)

    def data(self, data: bytes, where: str) -> bytes:
        """Bytes masked in place: the result has the same length."""
        # latin-1 maps each byte to one character and back, so lengths and offsets hold
        text = data.decode("latin-1")
        out = self._redact(text, where, _same_length, _fit_same_length, as_latin1=True)
        return out.encode("latin-1") if out != text else data

    def _redact(self, text: str, where: str, mask: Mask, fit: Callable[[str, str], str],
                as_latin1: bool = False) -> str:
        scan = _Scan(mask=mask)
        text = _apply_rules(text, scan)
        text = self._literals(text, scan, as_latin1)
        if self.pseudonyms is not None:
            text = _pseudonymise(text, self.pseudonyms, fit, scan.kinds)
        self.redactions |= {Redaction(kind, where) for kind in scan.kinds}
        return text

    def _literals(self, text: str, scan: _Scan, as_latin1: bool) -> str:
        if not self.known:
            return text
        return self._literal_pattern(as_latin1).sub(
            lambda m: scan.hide("known-secret", m.group(0)), text)

    def _literal_pattern(self, as_latin1: bool) -> re.Pattern[str]:
        current = frozenset(self.known)
        if current != self._literal_for:
            self._patterns = {}
            self._literal_for = current
        if as_latin1 not in self._patterns:
            # longest first, so a secret that contains another is masked whole; the latin-1
            # form finds the UTF-8 bytes of a secret inside bytes decoded one char per byte
            ordered = sorted(current, key=len, reverse=True)
            spelled = [s.encode().decode("latin-1") if as_latin1 else s for s in ordered]
            self._patterns[as_latin1] = re.compile("|".join(re.escape(s) for s in spelled))
        return self._patterns[as_latin1]

    def value(self, value: Any, where: str) -> Any:
        """Every string inside a JSON-like value (the report), masked."""
        if isinstance(value, str):
            return self.text(value, where)
        if isinstance(value, list):
            return [self.value(v, where) for v in value]
        if isinstance(value, dict):
            return {k: self.value(v, where) for k, v in value.items()}
        return value


# -- environment ---------------------------------------------------------------------------


def redact_env(env: Mapping[str, str], redactor: Redactor) -> dict[str, str]:
    """Secret-looking names keep the name and lose the value; other values are scanned."""
    out: dict[str, str] = {}
    for name, value in env.items():
        if is_secret_name(name) and value:
            out[name] = REDACTED
            redactor.redactions.add(Redaction("secret-env", f"env {name}"))
        else:
            out[name] = redactor.text(value, f"env {name}")
    return out


def secret_env_values(env: Mapping[str, str]) -> set[str]:
    return {v for k, v in env.items() if is_secret_name(k) and len(v) >= MIN_LITERAL_LEN}


# -- a whole recording -----------------------------------------------------------------------


@dataclass(frozen=True)
class RedactedRecording:
    recording: Recording
    redactor: Redactor  # carries the known secrets: use it for the report and other members

    @property
    def redactions(self) -> tuple[Redaction, ...]:
        return tuple(sorted(self.redactor.redactions))


def _texts(recording: Recording) -> Iterable[str]:
    """Everything a first pass should learn secrets from."""
    if recording.env is not None:
        yield from (f"{k}={v}" for k, v in recording.env.items())
    for record in recording.commands:
        yield " ".join(record.result.argv)
        yield record.result.stdout
        yield record.result.stderr
    for entry in recording.files.values():
        if isinstance(entry.text, str):
            yield entry.text
        for rng in entry.ranges:
            if rng.data is not None:
                yield rng.data.decode("utf-8", "replace")


def new_redactor(recording: Recording, hostnames: bool = False) -> Redactor:
    """A redactor that knows every secret value the recording holds (the first pass)."""
    redactor = Redactor(known=secret_env_values(recording.env or {}))
    for text in _texts(recording):
        redactor.learn(text)
    if hostnames:
        own = recording.manifest.hostname
        names = [n for n in (own, own.split(".")[0]) if n and n not in ("unknown", "localhost")]
        redactor.pseudonyms = Pseudonyms(n for n in names if len(n) >= 2)
    return redactor


def redact_recording(recording: Recording, hostnames: bool = False) -> RedactedRecording:
    """The recording with secrets (and optionally host names and addresses) masked."""
    redactor = new_redactor(recording, hostnames)
    env = None if recording.env is None else redact_env(recording.env, redactor)
    redacted = replace(
        recording,
        manifest=_manifest(recording.manifest, redactor),
        env=env,
        python=_python(recording.python, redactor),
        commands=tuple(_command(c, redactor) for c in recording.commands),
        files={path: _file(path, e, redactor) for path, e in recording.files.items()},
    )
    return RedactedRecording(redacted, redactor)


def _manifest(manifest: Manifest, redactor: Redactor) -> Manifest:
    if redactor.pseudonyms is None:
        return manifest
    return replace(manifest, hostname=redactor.text(manifest.hostname, "manifest hostname"),
                   source=redactor.text(manifest.source, "manifest source"))


def _python(found: PythonEnvironment | None, redactor: Redactor) -> PythonEnvironment | None:
    if found is None:
        return None
    return replace(found, error=redactor.text(found.error, "python error"),
                   interpreter=redactor.text(found.interpreter, "python interpreter"))


def redact_argv(argv: tuple[str, ...], redactor: Redactor, where: str) -> tuple[str, ...]:
    out = list(argv)
    for i, arg in enumerate(argv):
        flag = arg.lstrip("-")
        if arg.startswith("-") and "=" not in arg and is_secret_name(flag) and i + 1 < len(argv):
            redactor.redactions.add(Redaction("secret-argument", where))
            out[i + 1] = REDACTED
        elif out[i] != REDACTED:
            out[i] = redactor.text(arg, where)
    return tuple(out)


def _command(record: CommandRecord, redactor: Redactor) -> CommandRecord:
    result = record.result
    # the label is built from the redacted argv: a place name must never carry a value
    argv = redact_argv(result.argv, redactor, f"command `{result.argv[0]}` argv")
    label = f"command `{' '.join(argv[:3])}`"
    redacted: CommandResult = replace(
        result,
        argv=argv,
        stdout=redactor.text(result.stdout, f"{label} stdout"),
        stderr=redactor.text(result.stderr, f"{label} stderr"),
        error=redactor.text(result.error, f"{label} error"),
    )
    return replace(record, result=redacted)


def _error(error: RecordedError, redactor: Redactor, where: str) -> RecordedError:
    return replace(error, reason=redactor.text(error.reason, where))


def _file(path: str, entry: FileRecord, redactor: Redactor) -> FileRecord:
    where = f"file {path}"
    text = entry.text
    if isinstance(text, str):
        text = redactor.text(text, where)
    elif isinstance(text, RecordedError):
        text = _error(text, redactor, where)
    return replace(entry, text=text, ranges=tuple(_range(r, redactor, where)
                                                  for r in entry.ranges))


def _range(record: RangeRecord, redactor: Redactor, where: str) -> RangeRecord:
    if record.data is not None:
        return replace(record, data=redactor.data(record.data, where))
    if record.error is not None:
        return replace(record, error=_error(record.error, redactor, where))
    return record


def summarise(redactions: Iterable[Redaction]) -> list[str]:
    """One line per kind: how many places, and the env names (names are safe to show)."""
    by_kind: dict[str, list[str]] = {}
    for item in sorted(redactions):
        by_kind.setdefault(item.kind, []).append(item.where)
    lines = []
    for kind, places in by_kind.items():
        if kind == "secret-env":
            names = ", ".join(p.removeprefix("env ") for p in places)
            lines.append(f"{kind}: {len(places)} variable(s): {names}")
        else:
            shown = "; ".join(places[:3]) + ("; ..." if len(places) > 3 else "")
            lines.append(f"{kind}: {len(places)} place(s): {shown}")
    return lines
