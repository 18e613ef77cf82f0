"""The doctor's built-in YAML data (policy defaults, compatibility table), read fast.

The YAML files are the source: they carry a comment with the source of every value. Beside each
one, a JSON copy holds the parsed data and a fingerprint of the YAML text it was made from
(`python -m checks.datafiles` writes them; a test keeps them fresh). A run reads the copy while
the fingerprint still matches, so it never imports PyYAML, which is about a tenth of the doctor's
start-up; an edited YAML without a fresh copy is read as YAML, so the data is never stale.
"""

from __future__ import annotations

import json
import sys
import zlib
from pathlib import Path
from typing import Any

PACKAGE_DIR = Path(__file__).resolve().parent
# policy.yaml and every knowledge file under data/ (checks.data)
SOURCES = ("policy.yaml", *sorted(f"data/{p.name}" for p in (PACKAGE_DIR / "data").glob("*.yaml")))
COPY_FORMAT = "ascend-doctor-data/1"


def fingerprint(text: str) -> str:
    """Detects an edit, nothing more: CRC-32 and length of the UTF-8 text."""
    raw = text.encode("utf-8")
    return f"crc32:{zlib.crc32(raw):08x}:{len(raw)}"


def copy_path(source: str) -> Path:
    return (PACKAGE_DIR / source).with_suffix(".json")


def load(source: str) -> Any:
    """The parsed data of a built-in YAML file (`source` relative to the package)."""
    text = (PACKAGE_DIR / source).read_text(encoding="utf-8")
    try:
        copy = json.loads(copy_path(source).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        copy = None
    if (isinstance(copy, dict) and copy.get("format") == COPY_FORMAT
            and copy.get("fingerprint") == fingerprint(text)):
        return copy["data"]
    return _parse_yaml(text)


def _parse_yaml(text: str) -> Any:
    import yaml

    loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load(text, Loader=loader)


def render_copy(source: str) -> str:
    """The JSON copy of `source` as it should be on disk."""
    text = (PACKAGE_DIR / source).read_text(encoding="utf-8")
    document = {"format": COPY_FORMAT,
                "note": f"generated from checks/{source} by `python -m checks.datafiles`; "
                        "edit the YAML, not this file",
                "fingerprint": fingerprint(text), "data": _parse_yaml(text)}
    return json.dumps(document, indent=1, ensure_ascii=False) + "\n"


def main() -> int:
    for source in SOURCES:
        path = copy_path(source)
        path.write_text(render_copy(source), encoding="utf-8")
        print(f"wrote {path.relative_to(PACKAGE_DIR.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
