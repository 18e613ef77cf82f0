"""Building one kind into a directory: up-to-date detection, staging, the demo.json record.

Each output directory carries a `demo.json` describing what it holds; a second build with
the same options finds it and skips ("up to date"), `force` rebuilds. Directories are built
in a staging folder next to `--out` and moved into place, so a failed build leaves nothing
half written.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

from demo_models.base import BuildOptions, DemoError, write_json
from demo_models.kinds import KINDS
from demo_models.smollm2 import SMOLLM2_DIST

FORMAT_VERSION = 3  # bump when a kind's output changes, so old builds are rebuilt
DEMO_FILE = "demo.json"


def expected_record(options: BuildOptions) -> dict[str, Any]:
    record: dict[str, Any] = {"kind": options.kind, "format_version": FORMAT_VERSION}
    if KINDS[options.kind].safetensors:
        record["options"] = {"scale_dtype": options.scale_dtype, "shards": options.shards}
    return record


def listed_files(out: Path) -> Iterator[Path]:
    for entry in sorted(out.iterdir()):
        if entry.is_file() and entry.name != DEMO_FILE:
            yield entry


def read_record(out: Path) -> dict[str, Any] | None:
    try:
        record = json.loads((out / DEMO_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def is_up_to_date(out: Path, options: BuildOptions) -> bool:
    """demo.json matches the options and every file it lists is there with its size."""
    record = read_record(out)
    if record is None:
        return False
    if any(record.get(key) != value for key, value in expected_record(options).items()):
        return False
    if "source" in record:
        try:
            if record["source"].get("version") != metadata.version(SMOLLM2_DIST):
                return False
        except metadata.PackageNotFoundError:
            return False
    files = record.get("files")
    if not isinstance(files, dict) or not files:
        return False
    return all((out / name).is_file() and (out / name).stat().st_size == size
               for name, size in files.items())


def check_out_dir(out: Path) -> None:
    """Refuse to replace a non-empty directory that is not a demo build."""
    if out.exists() and not out.is_dir():
        raise DemoError(f"--out {out} exists and is not a directory; choose another --out")
    if out.is_dir() and any(out.iterdir()) and read_record(out) is None:
        raise DemoError(f"--out {out} is a non-empty directory without {DEMO_FILE}; "
                        f"choose an empty or new --out")


def replace_dir(staging: Path, out: Path) -> None:
    if out.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
        out.rename(old / out.name)
        staging.rename(out)
        shutil.rmtree(old, ignore_errors=True)
    else:
        staging.rename(out)


def build(out: Path, options: BuildOptions, force: bool = False) -> tuple[bool, dict[str, Any]]:
    """Build `options.kind` into `out`; (False, record) when already up to date."""
    if not force and is_up_to_date(out, options):
        record = read_record(out)
        assert record is not None
        return False, record
    check_out_dir(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DemoError(f"cannot create {out.parent}: {exc.strerror}; choose another --out") \
            from None
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.building-", dir=out.parent))
    staging.chmod(0o755)  # mkdtemp makes it private; the result is an ordinary directory
    try:
        started = time.monotonic()
        record = expected_record(options)
        record.update(KINDS[options.kind].build(staging, options))
        for path in listed_files(staging):
            path.chmod(0o644)  # some writers create private files
        record["files"] = {p.name: p.stat().st_size for p in listed_files(staging)}
        record["build_seconds"] = round(time.monotonic() - started, 2)
        write_json(staging / DEMO_FILE, record)
        replace_dir(staging, out)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return True, record
