"""The policy: thresholds with sources, overridable by a file, plus waivers."""

from __future__ import annotations

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
    import yaml  # only for a user's file: the defaults come without it

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PolicyError(f"{path}: cannot read policy ({exc.strerror or exc})") from None
    except yaml.YAMLError as exc:
        raise PolicyError(f"{path}: not valid YAML ({_first_line(exc)})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise PolicyError(f"{path}: a policy is a mapping of sections, not {type(data).__name__}")
    return data


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


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
        raise PolicyError(f"{where}: '{name}' must be {expected}, got {value!r}")
    return value


def _waivers(raw: Any, where: str) -> tuple[Waiver, ...]:
    if not isinstance(raw, list):
        raise PolicyError(f"{where}: 'waivers' must be a list")
    return tuple(_waiver(item, where) for item in raw)


def _waiver(item: Any, where: str) -> Waiver:
    import datetime as dt  # only a policy with waivers needs dates

    if not isinstance(item, dict) or set(item) != {"id", "reason", "expires"}:
        raise PolicyError(f"{where}: each waiver needs exactly id, reason and expires")
    expires = item["expires"]
    if isinstance(expires, str):
        try:
            expires = dt.date.fromisoformat(expires)
        except ValueError:
            raise PolicyError(f"{where}: waiver {item['id']}: expires must be YYYY-MM-DD") from None
    if not isinstance(expires, dt.date):
        raise PolicyError(f"{where}: waiver {item['id']}: expires must be YYYY-MM-DD")
    return Waiver(str(item["id"]), str(item["reason"]), expires)
