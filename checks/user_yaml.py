"""YAML files written by users (`--policy`, `--baseline`), read with bounds.

A policy or a baseline is a small, flat document. PyYAML's safe loader still lets a few hundred
bytes expand into gigabytes (aliases of aliases), recurse until RecursionError (deep nesting),
and raise plain Python errors for a date that does not exist or an integer of thousands of
digits. Here the file is read whole up to a size, must be UTF-8, may not use anchors or
aliases, may not nest deeper than a few levels, and dates stay text (the caller parses them
and names the key). Every problem is one `UserYamlError` line; callers add the file name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

# project defaults: the built-in policy is 4 KB and a baseline a few KB; a file a hundred times
# that is not one of them
MAX_BYTES = 1024 * 1024
MAX_DEPTH = 16
MAX_INT_DIGITS = 30  # longer integers stay text, so the caller names the key that holds one


class UserYamlError(Exception):
    """The file cannot be read as a bounded YAML document; the message is one line."""


def load_user_yaml(path: Path, max_bytes: int = MAX_BYTES) -> Any:
    """The document in `path`. Raises OSError (callers name it) or UserYamlError."""
    import yaml  # only a user's file needs it

    with open(path, "rb") as fh:
        raw = fh.read(max_bytes + 1)
    if len(raw) > max_bytes:
        raise UserYamlError(f"larger than {max_bytes // 1024} KiB; this is not a policy or "
                            "baseline file")
    try:
        text = raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise UserYamlError(f"not UTF-8 text (byte {exc.start}); save the file as UTF-8") from None
    try:
        return yaml.load(text, Loader=_loader())  # a SafeLoader subclass
    except UserYamlError:
        raise
    except yaml.YAMLError as exc:
        raise UserYamlError(f"not valid YAML ({_first_line(exc)})") from None
    except (ValueError, OverflowError, RecursionError) as exc:
        raise UserYamlError(f"not valid YAML ({type(exc).__name__}: {_first_line(exc)})") from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return " ".join(text.splitlines()[:1])[:200] if text else type(exc).__name__


_LOADER: Any = None


def _loader() -> Any:
    global _LOADER
    if _LOADER is None:
        _LOADER = _make_loader()
    return _LOADER


def _make_loader() -> Any:
    import yaml

    class BoundedLoader(yaml.SafeLoader):
        def __init__(self, stream: str) -> None:
            super().__init__(stream)
            self.depth = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            event = self.peek_event()
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                raise UserYamlError(f"line {event.start_mark.line + 1}: YAML anchors and "
                                    "aliases (&name, *name) are not allowed here; write the "
                                    "values out")
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise UserYamlError(f"line {event.start_mark.line + 1}: nested deeper than "
                                    f"{MAX_DEPTH} levels")
            try:
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

        def construct_yaml_int(self, node: Any) -> Any:
            digits = sum(ch.isdigit() for ch in str(node.value))
            if digits > MAX_INT_DIGITS:
                return str(node.value)
            return super().construct_yaml_int(node)

    BoundedLoader.add_constructor("tag:yaml.org,2002:int", BoundedLoader.construct_yaml_int)
    # dates stay text: the caller parses them and can say which key holds a bad one
    BoundedLoader.yaml_implicit_resolvers = {
        first: [(tag, regex) for tag, regex in resolvers
                if tag != "tag:yaml.org,2002:timestamp"]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    return BoundedLoader
