"""Redaction of a recording before it leaves the machine: pure functions, no I/O.

What happens to each part (what is and is not guaranteed: docs/snapshot-format.md, "Secrets"):

- the environment: a value is kept only for the allow-list of checks/env_allow.py (and then
  scanned like any text); an allowed name that looks secret is `<redacted>`; every other
  variable keeps its name with the value `<withheld>`. Withheld and redacted values are
  masked wherever else they appear (a token echoed in a log);
- every captured text (command output, file contents, byte ranges, errors, the report): the
  spans checks/bundle/redact_rules.py finds (named secrets, credentials, token formats, long random
  tokens) are masked;
- with `hostnames=True` the machine's names and addresses become `host-N` / `ip-N`
  (checks/bundle/pseudonyms.py) everywhere, paths, keys and listings included, so a replay of the
  bundle still finds every answer under the redacted path.

Byte ranges (`read_bytes` answers: plog tails) are masked in place with masks of the same
length, so offsets and sizes in the recording stay true. Structural files (safetensors
headers, shard indexes, model configs) are data: checks/bundle/redact_structural.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from checks.bundle.pseudonyms import Fit, Pseudonyms
from checks.bundle.redact_rules import Span, merge, raw_spans, secret_spans
from checks.bundle.redact_structural import (
    is_safetensors,
    is_structural,
    is_structural_json,
    is_vocabulary,
    json_values,
    redact_json,
)
from checks.env_allow import WITHHELD, value_allowed
from checks.secret_names import REDACTED, is_secret_name
from probes.host import CommandResult, PythonEnvironment
from probes.recording.model import (
    CommandRecord,
    FileRecord,
    Manifest,
    RangeRecord,
    RecordedError,
    Recording,
)
from probes.words import counted

__all__ = ["REDACTED", "WITHHELD", "Pseudonyms", "RedactedRecording", "Redaction", "Redactor",
           "is_secret_name", "redact_env", "redact_recording", "summarise"]

# A secret value shorter than this is not searched for elsewhere: "1" or "true" would mask
# half the recording. Long values (tokens, passwords) are.
MIN_LITERAL_LEN = 6
_PATH_LIKE = re.compile(r"^(?:[~.]?/[^:]*)(?::[~.]?/[^:]*)*:?$")  # /a/b or /a:/b:~/c


# -- what was redacted ---------------------------------------------------------------------


@dataclass(frozen=True, order=True)
class Redaction:
    """One kind of secret masked in one place. Never holds the value."""

    kind: str  # secret-env, withheld-env, url-credentials, authorization, bearer-token,
    #            private-key, secret-argument, secret-assignment, token-format, high-entropy,
    #            known-secret, hostname, ip-address
    where: str  # `env HF_TOKEN`, `command \`pip config list\` stdout`, `file /etc/x`, ...


Mask = Callable[[str], str]  # the secret -> what replaces it


def _same_length(secret: str) -> str:
    n = len(secret)
    return (REDACTED + "*" * n)[:n] if n >= len(REDACTED) else "*" * n


def _fit_same_length(original: str, pseudonym: str) -> str:
    n = len(original)
    return (pseudonym + "_" * n)[:n]


def _as_is(original: str, pseudonym: str) -> str:
    return pseudonym


# -- the redactor --------------------------------------------------------------------------


@dataclass
class Redactor:
    """Masks text and bytes; collects what it masked, by kind and place."""

    known: set[str] = field(default_factory=set)  # secret values to mask wherever they appear
    pseudonyms: Pseudonyms | None = None
    redactions: set[Redaction] = field(default_factory=set)
    _patterns: dict[bool, re.Pattern[str]] = field(default_factory=dict)
    _literal_for: frozenset[str] = frozenset()
    # spans found in the first pass, so a long text is scanned once, not twice
    _spans: dict[str, list[Span]] = field(default_factory=dict)

    def learn(self, text: str) -> None:
        """First pass: collect secret values so that their echoes elsewhere are masked too."""
        found = raw_spans(text)
        self._spans[text] = merge(found)
        for start, end, kind in found:
            value = text[start:end]
            self.learn_value(value)
            if kind == "secret-assignment" and " " in value.strip():
                self.learn_value(value.split()[0])  # `secret: VALUE and more` to the line end
            elif kind == "url-credentials" and ":" in value:
                self.learn_value(value.split(":", 1)[1])  # the password of user:password

    def learn_value(self, value: str) -> None:
        if len(value) >= MIN_LITERAL_LEN and value not in (REDACTED, WITHHELD):
            self.known.add(value)

    def text(self, text: str, where: str) -> str:
        return self._redact(text, where, lambda s: REDACTED, _as_is)

    def data(self, data: bytes, where: str) -> bytes:
        """Bytes masked in place: the result has the same length."""
        # latin-1 maps each byte to one character and back, so lengths and offsets hold
        text = data.decode("latin-1")
        out = self._redact(text, where, _same_length, _fit_same_length, as_latin1=True)
        return out.encode("latin-1") if out != text else data

    def known_only(self, data: bytes, where: str) -> bytes:
        """Bytes with only the secret values learned elsewhere masked, same length (a
        safetensors header: tensor names are data, never scanned)."""
        text = data.decode("latin-1")
        kinds: set[str] = set()
        out = self._literals(text, _same_length, kinds, as_latin1=True)
        self.redactions |= {Redaction(kind, where) for kind in kinds}
        return out.encode("latin-1") if out != text else data

    def path(self, path: str, where: str = "") -> str:
        """A path, key or listed name: host names replaced, nothing else (a replay looks
        answers up by them)."""
        if self.pseudonyms is None:
            return path
        kinds: set[str] = set()
        out = self.pseudonyms.apply(path, _as_is, kinds)
        self.redactions |= {Redaction(kind, where) for kind in kinds if where}
        return out

    def _redact(self, text: str, where: str, mask: Mask, fit: Fit,
                as_latin1: bool = False) -> str:
        kinds: set[str] = set()
        spans = self._spans.get(text)
        text = _mask_spans(text, secret_spans(text) if spans is None else spans, mask, kinds)
        text = self._literals(text, mask, kinds, as_latin1)
        if self.pseudonyms is not None:
            text = self.pseudonyms.apply(text, fit, kinds)
        self.redactions |= {Redaction(kind, where) for kind in kinds}
        return text

    def _literals(self, text: str, mask: Mask, kinds: set[str], as_latin1: bool) -> str:
        if not self.known:
            return text
        pattern = self._literal_pattern(as_latin1)
        out, count = pattern.subn(lambda m: mask(m.group(0)), text)
        if count:
            kinds.add("known-secret")
        return out

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


def _mask_spans(text: str, spans: list[Span], mask: Mask, kinds: set[str]) -> str:
    if not spans:
        return text
    out, last = [], 0
    for start, end, kind in spans:
        secret = text[start:end]
        if secret in (REDACTED, WITHHELD) or set(secret) <= {"*"}:
            continue
        out += [text[last:start], mask(secret)]
        kinds.add(kind)
        last = end
    return "".join([*out, text[last:]])


# -- environment ---------------------------------------------------------------------------


def redact_env(env: Mapping[str, str], redactor: Redactor) -> dict[str, str]:
    """Allow-listed values are kept (scanned); secret-looking allowed names are `<redacted>`;
    every other value is `<withheld>`. Names are always kept."""
    out: dict[str, str] = {}
    for name, value in env.items():
        shown_name = redactor.path(name)
        if not value:
            out[shown_name] = value
        elif value_allowed(name):
            out[shown_name] = redactor.text(value, f"env {shown_name}")
        else:
            secret = is_secret_name(name)
            out[shown_name] = REDACTED if secret else WITHHELD
            kind = "secret-env" if secret else "withheld-env"
            redactor.redactions.add(Redaction(kind, f"env {shown_name}"))
    return out


def hidden_env_values(env: Mapping[str, str], hostname: str = "") -> set[str]:
    """The values redact_env hides that are worth masking elsewhere: long enough, not a path
    (a withheld `PWD=/srv/model` must not blank out every path), not the host name."""
    own = {hostname.lower(), hostname.split(".")[0].lower()} - {""}
    return {value for name, value in env.items()
            if not value_allowed(name) and len(value) >= MIN_LITERAL_LEN
            and not _PATH_LIKE.match(value) and value.lower() not in own}


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
        yield from (f"{k}={v}" for k, v in recording.env.items() if value_allowed(k))
    for record in recording.commands:
        yield " ".join(record.result.argv)
        yield record.result.stdout
        yield record.result.stderr
    for path, entry in recording.files.items():
        if is_structural(path):
            # data: learn from its string values alone, never from tensor names and offsets
            if isinstance(entry.text, str) and not is_safetensors(path):
                yield from json_values(entry.text)
            continue
        if isinstance(entry.text, str):
            yield entry.text
        for rng in entry.ranges:
            if rng.data is not None:
                yield rng.data.decode("utf-8", "replace")


def new_redactor(recording: Recording, hostnames: bool = False) -> Redactor:
    """A redactor that knows every secret value the recording holds (the first pass)."""
    own = recording.manifest.hostname
    redactor = Redactor(known=hidden_env_values(recording.env or {}, own))
    for text in _texts(recording):
        redactor.learn(text)
    if hostnames:
        names = [n for n in (own, own.split(".")[0]) if n and n not in ("unknown", "localhost")]
        redactor.pseudonyms = Pseudonyms(names)
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
        files={redactor.path(path): _file(path, e, redactor)
               for path, e in recording.files.items()},
    )
    return RedactedRecording(redacted, redactor)


def _manifest(manifest: Manifest, redactor: Redactor) -> Manifest:
    if redactor.pseudonyms is None:
        return manifest
    return replace(manifest, hostname=redactor.text(manifest.hostname, "manifest hostname"),
                   source=redactor.text(manifest.source, "manifest source"),
                   root=redactor.path(manifest.root, "manifest root"))


def _python(found: PythonEnvironment | None, redactor: Redactor) -> PythonEnvironment | None:
    if found is None:
        return None
    return replace(found, error=redactor.text(found.error, "python error"),
                   interpreter=redactor.path(found.interpreter, "python interpreter"),
                   locations={k: redactor.path(v, "python locations")
                              for k, v in found.locations.items()})


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
    argv = redact_argv(result.argv, redactor, "command argv")
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
    where = f"file {redactor.path(path)}"
    text = entry.text
    structural = is_structural(path)
    as_data = redact_json(text, lambda v: redactor.text(v, where)) \
        if isinstance(text, str) and is_structural_json(path) else None
    if as_data is not None:
        text = as_data
    elif isinstance(text, str) and is_vocabulary(path):
        text = redactor.known_only(text.encode("utf-8"), where).decode("utf-8", "replace")
    elif isinstance(text, str):
        text = redactor.text(text, where)
    elif isinstance(text, RecordedError):
        text = _error(text, redactor, where)
    return replace(
        entry, text=text,
        realpath=(redactor.path(entry.realpath) if isinstance(entry.realpath, str)
                  else entry.realpath),
        listing=(tuple(redactor.path(n) for n in entry.listing)
                 if isinstance(entry.listing, tuple) else entry.listing),
        ranges=tuple(_range(r, redactor, where, structural) for r in entry.ranges))


def _range(record: RangeRecord, redactor: Redactor, where: str,
           structural: bool = False) -> RangeRecord:
    if record.data is not None and structural:
        return replace(record, data=redactor.known_only(record.data, where))
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
        if kind in ("secret-env", "withheld-env"):
            names = ", ".join(p.removeprefix("env ") for p in places)
            lines.append(f"{kind}: {counted(len(places), 'variable')}: {names}")
        else:
            shown = "; ".join(places[:3]) + ("; ..." if len(places) > 3 else "")
            lines.append(f"{kind}: {counted(len(places), 'place')}: {shown}")
    return lines
