"""The import rules of DESIGN.md §1, checked in fresh interpreters."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _all_modules(package: str) -> list[str]:
    pkg_dir = ROOT / package
    names = [package]
    for info in pkgutil.walk_packages([str(pkg_dir)], prefix=f"{package}."):
        if not info.name.endswith(".__main__"):  # `python -m` entry points run when imported
            names.append(info.name)
    return names


def _loaded_after_import(modules: list[str]) -> set[str]:
    code = (
        "import importlib, json, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "print(json.dumps(sorted(m.split('.')[0] for m in sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, check=True)
    return set(json.loads(out.stdout))


@pytest.mark.parametrize("package", ["probes", "checks", "playbooks"])
def test_judging_packages_load_neither_torch_nor_textual(package: str) -> None:
    loaded = _loaded_after_import(_all_modules(package))
    assert not loaded & {"torch", "textual", "transformers"}, package


def test_engine_loads_no_textual() -> None:
    loaded = _loaded_after_import(_all_modules("engine"))
    assert "textual" not in loaded


def test_the_rule_would_notice_a_violation() -> None:
    loaded = _loaded_after_import(["json", "textual"])
    assert "textual" in loaded


# Loaded only when a run needs them (issue #3, start-up): --model, --baseline, --junit, a
# --policy file, an npu-smi output to parse, a chip that is not OK, a program to run, Ascend
# version files, an Ascend PCI function, a CANN toolkit. rich and shutil never: the run report
# writes its own ANSI.
LAZY = ("probes.model.reader", "checks.baseline", "probes.npu_smi", "probes.npu_smi.kv",
        "xml.etree.ElementTree", "importlib.metadata", "torch", "transformers", "yaml",
        "checks.builtin.checkpoint", "checks.builtin.tokenizer",
        "checks.builtin.tokenizer_ids", "checks.builtin.hbm_fit",
        "checks.builtin.baseline", "subprocess", "concurrent.futures", "logging",
        "probes.version_files", "probes.pci", "probes.libraries", "rich", "shutil",
        # the endpoint checks: only with --endpoint URL
        "checks.builtin.endpoint", "probes.http", "probes.prometheus", "httpx",
        "prometheus_client",
        # engine.op-coverage and the ops/bench commands: only when asked for
        "checks.builtin.ops", "checks.cli.ops_view", "checks.cli.bench_view", "engine.tools.opscan",
        # the median without statistics (and its decimal, fractions, random); the temperature
        # rule only where a table is judged; the JSON timestamp without datetime; argparse's
        # sub-command parsers and their options only for a sub-command; the --model readers
        "statistics", "decimal", "fractions", "checks.thermal", "datetime",
        "checks.command_options", "numpy", "tokenizers", "jinja2", "probes.model.float_values",
        "probes.model.chat_template", "checks.builtin.tokenizer_load", "probes.model.config",
        # what only a process target needs
        "probes.target.parts", "probes.pyenv_static", "probes.target.serving")


@pytest.mark.parametrize("report", [["--json"], []], ids=["json", "terminal"])
def test_a_run_without_model_imports_only_what_it_needs(tmp_path: Path,
                                                         report: list[str]) -> None:
    code = (
        "import io, contextlib, json, sys\n"
        "import checks.cli as cli\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    cli.main(['--root', {str(tmp_path)!r}, *{report!r}])\n"
        f"print(json.dumps([m for m in {LAZY!r} if m in sys.modules]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, check=True)
    assert json.loads(out.stdout.splitlines()[-1]) == []


def test_discovery_on_a_bare_run_imports_only_what_it_needs(tmp_path: Path) -> None:
    """A live run with no --root looks for the serving process (/proc, npu-smi): reading /proc
    must stay as cheap as the rest. PATH holds no npu-smi, as on a machine without NPUs, and
    /proc is one the test builds (the real one may hold another run's servers)."""
    (tmp_path / "proc").mkdir()
    code = (
        "import io, contextlib, json, sys\n"
        "import checks.cli as cli, probes.target.proc as proc\n"
        f"proc.PROC = {str(tmp_path / 'proc')!r}\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    cli.main(['--json'])\n"
        f"print(json.dumps([m for m in {LAZY!r} if m in sys.modules]))\n"
    )
    env = {"PATH": str(tmp_path), "HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, check=True, env=env)
    assert json.loads(out.stdout.splitlines()[-1]) == []


def test_every_check_still_registers() -> None:
    code = ("import json; from checks.registry import all_checks; "
            "print(json.dumps([c.id for c in all_checks()]))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, check=True)
    ids = set(json.loads(out.stdout))
    assert {"checkpoint.format", "checkpoint.fp8-scales", "baseline.drift", "npu.health",
            "npu.hbm-fit", "tokenizer.dtype", "versions.parity"} <= ids
