"""Which tokenizer and chat template the serving engine will use: the target's `vllm serve`
command line read against the model directory (tokenizer.dtype; tokenizer.token-ids judges
the same tokenizer).

vLLM's flags (https://docs.vllm.ai/en/latest/cli/serve.html; vllm-project/vllm
vllm/engine/arg_utils.py):
- `--tokenizer NAME_OR_PATH`: the tokenizer; without it, the model's own name or path.
- `--tokenizer-mode`: auto, hf, slow, mistral, deepseek_v32 in current releases (custom in
  0.8.x); plugins may register more. `slow` asks transformers for the Python tokenizer,
  `mistral` for mistral_common's.
- `--chat-template`: a file the server opens (a relative path from its working directory);
  a value holding `{`, `}` or a newline that is no file is the template itself, with its
  backslash escapes decoded; any other value that cannot be opened stops the server at
  start ("looks like a file path, but it failed to be opened"; recent releases first try the
  name among their own bundled templates): vllm/entrypoints/chat_utils.py load_chat_template.
- `--trust-remote-code` / `--no-trust-remote-code`: whether the tokenizer's own Python code
  (tokenizer_config.json `auto_map`) may run; the last one given wins.
- `--generation-config`: "auto" (the default in current releases) reads
  generation_config.json from the model directory; "vllm" reads none; a folder reads it there.

A command line is applied only when the run judges the model that command line serves: a
`--model DIR` of another model keeps its own tokenizer, and the evidence says so.
"""

from __future__ import annotations

import codecs
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from checks.context import Context
from probes.errors import HostError, NotRecorded
from probes.textsafe import cut

JINJA_CHARS = "{}\n"  # vLLM's test for "the value is the template itself"
KNOWN_MODES = ("auto", "hf", "slow", "mistral", "deepseek_v32", "custom")


@dataclass(frozen=True)
class Served:
    """The tokenizer, mode, template and generation config the engine uses, and whence."""

    directory: Path  # where the tokenizer files are read (on the target's machine)
    directory_source: str  # "the model directory", "`--tokenizer X` on the command line"
    mode: str = "auto"
    mode_source: str = "vLLM's default"
    template_flag: str | None = None  # --chat-template as written
    trust_remote_code: bool = False
    generation_config: str = "auto"  # "auto", "vllm" or a folder
    command_line: bool = False  # a vLLM command line was read
    notes: tuple[str, ...] = ()  # what was seen and not applied, one line each


def served(ctx: Context, model_dir: Path) -> Served:
    """What the target's command line says about the tokenizer of `model_dir`."""
    args = _vllm_args(ctx)
    own = Served(model_dir, "the model directory")
    if args is None:
        return own
    serving = ctx.target.serving.model_dir
    if serving is None or Path(serving.value) != model_dir:
        where = serving.value if serving is not None else "a model not found"
        return Served(model_dir, "the model directory", notes=(
            f"the target's command line serves {where}, not {model_dir}: its tokenizer flags "
            "are not applied",))
    return _from_args(ctx, args, model_dir)


def _vllm_args(ctx: Context) -> tuple[str, ...] | None:
    proc = ctx.target.process
    if proc is None or ctx.target.serving.server != "vllm":
        return None
    from probes.target.argv import arguments

    return arguments(proc.cmdline)


def _last_switch(args: Sequence[str], on: str, off: str) -> bool:
    """Whether `on` was given after any `off` (argparse's BooleanOptionalAction)."""
    state = False
    for arg in args:
        name = arg.split("=", 1)[0].replace("_", "-")
        if name == on:
            state = True
        elif name == off:
            state = False
    return state


def _from_args(ctx: Context, args: Sequence[str], model_dir: Path) -> Served:
    from probes.target.argv import value_of

    notes: list[str] = []
    directory, source = model_dir, "the model directory"
    given = value_of(args, "--tokenizer")
    if given is not None:
        found, why = _tokenizer_dir(ctx, given)
        if found is None:
            notes.append(f"`--tokenizer {cut(given, 80)}`: {why}; the model directory's "
                         "tokenizer is judged instead")
        else:
            directory, source = Path(found), f"`--tokenizer {cut(given, 80)}` on the command line"
    mode = value_of(args, "--tokenizer-mode")
    return Served(
        directory, source, mode or "auto",
        f"`--tokenizer-mode {cut(mode, 40)}`" if mode else "vLLM's default",
        value_of(args, "--chat-template"),
        _last_switch(args, "--trust-remote-code", "--no-trust-remote-code"),
        value_of(args, "--generation-config") or "auto", True, tuple(notes))


def _tokenizer_dir(ctx: Context, given: str) -> tuple[str | None, str]:
    """The --tokenizer directory on the target's machine (a path, or a hub id in its cache)."""
    from probes.target.parts import Sourced
    from probes.target.serving import model_dir

    proc = ctx.target.process
    found, why = model_dir(ctx.host, Sourced(given, "--tokenizer"), _env(ctx),
                           proc.cwd if proc is not None else None)
    return (found.value, "") if found is not None else (None, why)


def _env(ctx: Context) -> Mapping[str, str]:
    if ctx.target.environment_unknown() is not None:
        return {}
    try:
        return dict(ctx.host.env)
    except NotRecorded:
        return {}


@dataclass(frozen=True)
class TemplateOverride:
    """What `--chat-template` gives the server: the template, or why the server cannot start."""

    text: str | None
    source: str  # "--chat-template /path (a file)" or "(the flag's own text)"
    problem: str = ""  # the server stops at start: fail
    unknown: str = ""  # not judged (a name vLLM may find among its bundled templates)


def chat_template_override(ctx: Context, flag: str) -> TemplateOverride:
    """Read `--chat-template` as vLLM does, through the target's files."""
    from checks.builtin.tokenizer_load import MAX_SMALL_FILE_BYTES, read_text, regular_file

    proc = ctx.target.process
    cwd = proc.cwd if proc is not None else None
    path = flag if flag.startswith("/") or not cwd else posixpath.join(cwd, flag)
    shown = f"`--chat-template {cut(flag, 80)}`"
    try:
        kind = ctx.host.kind(path)
    except HostError:
        kind = "missing"
    if kind == "file":
        refused = regular_file(ctx.host, Path(path), MAX_SMALL_FILE_BYTES)
        text = None if refused else read_text(ctx.host, Path(path))
        if text is None:
            return TemplateOverride(None, shown, f"{shown}: {path} was not read"
                                    + (f" ({refused})" if refused else ""))
        return TemplateOverride(text, f"{shown} ({path})")
    if any(c in flag for c in JINJA_CHARS):
        try:
            return TemplateOverride(codecs.decode(flag, "unicode_escape"),
                                    f"{shown} (the flag's own text)")
        except UnicodeDecodeError as exc:
            return TemplateOverride(None, shown, f"{shown}: its escapes do not decode ({exc})")
    if "/" not in flag:
        return TemplateOverride(None, shown, unknown=(
            f"{shown}: no such file in {cwd or 'its working directory'}; recent vLLM releases "
            "then look among their bundled templates, which are not in our data"))
    return TemplateOverride(None, shown, (
        f"{shown}: {path} is {'not a file' if kind != 'missing' else 'missing'}; vLLM stops "
        "at start (\"looks like a file path, but it failed to be opened\")"))


def whose_files(ctx: Context) -> str:
    """Whose files the tokenizer was read from, one line."""
    proc = ctx.target.process
    if proc is not None and proc.mount_ns == "other":
        return (f"files of process {proc.pid}'s container, read through {proc.files_root}")
    root = _root_of(ctx.host)
    return "files of this machine" if root in (None, "/") else f"files under --root {root}"


def _root_of(host: object) -> str | None:
    while not hasattr(host, "root") and hasattr(host, "inner"):
        host = host.inner
    root = getattr(host, "root", None)
    return root if isinstance(root, str) else None
