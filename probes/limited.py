"""A function of ours run on outside input in a fresh interpreter with hard limits.

Some inputs are code (a chat template) or drive native code (a tokenizer's normalizer) in
ways no budget counted from Python can stop: `(10 ** 256) ** 256` is one C call holding the
GIL, `'%0999999999d' % 1` allocates a gigabyte before anything can look at it. Such work runs
here: in a new interpreter (safe to start from a process with threads, such as the console),
whose address space and CPU time the kernel caps (setrlimit RLIMIT_AS and RLIMIT_CPU, set
before the input is read), under a wall-clock timeout that kills its process group
(probes.spawn). The argument goes in pickled (it is ours); the answer comes back as JSON on
stdout (the child ran someone else's code, so its words are data, never objects).
"""

from __future__ import annotations

import json
import os
import pickle
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

PROJECT_ROOT = str(Path(__file__).resolve().parent.parent)
MARK = "@@limited@@"

_CHILD = f"""
import json, pickle, resource, sys
memory, cpu_s, root, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
sys.path.insert(0, root)
with open(path, "rb") as handle:
    module, function, argument = pickle.load(handle)
import importlib
value = getattr(importlib.import_module(module), function)(argument)
sys.stdout.write({MARK!r} + json.dumps(value))
"""


class LimitedError(Exception):
    """The child gave no answer: a limit ended it, or it failed. One line."""


@dataclass(frozen=True)
class Limits:
    """What the child may take: address space, CPU seconds, wall seconds, bytes of answer."""

    # a chat template renders in milliseconds and the interpreter starts in a fraction of a
    # second of CPU: 3 s of CPU and 8 s of wall time leave room on a loaded machine
    memory_bytes: int = 256 * 1024 * 1024
    cpu_s: int = 3
    wall_s: float = 8.0
    answer_bytes: int = 8 * 1024 * 1024


def run_limited(module: str, function: str, argument: Any, limits: Limits | None = None,
                on_start: Callable[[], None] | None = None) -> Any:
    """`module.function(argument)` in a limited child; its JSON answer. Raises LimitedError.
    `on_start`: called once the child runs (probes.spawn)."""
    from probes.spawn import spawn

    limits = limits or Limits()
    with tempfile.NamedTemporaryFile("wb", suffix=".pickle", delete=False) as handle:
        pickle.dump((module, function, argument), handle)
    try:
        argv = (sys.executable, "-I", "-c", _CHILD, str(limits.memory_bytes),
                str(limits.cpu_s), PROJECT_ROOT, handle.name)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        result = spawn(argv, limits.wall_s, env, max_output_bytes=limits.answer_bytes,
                       on_start=on_start)
    finally:
        os.unlink(handle.name)
    return _answer(result, limits)


def _answer(result: Any, limits: Limits) -> Any:
    from probes.textsafe import one_line

    out = result.stdout
    if result.outcome == "timeout":
        raise LimitedError(f"more than {limits.wall_s:g} s")
    if result.outcome == "output_limit":
        raise LimitedError(f"an answer of more than {limits.answer_bytes:,} bytes")
    if result.ok and MARK in out:
        try:
            return json.loads(out[out.index(MARK) + len(MARK):])
        except ValueError:
            raise LimitedError("an unreadable answer") from None
    code = result.exit_code
    if code is not None and code < 0 and -code in (24, 9):  # SIGXCPU, SIGKILL at the hard cap
        raise LimitedError(f"more than {limits.cpu_s} s of CPU")
    if "MemoryError" in result.stderr:
        raise LimitedError(f"more than {limits.memory_bytes >> 20} MiB of memory")
    last = (result.stderr.strip().splitlines() or [result.error or "no answer"])[-1]
    raise LimitedError(one_line(last)[:200])
