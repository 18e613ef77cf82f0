"""Where secrets sit in a text: the spans to mask, by kind (pure, no I/O).

Two kinds of evidence, combined:

- a *name* that says "secret" next to a value: `--token=x`, `token = x`, `password: x`,
  `{'api_key': 'x'}`, `"AK":"x"`, `X-Auth-Token: x`, `x-obs-security-token=x`,
  `password%3Dx` (URL-encoded), `-pVALUE` (the glued password flag of mysql-style tools),
  `Authorization:` headers, `Bearer`/`Basic` tokens, credentials in URLs (`user:p@ss/w@host`),
  PEM private keys;
- the *value* itself: known token formats (GitHub, GitLab, Hugging Face, Slack, OpenAI-style
  `sk-`, AWS access key ids, JWTs, Slack webhooks) and long random-looking tokens (mixed case
  and digits, no word structure).

What is not found: a short secret with no secret-looking name beside it, a lowercase-only or
hexadecimal random string (hashes and ids look the same), and a secret spelled in a way no rule
above describes. Values of variables are handled apart (checks/env_allow.py): only allow-listed
ones are kept at all.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterator

from checks.secret_names import is_secret_name

Span = tuple[int, int, str]  # start, end, kind

_NAME = r"[A-Za-z_][A-Za-z0-9_.-]*"
_QUOTED = r"\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*'"
# an unquoted value ends at whitespace, a quote, or punctuation that separates fields (also
# URL-encoded: %26 `&`, %20 space, %2C `,`)
_BARE = r"(?:(?!%2[06Cc])[^\s\"'`,;&|<>(){}\[\]])+"

_URL_USER_PASSWORD = re.compile(  # greedy to the last `@` before the host: `p@ss/w` is kept whole
    r"(?i)\b[a-z][a-z0-9+.-]*://([^\s/@:'\"<>?#]*:[^\s'\"<>?#]*)@(?=[^\s@/'\"<>:]+)")
_URL_TOKEN = re.compile(r"(?i)\b[a-z][a-z0-9+.-]*://([^\s/@:'\"<>?#]+)@(?=[^\s@/'\"<>]+)")
_AUTHORIZATION = re.compile(
    r"(?i)\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?([^\r\n\"']+)")
_COOKIE = re.compile(r"(?i)\b(?:set-)?cookie[\"']?[ \t]*:[ \t]*([^\r\n]+)")
_BEARER = re.compile(r"(?i)\bbearer\s+([A-Za-z0-9._~+/=-]{8,})")
# `Basic` is also an English word: only base64-looking values
_BASIC = re.compile(r"\bBasic\s+(?=[A-Za-z0-9+/]*[0-9=+/]|[A-Za-z0-9+/]+[A-Z])"
                    r"([A-Za-z0-9+/]{8,}={0,2})")
_FLAG = re.compile(rf"(?<![\w-])--?({_NAME})(?:=|[ \t]+(?!-))({_QUOTED}|{_BARE})")
_GLUED_P = re.compile(r"(?<![\w-])-p([^\s\"'=-][^\s\"']*)")
# a name starts after a separator, also a URL-encoded one (`%26token%3D...`: `&token=`)
_ASSIGNMENT = re.compile(
    rf"(?:(?<![\w.-])|(?<=%2[6Cc0])|(?<=%3[Ff]))({_NAME})[ \t]*(?:=|:|%3[Dd]|%3[Aa])[ \t]*"
    rf"(b?(?:{_QUOTED})|{_BARE})")
# `ak is X, sk is Y`: a secret name, the word `is`, the value (log lines written for people)
_IS_PHRASE = re.compile(rf"(?<![\w.-])({_NAME})[ \t]+is[ \t]+({_QUOTED}|{_BARE})")
# <password>X</password>: an XML element named like a secret
_XML_ELEMENT = re.compile(rf"<({_NAME})>([^<]+)</\1>")
# ~/.pgpass: hostname:port:database:username:password, one entry a line
# (https://www.postgresql.org/docs/current/libpq-pgpass.html)
_PGPASS = re.compile(r"(?m)^[^\s:#]+:(?:\d{1,5}|\*):[^\s:]+:[^\s:]+:(\S+)[ \t]*$")
# curl -u/--user USER:PASSWORD (curl(1), `-u, --user <user:password>`), and --proxy-user
_USER_PASSWORD_FLAG = re.compile(
    r"(?<![\w-])(?:-u|--user|--proxy-user|-U)(?:=|[ \t]+)[\"']?[^\s:\"']*:([^\s\"']+)")
_QUOTED_NAME = re.compile(
    rf"([\"'])({_NAME})\1[ \t]*[:=][ \t]*(b?(?:{_QUOTED})|[^\s\"',}}\]]+)")
_YAML_LINE = re.compile(rf"(?m)^[ \t]*-?[ \t]*({_NAME})[ \t]*:[ \t]+([^\s#][^\n]*?)[ \t]*$")
_PRIVATE_KEY = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(.*?)"
                          r"(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)", re.S)
# known token formats, each with the literals one of its matches must contain (a cheap test
# before the expression runs over a long text)
_FORMATS: tuple[tuple[tuple[str, ...], re.Pattern[str]], ...] = tuple(
    (literals, re.compile(pattern)) for literals, pattern in (
        (("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), r"\bgh[pousr]_[A-Za-z0-9]{30,}"),
        (("github_pat_",), r"\bgithub_pat_[A-Za-z0-9_]{30,}"),
        (("glpat-",), r"\bglpat-[A-Za-z0-9_-]{20,}"),
        (("hf_",), r"\bhf_[A-Za-z0-9]{30,}"),
        (("xox",), r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
        (("sk-",), r"\bsk-[A-Za-z0-9_-]{20,}"),
        (("AKIA", "ASIA"), r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
        (("eyJ",), r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
        (("hooks.slack.com",), r"hooks\.slack\.com/services/[A-Za-z0-9/_-]+"),
    ))
_CANDIDATE = re.compile(r"[A-Za-z0-9+/_.~-]{16,}={0,2}")
MIN_RANDOM_SEGMENT = 16


def secret_spans(text: str) -> list[Span]:
    """The spans of `text` that hold secrets, merged and sorted."""
    return merge(raw_spans(text))


def raw_spans(text: str) -> list[Span]:
    """What each rule found, before overlapping spans are merged (a `Bearer X` inside an
    `Authorization:` header is both the header's value and the token X)."""
    spans: list[Span] = []
    for rule in _RULES:
        spans.extend(rule(text))
    return spans


def merge(spans: list[Span]) -> list[Span]:
    """Overlapping spans as one (the kind of the first)."""
    out: list[Span] = []
    for start, end, kind in sorted(s for s in spans if s[1] > s[0]):
        if out and start <= out[-1][1]:
            last = out[-1]
            out[-1] = (last[0], max(last[1], end), last[2])
        else:
            out.append((start, end, kind))
    return out


def _groups(pattern: re.Pattern[str], kind: str, group: int = 1) -> Callable[[str], Iterator[Span]]:
    def find(text: str) -> Iterator[Span]:
        for m in pattern.finditer(text):
            yield m.start(group), m.end(group), kind
    return find


def _value_span(m: re.Match[str], group: int, kind: str) -> Span:
    """The value of group `group` without its quotes (and a bytes literal's `b`)."""
    start, end = m.start(group), m.end(group)
    value = m.group(group)
    if value.startswith("b") and len(value) > 1 and value[1] in "\"'":
        start, value = start + 1, value[1:]
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        start, end = start + 1, end - 1
    return start, end, kind


def _named(pattern: re.Pattern[str], name: int, value: int, kind: str
           ) -> Callable[[str], Iterator[Span]]:
    def find(text: str) -> Iterator[Span]:
        at = 0
        while (m := pattern.search(text, at)) is not None:
            if is_secret_name(m.group(name)):
                yield _value_span(m, value, kind)
                at = m.end()
            else:  # `sqlite:///db?password=x`: a plain name's value may hold a secret one
                at = max(m.start(value), m.start() + 1)
    return find


def _token_formats(text: str) -> Iterator[Span]:
    for literals, pattern in _FORMATS:
        if any(literal in text for literal in literals):
            for m in pattern.finditer(text):
                yield m.start(), m.end(), "token-format"


def _private_keys(text: str) -> Iterator[Span]:
    if "PRIVATE KEY-----" not in text:
        return
    for m in _PRIVATE_KEY.finditer(text):
        yield m.start(1), m.end(1), "private-key"


def _glued_password(text: str) -> Iterator[Span]:
    for m in _GLUED_P.finditer(text):
        yield m.start(1), m.end(1), "secret-argument"


def _random_tokens(text: str) -> Iterator[Span]:
    for m in _CANDIDATE.finditer(text):
        token = m.group(0)
        segments = [(s.start(), s.end()) for s in _segments(token)]
        random_parts = [(a, b) for a, b in segments if looks_random(token[a:b])]
        if not random_parts:
            continue
        if token.startswith(("/", "~", ".")):  # a path: only the random components
            for a, b in random_parts:
                yield m.start() + a, m.start() + b, "high-entropy"
        else:
            yield m.start(), m.end(), "high-entropy"


def _segments(token: str) -> Iterator[re.Match[str]]:
    return re.finditer(r"[^-_./~]+", token)


def looks_random(segment: str) -> bool:
    """A long run of mixed-case letters and digits with no word structure: a key, a token.

    CamelCase identifiers (`HcclCommInitRootInfo`, `aclnnQuantMatmulV5GetWorkspaceSize`) start
    most capitals a word; random strings rarely do. Lowercase or hexadecimal strings are left:
    hashes, ids and names look exactly like them.
    """
    if len(segment) < MIN_RANDOM_SEGMENT:
        return False
    uppers = [i for i, ch in enumerate(segment) if "A" <= ch <= "Z"]
    lowers = sum("a" <= ch <= "z" for ch in segment)
    digits = sum(ch.isdigit() for ch in segment)
    if not uppers or lowers < 2 or len(uppers) + lowers + digits < len(segment) - 2:
        return False
    words = sum(segment[i + 1 : i + 3].isalpha() and segment[i + 1 : i + 3].islower()
                for i in uppers)
    return words / len(uppers) < 0.5 and _entropy_bits(segment) >= 3.5


def _entropy_bits(text: str) -> float:
    counts = Counter(text)
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


_RULES: tuple[Callable[[str], Iterator[Span]], ...] = (
    _groups(_URL_USER_PASSWORD, "url-credentials"),
    _groups(_URL_TOKEN, "url-credentials"),
    _groups(_AUTHORIZATION, "authorization"),
    _groups(_COOKIE, "authorization"),
    _groups(_BEARER, "bearer-token"),
    _groups(_BASIC, "bearer-token"),
    _private_keys,
    _named(_FLAG, 1, 2, "secret-argument"),
    _glued_password,
    _named(_ASSIGNMENT, 1, 2, "secret-assignment"),
    _named(_IS_PHRASE, 1, 2, "secret-assignment"),
    _named(_XML_ELEMENT, 1, 2, "secret-assignment"),
    _groups(_PGPASS, "secret-assignment"),
    _groups(_USER_PASSWORD_FLAG, "secret-argument"),
    _named(_QUOTED_NAME, 2, 3, "secret-assignment"),
    _named(_YAML_LINE, 1, 2, "secret-assignment"),
    _token_formats,
    _random_tokens,
)
