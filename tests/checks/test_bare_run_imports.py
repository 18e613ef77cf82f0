"""A bare run (no --model, no serving process, no Ascend stack, no NPU) skips the checks whose
inputs are absent before their tables and judges are imported: their fronts
(checks/registry.py) read the shared facts first. This keeps `ascend-doctor` quick
(bench/bench_doctor.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

TABLES = ("checks.builtin.serving_rows", "checks.builtin.serving_inputs",
          "checks.builtin.serving_support", "checks.builtin.serving_flags",
          "checks.builtin.versions", "checks.builtin.compat", "checks.builtin.toolchain",
          "checks.data", "checks.builtin.npu", "checks.health_codes", "checks.thermal_codes",
          "checks.builtin.pcie", "checks.builtin.versions_model", "checks.builtin.devices")

CODE = """
import contextlib, io, json, sys
import checks.cli as c
with contextlib.redirect_stdout(io.StringIO()) as out:
    c.main(['--root', sys.argv[1], '--json'])
report = json.loads(out.getvalue())
print(json.dumps({"imported": sorted(m for m in sys.modules if m in sys.argv[2:]),
                  "status": {r["id"]: r["status"] for r in report["results"]}}))
"""


def bare_run(root: Path) -> dict[str, object]:
    """The doctor on an empty tree of its own (--root: no process of this machine is judged)."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    out = subprocess.run([sys.executable, "-c", CODE, str(root), *TABLES], capture_output=True,
                         text=True, timeout=120, env=env, cwd="/")
    assert out.returncode == 0, out.stderr[-800:]
    found: dict[str, object] = json.loads(out.stdout)
    return found


def test_a_bare_run_imports_no_table(tmp_path: Path) -> None:
    found = bare_run(tmp_path)
    assert found["imported"] == []
    status = found["status"]
    assert isinstance(status, dict)
    assert status["versions.parity"] == status["serving.support"] == "skip"
    assert status["serving.flags"] == status["npu.health"] == status["pcie.contention"] == "skip"


def test_a_tree_with_a_toolkit_imports_the_judges(tmp_path: Path) -> None:
    """The front only skips on absence: a CANN toolkit's version file sends the run on."""
    info = tmp_path / "usr/local/Ascend/ascend-toolkit/latest/x86_64-linux"
    info.mkdir(parents=True)
    (info / "ascend_toolkit_install.info").write_text("version=8.2.RC1\n", encoding="utf-8")
    found = bare_run(tmp_path)
    imported = found["imported"]
    assert isinstance(imported, list)
    assert "checks.builtin.versions" in imported and "checks.builtin.compat" in imported
