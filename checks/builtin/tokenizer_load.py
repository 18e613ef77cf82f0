"""The tokenizer files of a model directory, and the tokenizer they make, loaded once per run.

`tokenizer.json` is read with the `tokenizers` library directly (what transformers' fast
tokenizers wrap), which takes a tenth of a second; transformers is imported only for a model
that ships no `tokenizer.json` (vocab.json + merges.txt, tokenizer.model, ...). Both give
the checks one small interface: size, added ids, token lookup both ways, encode.

Every file is read through the one model-directory reader (probes.model.reader: bounded reads
of regular files through the Host), and only when it is a regular file below a size limit: a
tokenizer file that is a FIFO, a device or a multi-gigabyte blob is reported, never read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from probes.errors import HostError, NotRecorded
from probes.host import Host
from probes.textsafe import one_line

MAX_TOKENIZER_JSON_BYTES = 512 * 1024 * 1024  # the largest real ones are tens of MB
MAX_SMALL_FILE_BYTES = 32 * 1024 * 1024  # config files, chat templates

# Files that hold a vocabulary, in the sets transformers loads them from.
VOCABULARY_SETS: tuple[tuple[str, ...], ...] = (
    ("tokenizer.json",), ("vocab.json", "merges.txt"), ("tokenizer.model",), ("vocab.txt",),
)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt",
                   "tokenizer.model", "vocab.txt")
SPECIAL_TOKEN_KEYS = ("bos_token", "eos_token", "pad_token", "unk_token")


class TokenizerUnavailable(Exception):
    """Why no tokenizer could be examined; the checks turn it into a skip or a warn.
    `detail`: the library's own one-line error, when one caused it."""

    def __init__(self, reason: str, status: str = "skip", detail: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status
        self.detail = detail

    def __reduce__(self) -> tuple[type[TokenizerUnavailable], tuple[str, str, str]]:
        # kept whole when it comes back from a child process (checks.builtin.tokenizer)
        return TokenizerUnavailable, (self.reason, self.status, self.detail)


# -- reading files ------------------------------------------------------------------------


def regular_file(host: Host, path: Path, max_bytes: int) -> str:
    """"" when `path` is a regular file of at most `max_bytes`, else why it is not read."""
    try:
        kind = host.kind(str(path))
        if kind != "file":
            return "" if kind == "missing" else f"{path} is not a regular file"
        size = host.file_size(str(path))
    except NotRecorded:
        raise
    except HostError as exc:
        return f"{path}: {exc.reason}"
    return f"{path} is {size:,} bytes, over the {max_bytes:,} read" if size > max_bytes else ""


def read_json(host: Host, path: Path, max_bytes: int = MAX_SMALL_FILE_BYTES) -> dict[str, Any]:
    """A JSON object file, or {} when it is absent, not a regular file, too big or not JSON."""
    from probes.model.reader import CheckpointError
    from probes.model.reader import read_json as read_bounded

    if regular_file(host, path, max_bytes) or not host.exists(str(path)):
        return {}
    try:
        document = read_bounded(host, str(path), max_bytes)
    except (CheckpointError, HostError):
        return {}
    return document if isinstance(document, dict) else {}


def read_text(host: Host, path: Path) -> str | None:
    """A UTF-8 text file below MAX_SMALL_FILE_BYTES, or None (absent, not regular, unreadable)."""
    from probes.model.reader import CheckpointError, read_limited

    if regular_file(host, path, MAX_SMALL_FILE_BYTES) or not host.exists(str(path)):
        return None
    try:
        return read_limited(host, str(path), MAX_SMALL_FILE_BYTES).decode("utf-8")
    except (CheckpointError, HostError, ValueError):
        return None


def token_text(value: Any) -> str | None:
    """A special token as tokenizer_config.json writes it: a string or {"content": ...}."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and isinstance(value.get("content"), str):
        return str(value["content"])
    return None


@dataclass(frozen=True)
class TokenizerFiles:
    """What a model directory holds for its tokenizer, and the model's configs the checks
    compare it with (as written; {} when absent or unreadable)."""

    directory: Path
    present: tuple[str, ...]  # names of TOKENIZER_FILES (and *.tiktoken) that are there
    config: Mapping[str, Any] = field(default_factory=dict)  # tokenizer_config.json
    chat_template: str | None = None
    template_source: str = ""  # the file the chat template came from
    model_config: Mapping[str, Any] = field(default_factory=dict)  # config.json
    generation_config: Mapping[str, Any] = field(default_factory=dict)
    # the model directory's own template, when --chat-template replaced it (the thinking rule)
    replaced_template: str | None = None
    # tokenizer.json as the run's host read it (a bundle records it, a replay loads it), left
    # undecoded until the tokenizer is built (in prefetch's child, off the run's main thread);
    # None: absent, or over the host's read cap, then opened where it lies on this machine
    tokenizer_json: bytes | None = field(default=None, repr=False, compare=False)

    @property
    def has_vocabulary(self) -> bool:
        return any(all(n in self.present for n in group) for group in VOCABULARY_SETS) or \
            any(n.endswith(".tiktoken") for n in self.present)

    def missing_vocabulary(self) -> str:
        """What a partial copy lacks, said for a person; "" when a vocabulary is there."""
        if self.has_vocabulary:
            return ""
        have = ", ".join(self.present) or "no tokenizer file"
        wanted = ", ".join(" + ".join(group) for group in VOCABULARY_SETS)
        return f"{self.directory} has {have} but none of {wanted} or *.tiktoken"

    def special_tokens(self) -> dict[str, str]:
        found = {key: token_text(self.config.get(key)) for key in SPECIAL_TOKEN_KEYS}
        return {key: value for key, value in found.items() if value is not None}


def _chat_template(host: Host, directory: Path,
                   config: Mapping[str, Any]) -> tuple[str | None, str]:
    """The chat template and its file: chat_template.jinja, chat_template.json, then
    tokenizer_config.json (a string, or a list of named templates: "default")."""
    jinja = read_text(host, directory / "chat_template.jinja")
    if jinja is not None:
        return jinja, "chat_template.jinja"
    for document, name in ((read_json(host, directory / "chat_template.json"),
                            "chat_template.json"),
                           (config, "tokenizer_config.json")):
        value = document.get("chat_template")
        if isinstance(value, list):
            named = {str(t.get("name")): t.get("template") for t in value
                     if isinstance(t, Mapping)}
            value = named.get("default")
        if isinstance(value, str):
            return value, name
    return None, ""


def tokenizer_files(directory: Path, host: Host,
                    model_dir: Path | None = None) -> TokenizerFiles:
    """The tokenizer files of `directory`, with config.json and generation_config.json of
    `model_dir` (the same directory when None: a --tokenizer elsewhere keeps the model's)."""
    from probes.model.reader import CONFIG_FILE, GENERATION_CONFIG_FILE

    configs = directory if model_dir is None else model_dir

    try:
        names = sorted(host.list_dir(str(directory)))
    except NotRecorded:
        raise
    except HostError:
        names = []
    present = tuple(n for n in names if n in TOKENIZER_FILES or n.endswith(".tiktoken"))
    config = read_json(host, directory / "tokenizer_config.json")
    template, source = _chat_template(host, directory, config)
    return TokenizerFiles(directory, present, config, template, source,
                          read_json(host, configs / CONFIG_FILE),
                          read_json(host, configs / GENERATION_CONFIG_FILE),
                          tokenizer_json=_tokenizer_json(host, directory, present))


def _tokenizer_json(host: Host, directory: Path, present: tuple[str, ...]) -> bytes | None:
    """tokenizer.json read through the run's host, so that a bundle being recorded keeps it
    and its replay builds the same tokenizer; None when absent, not a regular file, not
    recorded, or over the host's read cap."""
    path = directory / "tokenizer.json"
    if "tokenizer.json" not in present or regular_file(host, path, MAX_TOKENIZER_JSON_BYTES):
        return None
    try:
        return host.read_bytes(str(path))
    except HostError:  # NotRecorded is a HostError
        return None


# -- the loaded tokenizer -----------------------------------------------------------------


class Loaded(Protocol):
    """The interface the checks use; `library` names what loaded it, with its version."""

    library: str
    files: TokenizerFiles

    def size(self) -> int: ...
    def added_ids(self) -> frozenset[int]: ...
    def token_id(self, token: str) -> int | None: ...
    def encode(self, text: str) -> list[int]: ...
    def id_to_token(self, token_id: int) -> str | None: ...


class FastFile:
    """tokenizer.json through the `tokenizers` library."""

    def __init__(self, tokenizer: Any, files: TokenizerFiles, version: str) -> None:
        self._tok = tokenizer
        self.files = files
        self.library = f"tokenizers {version}"

    def size(self) -> int:
        return int(self._tok.get_vocab_size(with_added_tokens=True))

    def added_ids(self) -> frozenset[int]:
        return frozenset(int(i) for i in self._tok.get_added_tokens_decoder())

    def token_id(self, token: str) -> int | None:
        found = self._tok.token_to_id(token)
        return None if found is None else int(found)

    def encode(self, text: str) -> list[int]:
        return [int(i) for i in self._tok.encode(text, add_special_tokens=False).ids]

    def id_to_token(self, token_id: int) -> str | None:
        found = self._tok.id_to_token(token_id)
        return None if found is None else str(found)


class Transformers:
    """Any other tokenizer files, through transformers' AutoTokenizer."""

    def __init__(self, tokenizer: Any, files: TokenizerFiles, version: str) -> None:
        self._tok = tokenizer
        self.files = files
        self.library = f"transformers {version}"

    def size(self) -> int:
        return len(self._tok)

    def added_ids(self) -> frozenset[int]:
        added = {int(i) for i in getattr(self._tok, "added_tokens_decoder", {})}
        special = {int(i) for i in getattr(self._tok, "all_special_ids", []) if i is not None}
        return frozenset(added | special)

    def token_id(self, token: str) -> int | None:
        return int(self._tok.convert_tokens_to_ids(token)) if token in self._tok.get_vocab() \
            else None

    def encode(self, text: str) -> list[int]:
        return [int(i) for i in self._tok.encode(text, add_special_tokens=False)]

    def id_to_token(self, token_id: int) -> str | None:
        if not 0 <= token_id < len(self._tok):
            return None
        found = self._tok.convert_ids_to_tokens(token_id)
        return None if found is None else str(found)


def _version(module: Any) -> str:
    """The module's own __version__ (a metadata lookup scans every installed package)."""
    return str(getattr(module, "__version__", "(version unknown)"))


def local_path(host: Host, path: Path) -> str | None:
    """Where this process opens the observed `path`: the same path on this machine's `/`, or
    below the root a LiveHost reads (a --root tree, a container's /proc/PID/root; symlinks
    resolved inside it). None for a recording: it holds the files a run read, not a directory
    another library could open (tokenizer.json is built from its recorded text instead)."""
    from probes.live import LiveHost
    from probes.recording.overlay import ModelOverlay

    inner: object = host.answering(str(path)) if isinstance(host, ModelOverlay) else host
    while not isinstance(inner, LiveHost) and hasattr(inner, "inner"):
        inner = inner.inner
    if not isinstance(inner, LiveHost):
        return None
    try:
        return inner.host_path(str(path))
    except Exception:  # not resolvable under the root: not loadable
        return None


def _opened(host: Host, path: Path) -> str:
    found = local_path(host, path)
    if found is None:
        raise TokenizerUnavailable(f"{path}: not on this machine (a recording holds the files "
                                   "a run read; only a tokenizer.json is built from them)")
    return found


def load(directory: Path, host: Host) -> Loaded:
    """The tokenizer of a model directory on this machine (`host` reads its own `/`).
    Raises TokenizerUnavailable."""
    return load_files(tokenizer_files(directory, host), host)


def load_files(files: TokenizerFiles, host: Host) -> Loaded:
    """The tokenizer those files make (tokenizer_files read them). Raises
    TokenizerUnavailable."""
    if not files.present:
        raise TokenizerUnavailable(
            f"no tokenizer files in {files.directory} (looked for "
            f"{', '.join(TOKENIZER_FILES)})", status="warn")
    if "tokenizer.json" in files.present:
        return _load_fast(files, host)
    return _load_transformers(files, host)


def _load_fast(files: TokenizerFiles, host: Host) -> Loaded:
    path = files.directory / "tokenizer.json"
    refused = regular_file(host, path, MAX_TOKENIZER_JSON_BYTES)
    if refused:
        raise TokenizerUnavailable(f"tokenizer.json not read: {refused}", status="warn")
    try:
        import tokenizers
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise TokenizerUnavailable(f"the tokenizers library is not installed ({exc})") from exc
    text = _decoded(files.tokenizer_json)
    try:
        if text is not None:
            tokenizer = Tokenizer.from_str(text)
        else:
            tokenizer = Tokenizer.from_file(_opened(host, path))
    except TokenizerUnavailable:
        raise
    except Exception as exc:
        raise TokenizerUnavailable(
            f"cannot load a tokenizer from {path}: {type(exc).__name__}: {one_line(str(exc))}",
            status="warn", detail=one_line(str(exc))) from exc
    return FastFile(tokenizer, files, _version(tokenizers))


def _decoded(data: bytes | None) -> str | None:
    """tokenizer.json's text; None when it is not UTF-8 (then opened where it lies, and the
    library says what is wrong with it)."""
    try:
        return None if data is None else data.decode("utf-8")
    except ValueError:
        return None


def _load_transformers(files: TokenizerFiles, host: Host) -> Loaded:
    for name in files.present:
        refused = regular_file(host, files.directory / name, MAX_TOKENIZER_JSON_BYTES)
        if refused:
            raise TokenizerUnavailable(f"{name} not read: {refused}", status="warn")
    try:
        import transformers
        from transformers import AutoTokenizer
    except ImportError as exc:
        raise TokenizerUnavailable(f"transformers is not installed ({exc})") from exc
    opened = _opened(host, files.directory)
    try:
        tokenizer = AutoTokenizer.from_pretrained(opened, local_files_only=True)
    except Exception as exc:
        raise TokenizerUnavailable(
            f"cannot load a tokenizer from {files.directory}: {type(exc).__name__}: "
            f"{one_line(str(exc))}",
            status="warn", detail=one_line(str(exc))) from exc
    return Transformers(tokenizer, files, _version(transformers))
