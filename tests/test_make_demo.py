"""`make demo` as a newcomer runs it outside a terminal (CI, a pipe): the three doctor runs
the README describes, then what to do next. Run with a stand-in .venv (its python and
ascend-doctor are scripts that echo), so the Makefile's own steps are what is tested."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def stand_in_venv(venv: Path) -> None:
    (venv / "bin").mkdir(parents=True)
    for name in ("python", "ascend-doctor", "ascend-console"):
        script = venv / "bin" / name
        script.write_text(f'#!/bin/sh\necho "{name} $*"\n')
        script.chmod(0o755)
    (venv / ".installed").touch()  # newer than pyproject.toml: no install


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_demo_outside_a_terminal_runs_the_doctor_then_says_what_next(
        tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    stand_in_venv(venv)
    done = subprocess.run(["make", "--no-print-directory", "demo", f"VENV={venv}",
                           f"DEMO_DIR={tmp_path / 'assets'}"], cwd=ROOT, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "MAKEFLAGS": ""})
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert f"ascend-doctor --from {tmp_path / 'assets'}/a2-recorded" in out
    assert f"ascend-doctor npu --from {tmp_path / 'assets'}/a2-recorded" in out
    tail = out[out.index("ascend-doctor npu --from"):]
    assert f"next: . {venv}/bin/activate" in tail
    for command in ("ascend-console", "ascend-doctor --help", "ascend-doctor explain ID",
                    "ascend-doctor triage LOG"):
        assert f"  {command}" in tail


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_the_install_note_does_not_claim_an_error_was_printed(tmp_path: Path) -> None:
    # pip prints the resolver ERROR only sometimes (not with the wheels already installed)
    venv = tmp_path / "fresh-venv"  # no stamp: `make -n` lists the install's commands
    done = subprocess.run(["make", "-n", "--no-print-directory", f"{venv}/.installed",
                           f"VENV={venv}"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, env={**os.environ, "MAKEFLAGS": ""})
    assert done.returncode == 0, done.stderr
    assert "if pip printed a 'dependency resolver' ERROR" in done.stdout
    assert "expected and harmless" in done.stdout and "ERROR above" not in done.stdout
