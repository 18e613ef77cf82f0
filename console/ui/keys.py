"""Key names as people read them ("Esc", "/", "?", "Ctrl+S", "F2"), for the help screen and
the footer; Textual's own names ("escape", "slash", "question_mark") are for bindings."""

from __future__ import annotations

from collections.abc import Iterable

from textual.binding import Binding, BindingType
from textual.keys import format_key

_NAMED = {"escape": "Esc", "enter": "Enter", "tab": "Tab", "space": "Space",
          "up": "↑", "down": "↓", "left": "←", "right": "→"}


def key_label(key: str) -> str:
    """One key or chord in its printed form: "ctrl+s" -> "Ctrl+S", "slash" -> "/"."""
    *modifiers, last = key.split("+")
    if last in _NAMED:
        name = _NAMED[last]
    elif last.startswith("f") and last[1:].isdigit():
        name = last.upper()
    else:
        name = format_key(last)
        if modifiers and len(name) == 1:
            name = name.upper()
    return "+".join([m.capitalize() for m in modifiers] + [name])


def binding_keys(binding: Binding) -> str:
    """Every key of a binding ("f1,question_mark" -> "F1 ?")."""
    return " ".join(key_label(k.strip()) for k in binding.key.split(","))


def key_rows(bindings: Iterable[BindingType]) -> list[tuple[str, str]]:
    """(keys, what they do) per action, the keys of one action together; what they do is the
    binding's tooltip (the longer text) where it has one, else its footer description."""
    rows: dict[str, tuple[list[str], str]] = {}
    for binding in bindings:
        if not isinstance(binding, Binding):
            continue
        said = binding.tooltip or binding.description or binding.action
        rows.setdefault(binding.action, ([], said))[0].append(binding_keys(binding))
    return [(" ".join(keys), description) for keys, description in rows.values()]
