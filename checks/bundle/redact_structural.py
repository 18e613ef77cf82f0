"""Structural files of a recording are data, never text to scan: pure functions, no I/O.

A checkpoint's safetensors headers, its shard index (`*.index.json`) and its JSON configs
(config.json, generation_config.json, tokenizer_config.json, ...) hold tensor names such as
`model.embed_tokens.weight`: read as text, `"...tokens.weight": "model-00001-..."` looks like a
secret assignment, and masking it rewrites the index (a replay then reports a healthy
checkpoint as corrupt, or skips what the live run failed). So:

- a JSON structural file is parsed and only its string *values* are redacted, each one alone
  (a key is never a secret's name here); a file whose values hold nothing secret is kept byte
  for byte, and one whose do is written back as JSON with those values masked;
- a safetensors byte range (the 8-byte length and the JSON header) and a tokenizer.json (its
  strings are tokens and merges) are masked only where a secret value learned elsewhere (an
  HF_TOKEN in the environment) appears, with masks of the same length so offsets and sizes
  stay true;
- neither is learned from: their strings never become "known secrets" masked elsewhere.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Callable, Iterable
from typing import Any

from probes.model.reader import CONFIG_FILE, GENERATION_CONFIG_FILE

# the model directory's JSON files (their names as the one model-directory reader spells them)
JSON_NAMES = frozenset({CONFIG_FILE, GENERATION_CONFIG_FILE, "tokenizer_config.json",
                        "special_tokens_map.json", "preprocessor_config.json",
                        "quant_model_description.json"})
# a vocabulary: every string is a token (`token`, `password`, merges like "token =abc"), never a
# setting; only secrets learned elsewhere are masked, at the same length (a replay builds the
# tokenizer from this text)
VOCABULARY_NAMES = frozenset({"tokenizer.json"})


def is_structural_json(path: str) -> bool:
    name = posixpath.basename(path)
    return name in JSON_NAMES or name.endswith(".index.json")


def is_vocabulary(path: str) -> bool:
    return posixpath.basename(path) in VOCABULARY_NAMES


def is_safetensors(path: str) -> bool:
    return posixpath.basename(path).endswith(".safetensors")


def is_structural(path: str) -> bool:
    return is_structural_json(path) or is_safetensors(path) or is_vocabulary(path)


def json_values(text: str) -> Iterable[str]:
    """The string values of a JSON document (keys left out); nothing when it is not JSON."""
    try:
        doc = json.loads(text)
    except ValueError:
        return
    pending = [doc]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, list):
            pending.extend(item)
        elif isinstance(item, dict):
            pending.extend(item.values())


def redact_json(text: str, redact_value: Callable[[str], str]) -> str | None:
    """`text` with each string value passed through `redact_value`: the text itself when
    nothing changed, the re-written JSON when something did; None when it is not JSON."""
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    changed = False

    def walk(item: Any) -> Any:
        nonlocal changed
        if isinstance(item, str):
            out = redact_value(item)
            changed = changed or out != item
            return out
        if isinstance(item, list):
            return [walk(v) for v in item]
        if isinstance(item, dict):
            return {k: walk(v) for k, v in item.items()}
        return item

    redacted = walk(doc)
    return json.dumps(redacted, indent=2, ensure_ascii=False) if changed else text
