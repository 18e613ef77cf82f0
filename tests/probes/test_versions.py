from __future__ import annotations

import contextlib
import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from probes.errors import ParseError
from probes.versions import (
    LINE_FINAL,
    LINE_RC,
    LINE_T,
    AscendVersion,
    parse_version,
    same_release,
    torch_base,
    try_parse_version,
)


def _assert_chain(chain: list[str]) -> None:
    parsed = [parse_version(s) for s in chain]
    for lo, hi in itertools.pairwise(parsed):
        assert lo < hi, f"{lo.raw} < {hi.raw}"
        assert hi > lo
        assert lo != hi
    assert sorted(reversed(parsed)) == parsed


EVERY_FORM = [
    "8.0.RC2", "8.1.RC1", "8.0.T6", "8.1.RC1.alpha001", "8.5.0.alpha001", "8.0.RC1.beta1",
    "8.5.0", "9.0.0-beta.1", "9.0.0.rc1", "24.1.rc2.2", "25.0.rc1.b010", "23.0.rc3",
    "24.1.RC2", "25.0.rc1.1", "26.1.0.b083", "24.1.0.1", "7.1.0.11.220", "2.5.1.post1",
    "2.1.0.post8.dev20241009", "2.9.0.post1+git4c901a4", "2.10.0+cpu", "2.1.RC2.B080",
    "2.0.T3.B010", "v0.11.0rc3", "1.0.27.alpha", "6.0.rc1.2", "7.7.T20.0.B210",
    "8.0.T63.B020", "9.0.0-rc.1", "2.7.1.dev20250724", "0.9.1",
]


@pytest.mark.parametrize("text", EVERY_FORM)
def test_every_documented_form_parses_and_keeps_raw(text: str) -> None:
    v = parse_version(text)
    assert v.raw == text
    assert str(v) == text


@pytest.mark.parametrize(
    "text",
    ["", "  ", "abc", "8", "V100R001C21SPC001B238", "8.0.", "8..0", "8.0.RC1 x", "1.0+",
     "1.0+bad label", "8.0.RC1.alpha1.beta1", "8.0.zz1", "1.0.post1.post2", "1" + "0" * 40 + ".1"],
)
def test_non_versions_raise_parse_error(text: str) -> None:
    with pytest.raises(ParseError):
        parse_version(text)
    assert try_parse_version(text) is None


def test_try_parse_none() -> None:
    assert try_parse_version(None) is None


def test_compat_yaml_cann_chain() -> None:
    _assert_chain([
        "7.0.RC1", "7.0.0", "7.0.1", "8.0.RC1", "8.0.RC2", "8.0.RC3", "8.0.0", "8.1.RC1",
        "8.2.RC1", "8.3.RC1", "8.3.RC2", "8.5.0", "8.5.1", "8.5.2", "9.0.0-beta.1",
        "9.0.0-beta.2", "9.0.0", "9.0.1", "9.1.0",
    ])


def test_semver_prereleases() -> None:
    _assert_chain(["8.5.0.alpha001", "8.5.0.alpha002", "8.5.0-beta.1", "8.5.0.rc1", "8.5.0"])
    assert parse_version("9.0.0.rc1") == parse_version("9.0.0-rc.1")
    assert parse_version("9.0.0-beta.1") == parse_version("9.0.0.beta1")


def test_legacy_prereleases_and_internal_builds() -> None:
    # T (internal) < RC of the same X.Y is our convention; alpha/beta precede their RC.
    _assert_chain(["8.0.T6", "8.0.T63", "8.0.RC1.alpha001", "8.0.RC1.beta1", "8.0.RC1",
                   "8.0.RC2", "8.0.0.alpha001", "8.0.0"])
    _assert_chain(["7.0.T10", "7.0.RC1", "7.0.0"])


def test_driver_chains() -> None:
    _assert_chain(["23.0.rc2", "23.0.rc2.3", "23.0.rc3", "23.0.0", "23.0.3", "23.0.7",
                   "24.1.RC1", "24.1.rc1.b030", "24.1.rc2", "24.1.rc2.2", "24.1.RC3",
                   "24.1.rc3.b999", "24.1.rc3.7", "24.1.0", "24.1.0.1", "25.0.rc1",
                   "25.0.rc1.b010", "25.0.rc1.1", "25.2.0", "25.3.rc1", "25.3.rc1.2", "25.5.0",
                   "25.5.1", "26.0.rc1", "26.1.0", "26.1.0.b083"])


def test_rc_case_does_not_matter() -> None:
    assert parse_version("24.1.RC2") == parse_version("24.1.rc2")
    assert hash(parse_version("24.1.RC2")) == hash(parse_version("24.1.rc2"))
    assert parse_version("8.0.rc3") == parse_version("8.0.RC3")
    assert parse_version("2.1.RC2.B080") == parse_version("2.1.rc2.b080")


def test_firmware_order() -> None:
    _assert_chain(["6.4.0.4.220", "7.0.0", "7.1.0.5.220", "7.1.0.6.220", "7.1.0.11.220",
                   "7.1.99", "7.3.0.1.231", "7.7.0.1.231", "7.7.99", "7.8.0.6.201"])


def test_torch_npu_pep440_chain() -> None:
    _assert_chain(["2.1.0", "2.1.0.post8.dev20241009", "2.1.0.post8", "2.1.0.post10",
                   "2.5.1.dev20250101", "2.5.1rc1", "2.5.1", "2.5.1.post1.dev20250619",
                   "2.5.1.post1", "2.5.1.post2", "2.7.1.dev20250724", "2.7.1", "2.9.0.post1",
                   "2.10.0.post4"])


def test_local_label_ignored_for_order_but_kept() -> None:
    cpu = parse_version("2.10.0+cpu")
    assert cpu == parse_version("2.10.0")
    assert cpu.raw == "2.10.0+cpu"
    assert cpu.local == "cpu"
    assert parse_version("2.9.0.post1+git4c901a4") == parse_version("2.9.0.post1")


def test_leading_v_and_pep440_glued() -> None:
    v = parse_version("v0.11.0rc3")
    assert v.base == (0, 11, 0)
    assert v.pre == ("rc", 3)
    assert v < parse_version("0.11.0")


def test_fields_and_base() -> None:
    v = parse_version("25.0.rc1.b010")
    assert (v.major, v.minor, v.line, v.line_number, v.build) == (25, 0, LINE_RC, 1, 10)
    assert v.base == (25, 0)
    assert v.is_prerelease
    t = parse_version("8.0.T6")
    assert t.line == LINE_T
    fw = parse_version("7.1.0.11.220")
    assert fw.line == LINE_FINAL
    assert fw.base == (7, 1, 0, 11, 220)
    assert not fw.is_prerelease
    assert parse_version("2.1") == parse_version("2.1.0")


def test_same_release_ignores_build_only() -> None:
    p = parse_version
    assert same_release(p("8.2.RC2"), p("8.2.RC2.B030"))
    assert same_release(p("8.0.T63"), p("8.0.T63.B020"))
    assert same_release(p("8.2.rc2"), p("8.2.RC2"))
    assert not same_release(p("8.2.RC2"), p("8.2.RC1"))
    assert not same_release(p("8.5.0"), p("8.5.0.alpha001"))
    assert not same_release(p("8.0.RC3"), p("8.0.RC3.20"))


def test_torch_base() -> None:
    assert torch_base("2.5.1.post1") == "2.5.1"
    assert torch_base("2.9.0.post1+git4c901a4") == "2.9.0"
    assert torch_base(parse_version("2.10.0+cpu")) == "2.10.0"
    assert torch_base("2.1.0.post8.dev20241009") == "2.1.0"


def test_normalised_spelling() -> None:
    assert parse_version("24.1.rc2.2").normalised() == "24.1.RC2.2"
    assert parse_version("9.0.0-beta.1").normalised() == "9.0.0.beta1"


def test_not_equal_to_other_types() -> None:
    assert parse_version("1.0") != "1.0"


# --- properties over generated version strings -----------------------------------------

_nums = st.integers(min_value=0, max_value=30).map(str)
_line = st.one_of(
    _nums,
    st.builds(lambda rc, n: f"{rc}{n}", st.sampled_from(["RC", "rc", "Rc"]), _nums),
    st.builds(lambda n: f"T{n}", _nums),
)
_tail_item = st.one_of(
    _nums,
    st.builds(lambda t, n: f"{t}{n}", st.sampled_from(["alpha", "beta", "rc"]), _nums),
    st.builds(lambda n: f"post{n}", _nums),
    st.builds(lambda n: f"dev{n}", _nums),
    st.builds(lambda n: f"b{n}", _nums),
)


@st.composite
def version_strings(draw: st.DrawFn) -> str:
    parts = [draw(_nums), draw(_nums)]
    if draw(st.booleans()):
        parts.append(draw(_line))
        parts += draw(st.lists(_tail_item, max_size=3))
    text = ".".join(parts)
    if draw(st.booleans()):
        text += "+" + draw(st.sampled_from(["cpu", "git4c901a4", "cu121"]))
    return text


def _parsed_or_none(text: str) -> AscendVersion | None:
    try:
        return parse_version(text)
    except ParseError:
        return None  # generated tails may repeat a tag: rejecting them is fine


@given(version_strings(), version_strings(), version_strings())
def test_order_is_total_antisymmetric_transitive(a: str, b: str, c: str) -> None:
    va, vb, vc = (_parsed_or_none(s) for s in (a, b, c))
    if va is None or vb is None or vc is None:
        return
    assert sum([va < vb, va == vb, va > vb]) == 1  # total, exactly one relation
    if va <= vb and vb <= va:
        assert va == vb
        assert hash(va) == hash(vb)
    if va <= vb and vb <= vc:
        assert va <= vc
    if va < vb and vb < vc:
        assert va < vc


@given(version_strings())
def test_rc_case_changes_do_not_change_order(text: str) -> None:
    v = _parsed_or_none(text)
    if v is None:
        return
    for variant in (text.upper(), text.lower(), text.swapcase()):
        assert parse_version(variant) == v


@given(st.text(max_size=40))
def test_parse_raises_only_parse_error_on_random_text(text: str) -> None:
    with contextlib.suppress(ParseError):
        parse_version(text)


@given(st.text(alphabet="0123456789.-+_vVrRcCtTbBaAlphetsodv", max_size=30))
def test_parse_raises_only_parse_error_on_versionish_text(text: str) -> None:
    with contextlib.suppress(ParseError):
        parse_version(text)


def test_long_texts_are_refused_before_they_are_split() -> None:
    import pytest

    from probes.errors import ParseError
    from probes.versions import MAX_VERSION_CHARS, parse_version

    for text in ("1." * 100_000 + "1", "1" * 200_000, "1.2." + "3." * MAX_VERSION_CHARS):
        with pytest.raises(ParseError, match="more than a version has") as caught:
            parse_version(text)
        assert len(str(caught.value)) < 300
    assert parse_version("1.2." + "3." * 40 + "4").patches[-1] == 4
