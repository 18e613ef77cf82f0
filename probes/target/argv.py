"""Reading a `vllm serve` command line past what ServingArgs keeps: switches, plain values and
the JSON of `--additional-config`, `--compilation-config` and `--speculative-config`. Pure.

vLLM's parser spells every flag both ways (`--max_model_len` is `--max-model-len`) and lets the
last occurrence win (https://docs.vllm.ai/en/latest/cli/serve.html); `probes.target.serving.flag`
already reads values that way, so this module reuses it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from probes.target.cmdline import program_args
from probes.target.serving import flag

MAX_JSON_CHARS = 64 * 1024  # a JSON flag longer than this is not parsed
# vLLM reads a bare number as the optimization level, not as JSON: "When it is a number
# (0, 1, 2, 3), it will be interpreted as the optimization level" (vllm-project/vllm
# vllm/engine/arg_utils.py, `--compilation-config, -O` help, as in the v0.7 line)
COMPILATION_LEVELS = ("0", "1", "2", "3")


@dataclass(frozen=True)
class JsonFlag:
    """A JSON-valued flag: its object, or why it could not be read; `written` as given."""

    name: str
    value: Mapping[str, Any] | None = None
    written: str = ""
    problem: str = ""


def arguments(cmdline: Sequence[str]) -> tuple[str, ...]:
    """The arguments after the program (`vllm`, or the module `python -m` runs)."""
    return program_args(cmdline)[1]


def has_switch(args: Sequence[str], name: str) -> bool:
    """Is the switch `--name` given (either spelling, without `=value`)?"""
    wanted = name.replace("_", "-")
    return any(a.startswith("--") and a.replace("_", "-") == wanted for a in args)


def value_of(args: Sequence[str], *names: str) -> str | None:
    """The value of the last `--name value` / `--name=value` among `names`."""
    found = flag(args, names)
    return found[0] if found is not None else None


def json_flag(args: Sequence[str], name: str) -> JsonFlag | None:
    """The JSON object of `--name '{...}'`; None when the flag is absent."""
    found = flag(args, [name])
    if found is None:
        return None
    text, written = found
    if name == "--compilation-config" and text.strip() in COMPILATION_LEVELS:
        return JsonFlag(name, {"level": int(text.strip())}, written)
    if len(text) > MAX_JSON_CHARS:
        return JsonFlag(name, written=written[:80], problem=f"over {MAX_JSON_CHARS} characters")
    try:
        value = json.loads(text)
    except ValueError as exc:
        return JsonFlag(name, written=written, problem=f"not JSON ({exc})")
    if not isinstance(value, dict):
        return JsonFlag(name, written=written, problem="not a JSON object")
    return JsonFlag(name, value, written)

