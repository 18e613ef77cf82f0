"""The package scan that runs inside the inspected interpreter.

Another interpreter runs this file's text with `-c`; the current one imports it. It must stay
runnable on Python 3.8 and import nothing from this package.

The first distribution per PEP 503 name in sys.path order wins: that is the one `import` would
load. The empty entry (cwd, added by -c) is skipped: it is the doctor's cwd, not the
deployment's.

It reports what importlib.metadata reports (Name and Version from the METADATA or PKG-INFO
header, the same dist-info/egg-info candidates in the same order as its path finder), but lists
directories with os.listdir and reads only the header lines: importing importlib.metadata
(email, pathlib objects per file) was most of the cost. A zip on sys.path is left to
importlib.metadata itself.
"""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Any

# Marks our line, so output from a chatty sitecustomize or .pth file cannot confuse us.
MARKER = "ASCEND_DOCTOR_PYENV "

def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name.strip()).lower()


def header(lines: list[str]) -> tuple[str, str]:
    found: dict[str, str] = {}
    for line in lines:
        if not line.strip():
            break
        key, _, value = line.partition(":")
        if key in ("Name", "Version") and key not in found:
            found[key] = value.strip()
    return found.get("Name", ""), found.get("Version", "")


def head_file(path: str) -> tuple[str, str] | None:
    """Name and Version from one metadata file's header; None where importlib.metadata reads
    no text. Reading stops at the header's end, or once both are known: the first of each
    wins, so the rest cannot change them."""
    found: dict[str, str] = {}
    read = False
    try:
        with open(path, encoding="utf-8") as handle:
            for raw in handle:
                read = True
                for line in raw.splitlines() or [""]:
                    if not line.strip():
                        return found.get("Name", ""), found.get("Version", "")
                    key, _, value = line.partition(":")
                    if key in ("Name", "Version") and key not in found:
                        found[key] = value.strip()
                if len(found) == 2:
                    return found["Name"], found["Version"]
    except (OSError, UnicodeDecodeError):
        return None
    return (found.get("Name", ""), found.get("Version", "")) if read else None


def head_dir(meta_dir: str) -> tuple[str, str]:
    for filename in ("METADATA", "PKG-INFO"):
        found = head_file(os.path.join(meta_dir, filename))
        if found is not None:
            return found
    return "", ""


def candidates(entry: str) -> list[str]:
    """importlib.metadata's order: dist-info/egg-info grouped by their normalised directory
    name in listing order, then the EGG-INFO of an .egg entry."""
    groups: dict[str, list[str]] = {}
    eggs = []
    base = os.path.basename(entry).lower()
    for child in os.listdir(entry):
        low = child.lower()
        if low.endswith((".dist-info", ".egg-info")):
            key = re.sub(r"[-_.]+", "-", low.rpartition(".")[0].partition("-")[0])
            groups.setdefault(key.replace("-", "_"), []).append(os.path.join(entry, child))
        elif base.endswith(".egg") and low == "egg-info":
            eggs.append(os.path.join(entry, "EGG-INFO"))
    return [path for group in groups.values() for path in group] + eggs


def zipped(entry: str) -> list[tuple[str, str]]:
    try:
        from importlib import metadata
    except ImportError:
        return []

    def head(dist: Any) -> tuple[str, str]:
        text = dist.read_text("METADATA") or dist.read_text("PKG-INFO") or ""
        return header(text.splitlines())

    return [head(dist) for dist in metadata.distributions(path=[entry])]


def found_in(entry: str) -> list[tuple[str, str]]:
    if os.path.isdir(entry):
        try:
            return [head_dir(path) for path in candidates(entry)]
        except OSError:
            return []
    if os.path.isfile(entry):
        return zipped(entry)
    return []


def scan(entries: list[str]) -> dict[str, dict[str, str]]:
    seen: dict[str, dict[str, str]] = {}
    for entry in entries:
        if not entry:
            continue
        for name, version in found_in(entry):
            if not name or norm(name) in seen:
                continue
            seen[norm(name)] = {"version": version, "location": entry}
    return seen


def report() -> dict[str, Any]:
    return {"version": sys.version, "executable": sys.executable, "packages": scan(sys.path)}


if __name__ == "__main__":
    print(MARKER + json.dumps(report()))
