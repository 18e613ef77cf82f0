"""Which names hold secrets: environment variables, flags and keys (pure, no I/O).

Used by the bundle redaction and by baselines, which record the ASCEND_* environment.
"""

from __future__ import annotations

import re

REDACTED = "<redacted>"

# Name parts (split on `_`, `-`, `.`; upper-cased) that make a name secret on their own.
_SECRET_PARTS = frozenset({
    "AK", "SK", "KEY", "KEYS", "PASS", "AUTH", "SESSION", "COOKIE", "COOKIES", "TOKEN",
    "TOKENS", "SECRET", "SECRETS", "PASSWORD", "PASSWORDS", "PASSWD", "PASSPHRASE",
    "CREDENTIAL", "CREDENTIALS", "PRIVATE", "APIKEY", "ACCESSKEY", "SECRETKEY", "SIGNATURE",
})
# Anywhere in a name (`MYPASSWORD`, `aws_secret_access_key`, `GOOGLE_CREDENTIALS_JSON`).
_SECRET_SUBSTRINGS = ("SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "PRIVATE", "COOKIE",
                      "APIKEY", "ACCESSKEY", "AUTHTOKEN", "PASSPHRASE")
# A part ending like this is secret too (`HFTOKEN`, `apiKey` -> `APIKEY`).
_SECRET_SUFFIXES = ("TOKEN", "KEY")
# Tokenizer and sizing vocabulary: `bos_token`, `max_tokens`, `pad_token_id` are not secrets,
# and masking them would break the replay of tokenizer and checkpoint checks.
_BENIGN_PARTS = frozenset({
    "BOS", "EOS", "PAD", "UNK", "CLS", "SEP", "MASK", "SPECIAL", "MAX", "MIN", "NUM", "VOCAB",
    "TYPE", "LEN", "LENGTH", "COUNT", "SIZE", "LIMIT", "START", "DECODER", "TOKENIZER",
})
_PART_SPLIT = re.compile(r"[^A-Z0-9]+")


def is_secret_name(name: str) -> bool:
    """Does a variable, flag or key name look like it holds a secret?"""
    upper = name.upper()
    parts = [p for p in _PART_SPLIT.split(upper) if p]
    if any(p in _BENIGN_PARTS for p in parts) or upper.endswith(("TOKEN_ID", "TOKEN_IDS")):
        return False
    return (any(p in _SECRET_PARTS or p.endswith(_SECRET_SUFFIXES) for p in parts)
            or any(s in upper for s in _SECRET_SUBSTRINGS))
