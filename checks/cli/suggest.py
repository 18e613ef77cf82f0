"""The "did you mean" of a mistyped option or command: argparse (Python 3.11) names what it did
not know, never what was meant. Loaded only on the error path: a bare run never imports it.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

_QUOTED = re.compile(r"'([^']*)'")
# words a newcomer tries for a command that has another name
_SYNONYMS = {"search": "playbooks", "find": "playbooks", "help": "--help", "logs": "triage"}


def hint(parser: Any, message: str) -> str:
    """` (did you mean --model?)` when `message` names an unknown option or command close to a
    known one; empty otherwise."""
    if message.startswith("unrecognized arguments:"):
        tokens = message.split(":", 1)[1].split()
        unknown = [token.split("=", 1)[0] for token in tokens if token.startswith("--")]
        known = sorted(_long_options(parser))
    elif "invalid choice:" in message and "(choose from" in message:
        named, _, choices = message.partition("(choose from")
        unknown = _QUOTED.findall(named)[-1:]
        known = _QUOTED.findall(choices)
    else:
        return ""
    for token in unknown:
        if token in _SYNONYMS and _SYNONYMS[token] in (*known, "--help"):
            return f" (did you mean {_SYNONYMS[token]}?)"
        close = difflib.get_close_matches(token, known, n=1, cutoff=0.6)
        if close:
            return f" (did you mean {close[0]}?)"
    return ""


def _long_options(parser: Any) -> set[str]:
    """Every --option of `parser` (an argparse parser: only the CLI's edge imports argparse)
    and of its sub-commands' parsers."""
    found: set[str] = set()
    for action in parser._actions:
        found.update(s for s in action.option_strings if s.startswith("--"))
        if isinstance(action.choices, dict):  # the sub-commands: name -> parser
            for sub in action.choices.values():
                found |= _long_options(sub)
    return found
