"""JSON written by others, read with a size and a depth limit.

`json.loads` recurses once per nesting level: `[[[[...` a hundred thousand deep raises
RecursionError (not ValueError, so `except ValueError` misses it), and a document of
gigabytes is read whole. A lone surrogate (`"\\udc80"`) is valid JSON that no UTF-8 writer
can write back. Here the size is checked first, the nesting is measured by one linear scan
before the parse (strings skipped), and lone surrogates in the result become U+FFFD; every
refusal is a JSONLimitError (a ValueError) whose one line names the document.
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_JSON_BYTES = 16 * 1024 * 1024
# The deepest document the doctor reads by design (a docker inspect, a MindIE config, an
# OpenAI answer) nests under 10 levels; 64 leaves room and stays far from the recursion limit.
MAX_JSON_DEPTH = 64

_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_LONE = re.compile("[\ud800-\udfff]")


class JSONLimitError(ValueError):
    """Not read: too large, too deep, or not JSON. The message is one line."""


def depth(text: str, limit: int = MAX_JSON_DEPTH) -> int:
    """The nesting depth of `text`, counted up to `limit + 1` (scanning stops there)."""
    deepest = level = 0
    for match in _TOKENS.finditer(text):
        token = match.group()
        if token in "[{":
            level += 1
            if level > deepest:
                deepest = level
                if deepest > limit:
                    break
        elif token in "]}":
            level -= 1
    return deepest


def loads(data: str | bytes, what: str, max_bytes: int = MAX_JSON_BYTES,
          max_depth: int = MAX_JSON_DEPTH) -> Any:
    """The JSON value of `data`; JSONLimitError naming `what` when it is not read."""
    if len(data) > max_bytes:
        raise JSONLimitError(f"{what}: over {max_bytes:,} bytes of JSON: not read")
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    if depth(text, max_depth) > max_depth:
        raise JSONLimitError(f"{what}: JSON nested more than {max_depth} levels: not read")
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:
        from probes.textsafe import one_line

        raise JSONLimitError(f"{what}: not JSON ({one_line(str(exc))[:160]})") from None
    return _whole_text(value) if _SURROGATE_ESCAPE.search(text) else value


def _whole_text(value: Any) -> Any:
    """`value` with lone surrogates replaced (the depth is bounded, so recursion is too)."""
    if isinstance(value, str):
        return _LONE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_whole_text(v) for v in value]
    if isinstance(value, dict):
        return {_whole_text(k): _whole_text(v) for k, v in value.items()}
    return value
