"""The transformers tokenizer next to a model's weights, for `Engine.load`.

When tokenizer_config.json has no `added_tokens_decoder` (transformers 5's `save_pretrained`
writes none), transformers' `_from_pretrained` reads tokenizer.json with Python's json module
only to take its "added_tokens" array, and then the tokenizers library parses the same file
again in Rust: for a 3.5 MB tokenizer.json that first parse took 0.1-0.2 s holding the GIL,
while the weights loaded beside it. Where that is the only legacy file it would read (no
special_tokens_map.json, no added_tokens.json), the array is read here, stopping at it, and
passed as `added_tokens_decoder`: the branch transformers takes when the config holds it,
with the same tokens (transformers/tokenization_utils_base.py, `_from_pretrained`, 5.x).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engine.errors import ModelFormatError

_SPACE = re.compile(r"[ \t\n\r]*")
_LEGACY_FILES = ("special_tokens_map.json", "added_tokens.json")
MAX_CONFIG_BYTES = 16 << 20


def load_tokenizer(path: Path, files: Sequence[str], required: bool) -> Any:
    """The transformers tokenizer next to the weights (HF dir or the .gguf file itself);
    `files` are the tokenizer files the model-directory reader found."""
    from transformers import AutoTokenizer

    from probes.bounded import regular_file_problem
    from probes.model.reader import TOKENIZER_FILES

    directory = path.parent if path.suffix == ".gguf" else path
    for problem in filter(None, (regular_file_problem(str(directory / name))
                                 for name in TOKENIZER_FILES)):
        raise ModelFormatError(f"{problem}: the tokenizer is not loaded; replace it with the "
                               "real file")
    try:
        if path.suffix == ".gguf":
            return AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        if files:
            return AutoTokenizer.from_pretrained(str(path), local_files_only=True,
                                                 **added_tokens_kwargs(path))
    except Exception as exc:
        raise ModelFormatError(f"{path}: the tokenizer failed to load "
                               f"({type(exc).__name__}: {exc}); re-download the tokenizer "
                               "files") from None
    if required:
        raise ModelFormatError(f"{path}: no tokenizer files (tokenizer.json, "
                               "tokenizer_config.json, vocab.json, ...); copy them next to the "
                               "weights, or pass require_tokenizer=False")
    return None


def added_tokens_kwargs(directory: Path) -> dict[str, Any]:
    """{"added_tokens_decoder": {id: token fields}} read from tokenizer.json, where
    transformers would otherwise parse the whole file for it; {} wherever it would not (or
    anything is unexpected: transformers then reads the files itself)."""
    if any((directory / name).exists() for name in _LEGACY_FILES):
        return {}
    config_file, tokens_file = directory / "tokenizer_config.json", directory / "tokenizer.json"
    try:
        if not tokens_file.is_file() or not config_file.is_file() \
                or config_file.stat().st_size > MAX_CONFIG_BYTES:
            return {}
        config = json.loads(config_file.read_text(encoding="utf-8"))
        if not isinstance(config, dict) or "added_tokens_decoder" in config:
            return {}
        tokens = top_level_value(tokens_file.read_text(encoding="utf-8"), "added_tokens")
    except (OSError, UnicodeDecodeError, ValueError):
        return {}
    if not isinstance(tokens, list):
        return {}
    decoder: dict[int, dict[str, Any]] = {}
    for token in tokens:
        if not isinstance(token, dict) or not isinstance(token.get("id"), int):
            return {}
        fields = dict(token)
        decoder[fields.pop("id")] = fields
    return {"added_tokens_decoder": decoder}


def top_level_value(text: str, key: str) -> Any:
    """The value of `key` in the JSON object `text`, parsing the members before it and none
    after it (tokenizers writes "added_tokens" before the large "model"). Raises ValueError
    when the text is not such an object or has no such member."""
    decoder = json.JSONDecoder()
    at = _skip(text, 0)
    if text[at:at + 1] != "{":
        raise ValueError("not a JSON object")
    at += 1
    while True:
        at = _skip(text, at)
        if text[at:at + 1] != '"':
            raise ValueError(f"no member {key!r}")
        name, at = decoder.raw_decode(text, at)
        at = _skip(text, at)
        if text[at:at + 1] != ":":
            raise ValueError("a member without ':'")
        value, at = decoder.raw_decode(text, _skip(text, at + 1))
        if name == key:
            return value
        at = _skip(text, at)
        if text[at:at + 1] != ",":
            raise ValueError(f"no member {key!r}")
        at += 1


def _skip(text: str, at: int) -> int:
    match = _SPACE.match(text, at)
    return match.end() if match else at
