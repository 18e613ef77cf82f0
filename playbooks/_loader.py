"""Parse playbook markdown files (YAML front matter + five fixed sections).

Front matter: id, title, kind, symptoms (the phrases people write, any language), checks,
sources, and optionally codes (error codes, exception, library and variable names the playbook
answers, each named by its sources or body; the search matches them whole).

A check's playbook may add "What the check does" after "What you see": the check's rules, one
bullet each, written `` - `rule-name` (warn/fail): what it judges `` (`rule_list` reads them).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol

import yaml

KINDS: tuple[str, ...] = ("check", "symptom", "folklore")
SECTIONS: tuple[str, ...] = (
    "What you see",
    "Why it happens",
    "How to confirm",
    "How to fix",
    "What not to do",
)
RULES_SECTION = "What the check does"
CHECK_SECTIONS: tuple[str, ...] = (SECTIONS[0], RULES_SECTION, *SECTIONS[1:])
_RULE_RE = re.compile(r"^- `([a-z0-9]+(?:-[a-z0-9]+)*)` \(([a-z/ ().]+?)\):", re.MULTILINE)
_LIST_FIELDS: tuple[str, ...] = ("symptoms", "checks", "sources", "codes")
_ALLOWED_KEYS = frozenset(("id", "title", "kind", *_LIST_FIELDS))
_ID_RE = re.compile(r"^[a-z0-9]+(?:[.-][a-z0-9]+)*$")
_HEADING_RE = re.compile(r"^##\s+(.+?)\s*$", re.MULTILINE)
_FENCE_RE = re.compile(r"^\s*```", re.MULTILINE)


class PlaybookError(ValueError):
    """A playbook file is malformed; the message names the file and the problem."""


@dataclass(frozen=True)
class Playbook:
    id: str
    title: str
    kind: str
    symptoms: tuple[str, ...]
    checks: tuple[str, ...]
    sources: tuple[str, ...]
    body: str
    path: str
    codes: tuple[str, ...] = ()  # error codes, exception and library names it answers

    def section(self, heading: str) -> str:
        """Text under one `## heading` of the body (without the heading), or ''."""
        return split_sections(self.body).get(heading, "")

    def rules(self) -> dict[str, str]:
        """The rules "What the check does" lists: name -> the statuses it gives."""
        return rule_list(self.section(RULES_SECTION))


def rule_list(text: str) -> dict[str, str]:
    """`` - `name` (statuses): ... `` bullets of a section, in order."""
    return {m.group(1): m.group(2) for m in _RULE_RE.finditer(text)}


class Entry(Protocol):
    """The part of `importlib.resources.abc.Traversable` (and `pathlib.Path`) we use."""

    @property
    def name(self) -> str: ...

    def is_file(self) -> bool: ...

    def read_text(self, encoding: str | None = None) -> str: ...

    def iterdir(self) -> Iterator[Entry]: ...


def _headings(body: str) -> list[re.Match[str]]:
    """`## ` headings of a markdown body, ignoring lines inside ``` fences."""
    fences = [m.start() for m in _FENCE_RE.finditer(body)]

    def inside_fence(pos: int) -> bool:
        return sum(1 for f in fences if f < pos) % 2 == 1

    return [m for m in _HEADING_RE.finditer(body) if not inside_fence(m.start())]


def split_sections(body: str) -> dict[str, str]:
    """Map each `## heading` of a body to the stripped text that follows it."""
    matches = _headings(body)
    out: dict[str, str] = {}
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(body)
        out[m.group(1)] = body[m.end() : end].strip()
    return out


def _split_front_matter(text: str, where: str) -> tuple[str, str]:
    lines = text.lstrip("\ufeff").splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise PlaybookError(f"{where}: must start with a '---' line opening the YAML front matter")
    for i in range(1, len(lines)):
        if lines[i].strip() == "---":
            return "".join(lines[1:i]), "".join(lines[i + 1 :])
    raise PlaybookError(f"{where}: front matter is never closed by a '---' line")


def _string_list(meta: dict[str, object], key: str, where: str) -> tuple[str, ...]:
    value = meta.get(key, [])
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise PlaybookError(f"{where}: '{key}' must be a list of non-empty strings")
    return tuple(v.strip() for v in value)


def _required_string(meta: dict[str, object], key: str, where: str) -> str:
    value = meta.get(key)
    if not isinstance(value, str) or not value.strip():
        raise PlaybookError(f"{where}: front matter needs a non-empty string '{key}'")
    return value.strip()


def _check_sections(body: str, where: str, kind: str) -> None:
    found = tuple(m.group(1) for m in _headings(body))
    allowed = (SECTIONS, CHECK_SECTIONS) if kind == "check" else (SECTIONS,)
    if found not in allowed:
        extra = f" (a check's playbook may add '{RULES_SECTION}' second)" if kind == "check" else ""
        raise PlaybookError(
            f"{where}: body must have exactly these '## ' sections in this order: "
            f"{', '.join(SECTIONS)}{extra}; found: {', '.join(found) or 'none'}"
        )
    empty = [name for name, text in split_sections(body).items() if not text]
    if empty:
        raise PlaybookError(f"{where}: empty section(s): {', '.join(empty)}")


def parse_playbook(text: str, where: str, expected_id: str | None = None) -> Playbook:
    """Parse one playbook's text; `where` names the file in error messages."""
    raw_meta, body = _split_front_matter(text, where)
    try:
        meta = yaml.safe_load(raw_meta)
    except yaml.YAMLError as exc:
        raise PlaybookError(f"{where}: front matter is not valid YAML: {exc}") from exc
    if not isinstance(meta, dict):
        raise PlaybookError(f"{where}: front matter must be a YAML mapping")
    unknown = sorted(str(k) for k in meta if k not in _ALLOWED_KEYS)
    if unknown:
        raise PlaybookError(f"{where}: unknown front-matter key(s): {', '.join(unknown)}")
    pid = _required_string(meta, "id", where)
    if not _ID_RE.match(pid):
        raise PlaybookError(f"{where}: id {pid!r} must be lowercase words joined by '.' or '-'")
    if expected_id is not None and pid != expected_id:
        raise PlaybookError(f"{where}: id {pid!r} does not match the file name {expected_id!r}")
    kind = _required_string(meta, "kind", where)
    if kind not in KINDS:
        raise PlaybookError(f"{where}: kind {kind!r} is not one of {', '.join(KINDS)}")
    sources = _string_list(meta, "sources", where)
    if not sources:
        raise PlaybookError(f"{where}: 'sources' must list at least one source")
    _check_sections(body, where, kind)
    return Playbook(
        id=pid,
        title=_required_string(meta, "title", where),
        kind=kind,
        symptoms=_string_list(meta, "symptoms", where),
        checks=_string_list(meta, "checks", where),
        sources=sources,
        body=body.strip() + "\n",
        path=where,
        codes=_string_list(meta, "codes", where),
    )


def _markdown_files(directory: Entry) -> Iterable[Entry]:
    files = [e for e in directory.iterdir() if e.is_file() and e.name.endswith(".md")]
    return sorted(files, key=lambda e: e.name)


def load_dir(directory: Entry) -> tuple[Playbook, ...]:
    """Load every `*.md` in `directory` (a Path or an importlib.resources Traversable)."""
    books: list[Playbook] = []
    seen: dict[str, str] = {}
    for entry in _markdown_files(directory):
        where = str(entry)
        try:
            text = entry.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise PlaybookError(f"{where}: cannot be read as UTF-8 text: {exc}") from exc
        book = parse_playbook(text, where, expected_id=entry.name[: -len(".md")])
        if book.id in seen:
            raise PlaybookError(f"{where}: id {book.id!r} already used by {seen[book.id]}")
        seen[book.id] = where
        books.append(book)
    return tuple(books)
