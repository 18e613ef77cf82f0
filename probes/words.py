"""How a count is written in a message: `1 chip`, `8 chips`. One home for the plural, so no
report says "8 chip(s)"."""

from __future__ import annotations


def counted(n: int, noun: str, plural: str = "") -> str:
    """`n` and the noun in the number `n` calls for; `plural` when adding "s" is wrong."""
    return f"{n} {noun if n == 1 else (plural or noun + 's')}"


def verb(n: int, singular: str, plural: str) -> str:
    """The verb agreeing with a count of `n` ("reports" for 1, "report" for 8)."""
    return singular if n == 1 else plural
