"""The neutraliser: outside text is shown, never obeyed."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from hypothesis import given
from hypothesis import strategies as st

from probes.textsafe import json_text, one_line, visible, xml_text


def test_escape_sequences_become_visible() -> None:
    assert visible("\x1b]0;pwned\x07") == "\\x1b]0;pwned\\x07"
    assert visible("a\x1b[2Jb") == "a\\x1b[2Jb"
    assert visible("\x9b31m") == "\\x9b31m"  # C1 CSI
    assert visible("\x7f") == "\\x7f"


def test_tab_and_newline_kept_except_in_one_line_fields() -> None:
    assert visible("a\tb\nc") == "a\tb\nc"
    assert one_line("a\tb\nc\rd") == "a\\tb\\nc\\x0dd"


def test_bidi_overrides_are_shown() -> None:
    assert visible("admin\u202egnp.exe") == "admin\\u202egnp.exe"


def test_plain_text_and_markup_unchanged() -> None:
    assert visible("910B4 [/x] 53444/ 65536 °C") == "910B4 [/x] 53444/ 65536 °C"


@given(st.text())
def test_no_control_survives(text: str) -> None:
    shown = one_line(text)
    assert not any(ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0 for ch in shown)


@given(st.text())
def test_xml_text_always_parses(text: str) -> None:
    element = ET.Element("failure", message=xml_text(text))
    element.text = xml_text(text)
    ET.fromstring(ET.tostring(element))


@given(st.recursive(st.text() | st.integers() | st.none(),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=10))
def test_json_text_is_the_same_value_with_nothing_to_obey(value: object) -> None:
    import json

    shown = json_text(json.dumps(value, ensure_ascii=False))
    assert json.loads(shown) == value
    assert not any((ord(ch) < 0x20 and ch != "\n") or 0x7F <= ord(ch) < 0xA0
                   or ch in "\u202e\u2066\u2028" for ch in shown)


def test_values_are_cut_to_a_budget_that_says_so() -> None:
    from probes.textsafe import cut, cut_lines

    assert cut("short", 10) == "short"
    long = "9" * 60_000_000  # a driver version of 60 MB, as a bundle can hold
    shown = cut(long, 400)
    assert len(shown) <= 400 and shown.endswith("characters)") and "+59,999,6" in shown
    lines = cut_lines(tuple(str(i) for i in range(1000)), max_lines=10, max_chars=5)
    assert len(lines) == 10 and lines[-1] == "…(+991 more lines)"

