"""The policy: thresholds with sources, overridable by a file, plus waivers."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from checks import datafiles

if TYPE_CHECKING:
    import datetime as dt


class PolicyError(Exception):
    """The policy file cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class Waiver:
    """A warn or fail of one check accepted until a date, for a stated reason."""

    check_id: str
    reason: str
    expires: dt.date

    def active(self, today: dt.date) -> bool:
        return today <= self.expires


@dataclass(frozen=True)
class Policy:
    """Every threshold by section and key, the waivers, and where they came from."""

    values: Mapping[str, Mapping[str, Any]]
    waivers: tuple[Waiver, ...] = ()
    source: str = "built-in defaults"

    def get(self, section: str, key: str) -> Any:
        return self.values[section][key]

    def waiver_for(self, check_id: str) -> Waiver | None:
        return next((w for w in self.waivers if w.check_id == check_id), None)


def command_output_bytes(policy: Policy) -> int:
    """The cap on one command's output (runner.command_output_mb), in bytes."""
    return int(float(policy.get("runner", "command_output_mb")) * 1024 * 1024)


def apply_output_cap(host: object, policy: Policy) -> None:
    """Give the live machine under `host` (a Host, or a recorder around one) the policy's
    output cap; a recording runs nothing and is left alone."""
    while not hasattr(host, "max_output_bytes") and hasattr(host, "inner"):
        host = host.inner
    if hasattr(host, "max_output_bytes"):
        host.max_output_bytes = command_output_bytes(policy)


def _defaults() -> dict[str, Any]:
    data = datafiles.load("policy.yaml")
    assert isinstance(data, dict)
    return data


def load_policy(path: Path | None = None) -> Policy:
    defaults = _defaults()
    waivers_raw: Any = defaults.pop("waivers", [])
    values = {k: dict(v) for k, v in defaults.items()}
    source = "built-in defaults"
    if path is not None:
        override = _read_override(path)
        waivers_raw = override.pop("waivers", waivers_raw)
        _merge(values, override, str(path))
        source = str(path)
    return Policy(values, _waivers(waivers_raw, source), source)


def _read_override(path: Path) -> dict[str, Any]:
    from checks.user_yaml import UserYamlError, load_user_yaml

    try:
        data = load_user_yaml(path)
    except OSError as exc:
        raise PolicyError(f"{path}: cannot read policy ({exc.strerror or exc})") from None
    except UserYamlError as exc:
        raise PolicyError(f"{path}: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise PolicyError(f"{path}: a policy is a mapping of sections, not {type(data).__name__}")
    return data


def _merge(values: dict[str, dict[str, Any]], override: dict[str, Any], where: str) -> None:
    for section, entries in override.items():
        if section not in values:
            raise PolicyError(f"{where}: unknown section '{section}' "
                              f"(known: {', '.join(sorted(values))}, waivers)")
        if not isinstance(entries, dict):
            raise PolicyError(f"{where}: section '{section}' must be a mapping")
        for key, value in entries.items():
            if key not in values[section]:
                raise PolicyError(f"{where}: unknown key '{section}.{key}' "
                                  f"(known: {', '.join(sorted(values[section]))})")
            values[section][key] = _typed(values[section][key], value, f"{section}.{key}", where)


# Numbers a policy may hold: finite, not negative, and not absurd; these must also be above 0.
MAX_NUMBER = 1e12
POSITIVE_KEYS = frozenset({"runner.check_timeout_s", "runner.command_output_mb",
                           "checkpoint.fp8_block_size", "hbm_fit.max_seq_len",
                           "hbm_fit.batch_size", "hbm_fit.tensor_parallel_size",
                           "hbm_fit.kv_block_tokens", "console.stale_after_intervals"})


def _typed(default: Any, value: Any, name: str, where: str) -> Any:
    numeric = (int, float)
    if isinstance(default, bool) or isinstance(value, bool):
        ok = isinstance(default, bool) and isinstance(value, bool)
    elif default is None or isinstance(default, numeric):
        ok = (value is None and default is None) or isinstance(value, numeric)
    else:
        ok = isinstance(value, type(default))
    if not ok:
        expected = "a number" if default is None else type(default).__name__
        raise PolicyError(f"{where}: '{name}' must be {expected}, got {_shown(value)}")
    if isinstance(value, numeric) and not isinstance(value, bool):
        _check_range(value, name, where)
    return value


def _check_range(value: float, name: str, where: str) -> None:

    low = "above 0" if name in POSITIVE_KEYS else "0 or more"
    if not (math.isfinite(value) and 0 <= value <= MAX_NUMBER) or (
            name in POSITIVE_KEYS and value <= 0):
        raise PolicyError(f"{where}: '{name}' must be a finite number {low} and at most "
                          f"{MAX_NUMBER:g}, got {_shown(value)}")


def _shown(value: Any) -> str:
    """A value in one short line: a 4,000-digit number or a long string is cut."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**18:
        return "a number of more than 18 digits"
    text = repr(value) if isinstance(value, (str, int, float, bool)) or value is None \
        else f"a {type(value).__name__}"
    return text if len(text) <= 60 else text[:57] + "..."


def _waivers(raw: Any, where: str) -> tuple[Waiver, ...]:
    if not isinstance(raw, list):
        raise PolicyError(f"{where}: 'waivers' must be a list")
    return tuple(_waiver(item, where) for item in raw)


def _waiver(item: Any, where: str) -> Waiver:
    if not isinstance(item, dict) or set(item) != {"id", "reason", "expires"}:
        raise PolicyError(f"{where}: each waiver needs exactly id, reason and expires")
    check_id = item["id"]
    if not isinstance(check_id, str) or not isinstance(item["reason"], (str, int, float)):
        raise PolicyError(f"{where}: a waiver's id and reason must be text, got "
                          f"{_shown(check_id)}")
    return Waiver(check_id, str(item["reason"]), _expiry(item["expires"], check_id, where))


def _expiry(expires: Any, check_id: str, where: str) -> dt.date:
    """A calendar date written YYYY-MM-DD: not a time, not a day that does not exist."""
    import datetime as dt  # only a policy with waivers needs dates

    if isinstance(expires, str) and len(expires) == 10 and expires[4] == expires[7] == "-":
        try:
            return dt.date.fromisoformat(expires)
        except ValueError:
            raise PolicyError(f"{where}: waiver {check_id!r}: 'expires' {_shown(expires)} is "
                              "not a date in the calendar") from None
    raise PolicyError(f"{where}: waiver {check_id!r}: 'expires' must be a date YYYY-MM-DD "
                      f"(no time), got {_shown(expires)}")
