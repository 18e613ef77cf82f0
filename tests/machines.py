"""Fake machines for checks and CLI tests: a fixture Atlas 800I A2 under a --root.

The npu-smi outputs are real (corpus 014/015). The version files follow the documented
formats (facts/PATHS.md §2) with a driver/firmware/CANN/torch_npu set that COMPAT.yaml pairs:
HDK 25.0.rc1.1 + firmware 7.7.0.1.231, CANN 8.3.RC2 (innerversion family C23 as observed),
NNAL 8.3.RC2, torch 2.7.1 + torch_npu 2.7.1.post1 + vllm-ascend v0.11.0 (one release row).
"""

from __future__ import annotations

import os
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path

from conftest import CORPUS_DIR, FakeRoot

from probes.live import LiveHost

CORPUS = CORPUS_DIR / "npu-smi"
ASCEND = "/usr/local/Ascend"
TOOLKIT = f"{ASCEND}/ascend-toolkit/latest"
PYTHON = "/usr/bin/python3"
A2_BUS_IDS = ("c1", "c2", "81", "82", "01", "02", "41", "42")  # from corpus 014
HEALTHY_PACKAGES = {"torch": "2.7.1", "torch_npu": "2.7.1.post1", "vllm": "0.11.0",
                    "vllm_ascend": "0.11.0", "transformers": "4.57.1", "tokenizers": "0.22.1"}

DRIVER_INFO = """Version=25.0.rc1.1
ascendhal_version=7.35.23
aicpu_version=1.0
tdt_version=1.0
log_version=1.0
prof_version=2.0
dvppkernels_version=1.1
tsfw_version=1.0
Innerversion=V100R001C21SPC001B100
compatible_version=[V100R001C30],[V100R001C13],[V100R001C15],[V100R001C17],[V100R001C18],\
[V100R001C19],[V100R001C20],[V100R001C21],[V100R001C23]
compatible_version_fw=[7.0.0,7.7.99]
package_version=25.0.rc1.1
"""
FIRMWARE_INFO = """Version=7.7.0.1.231
firmware_version=7.7.0.1.231
package_version=25.0.rc1.1
compatible_version_drv=[25.0.rc1,25.0.rc1.]
"""
NNAL_INFO = ("Ascend-cann-atb : 8.3.RC2\nAscend-cann-atb Version : 8.3.RC2.B030\n"
             "Platform : aarch64\n")


def corpus(prefix: str) -> Path:
    return next(CORPUS.glob(f"{prefix}-*"))


@dataclass
class A2:
    """What to plant on the fixture machine; the defaults are a healthy machine."""

    env: dict[str, str] = field(default_factory=dict)
    packages: dict[str, str] = field(default_factory=lambda: dict(HEALTHY_PACKAGES))
    link_x8: tuple[str, ...] = ()  # bus ids (as in A2_BUS_IDS) trained at x8
    char_devices: bool = True


def fixture_policy(root: FakeRoot) -> Path:
    """The default policy, except the free-disk floor: the fixture machine's disk is the test
    machine's own, whose free space is not ours to judge."""
    path = root.path.parent / "fixture-policy.yaml"
    path.write_text("logging:\n  min_free_disk_mb: 1\n")
    return path


def base_env() -> dict[str, str]:
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": "/root",
        "ASCEND_HOME_PATH": TOOLKIT,
        "ASCEND_TOOLKIT_HOME": TOOLKIT,
        "ASCEND_OPP_PATH": f"{TOOLKIT}/opp",
        "ASCEND_AICPU_PATH": TOOLKIT,
        "LD_LIBRARY_PATH": f"{ASCEND}/driver/lib64:{ASCEND}/driver/lib64/common:"
                           f"{ASCEND}/driver/lib64/driver:{TOOLKIT}/lib64",
    }


def build_a2(root: FakeRoot, spec: A2 | None = None) -> LiveHost:
    spec = spec or A2()
    _npu_smi(root)
    _version_files(root)
    _device_nodes(root, spec.char_devices)
    for bus in A2_BUS_IDS:
        width = "8" if bus in spec.link_x8 else "16"
        pci_function(root, [f"0000:{bus[0]}0:00.0", f"0000:{bus}:00.0"], "0x19e5", "0xd802",
                     "0x120000", link=("16.0 GT/s PCIe", width, "16.0 GT/s PCIe", "16"))
    env = base_env() | spec.env
    root.script(PYTHON, f'exec "{sys.executable}" "$@"\n')
    env["PYTHONPATH"] = site_packages(root.path.parent / "site", spec.packages)
    return LiveHost(root=str(root.path), env=env, python=PYTHON)


def _npu_smi(root: FakeRoot) -> None:
    root.script("/usr/local/bin/npu-smi",
                f'case "$*" in\n  "info") cat "{corpus("014")}" ;;\n'
                f'  "info -m") cat "{corpus("015")}" ;;\n'
                '  *) echo "Usage: npu-smi info" >&2; exit 1 ;;\nesac\n')


def _version_files(root: FakeRoot) -> None:
    root.file(f"{ASCEND}/driver/version.info", DRIVER_INFO)
    root.file(f"{ASCEND}/firmware/version.info", FIRMWARE_INFO)
    root.file(f"{TOOLKIT}/aarch64-linux/ascend_toolkit_install.info", corpus("021").read_text())
    root.file(f"{ASCEND}/nnal/atb/latest/version.info", NNAL_INFO)
    for sub in ("runtime", "compiler", "opp"):
        root.dir(f"{TOOLKIT}/{sub}")
    for lib in ("driver/lib64", "driver/lib64/common", "driver/lib64/driver"):
        root.dir(f"{ASCEND}/{lib}")
    root.file(f"{TOOLKIT}/lib64/libascendcl.so", b"\x7fELF")
    root.file(f"{ASCEND}/ascend-toolkit/set_env.sh", "export ASCEND_HOME_PATH=...\n")


def _device_nodes(root: FakeRoot, char_devices: bool) -> None:
    dev = root.dir("/dev")
    names = [f"davinci{n}" for n in range(8)] + ["davinci_manager", "devmm_svm", "hisi_hdc"]
    for name in names:
        if char_devices:
            # same numbers as /dev/null: a real character device, harmless; tests run as root
            os.mknod(dev / name, stat.S_IFCHR | 0o600, os.makedev(1, 3))
        else:
            root.file(f"/dev/{name}")


def site_packages(where: Path, packages: dict[str, str]) -> str:
    """A directory of `*.dist-info/METADATA` that the interpreter finds through PYTHONPATH."""
    where.mkdir(parents=True, exist_ok=True)
    for name, version in packages.items():
        meta = where / f"{name}-{version}.dist-info" / "METADATA"
        meta.parent.mkdir()
        meta.write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return str(where)


def pci_function(root: FakeRoot, chain: list[str], vendor: str, device: str, klass: str,
                 link: tuple[str, str, str, str] = ("16.0 GT/s PCIe", "16", "16.0 GT/s PCIe",
                                                     "16"),
                 numa: str = "0", aer_cor: int = 0) -> None:
    """A PCI function at the end of `chain` (root port first) under host bridge pci0000:00,
    with its sysfs link in /sys/bus/pci/devices as the kernel makes it (relative)."""
    address = chain[-1]
    real = "/sys/devices/pci0000:00/" + "/".join(chain)
    for depth in range(len(chain) - 1):
        bridge = "/sys/devices/pci0000:00/" + "/".join(chain[: depth + 1])
        for name, value in (("current_link_speed", "16.0 GT/s PCIe"),
                            ("current_link_width", "16"),
                            ("max_link_speed", "16.0 GT/s PCIe"), ("max_link_width", "16")):
            if not (root.path / bridge.lstrip("/") / name).exists():
                root.file(f"{bridge}/{name}", value + "\n")
    files = {"vendor": vendor, "device": device, "class": klass, "numa_node": numa,
             "current_link_speed": link[0], "current_link_width": link[1],
             "max_link_speed": link[2], "max_link_width": link[3],
             "aer_dev_correctable": f"RxErr {aer_cor}\nTOTAL_ERR_COR {aer_cor}",
             "aer_dev_fatal": "TOTAL_ERR_FATAL 0", "aer_dev_nonfatal": "TOTAL_ERR_NONFATAL 0"}
    for name, value in files.items():
        root.file(f"{real}/{name}", value + "\n")
    root.link(f"/sys/bus/pci/devices/{address}", "../../.." + real.removeprefix("/sys"))


def demo_recording(where: Path) -> Path:
    """The demo's recorded Atlas A2 machine (scripts/build_demo_assets.py), built under
    `where`; the path to pass to `--from`."""
    scripts = str(Path(__file__).resolve().parents[1] / "scripts")
    sys.path.insert(0, scripts)
    try:
        from build_demo_assets import build_a2 as build_recording
    finally:
        sys.path.remove(scripts)
    recorded: Path = build_recording(where)
    return recorded
