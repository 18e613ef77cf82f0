"""Every entry point judges through checks.doctor.run: `ascend-doctor` (live and `--from`), its
`--prometheus` file and `bundle`, each driven once with a spy around the real function; and no
module but checks.doctor calls the runner, read from the source of every package, the benches
and the scripts (a planted caller is reported)."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import FakeRoot
from machines import build_a2

from checks import doctor
from checks.cli import main
from checks.policy import Policy
from probes.target.find import Observed

ROOT = Path(__file__).resolve().parent.parent.parent
SOURCES = ("probes", "checks", "engine", "console", "playbooks", "demo_models", "bench",
           "scripts")
RUNNER_HOME = "checks/runner.py"
THE_FACE = "checks/doctor.py"


# -- the runner is called from one place ---------------------------------------------------------


def runner_callers(root: Path, sources: tuple[str, ...] = SOURCES) -> list[str]:
    """Modules other than checks.runner and checks.doctor that import the runner's run_checks
    (by name, or the runner module itself, whose only function is to run checks)."""
    found = []
    for path in _python_files(root, sources):
        rel = path.relative_to(root).as_posix()
        if rel in (RUNNER_HOME, THE_FACE):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom) and _imports_the_runner(node):
                found.append(f"{rel}:{node.lineno}")
    return found


def _python_files(root: Path, sources: tuple[str, ...]) -> Iterator[Path]:
    for name in sources:
        yield from sorted((root / name).rglob("*.py"))


def _imports_the_runner(node: ast.Import | ast.ImportFrom) -> bool:
    if isinstance(node, ast.ImportFrom) and node.module == "checks.runner":
        return any(alias.name == "run_checks" for alias in node.names)
    if isinstance(node, ast.ImportFrom) and node.module == "checks":
        return any(alias.name == "runner" for alias in node.names)
    if isinstance(node, ast.Import):
        return any(alias.name == "checks.runner" for alias in node.names)
    return False


def test_only_the_doctor_calls_the_runner() -> None:
    assert runner_callers(ROOT) == []


@pytest.mark.parametrize("line", ["from checks.runner import Run, run_checks",
                                  "import checks.runner as runner",
                                  "from checks import runner"])
def test_a_planted_runner_call_is_reported(tmp_path: Path, line: str) -> None:
    (tmp_path / "checks").mkdir()
    (tmp_path / "checks" / "doctor.py").write_text("from checks.runner import run_checks\n")
    (tmp_path / "checks" / "types.py").write_text("from checks.runner import Run\n")
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "bench_x.py").write_text(f"import os\n\n\ndef f():\n    {line}\n")
    assert runner_callers(tmp_path, ("checks", "bench")) == ["bench/bench_x.py:5"]


# -- each entry point judges through doctor.run --------------------------------------------------


class Spy:
    """doctor.run, called for real; what each call judged."""

    def __init__(self) -> None:
        self.ids: list[list[str]] = []
        self._real = doctor.run

    def __call__(self, observed: Observed, policy: Policy, request: doctor.Request
                 ) -> doctor.Judged:
        judged = self._real(observed, policy, request)
        self.ids.append([r.id for r in judged.run.results])
        return judged


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> Spy:
    found = Spy()
    monkeypatch.setattr(doctor, "run", found)
    return found


def test_a_run_and_its_prometheus_file_are_the_doctors_judgement(
        fake_root: FakeRoot, tmp_path: Path, spy: Spy,
        capsys: pytest.CaptureFixture[str]) -> None:
    build_a2(fake_root)
    prom = tmp_path / "doctor.prom"
    main(["--root", str(fake_root.path), "--json", "--prometheus", str(prom)])
    report = json.loads(capsys.readouterr().out)
    assert spy.ids == [[r["id"] for r in report["results"]]]
    gauges = re.findall(r'ascend_doctor_check_status\{id="([^"]+)"', prom.read_text())
    assert gauges == spy.ids[0]


def test_a_bundle_and_its_replay_are_the_doctors_judgement(
        fake_root: FakeRoot, tmp_path: Path, spy: Spy,
        capsys: pytest.CaptureFixture[str]) -> None:
    build_a2(fake_root)
    out = tmp_path / "a2.tar.gz"
    assert main(["bundle", "--root", str(fake_root.path), "--no-logs", "-o", str(out)]) == 0
    capsys.readouterr()
    assert len(spy.ids) == 1 and len(spy.ids[0]) > 10  # every check, judged once
    main(["--from", str(out), "--json"])
    replayed = json.loads(capsys.readouterr().out)
    assert spy.ids[1] == [r["id"] for r in replayed["results"]] == spy.ids[0]
