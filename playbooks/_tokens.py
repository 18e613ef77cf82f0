"""Turn what a person types, or pastes from a log, into search terms.

Identifiers stay whole so they can match exactly (`EZ1001`, `507035`, `libatb.so`,
`ACL_ERROR_RT_AICORE_EXCEPTION`, `RuntimeError`), and their parts are added too, split at
`_`, `.`, `-` and CamelCase humps, so `AscendFp8Config` also meets "fp8" and "config".
Chinese has no spaces: each run of Han characters becomes its character bigrams (a lone
character stays a unigram), which needs no segmenter and still matches 显存不足 inside
"推理时显存不足了". Pure functions, no dependencies.
"""

from __future__ import annotations

import re
from functools import lru_cache

_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_TOKEN_RE = re.compile(
    rf"(?P<han>[{_HAN}]+)|(?P<word>[A-Za-z0-9]+(?:[._\-][A-Za-z0-9]+)*)"
)
_HAN_RE = re.compile(f"[{_HAN}]")
# colour and cursor sequences of a log copied from a terminal: "\x1b[31mERROR" is "ERROR"
_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
_SEPARATOR_RE = re.compile(r"[._\-]")
_HEX_RE = re.compile(r"0x[0-9A-Fa-f]+")
_HUMP_RE = re.compile(r"[A-Z]?[a-z]+[0-9]*|[A-Z]+[0-9]*(?![a-z])|[0-9]+[A-Za-z]*")
# The families of six-digit ACL return codes (1000xx, 1070xx, 1480xx, 2000xx, 2070xx, 3000xx,
# 5000xx, 5070xx-5079xx in Ascend/pytorch torch_npu/csrc/core/npu/NPUErrorCodes.h; 145xxx,
# 245xxx, 545xxx in CANN's ge_error_codes.h; aclnn's 161xxx/561xxx): a six-digit number from
# these is read as a code, any other (a PID, a port, a byte count) is not.
_CODE_RE = re.compile(
    r"(?<![\w.])(?:"
    r"E[A-Z0-9][0-9]{4}"  # CANN error-code reference: EZ1001, EI0006, E39999
    r"|(?:100|107|145|148|161|200|207|245|300|500|507|545|561)[0-9]{3}"
    r"|-80[0-9]{2}"  # DCMI return codes: -8005, -8020
    r"|0x[0-9A-Fa-f]{8}"  # device fault codes: 0x80E00209
    r"|ACL(?:NN)?_ERR(?:OR)?_[A-Z0-9_]+"
    r")(?![\w.])"
)
# fmt: off
STOPWORDS = frozenset((
    "a", "an", "the", "of", "to", "in", "on", "at", "is", "are", "be", "was", "were", "and",
    "or", "for", "with", "it", "its", "my", "me", "i", "we", "our", "you", "your", "this",
    "that", "these", "by", "as", "from", "into", "after", "when", "how", "what", "why", "do",
    "does", "did", "has", "have", "had", "can", "could", "should", "would", "will", "but",
    "so", "if", "then", "than", "there", "very", "just", "also", "please", "any", "some",
))
# Everyday Chinese bigrams a symptom phrase may share with any sentence: "model", "service",
# "error", "problem", "no/not", "when", "normal", "success", "how", "can", "run", "use", ...
HAN_COMMON = frozenset((
    "模型", "服务", "报错", "错误", "问题", "没有", "时候", "正常", "成功", "怎么", "如何",
    "什么", "可以", "运行", "执行", "使用", "出现", "一个", "这个", "今天", "现在",
    "请问", "一下", "已经", "还是", "但是", "因为", "所以", "任何", "很好", "不能", "无法",
))
# fmt: on


def stem(word: str) -> str:
    """Fold simple plurals and -ing/-ed/-e endings so 'garbled' meets 'garble'."""
    if len(word) <= 3 or not word.isalpha():
        return word
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    for suffix in ("ing", "ed"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            if word[-1] == word[-2] and word[-1] not in "lsz":
                word = word[:-1]  # logging -> log, stopped -> stop
            break
    if word.endswith("e") and len(word) > 3:
        word = word[:-1]
    return word


def _parts(word: str) -> list[str]:
    """The pieces of a compound or CamelCase word; pure numbers (version pieces) dropped."""
    pieces: list[str] = []
    for chunk in _SEPARATOR_RE.split(word):
        humped = chunk if chunk.islower() or chunk.isupper() else None
        pieces.extend([chunk] if humped is not None else _HUMP_RE.findall(chunk))
    return [p for p in pieces if p and not p.isdigit()]


def _is_compound(word: str) -> bool:
    if _SEPARATOR_RE.search(word):
        return True
    tail = word[1:]
    mixed_case = tail != tail.lower() and word != word.upper()
    return mixed_case and not _HEX_RE.fullmatch(word)


@lru_cache(maxsize=16384)
def _word_terms(word: str) -> tuple[str, ...]:
    if not _is_compound(word):
        low = word.lower()
        return () if low in STOPWORDS else (stem(low),)
    parts = [stem(p.lower()) for p in _parts(word) if p.lower() not in STOPWORDS]
    return (word.lower(), *parts)


def _han_terms(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def is_han(term: str) -> bool:
    """Whether a term is a Chinese unigram or bigram."""
    return _HAN_RE.match(term) is not None


def tokenize(text: str) -> list[str]:
    """Search terms of `text`, in order, repeats kept (term frequency counts them)."""
    terms: list[str] = []
    for han, word in _TOKEN_RE.findall(_ANSI_RE.sub(" ", text)):
        terms.extend(_han_terms(han) if han else _word_terms(word))
    return terms


def code_names(text: str) -> tuple[str, ...]:
    """The error codes written in `text`, as written (a DCMI code keeps its '-'), in order."""
    found = _CODE_RE.finditer(_ANSI_RE.sub(" ", text))
    return tuple(dict.fromkeys(m.group(0) for m in found))


def code_term(code: str) -> str:
    """The search term of one code: lowercase, a DCMI code without its '-'."""
    return _word_terms(code.lstrip("-"))[0]


def error_codes(text: str) -> frozenset[str]:
    """The error codes written in `text`, as search terms."""
    return frozenset(code_term(code) for code in code_names(text))
