from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from probes.errors import NotRecorded, PathMissing, PathUnreadable
from probes.host import DEFAULT_TIMEOUT_S, CommandResult, PathKind, PythonEnvironment
from probes.stack import Found, find_first, read_stack
from probes.version_files import parse_driver_version_info
from tests.npu_smi_fixtures import npu_smi_sample

try:
    from probes.live import LiveHost
except ImportError:  # pragma: no cover - the live host is written by another engineer
    LiveHost = None  # type: ignore[assignment,misc]


needs_live = pytest.mark.skipif(LiveHost is None, reason="probes.live not importable")


def toolkit_info(version: str, path: str, inner: str = "V100R001C25SPC001B212") -> str:
    return (
        f"package_name=Ascend-cann-toolkit\nversion={version}\ninnerversion={inner}\n"
        f"arch=aarch64\nos=linux\npath={path}\n"
    )


LEGACY_TOOLKIT = "/usr/local/Ascend/ascend-toolkit/latest/aarch64-linux/ascend_toolkit_install.info"
ATB_INFO = "Ascend-cann-atb : 8.2.RC2\nAscend-cann-atb Version : 8.2.RC2.B030\nPlatform : aarch64\n"
MINDIE_INFO = "Ascend-mindie : MindIE 2.1.RC2.B080\nmindie-rt: 2.1.RC2.B080\nPlatform : aarch64\n"


def put(root: Path, path: str, text: str) -> None:
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")


# --- through LiveHost over a fake tree ----------------------------------------------------


@needs_live
def test_legacy_layout(tmp_path: Path) -> None:
    put(tmp_path, "/usr/local/Ascend/driver/version.info", npu_smi_sample("040"))
    put(tmp_path, "/usr/local/Ascend/firmware/version.info", npu_smi_sample("034"))
    put(tmp_path, LEGACY_TOOLKIT, npu_smi_sample("021"))
    put(tmp_path, "/usr/local/Ascend/ascend-toolkit/latest/version.cfg", npu_smi_sample("045"))
    put(tmp_path, "/usr/local/Ascend/nnal/atb/latest/version.info", ATB_INFO)
    put(tmp_path, "/usr/local/Ascend/mindie/latest/version.info", MINDIE_INFO)
    stack = read_stack(LiveHost(root=str(tmp_path), env={}))

    assert stack.install_info.state == "missing"
    assert stack.install_info.tried == ("/etc/ascend_install.info",)
    assert stack.driver.path == "/usr/local/Ascend/driver/version.info"
    assert stack.driver.value is not None and stack.driver.value.driver_version == "24.1.rc1"
    assert stack.firmware.value is not None and stack.firmware.value.version == "7.1.0.11.220"
    assert stack.toolkit.state == "found"
    assert stack.toolkit.path == LEGACY_TOOLKIT
    assert stack.toolkit.value is not None and stack.toolkit.value.version == "8.3.RC2"
    assert stack.version_cfg.path == "/usr/local/Ascend/ascend-toolkit/latest/version.cfg"
    assert stack.version_cfg.value is not None
    assert stack.version_cfg.value.running_version == "8.1.RC1"
    assert stack.nnal.value is not None and stack.nnal.value.version == "8.2.RC2"
    assert stack.mindie.value is not None and stack.mindie.value.version == "2.1.RC2.B080"
    assert stack.toolkit.error == ""


@needs_live
def test_new_cann_850_layout_x86_and_install_pointer(tmp_path: Path) -> None:
    put(tmp_path, "/etc/ascend_install.info",
        "Driver_Install_Path_Param=/opt/Ascend\nFirmware_Install_Path_Param=/opt/Ascend\n")
    put(tmp_path, "/opt/Ascend/driver/version.info", npu_smi_sample("033"))
    put(tmp_path, "/opt/Ascend/firmware/version.info", npu_smi_sample("034"))
    put(tmp_path, "/usr/local/Ascend/cann-8.3.RC2/x86_64-linux/ascend_toolkit_install.info",
        toolkit_info("8.3.RC2", "/usr/local/Ascend/cann-8.3.RC2/x86_64-linux"))
    put(tmp_path, "/usr/local/Ascend/cann-8.5.0/x86_64-linux/ascend_toolkit_install.info",
        toolkit_info("8.5.0", "/usr/local/Ascend/cann-8.5.0/x86_64-linux"))
    stack = read_stack(LiveHost(root=str(tmp_path), env={}))

    assert stack.install_info.value is not None
    assert stack.driver.path == "/opt/Ascend/driver/version.info"
    assert stack.firmware.path == "/opt/Ascend/firmware/version.info"
    # the newest cann-<ver> wins when no `cann` / `latest` link is there
    assert stack.toolkit.path == (
        "/usr/local/Ascend/cann-8.5.0/x86_64-linux/ascend_toolkit_install.info"
    )
    assert stack.toolkit.value is not None and stack.toolkit.value.family == "V100R001C25"
    assert LEGACY_TOOLKIT in stack.toolkit.tried
    assert stack.version_cfg.state == "missing"
    assert stack.version_cfg.tried[0] == "/usr/local/Ascend/cann-8.5.0/version.cfg"
    assert stack.nnal.state == "missing"
    assert stack.mindie.state == "missing"


@needs_live
def test_ascend_home_path_pointing_elsewhere_wins(tmp_path: Path) -> None:
    put(tmp_path, LEGACY_TOOLKIT, npu_smi_sample("021"))
    put(tmp_path, "/data/cann/8.5.0/aarch64-linux/ascend_toolkit_install.info",
        npu_smi_sample("019"))
    put(tmp_path, "/data/cann/8.5.0/version.cfg", "toolkit_running_version=[8.5.0.1:8.5.0]\n")
    put(tmp_path, "/home/dev/Ascend/nnal/atb/latest/version.info",
        'Version=8.5.0\nrequired_package_toolkit_version>="8.2"\n')
    env = {"ASCEND_HOME_PATH": "/data/cann/8.5.0/", "HOME": "/home/dev"}
    stack = read_stack(LiveHost(root=str(tmp_path), env=env))

    assert stack.toolkit.path == "/data/cann/8.5.0/aarch64-linux/ascend_toolkit_install.info"
    assert stack.toolkit.tried[0] == stack.toolkit.path
    assert stack.version_cfg.path == "/data/cann/8.5.0/version.cfg"
    assert stack.nnal.path == "/home/dev/Ascend/nnal/atb/latest/version.info"
    assert stack.nnal.value is not None and stack.nnal.value.shape == "source"


@needs_live
def test_home_install_and_env_pointers(tmp_path: Path) -> None:
    put(tmp_path, "/home/u/Ascend/ascend-toolkit/latest/aarch64-linux/ascend_toolkit_install.info",
        npu_smi_sample("021"))
    put(tmp_path, "/srv/mindie/latest/version.info", MINDIE_INFO)
    put(tmp_path, "/srv/nnal/atb/latest/version.info", ATB_INFO)
    env = {
        "HOME": "/home/u",
        "MINDIE_LLM_HOME_PATH": "/srv/mindie/latest/mindie-service",
        "ATB_HOME_PATH": "/srv/nnal/atb/latest/atb/cxx_abi_1",
    }
    stack = read_stack(LiveHost(root=str(tmp_path), env=env))
    assert stack.toolkit.path is not None and stack.toolkit.path.startswith("/home/u/Ascend/")
    assert stack.mindie.path == "/srv/mindie/latest/version.info"
    assert stack.nnal.path == "/srv/nnal/atb/latest/version.info"


@needs_live
def test_nothing_installed(tmp_path: Path) -> None:
    stack = read_stack(LiveHost(root=str(tmp_path), env={}))
    for item in (stack.install_info, stack.driver, stack.firmware, stack.toolkit,
                 stack.version_cfg, stack.nnal, stack.mindie):
        assert item.state == "missing"
        assert item.value is None and item.path is None
        assert item.tried
        assert not item.not_recorded
        assert item.error.startswith("not found; tried /")
    assert "/usr/local/Ascend/driver/version.info" in stack.driver.tried
    assert "/usr/local/Ascend/cann/x86_64-linux/ascend_toolkit_install.info" in stack.toolkit.tried


@needs_live
def test_unreadable_and_invalid_files(tmp_path: Path) -> None:
    # a directory where the file should be cannot be read (tests may run as root, so a
    # permission bit would not do)
    (tmp_path / "usr/local/Ascend/driver/version.info").mkdir(parents=True)
    put(tmp_path, "/usr/local/Ascend/firmware/version.info", "not a version file\n")
    stack = read_stack(LiveHost(root=str(tmp_path), env={}))
    assert stack.driver.state == "unreadable"
    assert stack.driver.problems[0][0] == "/usr/local/Ascend/driver/version.info"
    assert stack.driver.error.startswith("/usr/local/Ascend/driver/version.info: ")
    assert stack.firmware.state == "invalid"
    assert "parse:" in stack.firmware.error


@needs_live
def test_bad_candidate_falls_through_to_next(tmp_path: Path) -> None:
    put(tmp_path, "/data/tk/aarch64-linux/ascend_toolkit_install.info", "garbage\n")
    put(tmp_path, LEGACY_TOOLKIT, npu_smi_sample("021"))
    stack = read_stack(LiveHost(root=str(tmp_path), env={"ASCEND_TOOLKIT_HOME": "/data/tk"}))
    assert stack.toolkit.state == "found"
    assert stack.toolkit.value is not None and stack.toolkit.value.version == "8.3.RC2"
    assert stack.toolkit.problems[0][0] == "/data/tk/aarch64-linux/ascend_toolkit_install.info"


# --- through a dict-backed fake (recorded answers) ---------------------------------------


class DictHost:
    """A Host from a dict: str = file text, Exception = the error to raise.

    Paths absent from the dict raise `missing` (PathMissing or, for a snapshot, NotRecorded).
    """

    def __init__(
        self, files: Mapping[str, str | Exception], env: Mapping[str, str] | None = None,
        snapshot: bool = False,
    ) -> None:
        self.files = dict(files)
        self._env = dict(env or {})
        self.snapshot = snapshot

    @property
    def description(self) -> str:
        return "dict"

    @property
    def env(self) -> Mapping[str, str]:
        return self._env

    def _absent(self, path: str) -> Exception:
        return NotRecorded(path) if self.snapshot else PathMissing(path)

    def run(self, argv: Sequence[str], timeout_s: float = DEFAULT_TIMEOUT_S) -> CommandResult:
        return CommandResult(tuple(argv), "not_recorded")

    def read_text(self, path: str) -> str:
        answer = self.files.get(path)
        if answer is None:
            raise self._absent(path)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def read_bytes(self, path: str, offset: int = 0, length: int | None = None) -> bytes:
        data = self.read_text(path).encode()[offset:]
        return data if length is None else data[:length]

    def list_dir(self, path: str) -> list[str]:
        prefix = path.rstrip("/") + "/"
        names = {p[len(prefix):].split("/")[0] for p in self.files if p.startswith(prefix)}
        if not names:
            raise self._absent(path)
        return sorted(names)

    def exists(self, path: str) -> bool:
        return path in self.files

    def kind(self, path: str) -> PathKind:
        return "file" if path in self.files else "missing"

    def realpath(self, path: str) -> str:
        return posixpath.normpath(path)

    def python_packages(self) -> PythonEnvironment:
        return PythonEnvironment(interpreter="", error="not recorded")


def test_not_recorded_is_not_missing() -> None:
    host = DictHost({"/usr/local/Ascend/driver/version.info": npu_smi_sample("033")}, snapshot=True)
    stack = read_stack(host)
    assert stack.driver.state == "found"
    for item in (stack.firmware, stack.toolkit, stack.version_cfg, stack.nnal, stack.mindie):
        assert item.not_recorded
        assert item.state == "not_recorded"
        assert item.value is None


def test_unrecorded_install_pointer_makes_missing_driver_unknown() -> None:
    files: dict[str, str | Exception] = {
        "/etc/ascend_install.info": NotRecorded("/etc/ascend_install.info"),
    }
    stack = read_stack(DictHost(files))
    assert stack.install_info.state == "not_recorded"
    assert stack.driver.state == "not_recorded"  # the pointer could have named another root
    assert stack.toolkit.state == "missing"


def test_path_unreadable_from_fake_host() -> None:
    path = "/usr/local/Ascend/mindie/latest/version.info"
    stack = read_stack(DictHost({path: PathUnreadable(path, "permission denied")}))
    assert stack.mindie.state == "unreadable"
    assert stack.mindie.problems == ((path, "permission denied"),)
    assert stack.mindie.error == f"{path}: permission denied"


def test_unrecorded_cann_listing_marks_toolkit_unknown() -> None:
    # /usr/local/Ascend exists in the recording only through the driver file; the CANN
    # pointer was never recorded, so a missing toolkit is unknown
    files: dict[str, str | Exception] = {
        "/usr/local/Ascend/driver/version.info": npu_smi_sample("040"),
        "/etc/Ascend/ascend_cann_install.info": NotRecorded("/etc/Ascend/ascend_cann_install.info"),
    }
    stack = read_stack(DictHost(files))
    assert stack.toolkit.state == "not_recorded"
    assert stack.driver.state == "found"


def test_cann_install_pointer_prefix() -> None:
    files: dict[str, str | Exception] = {
        "/etc/Ascend/ascend_cann_install.info": "Install_Path=/opt/cann\n",
        "/opt/cann/ascend-toolkit/latest/aarch64-linux/ascend_toolkit_install.info":
            npu_smi_sample("019"),
        LEGACY_TOOLKIT: npu_smi_sample("021"),
    }
    stack = read_stack(DictHost(files))
    assert stack.toolkit.path == (
        "/opt/cann/ascend-toolkit/latest/aarch64-linux/ascend_toolkit_install.info"
    )


def test_find_first_records_tried_in_order() -> None:
    host = DictHost({"/b": npu_smi_sample("033")})
    found: Found[object] = find_first(host, ["/a", "/b", "/c", "relative/ignored", "/a"],
                                      parse_driver_version_info)
    assert found.path == "/b"
    assert found.tried == ("/a", "/b")
    empty = find_first(host, ["/x", "/y//z/"], parse_driver_version_info)
    assert empty.tried == ("/x", "/y/z")
    assert empty.state == "missing"
