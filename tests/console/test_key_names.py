"""Every screen's footer spells Esc and Ctrl keys as the main screen does ("Esc", "Ctrl+R"),
never Textual's "esc" or "^r"."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest
from textual.binding import Binding
from textual.screen import Screen

import console.ui.screens as screens


def screen_bindings() -> list[tuple[str, Binding]]:
    found = []
    for module_info in pkgutil.iter_modules(screens.__path__):
        module = importlib.import_module(f"{screens.__name__}.{module_info.name}")
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, Screen) and cls.__module__ == module.__name__:
                found += [(f"{module_info.name}.{name}", b) for b in cls.BINDINGS
                          if isinstance(b, Binding)]
    return found


@pytest.mark.parametrize(("where", "binding"), [
    (w, b) for w, b in screen_bindings() if b.show and (b.key == "escape"
                                                       or b.key.startswith("ctrl+"))])
def test_a_shown_esc_or_ctrl_key_is_spelled_for_people(where: str, binding: Binding) -> None:
    expected = "Esc" if binding.key == "escape" else "Ctrl+" + binding.key[5:].upper()
    assert binding.key_display == expected, f"{where}: {binding.key} shows as {binding.key_display}"


def test_the_screens_are_found() -> None:
    assert len({w for w, _ in screen_bindings()}) >= 5
