"""The baseline file: `ascend-baseline/1` YAML, written and read back (a bad file is a
BaselineError naming the file and the key)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from checks.baseline.model import (
    PROBE_TEXT,
    SCHEMA,
    SCHEMA_MAJOR,
    SCHEMA_NAME,
    STACK_ITEMS,
    Baseline,
    BaselineError,
    NpuInventory,
    TokenizerFingerprint,
)
from probes.host import normalise_dist_name

# -- the file ---------------------------------------------------------------------------------


def to_data(baseline: Baseline) -> dict[str, Any]:
    data: dict[str, Any] = {
        "schema": SCHEMA,
        "recorded_at": baseline.recorded_at,
        "host": baseline.host,
        "versions": dict(baseline.versions),
        "environment": dict(baseline.environment),
        "npu": None if baseline.npu is None else {
            "count": baseline.npu.count,
            "chips": list(baseline.npu.chips),
            "hbm_total_mb": list(baseline.npu.hbm_total_mb),
        },
    }
    tok = baseline.tokenizer
    if tok is not None:
        data["tokenizer"] = {
            "vocab_size": tok.vocab_size,
            "special_ids": dict(tok.special_ids),
            "probe_text": tok.probe_text,
            "ids": list(tok.ids),
            "ids_dtype": tok.ids_dtype,
            "mask_dtype": tok.mask_dtype,
        }
    return data


HEADER = ("# ascend-doctor baseline of a validated machine (ascend-baseline/1).\n"
          "# Compare a machine with it: ascend-doctor --baseline THIS_FILE\n")


def to_yaml(baseline: Baseline) -> str:
    return HEADER + yaml.safe_dump(to_data(baseline), sort_keys=False, allow_unicode=True)


def load_baseline(path: Path) -> Baseline:
    from checks.user_yaml import UserYamlError, load_user_yaml

    try:
        raw = load_user_yaml(path)
    except OSError as exc:
        raise BaselineError(f"--baseline {path}: cannot read ({exc.strerror or exc})") from None
    except UserYamlError as exc:
        raise BaselineError(f"--baseline {path}: {exc}") from None
    try:
        return from_data(raw)
    except KeyError as exc:
        raise BaselineError(f"--baseline {path}: the key {exc} is missing; record a new one "
                            "with `ascend-doctor baseline record`") from None
    except (TypeError, ValueError, OverflowError) as exc:
        raise BaselineError(f"--baseline {path}: {exc}; record a new one with "
                            "`ascend-doctor baseline record`") from None


def _mapping(raw: Any, what: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise TypeError(f"'{what}' must be a mapping")
    return raw


def _strings(raw: Any, what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in _mapping(raw, what).items():
        if not isinstance(value, str):
            shown = str(value) if isinstance(value, (int, float, bool)) else "..."
            raise TypeError(f"'{what}.{str(key)[:60]}' must be a string (quote it: "
                            f"'{shown[:40]}')")
        out[str(key)] = value
    return out


def _count(raw: Any, what: str) -> int:
    """A non-negative integer of plausible size (a vocabulary, a chip count)."""
    if not isinstance(raw, int) or isinstance(raw, bool) or not 0 <= raw < 2**40:
        raise TypeError(f"'{what}' must be a whole number from 0 to 2**40")
    return raw


def from_data(raw: Any) -> Baseline:
    data = _mapping(raw, "the file")
    schema = str(data.get("schema", ""))
    name, _, version = schema.partition("/")
    if name != SCHEMA_NAME or version.split(".", 1)[0] != SCHEMA_MAJOR:
        raise ValueError(f"schema {schema!r} is not {SCHEMA}")
    versions = {normalise_dist_name(k) if k not in STACK_ITEMS else k: v
                for k, v in _strings(data.get("versions", {}), "versions").items()}
    return Baseline(
        recorded_at=str(data.get("recorded_at", "")),
        host=str(data.get("host", "")),
        versions=versions,
        environment=_strings(data.get("environment", {}), "environment"),
        npu=_npu_from(data.get("npu")),
        tokenizer=_tokenizer_from(data.get("tokenizer")),
    )


def _npu_from(raw: Any) -> NpuInventory | None:
    if raw is None:
        return None
    npu = _mapping(raw, "npu")
    chips = npu.get("chips", [])
    hbm = npu.get("hbm_total_mb", [])
    if not isinstance(chips, list) or not isinstance(hbm, list):
        raise TypeError("'npu.chips' and 'npu.hbm_total_mb' must be lists")
    if any(v is not None and (not isinstance(v, int) or isinstance(v, bool)) for v in hbm):
        raise TypeError("'npu.hbm_total_mb' must hold integers (MB) or null")
    count = _count(npu.get("count", len(chips)), "npu.count")
    return NpuInventory(count, tuple(str(c) for c in chips), tuple(hbm))


def _tokenizer_from(raw: Any) -> TokenizerFingerprint | None:
    if raw is None:
        return None
    tok = _mapping(raw, "tokenizer")
    ids = tok["ids"]
    if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
        raise TypeError("'tokenizer.ids' must be a list of integers")
    specials = _mapping(tok.get("special_ids", {}), "tokenizer.special_ids")
    return TokenizerFingerprint(
        vocab_size=_count(tok["vocab_size"], "tokenizer.vocab_size"),
        special_ids={str(k): v if isinstance(v, int) else None for k, v in specials.items()},
        probe_text=str(tok.get("probe_text", PROBE_TEXT)),
        ids=tuple(ids),
        ids_dtype=str(tok["ids_dtype"]),
        mask_dtype=None if tok.get("mask_dtype") is None else str(tok["mask_dtype"]),
    )
