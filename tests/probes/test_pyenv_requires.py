"""probes.pyenv_requires: Requires-Dist from a planted *.dist-info, bounded to its header."""

from __future__ import annotations

from conftest import FakeRoot

from probes import pyenv_requires
from probes.live import LiveHost
from probes.pyenv_requires import dist_info_dir, parse_requires, requires_dist

SITE = "/site"


def test_the_header_only_is_read() -> None:
    text = ("Name: x\nVersion: 1\nRequires-Dist: torch==2.10.0\nrequires-dist: numpy\n\n"
            "Requires-Dist: not-a-header==1\n")
    assert parse_requires(text) == ("torch==2.10.0", "numpy")


def test_the_distribution_is_found_by_its_normalised_name(fake_root: FakeRoot) -> None:
    fake_root.file(f"{SITE}/torch_npu-2.10.0.post6.dist-info/METADATA",
                   "Name: torch_npu\nVersion: 2.10.0.post6\nRequires-Dist: torch==2.10.0\n")
    fake_root.file(f"{SITE}/torch-2.10.0.dist-info/METADATA", "Name: torch\n")
    host = LiveHost(root=str(fake_root.path), env={})
    assert dist_info_dir(host, SITE, "Torch-NPU") == f"{SITE}/torch_npu-2.10.0.post6.dist-info"
    assert requires_dist(host, SITE, "torch-npu") == ("torch==2.10.0",)
    assert requires_dist(host, SITE, "vllm") == f"no vllm *.dist-info in {SITE}"


def test_a_huge_header_is_read_up_to_the_cap(fake_root: FakeRoot) -> None:
    cap = pyenv_requires.MAX_HEADER_BYTES
    filler = "Classifier: x\n" * (cap // 14 + 10)
    fake_root.file(f"{SITE}/vllm-1.0.dist-info/METADATA",
                   "Name: vllm\nRequires-Dist: torch==1\n" + filler + "Requires-Dist: late==1\n")
    host = LiveHost(root=str(fake_root.path), env={})
    assert requires_dist(host, SITE, "vllm") == ("torch==1",)
