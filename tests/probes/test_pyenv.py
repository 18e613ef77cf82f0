from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FakeRoot

from probes.host import CommandResult
from probes.live import LiveHost
from probes.pyenv import MARKER, inspect_current, inspect_python, parse_report

PY_DIR = f"python{sys.version_info.major}.{sys.version_info.minor}"


def make_venv(where: Path, copies: bool = False) -> Path:
    args = [sys.executable, "-m", "venv", "--without-pip", str(where)]
    subprocess.run([*args, "--copies"] if copies else args, check=True, timeout=120)
    return where / "bin" / "python"


def add_dist(site: Path, name: str, version: str) -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("venv") / "env"
    python = make_venv(where)
    add_dist(where / "lib" / PY_DIR / "site-packages", "torch-npu", "2.5.1.post1")
    return python


def clean_env() -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}


def test_venv_distribution_is_seen(venv: Path) -> None:
    found = inspect_python(str(venv), clean_env())
    assert found.error == ""
    assert found.interpreter == str(venv)
    assert found.python_version == sys.version.split()[0]
    assert found.version_of("torch_npu") == "2.5.1.post1"
    assert found.version_of("Torch-NPU") == "2.5.1.post1"
    assert found.locations["torch-npu"].endswith("site-packages")
    # the doctor's own packages are not in a fresh venv
    assert found.version_of("pyyaml") is None


def test_pythonpath_takes_precedence(venv: Path, tmp_path: Path) -> None:
    shadow = tmp_path / "shadow"
    add_dist(shadow, "torch_npu", "2.4.0")
    found = inspect_python(str(venv), {**clean_env(), "PYTHONPATH": str(shadow)})
    assert found.version_of("torch-npu") == "2.4.0"
    assert found.locations["torch-npu"] == str(shadow)


def test_missing_interpreter(tmp_path: Path) -> None:
    found = inspect_python(str(tmp_path / "nope" / "python"), clean_env())
    assert found.error
    assert "\n" not in found.error
    assert found.packages == {}


def fake_interpreter(tmp_path: Path, body: str) -> str:
    script = tmp_path / "python"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)
    return str(script)


def test_timeout(tmp_path: Path) -> None:
    found = inspect_python(fake_interpreter(tmp_path, "exec sleep 10\n"), clean_env(), 0.3)
    assert "did not answer" in found.error


def test_nonzero_exit_names_last_stderr_line(tmp_path: Path) -> None:
    python = fake_interpreter(tmp_path, "echo 'first' >&2; echo 'Fatal: no stdlib' >&2; exit 1\n")
    found = inspect_python(python, clean_env())
    assert found.error.endswith("exited with code 1: Fatal: no stdlib")


def test_not_a_python(tmp_path: Path) -> None:
    found = inspect_python(fake_interpreter(tmp_path, "echo hello\n"), clean_env())
    assert "no report" in found.error


def test_bad_json(tmp_path: Path) -> None:
    found = inspect_python(fake_interpreter(tmp_path, f"echo '{MARKER}{{bad'\n"), clean_env())
    assert "unreadable report" in found.error
    assert "\n" not in found.error


def test_noise_before_report_is_ignored() -> None:
    line = MARKER + '{"version": "3.8.10 (x)", "packages": {"Torch_NPU": '
    line += '{"version": "2.1.0", "location": "/site"}}}'
    found = parse_report("/py", "sitecustomize says hi\n" + line + "\n")
    assert found.python_version == "3.8.10"
    assert found.packages == {"torch-npu": "2.1.0"}


def test_injected_runner_is_used() -> None:
    def run(argv: object, timeout_s: float) -> CommandResult:
        return CommandResult(argv=("x",), outcome="not_found")

    assert "not found" in inspect_python("/py", {}, run=run).error


def test_live_host_under_root_inspects_the_root_interpreter(fake_root: FakeRoot) -> None:
    python = make_venv(fake_root.path / "opt" / "venv", copies=True)
    add_dist(fake_root.path / "opt" / "venv" / "lib" / PY_DIR / "site-packages", "vllm", "0.9.1")
    host = LiveHost(root=str(fake_root.path), env=clean_env(), python="/opt/venv/bin/python")
    found = host.python_packages()
    assert python.exists()
    assert found.error == ""
    assert found.interpreter == "/opt/venv/bin/python"
    assert found.version_of("vllm") == "0.9.1"
    assert found.locations["vllm"] == f"/opt/venv/lib/{PY_DIR}/site-packages"


def test_a_symlinked_venv_interpreter_reports_the_venv(tmp_path: Path) -> None:
    """bin/python links to the base interpreter; with a stripped environment the venv is still
    found (pyvenv.cfg beside the path it was started as), by the -c scan and the static
    derivation alike, and both agree with the interpreter's own sys.path."""
    import json

    from probes.pyenv_static import inspect_static
    from probes.target.proc import ProcReader

    python = make_venv(tmp_path / "env")
    site = tmp_path / "env" / "lib" / PY_DIR / "site-packages"
    add_dist(site, "fakepkg", "1.2.3")
    assert python.is_symlink() and not (python.resolve().parent.parent / "pyvenv.cfg").exists()
    code = "import json, sys, time; print(json.dumps(sys.path), flush=True); time.sleep(60)"
    proc = subprocess.Popen([str(python), "-c", code], env={}, stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout is not None
        own = json.loads(proc.stdout.readline())
        reader = ProcReader()
        info, _ = reader.process(proc.pid)
        assert info.exe is not None
        static = inspect_static(LiveHost(), info.exe, info.cmdline, {}, info.cwd)
    finally:
        proc.kill()
        proc.wait()
    asked = LiveHost(root="/", env={}, python=str(python)).python_packages()
    assert str(site) in own
    for found in (asked, static.environment):
        assert found.error == ""
        assert dict(found.packages) == {"fakepkg": "1.2.3"}  # not the base interpreter's
        assert found.locations["fakepkg"] == str(site)
    assert static.derived is not None
    assert list(static.derived.entries) == [p for p in own if os.path.isdir(p)]


def _importlib_metadata_view(path: list[str]) -> dict[str, tuple[str, str]]:
    """What importlib.metadata reports: first distribution per normalised name on `path`."""
    import re
    from importlib import metadata

    seen: dict[str, tuple[str, str]] = {}
    for entry in path:
        if not entry:
            continue
        for dist in metadata.distributions(path=[entry]):
            name = dist.metadata["Name"]
            key = re.sub(r"[-_.]+", "-", (name or "").strip()).lower()
            if name and key not in seen:
                seen[key] = (dist.version, entry)
    return seen


def test_fast_scan_agrees_with_importlib_metadata_for_this_environment() -> None:
    env = inspect_current()
    assert not env.error
    fast = {name: (env.packages[name], env.locations[name]) for name in env.packages}
    assert fast == _importlib_metadata_view(sys.path)
    assert "rich" in fast and "pytest" in fast


def test_fast_scan_agrees_on_odd_metadata_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                ) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    add_dist(first, "Zope.Interface", "6.0")
    add_dist(second, "zope-interface", "5.0")  # shadowed by the first entry
    empty = first / "empty-1.0.dist-info"
    empty.mkdir()
    (empty / "METADATA").write_text("")
    (empty / "PKG-INFO").write_text("Name: from-pkg-info\nVersion: 2\n\nName: body\n")
    legacy = first / "legacy.egg-info"  # egg-info without a version in its name
    legacy.mkdir()
    (legacy / "PKG-INFO").write_text("Metadata-Version: 1.0\nName: Legacy\nVersion: 0.3.dev1\n")
    (first / "not-metadata.txt").write_text("x")
    monkeypatch.setattr(sys, "path", [str(first), "", str(tmp_path / "missing"), str(second)])
    env = inspect_current()
    fast = {name: (env.packages[name], env.locations[name]) for name in env.packages}
    assert fast == _importlib_metadata_view(sys.path)
    assert fast["zope-interface"] == ("6.0", str(first))
    assert fast["from-pkg-info"] == ("2", str(first))
    assert fast["legacy"] == ("0.3.dev1", str(first))
