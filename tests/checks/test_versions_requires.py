"""versions.parity's static `pip check`: planted site-packages of real `*.dist-info/METADATA`
files, read through a Host, the interpreter never run."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import FakeRoot

from checks.builtin.versions_model import Judgement
from checks.builtin.versions_requires import judge_requirements
from probes.host import PythonEnvironment, normalise_dist_name
from probes.live import LiveHost

SITE = "/usr/local/lib/python3.10/dist-packages"
# The stack requirements of vllm-project/vllm-ascend requirements.txt @ 0baa3f125951 (torch,
# torch-npu, triton-ascend, transformers among its other lines), as Requires-Dist lines; the
# version label names that commit.
VLLM_ASCEND = "0.0.0+g0baa3f1"
REQUIRES = ("numpy", "packaging", "torch==2.10.0", "torch-npu==2.10.0.post6",
            "torchvision==0.25.0", "triton-ascend==3.2.2", "transformers==5.14.1",
            "fastapi<0.124.0")
HEALTHY = {"torch": "2.10.0", "torch_npu": "2.10.0.post6", "triton_ascend": "3.2.2",
           "transformers": "5.14.1"}


def metadata(name: str, version: str, requires: tuple[str, ...] = (), body: str = "") -> str:
    head = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    head += "".join(f"Requires-Dist: {r}\n" for r in requires)
    return head + (f"\n{body}" if body else "")


def plant(root: FakeRoot, packages: dict[str, str], requires: tuple[str, ...] = REQUIRES,
          python_version: str = "3.10") -> PythonEnvironment:
    """vllm_ascend with `requires` and `packages` in SITE; their environment as the static
    read reports it (names, versions, the sys.path entry each was found in)."""
    everything = {"vllm_ascend": VLLM_ASCEND, **packages}
    for name, version in everything.items():
        root.file(f"{SITE}/{name}-{version}.dist-info/METADATA",
                  metadata(name, version, requires if name == "vllm_ascend" else ()))
    names = {normalise_dist_name(n): v for n, v in everything.items()}
    return PythonEnvironment("/usr/bin/python3.10", python_version, names,
                             locations=dict.fromkeys(names, SITE))


def judge(root: FakeRoot, py: PythonEnvironment) -> Judgement:
    j = Judgement()
    judge_requirements(LiveHost(root=str(root.path), env={}), py, j)
    return j


def test_met_requirements_pass(fake_root: FakeRoot) -> None:
    finding = judge(fake_root, plant(fake_root, HEALTHY)).finding("ok")
    assert finding.status == "pass" and finding.rules == ()
    assert ("ok: pip check (read statically from the packages' METADATA): the 4 requirements "
            "the stack packages declare on one another are met") in finding.evidence


def test_unmet_and_conflicting_requirements_warn(fake_root: FakeRoot) -> None:
    packages = {**HEALTHY, "torch_npu": "2.9.0"}
    del packages["triton_ascend"]
    finding = judge(fake_root, plant(fake_root, packages)).finding("ok")
    assert finding.status == "warn" and finding.rules == ("pip-check",)
    assert (f"vllm-ascend {VLLM_ASCEND} requires torch-npu==2.10.0.post6, found 2.9.0; "
            f"vllm-ascend {VLLM_ASCEND} requires triton-ascend==3.2.2, not installed"
            ) in finding.summary
    assert "pip check" in finding.remedy


def test_a_local_label_meets_an_exact_pin(fake_root: FakeRoot) -> None:
    # a CPU or CUDA wheel of torch carries a local label: PEP 440 == ignores it
    finding = judge(fake_root, plant(fake_root, {**HEALTHY, "torch": "2.10.0+cpu"})).finding("")
    assert finding.status == "pass"


@pytest.mark.parametrize(("requirement", "judged"), [
    ('torch-npu==1.0; python_version < "3.9"', False),  # not for Python 3.10
    ('torch-npu==1.0; extra == "dev"', False),  # behind an extra
    ('torch-npu==1.0; sys_platform == "win32"', False),
    ('torch-npu==1.0; python_version >= "3.10"', True),
])
def test_markers_are_evaluated_for_the_judged_interpreter(
        fake_root: FakeRoot, requirement: str, judged: bool) -> None:
    j = judge(fake_root, plant(fake_root, HEALTHY, requires=(requirement,)))
    assert (j.finding("").status == "warn") is judged


def test_a_marker_on_the_patch_release_is_not_guessed(fake_root: FakeRoot) -> None:
    py = plant(fake_root, HEALTHY, requires=('torch-npu==1.0; python_full_version >= "3.10.5"',))
    j = judge(fake_root, py)
    finding = j.finding("")
    assert finding.status == "pass"  # nothing judged: no verdict at all
    assert any("whether its marker holds for Python 3.10 cannot be told" in e
               for e in finding.evidence)


def test_unreadable_metadata_is_said(fake_root: FakeRoot) -> None:
    py = plant(fake_root, HEALTHY)
    py = PythonEnvironment(py.interpreter, py.python_version, py.packages,
                           locations={**py.locations, "vllm-ascend": "/nowhere"})
    finding = judge(fake_root, py).finding("")
    assert any(e.startswith("pip check: the requirements of vllm-ascend not read "
                            "(vllm-ascend: ") for e in finding.evidence)
    assert finding.status == "pass" and not any(e.startswith("ok: pip") for e in finding.evidence)


def test_a_full_python_version_decides_a_patch_marker(fake_root: FakeRoot) -> None:
    # an interpreter that ran reports X.Y.Z: the marker is evaluated, not left unjudged
    requires = ('torch-npu==1.0; python_full_version >= "3.10.5"',)
    old = judge(fake_root, plant(fake_root, HEALTHY, requires, python_version="3.10.4"))
    assert old.finding("").status == "pass"
    new = judge(fake_root, plant(fake_root, HEALTHY, requires, python_version="3.10.12"))
    assert new.finding("").rules == ("pip-check",)


def test_packaging_is_loaded_only_for_a_line_naming_the_stack(fake_root: FakeRoot) -> None:
    code = (
        "import sys\n"
        "from checks.builtin.versions_model import Judgement\n"
        "from checks.builtin.versions_requires import judge_requirements\n"
        "from probes.host import PythonEnvironment\n"
        "from probes.live import LiveHost\n"
        f"py = PythonEnvironment('p', '3.10', {{'torch': '2.10.0'}}, "
        f"locations={{'torch': {SITE!r}}})\n"
        f"judge_requirements(LiveHost(root={str(fake_root.path)!r}, env={{}}), py, "
        "Judgement())\n"
        "print('packaging' in sys.modules)\n")
    fake_root.file(f"{SITE}/torch-2.10.0.dist-info/METADATA",
                   metadata("torch", "2.10.0", ("filelock", "sympy>=1.13.3",
                                                'networkx; python_version >= "3.10"')))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60, check=True)
    assert result.stdout.strip() == "False"
