"""A function of ours run on outside input in a fresh interpreter with hard limits.

Some inputs are code (a chat template) or drive native code (a tokenizer's normalizer) in
ways no budget counted from Python can stop: `(10 ** 256) ** 256` is one C call holding the
GIL, `'%0999999999d' % 1` allocates a gigabyte before anything can look at it. Such work runs
here: in a new interpreter (safe to start from a process with threads, such as the console),
whose address space and CPU time the kernel caps (setrlimit RLIMIT_AS and RLIMIT_CPU, set
before the input is unpickled or used), under a wall-clock timeout that kills its process group
(probes.spawn). The argument goes in pickled on stdin (it is ours); the answer comes back as JSON on
stdout (the child ran someone else's code, so its words are data, never objects).
"""

from __future__ import annotations

import json
import os
import pickle
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from probes.spawn import Started

PROJECT_ROOT = str(Path(__file__).resolve().parent.parent)
MARK = "@@limited@@"

# The child imports its module (and what `preload` names, and runs the module's `warm_up`
# when it has one) as soon as it starts, then waits
# for one line of limits and the pickled call on stdin: a caller may start it early, while
# it has other work, and hand the call over later. End of input before the call: nothing
# was wanted, it exits quietly. The limits are set before the call is unpickled or run.
_CHILD = f"""
import importlib, importlib.util, json, pickle, resource, sys
source, preload = sys.argv[1], sys.argv[2]
sys.path.insert(0, sys.argv[3])
sys.path.extend(sys.argv[4:])
if source.endswith(".py"):  # one file, without the package around it
    spec = importlib.util.spec_from_file_location("limited_entry", source)
    module = importlib.util.module_from_spec(spec)
    sys.modules["limited_entry"] = module
    spec.loader.exec_module(module)
else:
    module = importlib.import_module(source)
for name in filter(None, preload.split(",")):
    importlib.import_module(name)
if hasattr(module, "warm_up"):  # what the first call would otherwise do on the clock
    module.warm_up()
header = sys.stdin.buffer.readline().split()
if not header:
    sys.exit(0)
memory, cpu_s = int(header[0]), int(header[1])
resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
function, argument = pickle.loads(sys.stdin.buffer.read())
value = getattr(module, function)(argument)
sys.stdout.write({MARK!r} + json.dumps(value))
sys.stdout.flush()
import os
os._exit(0)  # the answer is out: no finalization of every module on the caller's clock
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


def start_limited(source: str, preload: Sequence[str] = (),
                  without_site: Sequence[str] = ()) -> Started:
    """A limited child that imports `source` (a module name, or a .py file loaded alone,
    without its package) and `preload`, then waits for finish_limited. The caller owns it:
    finish_limited or `.discard()` it. `without_site`: top-level packages it needs from
    site-packages; when this interpreter finds them all, the child starts without `site`
    (-S: a few milliseconds) and is given just their directories."""
    from probes.spawn import start

    folders = _folders_of(without_site) if without_site else None
    flags = ("-I", "-S") if folders is not None else ("-I",)
    argv = (sys.executable, *flags, "-c", _CHILD, source, ",".join(preload), PROJECT_ROOT,
            *(folders or ()))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    return start(argv, env, with_input=True)


def _folders_of(packages: Sequence[str]) -> tuple[str, ...] | None:
    """The sys.path folders that hold these top-level packages; None when one is not found
    as a plain folder (a zip, a custom finder: then the child uses `site` as usual)."""
    found: list[str] = []
    for name in packages:
        folder = next((p for p in sys.path if p and os.path.isdir(os.path.join(p, name))),
                      None)
        if folder is None:
            return None
        if folder not in found:
            found.append(folder)
    return tuple(found)


def finish_limited(started: Started, function: str, argument: Any,
                   limits: Limits | None = None) -> Any:
    """`function(argument)` of the module `started` imported, within `limits`; its JSON
    answer. Raises LimitedError; pickling errors of `argument` are raised as they are (the
    child is ended then)."""
    limits = limits or Limits()
    try:
        call = pickle.dumps((function, argument))
    except BaseException:
        started.discard()
        raise
    header = f"{limits.memory_bytes} {limits.cpu_s}\n".encode()
    result = started.finish(limits.wall_s, limits.answer_bytes, header + call)
    return _answer(result, limits)


def run_limited(module: str, function: str, argument: Any, limits: Limits | None = None,
                on_start: Callable[[], None] | None = None) -> Any:
    """`module.function(argument)` in a limited child; its JSON answer. Raises LimitedError.
    `on_start`: called once the child runs (probes.spawn)."""
    started = start_limited(module)
    if on_start is not None:
        on_start()
    return finish_limited(started, function, argument, limits)


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
