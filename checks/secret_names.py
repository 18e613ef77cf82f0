"""Which names hold secrets: environment variables, flags and keys (pure, no I/O).

Used by the bundle redaction (for names in captured text, and for the allow-listed variables
that still look secret) and by baselines, which record the ASCEND_* environment.
"""

from __future__ import annotations

import re

REDACTED = "<redacted>"

# Name parts (split on `_`, `-`, `.`; upper-cased) that make a name secret whatever else the
# name says: `NUM_SECRETS` holds secrets, `MAX_PASSWORD_AGE` may well be one.
_STRONG_PARTS = frozenset({
    "SECRET", "SECRETS", "PASSWORD", "PASSWORDS", "PASSWD", "PASSPHRASE", "PASS", "SSHPASS",
    "CREDENTIAL", "CREDENTIALS", "CRED", "CREDS", "PRIVATE", "APIKEY", "ACCESSKEY",
    "SECRETKEY", "SIGNATURE", "AUTH", "COOKIE", "COOKIES", "JWT", "PAT", "WEBHOOK", "DSN",
    "PRIVKEY", "PSK",
})
# Parts that make a name secret unless a tokenizer or sizing word says otherwise (`bos_token`,
# `max_tokens`, `num_key_value_heads`, `pad_token_id` are not secrets, and masking them would
# break the replay of tokenizer and checkpoint checks).
_WEAK_PARTS = frozenset({"AK", "SK", "KEY", "KEYS", "TOKEN", "TOKENS", "SESSION"})
# Anywhere in a name (`MYPASSWORD`, `aws_secret_access_key`, `GOOGLE_CREDENTIALS_JSON`).
_STRONG_SUBSTRINGS = ("SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "PRIVATE", "COOKIE",
                      "APIKEY", "ACCESSKEY", "AUTHTOKEN", "PASSPHRASE", "WEBHOOK", "AUTHCODE",
                      "AUTHKEY")
# A part ending like this is secret too (`HFTOKEN`, `apiKey` -> `APIKEY`, `DBPASS`).
_WEAK_SUFFIXES = ("TOKEN", "KEY")
_BENIGN_PARTS = frozenset({
    "BOS", "EOS", "PAD", "UNK", "CLS", "SEP", "MASK", "SPECIAL", "MAX", "MIN", "NUM", "VOCAB",
    "TYPE", "LEN", "LENGTH", "COUNT", "SIZE", "LIMIT", "START", "DECODER", "TOKENIZER",
    "HEADS", "PARALLELISM",
})
_PART_SPLIT = re.compile(r"[^A-Z0-9]+")


def is_secret_name(name: str) -> bool:
    """Does a variable, flag or key name look like it holds a secret?"""
    upper = name.upper()
    parts = [p for p in _PART_SPLIT.split(upper) if p]
    if any(p in _STRONG_PARTS for p in parts) or any(s in upper for s in _STRONG_SUBSTRINGS):
        return True
    if len(parts) > 1 and "PWD" in parts:  # MYSQL_PWD; PWD alone is the working directory
        return True
    if any(p in _BENIGN_PARTS for p in parts) or upper.endswith(("TOKEN_ID", "TOKEN_IDS")):
        return False
    if parts in (["KEY"], ["KEYS"]):  # a bare `key` is a lookup key (`{"key": "npu:0/1"}`)
        return False
    return any(p in _WEAK_PARTS or p.endswith(_WEAK_SUFFIXES) for p in parts)
