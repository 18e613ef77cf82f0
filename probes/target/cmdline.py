"""What a command line is: which program (past the interpreter), which known server, how it
reads to a person, and with secret-looking flag values masked. Pure.

Known servers: `vllm serve` (vllm-project/vllm `vllm/entrypoints/cli/serve.py`), `python -m
vllm.entrypoints...` (the OpenAI-compatible and plain API servers), MindIE's
`mindieservice_daemon` (and `mindie`), and `torchrun` / `python -m torch.distributed.run`
(PyTorch's elastic launcher).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Sequence

MINDIE_BINARIES = ("mindieservice_daemon", "mindie")
_PYTHON = re.compile(r"^python[0-9.]*$")


def base_name(arg: str) -> str:
    return posixpath.basename(arg)


def is_python(path: str) -> bool:
    """`python`, `python3`, `python3.11`: the names CPython installs itself under."""
    return bool(_PYTHON.match(base_name(path)))


def program_args(cmdline: Sequence[str]) -> tuple[str, tuple[str, ...]]:
    """(the program, its arguments): `python3 /venv/bin/vllm serve x` is vllm with
    `serve x`, `python -m vllm.entrypoints.openai.api_server --model x` is that module."""
    args = list(cmdline)
    if args and is_python(args[0]):
        rest = args[1:]
        while rest and rest[0].startswith("-") and rest[0] not in ("-m", "-c"):
            takes_value = rest[0] in ("-W", "-X", "--check-hash-based-pycs")
            rest = rest[2:] if takes_value else rest[1:]
        if len(rest) >= 2 and rest[0] == "-m":
            return rest[1], tuple(rest[2:])
        if rest and rest[0] != "-c":
            return rest[0], tuple(rest[1:])
        return args[0], tuple(rest)
    return (args[0], tuple(args[1:])) if args else ("", ())


SecretName = Callable[[str], bool]  # does a flag name look like it holds a secret?
MASK = "<redacted>"


def masked(cmdline: Sequence[str], is_secret: SecretName | None) -> tuple[str, ...]:
    """The command line with the values of secret-looking flags (`--api-key VALUE`,
    `--hf-token=VALUE`) replaced: a report shows it, and reports travel."""
    if is_secret is None:
        return tuple(cmdline)
    out = list(cmdline)
    for index, arg in enumerate(out):
        if not arg.startswith("-") or arg == MASK:
            continue
        name, sep, _ = arg.lstrip("-").partition("=")
        if not is_secret(name):
            continue
        if sep:
            out[index] = arg.split("=", 1)[0] + "=" + MASK
        elif index + 1 < len(out) and not out[index + 1].startswith("-"):
            out[index + 1] = MASK
    return tuple(out)


def display(cmdline: Sequence[str]) -> str:
    """The command as a person would type it: `vllm serve /models/m ...` rather than the
    interpreter running the `vllm` script."""
    if not cmdline:
        return ""
    program, args = program_args(cmdline)
    if is_python(cmdline[0]) and program != cmdline[0]:
        where = list(cmdline).index(program)
        head = f"python -m {program}" if cmdline[where - 1] == "-m" else base_name(program)
        return " ".join([head, *args])
    return " ".join(cmdline)


def server_kind(cmdline: Sequence[str]) -> str:
    """vllm, mindie, torchrun, or "" for a command line that is none of the known servers."""
    program, args = program_args(cmdline)
    name = base_name(program)
    if name == "vllm" and args[:1] == ("serve",):
        return "vllm"
    if program.startswith("vllm.entrypoints"):
        return "vllm"
    if name in MINDIE_BINARIES:
        return "mindie"
    if name == "torchrun" or program in ("torch.distributed.run", "torch.distributed.launch"):
        return "torchrun"
    return ""
