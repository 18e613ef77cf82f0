"""sys.path derived without running the interpreter: against what real interpreters report,
and on trees laid out as venvs, distributions and containers lay them out."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from conftest import FakeRoot
from machines import site_packages
from target_fixtures import running, write_script

from probes.live import LiveHost
from probes.pyenv_static import derive_sys_path, inspect_static, parse_flags
from probes.target.proc import ProcReader

SCAN_DIR = str(Path(__file__).resolve().parents[2] / "probes")


def test_the_shared_venv_with_a_pythonpath_matches_its_own_report(tmp_path: Path) -> None:
    site = site_packages(tmp_path / "site", {"torch": "2.7.1", "torch_npu": "2.7.1.post1",
                                             "safetensors": "0.0.1"})
    env = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "PYTHONPATH": site}
    script = write_script(tmp_path / "bin", "server", sys.executable)
    with running([str(script)], env) as pid:
        reader = ProcReader()
        info, _ = reader.process(pid)
        assert info.exe is not None
        found = inspect_static(LiveHost(), info.exe, info.cmdline, reader.environ(pid),
                               info.cwd)
    own = _report_of(sys.executable, env, tmp_path)
    assert found.environment.error == ""
    assert dict(found.environment.packages) == {k: v["version"] for k, v in own.items()}
    assert found.environment.locations["torch-npu"] == site
    assert found.environment.packages["safetensors"] == "0.0.1"  # PYTHONPATH shadows the venv
    assert found.derived is not None and found.derived.interpreter == sys.executable


def _report_of(python: str, env: dict[str, str], tmp_path: Path) -> dict[str, dict[str, str]]:
    """What the interpreter itself finds (probes/pyenv_scan.py run inside it)."""
    import subprocess

    code = (f"import sys, json; sys.path.insert(0, {SCAN_DIR!r}); import pyenv_scan; "
            "sys.path.pop(0); print(json.dumps(pyenv_scan.scan(sys.path)))")
    out = subprocess.run([python, "-c", code], env=env, capture_output=True, text=True,
                         timeout=60, check=True)
    return json.loads(out.stdout)  # type: ignore[no-any-return]


@pytest.mark.skipif(not shutil.which("python3", path="/usr/bin"), reason="no /usr/bin/python3")
def test_the_distribution_python_matches_its_own_sys_path(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"}
    script = tmp_path / "path.py"
    script.write_text("import json, sys, time\nprint(json.dumps(sys.path[1:]), flush=True)\n"
                      "time.sleep(600)\n")
    import subprocess

    proc = subprocess.Popen(["/usr/bin/python3", str(script)], env=env, stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout is not None
        real = json.loads(proc.stdout.readline())
        reader = ProcReader()
        info, _ = reader.process(proc.pid)
        assert info.exe is not None
        derived = derive_sys_path(LiveHost(), info.exe, info.cmdline, env, info.cwd)
    finally:
        proc.kill()
        proc.wait()
    on_disk = [p for p in real if os.path.isdir(p)]
    assert list(derived.entries[1:]) == on_disk  # [0] is the script's directory


# -- trees -----------------------------------------------------------------------------------


def interpreter(root: FakeRoot, prefix: str = "/usr", lib: str = "lib", xy: str = "3.10") -> str:
    root.file(f"{prefix}/bin/python{xy}", b"\x7fELF", mode=0o755)
    root.link(f"{prefix}/bin/python3", f"python{xy}")
    root.file(f"{prefix}/{lib}/python{xy}/os.py", "")
    return f"{prefix}/bin/python{xy}"


def dist(root: FakeRoot, where: str, name: str, version: str) -> None:
    root.file(f"{where}/{name}-{version}.dist-info/METADATA",
              f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\nbody\n")


def test_a_venv_without_system_packages(fake_root: FakeRoot) -> None:
    exe = interpreter(fake_root)
    fake_root.file("/opt/venv/pyvenv.cfg", "home = /usr/bin\ninclude-system-site-packages = "
                   "false\nversion = 3.10.12\n")
    fake_root.link("/opt/venv/bin/python3", "/usr/bin/python3.10")
    dist(fake_root, "/opt/venv/lib/python3.10/site-packages", "vllm", "0.11.0")
    dist(fake_root, "/usr/lib/python3.10/site-packages", "torch", "2.1.0")
    dist(fake_root, "/root/.local/lib/python3.10/site-packages", "torch_npu", "2.1.0")
    host = LiveHost(root=str(fake_root.path))
    found = inspect_static(host, exe, ["/opt/venv/bin/python3", "-m", "vllm.entrypoints"],
                           {"HOME": "/root"}, "/srv")
    env = found.environment
    assert env.python_version == "3.10.12" and env.interpreter == "/opt/venv/bin/python3"
    assert dict(env.packages) == {"vllm": "0.11.0"}
    assert found.derived is not None and found.derived.entries[0] == "/srv"  # -m: the cwd
    assert any("virtual environment /opt/venv" in line for line in found.how)


def test_system_site_packages_user_site_and_pth_order(fake_root: FakeRoot) -> None:
    exe = interpreter(fake_root)
    fake_root.file("/opt/venv/pyvenv.cfg", "home = /usr/bin\n"
                   "include-system-site-packages = true\n")
    fake_root.link("/opt/venv/bin/python", "/usr/bin/python3.10")
    venv_site = "/opt/venv/lib/python3.10/site-packages"
    dist(fake_root, venv_site, "torch", "2.7.1")
    dist(fake_root, "/home/u/.local/lib/python3.10/site-packages", "torch", "2.1.0")
    dist(fake_root, "/home/u/.local/lib/python3.10/site-packages", "numpy", "1.26.0")
    dist(fake_root, "/usr/lib/python3.10/site-packages", "numpy", "1.21.0")
    dist(fake_root, "/usr/lib/python3/dist-packages", "yaml", "5.4")
    fake_root.file(f"{venv_site}/extra.pth", "# comment\n../../../../ext\nimport hook\n"
                   "/does/not/exist\n")
    dist(fake_root, "/opt/ext", "torch_npu", "2.7.1")
    host = LiveHost(root=str(fake_root.path))
    found = inspect_static(host, exe, ["/opt/venv/bin/python", "/srv/app.py"],
                           {"HOME": "/home/u"}, "/srv")
    assert found.derived is not None
    assert found.derived.entries == (
        "/srv", "/usr/lib/python3.10", "/usr/lib/python3.10/lib-dynload", venv_site,
        "/opt/ext", "/home/u/.local/lib/python3.10/site-packages",
        "/usr/lib/python3.10/site-packages", "/usr/lib/python3/dist-packages")
    packages = found.environment.packages
    assert packages == {"torch": "2.7.1", "torch-npu": "2.7.1", "numpy": "1.26.0", "yaml": "5.4"}
    assert any("an `import` line is code" in note for note in found.how)


def test_flags_and_variables_that_change_the_path(fake_root: FakeRoot) -> None:
    exe = interpreter(fake_root)
    dist(fake_root, "/pp", "torch", "9")
    dist(fake_root, "/usr/lib/python3.10/site-packages", "torch", "2.1.0")
    host = LiveHost(root=str(fake_root.path))
    env = {"PYTHONPATH": "/pp"}
    assert inspect_static(host, exe, [exe, "x.py"], env, "/").environment.packages == \
        {"torch": "9"}
    isolated = inspect_static(host, exe, [exe, "-I", "x.py"], env, "/").environment
    assert isolated.packages == {"torch": "2.1.0"}
    assert inspect_static(host, exe, [exe, "-ES", "x.py"], env, "/").environment.packages == {}
    assert parse_flags([exe, "-W", "ignore", "-sE", "-m", "vllm"]).path0 == "-m"


def test_pythonhome_and_a_lib64_distribution(fake_root: FakeRoot) -> None:
    exe = interpreter(fake_root, lib="lib64", xy="3.11")
    dist(fake_root, "/usr/lib64/python3.11/site-packages", "torch", "2.5.1")
    dist(fake_root, "/usr/lib/python3.11/site-packages", "vllm", "0.9.0")
    host = LiveHost(root=str(fake_root.path))
    found = inspect_static(host, exe, [exe], {}, "/")
    assert found.environment.packages == {"torch": "2.5.1", "vllm": "0.9.0"}
    interpreter(fake_root, prefix="/opt/py", xy="3.11")
    dist(fake_root, "/opt/py/lib/python3.11/site-packages", "torch", "2.6.0")
    homed = inspect_static(host, exe, [exe], {"PYTHONHOME": "/opt/py"}, "/")
    assert homed.environment.packages == {"torch": "2.6.0"}


def test_what_cannot_be_derived_is_one_line(fake_root: FakeRoot) -> None:
    host = LiveHost(root=str(fake_root.path))
    fake_root.file("/usr/bin/mindieservice_daemon", b"\x7fELF", mode=0o755)
    daemon = inspect_static(host, "/usr/bin/mindieservice_daemon", ["mindieservice_daemon"],
                            {}, "/").environment
    assert "not a CPython interpreter" in daemon.error and "\n" not in daemon.error
    fake_root.file("/usr/bin/python3.9", b"", mode=0o755)
    lost = inspect_static(host, "/usr/bin/python3.9", ["python3.9"], {}, "/").environment
    assert "no standard library (lib/python3.9/os.py)" in lost.error
