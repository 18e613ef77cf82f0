"""Ascend version strings and their order.

One parser covers every form in checks/data/compat.yaml `version_formats`: CANN legacy (`8.0.RC2`,
`8.0.T6`, `8.1.RC1.alpha001`), CANN semver (`8.5.0`, `9.0.0-beta.1`, `9.0.0.rc1`),
driver/HDK (`24.1.rc2.2`, `25.0.rc1.b010`, `26.1.0.b083`), firmware (`7.1.0.11.220`),
PEP 440 torch-style (`2.5.1.post1`, `2.1.0.post8.dev20241009`, `2.10.0+cpu`) and MindIE
(`2.1.RC2.B080`, `2.0.T3.B010`).

A version is X.Y, then a *line* at the third position, then a tail:

    line   : Tn (internal build) < RCn (release candidate) < Z (final release number)
    tail   : patches (more numbers), pre-release (alpha < beta < rc), post, dev, build (bNNN)

The order is a single tuple key (`sort_key`), so it is total and consistent with `==`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from probes.errors import ParseError
from probes.textsafe import cut

# Line kinds at the third position. T (internal/dev builds such as 8.0.T6) sorting below
# RC of the same X.Y is OUR convention: internal builds precede the public releases of a
# line (8.0.T6 became 8.0.RC1). Every RC sorts before the first final release, as the
# vendor's own comparison does (X.Y.RC3 < X.Y.0).
LINE_T = 0
LINE_RC = 1
LINE_FINAL = 2
_LINE_NAMES = {LINE_T: "T", LINE_RC: "RC", LINE_FINAL: ""}

# Pre-release ranks; a final (no pre-release) outranks them all.
_PRE_RANK = {"alpha": 1, "beta": 2, "rc": 3}
_PRE_FINAL = 4
_PRE_DEV_ONLY = 0  # PEP 440: 1.0.dev1 < 1.0a1, so a bare dev release sorts below any pre.

_MAX_DIGITS = 20  # longer numbers are not versions; also keeps int() far from its limits
# PEP 440 sets no length; the longest the doctor meets (a local label with a git hash) is
# under 64. A text of kilobytes is not a version, and is refused before it is split.
MAX_VERSION_CHARS = 256

_GLUED = re.compile(r"([0-9]+)([a-z]+)([0-9]*)", re.ASCII)
_TAG = re.compile(r"([a-z]+)([0-9]*)", re.ASCII)
_NUM = re.compile(r"[0-9]+", re.ASCII)
_LOCAL = re.compile(r"[a-z0-9]+(?:[.\-_][a-z0-9]+)*", re.ASCII)
_SEP = re.compile(r"[.\-_]")

# Tag spellings -> canonical kind. `b` alone after a separator is a build number
# (25.0.rc1.b010, 2.1.RC2.B080); glued to a digit (2.5.1b1) it is PEP 440 beta.
_SEPARATE_TAGS = {
    "rc": "rc", "pre": "rc", "preview": "rc",
    "alpha": "alpha", "a": "alpha",
    "beta": "beta",
    "t": "t",
    "b": "build",
    "post": "post",
    "dev": "dev",
}
_GLUED_TAGS = {**_SEPARATE_TAGS, "b": "beta"}

Token = tuple[str, int | None]  # (kind, number); kind "num" for plain numbers


@dataclass(frozen=True, eq=False)
class AscendVersion:
    """A parsed version. Compare with <, ==, sorted(); `raw` keeps the text as given."""

    raw: str
    major: int
    minor: int
    line: int  # LINE_T, LINE_RC or LINE_FINAL
    line_number: int  # n of Tn / RCn, or Z of a final release
    patches: tuple[int, ...] = ()  # numbers after the line: 25.3.rc1.2 -> (2,)
    pre: tuple[str, int] | None = None  # ("alpha"|"beta"|"rc", n)
    post: int | None = None
    dev: int | None = None
    build: int | None = None  # bNNN / BNNN
    local: str = ""  # PEP 440 local label after "+": kept, never ordered on

    @property
    def sort_key(self) -> tuple[object, ...]:
        """The one ordering key; every comparison goes through it."""
        return (*self.release_key, (0, 0) if self.build is None else (1, self.build))

    @property
    def release_key(self) -> tuple[object, ...]:
        """The key without the build number (see `same_release`)."""
        if self.pre is not None:
            pre_key = (_PRE_RANK[self.pre[0]], self.pre[1])
        elif self.dev is not None and self.post is None:
            pre_key = (_PRE_DEV_ONLY, 0)
        else:
            pre_key = (_PRE_FINAL, 0)
        post_key = (0, 0) if self.post is None else (1, self.post)
        dev_key = (1, 0) if self.dev is None else (0, self.dev)
        return (
            self.major, self.minor, self.line, self.line_number, self.patches,
            pre_key, post_key, dev_key,
        )

    @property
    def base(self) -> tuple[int, ...]:
        """The leading run of plain numbers (PEP 440's release segment).

        (2, 5, 1) for 2.5.1.post1, (7, 1, 0, 11, 220) for firmware, (24, 1) for 24.1.rc2:
        an RC or T line has no meaningful Z.
        """
        if self.line != LINE_FINAL:
            return (self.major, self.minor)
        return (self.major, self.minor, self.line_number, *self.patches)

    @property
    def is_prerelease(self) -> bool:
        """True for T/RC lines, alpha/beta/rc pre-releases and dev builds."""
        return self.line != LINE_FINAL or self.pre is not None or self.dev is not None

    def normalised(self) -> str:
        """A canonical spelling (upper-case RC/T), without build and local parts."""
        if self.line == LINE_FINAL:
            parts = [str(self.major), str(self.minor), str(self.line_number)]
        else:
            line = f"{_LINE_NAMES[self.line]}{self.line_number}"
            parts = [str(self.major), str(self.minor), line]
        parts += [str(p) for p in self.patches]
        if self.pre is not None:
            parts.append(f"{self.pre[0]}{self.pre[1]}")
        if self.post is not None:
            parts.append(f"post{self.post}")
        if self.dev is not None:
            parts.append(f"dev{self.dev}")
        return ".".join(parts)

    def __str__(self) -> str:
        return self.raw

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AscendVersion):
            return NotImplemented
        return self.sort_key == other.sort_key

    def __hash__(self) -> int:
        return hash(self.sort_key)

    def __lt__(self, other: AscendVersion) -> bool:
        return self.sort_key < other.sort_key

    def __le__(self, other: AscendVersion) -> bool:
        return self.sort_key <= other.sort_key

    def __gt__(self, other: AscendVersion) -> bool:
        return self.sort_key > other.sort_key

    def __ge__(self, other: AscendVersion) -> bool:
        return self.sort_key >= other.sort_key


def parse_version(text: str) -> AscendVersion:
    """Parse any Ascend / PEP 440 version string. Raises ParseError otherwise."""
    raw = text
    what = f"version {cut(text, 80)!r}"
    if len(text) > MAX_VERSION_CHARS:
        raise ParseError(what, f"{len(text):,} characters, more than a version has "
                               f"({MAX_VERSION_CHARS})")
    body = text.strip().lower()
    body, plus, local = body.partition("+")
    if plus and not _LOCAL.fullmatch(local):
        raise ParseError(what, "bad local label after '+'")
    if body.startswith("v"):
        body = body[1:]
    if not body:
        raise ParseError(what, "empty")
    tokens = _tokenise(body, what)
    return _assemble(raw, local, tokens, what)


def try_parse_version(text: str | None) -> AscendVersion | None:
    """parse_version, or None for None / text that is not a version."""
    if text is None:
        return None
    try:
        return parse_version(text)
    except ParseError:
        return None


def order_key(text: str) -> tuple[object, ...]:
    """A sort key for a version text: versions in version order, after any text that does not
    parse as one."""
    parsed = try_parse_version(text)
    return (1, parsed.sort_key) if parsed is not None else (0, text)


def same_release(a: AscendVersion, b: AscendVersion) -> bool:
    """Same release, build number ignored: 8.2.RC2 and 8.2.RC2.B030 are the same.

    Used for "NNAL equals CANN": installers stamp a build suffix on one file and not the
    other, so the build is not part of the release identity. RC case never matters.
    """
    return a.release_key == b.release_key


def torch_base(v: AscendVersion | str) -> str:
    """PEP 440 base_version: `2.5.1` for 2.5.1.post1+git4c901a4 (torch_npu must match torch)."""
    parsed = parse_version(v) if isinstance(v, str) else v
    return ".".join(str(n) for n in parsed.base)


def _tokenise(body: str, what: str) -> list[Token]:
    tokens: list[Token] = []
    for piece in _SEP.split(body):
        if not piece:
            raise ParseError(what, "empty component")
        if _NUM.fullmatch(piece):
            tokens.append(("num", _to_int(piece, what)))
            continue
        glued = _GLUED.fullmatch(piece)
        if glued:
            tokens.append(("num", _to_int(glued.group(1), what)))
            tokens.append(_tag(glued.group(2), glued.group(3), _GLUED_TAGS, what))
            continue
        tag = _TAG.fullmatch(piece)
        if tag:
            tokens.append(_tag(tag.group(1), tag.group(2), _SEPARATE_TAGS, what))
            continue
        raise ParseError(what, f"unrecognised component {piece!r}")
    return _attach_tag_numbers(tokens)


def _tag(name: str, digits: str, table: dict[str, str], what: str) -> Token:
    kind = table.get(name)
    if kind is None:
        raise ParseError(what, f"unknown tag {name!r}")
    return (kind, _to_int(digits, what) if digits else None)


def _attach_tag_numbers(tokens: list[Token]) -> list[Token]:
    """`beta.1`, `-rc.2`: a bare pre/post/dev tag takes the number that follows it."""
    out: list[Token] = []
    i = 0
    while i < len(tokens):
        kind, num = tokens[i]
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        # T and RC at the line position (index 2) keep a following number as a patch
        # (24.1.rc2.2); after X.Y.Z a bare `rc` is a pre-release that takes it (9.0.0-rc.1).
        takes_number = kind in ("alpha", "beta", "post", "dev") or (kind == "rc" and i >= 3)
        if num is None and takes_number and nxt and nxt[0] == "num":
            out.append((kind, nxt[1]))
            i += 2
            continue
        out.append((kind, num))
        i += 1
    return out


def _to_int(digits: str, what: str) -> int:
    if len(digits) > _MAX_DIGITS:
        raise ParseError(what, "number too long")
    return int(digits)


def _assemble(raw: str, local: str, tokens: list[Token], what: str) -> AscendVersion:
    if len(tokens) < 2 or tokens[0][0] != "num" or tokens[1][0] != "num":
        raise ParseError(what, "a version starts with X.Y")
    major, minor = tokens[0][1] or 0, tokens[1][1] or 0
    at = 2  # an index, not slices: the walk stays linear in the number of parts
    line, line_number = LINE_FINAL, 0  # X.Y alone means X.Y.0
    if at < len(tokens) and tokens[at][0] in ("num", "t", "rc"):
        kind, num = tokens[at]
        line = {"num": LINE_FINAL, "t": LINE_T, "rc": LINE_RC}[kind]
        line_number = num or 0
        at += 1
    patches: list[int] = []
    while at < len(tokens) and tokens[at][0] == "num":
        patches.append(tokens[at][1] or 0)
        at += 1
    fields: dict[str, int] = {}
    pre: tuple[str, int] | None = None
    for kind, num in tokens[at:]:
        if kind in _PRE_RANK:
            if pre is not None:
                raise ParseError(what, "two pre-release tags")
            pre = (kind, num or 0)
        elif kind in ("post", "dev", "build") and kind not in fields:
            fields[kind] = num or 0
        else:
            raise ParseError(what, f"unexpected {kind!r} in the tail")
    return AscendVersion(
        raw=raw, major=major, minor=minor, line=line, line_number=line_number,
        patches=tuple(patches), pre=pre, post=fields.get("post"), dev=fields.get("dev"),
        build=fields.get("build"), local=local,
    )
