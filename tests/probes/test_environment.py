from __future__ import annotations

import os
from pathlib import Path

import pytest

from probes.environment import (
    ascend_environment,
    davinci_ids,
    parse_log_file_num,
    parse_log_level,
    parse_visible_devices,
    read_device_nodes,
    resolve_log_dir,
    split_path_list,
)
from probes.errors import NotRecorded, PathMissing
from probes.host import PathKind
from probes.libraries import read_ld_library_dirs
from probes.live import LiveHost

# ----------------------------------------------------------------------------- visible devices


@pytest.mark.parametrize(
    ("raw", "device_count", "ids"),
    [
        # the documented examples (HIA envref_07_0028 and older ptmigr pages)
        ("1", None, (1,)),
        ("1,2,3", None, (1, 2, 3)),
        ("1, 2,3", None, (1,)),
        ("1,3,8", 8, (1, 3)),
        ("1,2,-1,3", None, (1, 2)),
        # edge cases of the same grammar
        ("1,3,8", None, (1, 3, 8)),  # without a device count 8 cannot be judged
        ("0,1,2,3,4,5,6,7", 8, (0, 1, 2, 3, 4, 5, 6, 7)),
        ("1;2", None, (1,)),
        ("a", None, ()),
        (" 1", None, ()),
        ("1,,2", None, (1,)),
        ("0,1,", None, (0, 1)),
        ("８", None, ()),  # a full-width digit is not an ASCII digit
        ("15", 16, (15,)),
        ("12a,3", None, (12,)),  # the digits before the other character are still read
    ],
)
def test_visible_devices_ids(raw: str, device_count: int | None, ids: tuple[int, ...]) -> None:
    assert parse_visible_devices(raw, device_count).ids == ids


def test_visible_devices_unset_means_all() -> None:
    parsed = parse_visible_devices(None)
    assert parsed.ids is None
    assert parsed.problems == ()


def test_visible_devices_valid_has_no_problems() -> None:
    assert parse_visible_devices("0,1,2,3", 8).problems == ()


def test_visible_devices_problems_say_where_and_why() -> None:
    space = parse_visible_devices("1, 2,3")
    assert len(space.problems) == 1
    assert "' ' at offset 2" in space.problems[0]
    too_big = parse_visible_devices("1,3,8", device_count=8)
    assert "device id 8" in too_big.problems[0]
    assert "8 devices" in too_big.problems[0]
    trailing = parse_visible_devices("0,1,")
    assert "trailing ','" in trailing.problems[0]
    nothing = parse_visible_devices("x")
    assert any("no device is visible" in p for p in nothing.problems)
    empty = parse_visible_devices("")
    assert empty.ids == ()
    assert "empty" in empty.problems[0]


def test_visible_devices_out_of_order_is_kept_and_reported() -> None:
    parsed = parse_visible_devices("3,2,1")
    assert parsed.ids == (3, 2, 1)
    assert len(parsed.problems) == 1
    assert "ascending" in parsed.problems[0]
    assert "ascending" in parse_visible_devices("1,1").problems[0]


# ----------------------------------------------------------------------------- log level / dir


@pytest.mark.parametrize(
    ("raw", "level", "name"),
    [
        (None, 3, "ERROR"),
        ("", 3, "ERROR"),  # set but empty: the default, not an illegal value
        ("0", 0, "DEBUG"),
        ("1", 1, "INFO"),
        ("2", 2, "WARNING"),
        ("4", 4, "NULL"),
    ],
)
def test_legal_log_levels(raw: str | None, level: int, name: str) -> None:
    parsed = parse_log_level(raw)
    assert (parsed.level, parsed.name, parsed.problems) == (level, name, ())


@pytest.mark.parametrize(("raw", "count", "problems"), [
    (None, 10, 0), ("", 10, 0), ("1", 1, 0), ("1000", 1000, 0),
    ("0", 10, 1), ("1001", 10, 1), ("-5", 10, 1), ("ten", 10, 1),
])
def test_log_file_num(raw: str | None, count: int, problems: int) -> None:
    parsed = parse_log_file_num(raw)
    assert (parsed.count, len(parsed.problems)) == (count, problems)


@pytest.mark.parametrize("raw", ["5", "-1", "debug", " 1", "1.0", "01"])
def test_illegal_log_levels_fall_back_to_error(raw: str) -> None:
    parsed = parse_log_level(raw)
    assert parsed.raw == raw
    assert parsed.level == 3
    assert parsed.name == "ERROR"
    assert len(parsed.problems) == 1
    assert repr(raw) in parsed.problems[0]


def test_log_dir_precedence() -> None:
    all_three = {
        "ASCEND_PROCESS_LOG_PATH": "/data/plog",
        "ASCEND_WORK_PATH": "/data/work",
        "HOME": "/home/u",
    }
    chosen = resolve_log_dir(all_three)
    assert (chosen.path, chosen.source) == ("/data/plog", "ASCEND_PROCESS_LOG_PATH")
    assert any("ASCEND_WORK_PATH=/data/work is overridden" in n for n in chosen.notes)

    work = resolve_log_dir({"ASCEND_WORK_PATH": "/data/work", "HOME": "/home/u"})
    # envref_07_0007: the logs of a work path are in its log/ subdirectory, said so
    assert (work.path, work.source) == ("/data/work/log", "ASCEND_WORK_PATH")
    assert any("base directory" in n for n in work.notes)

    home = resolve_log_dir({"HOME": "/home/u"})
    assert (home.path, home.source, home.notes) == ("/home/u/ascend/log", "HOME", ())

    nothing = resolve_log_dir({})
    assert (nothing.path, nothing.source) == (None, None)
    assert "HOME is not set" in nothing.notes[0]


def test_empty_log_variable_is_ignored_and_noted() -> None:
    chosen = resolve_log_dir({"ASCEND_PROCESS_LOG_PATH": "", "HOME": "/root"})
    assert (chosen.path, chosen.source) == ("/root/ascend/log", "HOME")
    assert "ASCEND_PROCESS_LOG_PATH is set but empty" in chosen.notes[0]


# ----------------------------------------------------------------------------- environment


def test_ascend_environment_selects_and_splits() -> None:
    env = {
        "ASCEND_HOME_PATH": "/usr/local/Ascend/ascend-toolkit/latest",
        "ASCEND_RT_VISIBLE_DEVICES": "0,1",
        "ASCEND_GLOBAL_LOG_LEVEL": "1",
        "ATB_HOME_PATH": "/usr/local/Ascend/nnal/atb/latest/atb/cxx_abi_1",
        "HCCL_CONNECT_TIMEOUT": "1200",
        "MINDIE_LOG_TO_STDOUT": "1",
        "PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True",
        "TORCH_NPU_SOMETHING": "x",
        "TASK_QUEUE_ENABLE": "2",
        "LD_LIBRARY_PATH": "/usr/local/Ascend/driver/lib64::/opt/lib:",
        "PYTHONPATH": "/a:/b",
        "HOME": "/root",
        "PATH": "/usr/bin",
        "CUDA_VISIBLE_DEVICES": "0",
        "ASCENDX": "not a prefix match",
    }
    parsed = ascend_environment(env, device_count=8)
    assert list(parsed.variables) == sorted(parsed.variables)
    assert set(parsed.variables) == {
        "ASCEND_HOME_PATH",
        "ASCEND_RT_VISIBLE_DEVICES",
        "ASCEND_GLOBAL_LOG_LEVEL",
        "ATB_HOME_PATH",
        "HCCL_CONNECT_TIMEOUT",
        "MINDIE_LOG_TO_STDOUT",
        "PYTORCH_NPU_ALLOC_CONF",
        "TORCH_NPU_SOMETHING",
        "TASK_QUEUE_ENABLE",
        "LD_LIBRARY_PATH",
        "PYTHONPATH",
    }
    assert parsed.ld_library_path == ("/usr/local/Ascend/driver/lib64", "/opt/lib")
    assert parsed.ld_library_path_has_empty_entry is True
    assert parsed.pythonpath == ("/a", "/b")
    assert parsed.visible_devices.ids == (0, 1)
    assert parsed.log_level.name == "INFO"
    assert parsed.log_dir.path == "/root/ascend/log"


def test_ascend_environment_of_a_bare_process() -> None:
    parsed = ascend_environment({})
    assert parsed.variables == {}
    assert parsed.ld_library_path == ()
    assert parsed.ld_library_path_has_empty_entry is False
    assert parsed.visible_devices.ids is None
    assert parsed.log_level.level == 3
    assert parsed.log_dir.path is None


def test_split_path_list() -> None:
    assert split_path_list(None) == ()
    assert split_path_list("") == ()
    assert split_path_list(":/a::/b:") == ("/a", "/b")


# ----------------------------------------------------------------------------- device nodes


def test_davinci_ids_are_sorted_numerically() -> None:
    names = ["davinci10", "davinci2", "davinci_manager", "davinci", "davinci1x", "davinci0"]
    assert davinci_ids(names) == (0, 2, 10)


def test_device_nodes_in_a_fake_root(tmp_path: Path) -> None:
    dev = tmp_path / "dev"
    dev.mkdir()
    for n in range(8):
        (dev / f"davinci{n}").write_text("")
    (dev / "davinci_manager").write_text("")
    (dev / "hisi_hdc").mkdir()  # odd, but its kind is what must be recorded
    nodes = read_device_nodes(LiveHost(root=str(tmp_path), env={}))
    assert nodes.davinci_ids == (0, 1, 2, 3, 4, 5, 6, 7)
    assert nodes.davinci[7].path == "/dev/davinci7"
    assert {node.kind for node in nodes.davinci.values()} == {"file"}
    assert nodes.shared["davinci_manager"].kind == "file"  # present but not a char device
    assert nodes.shared["davinci_manager"].present
    assert nodes.shared["hisi_hdc"].kind == "dir"
    assert nodes.shared["devmm_svm"].kind == "missing"
    assert not nodes.shared["devmm_svm"].present
    assert nodes.shared["dvpp_cmdlist"].kind == "missing"


def test_device_nodes_without_dev_raise(tmp_path: Path) -> None:
    with pytest.raises(PathMissing):
        read_device_nodes(LiveHost(root=str(tmp_path), env={}))


class _Unrecorded(LiveHost):
    def __init__(self, root: str, missing: set[str]) -> None:
        super().__init__(root=root, env={})
        self.missing = missing

    def kind(self, path: str) -> PathKind:
        if path in self.missing:
            raise NotRecorded(path)
        return super().kind(path)

    def exists(self, path: str) -> bool:
        if path in self.missing:
            raise NotRecorded(path)
        return super().exists(path)


def test_not_recorded_node_is_its_own_kind(tmp_path: Path) -> None:
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev/davinci0").write_text("")
    nodes = read_device_nodes(_Unrecorded(str(tmp_path), {"/dev/hisi_hdc", "/dev/davinci0"}))
    assert nodes.shared["hisi_hdc"].kind == "not_recorded"
    assert not nodes.shared["hisi_hdc"].present
    assert nodes.davinci[0].kind == "not_recorded"
    assert nodes.shared["davinci_manager"].kind == "missing"


# ----------------------------------------------------------------------------- LD_LIBRARY_PATH


@pytest.fixture
def libroot(tmp_path: Path) -> Path:
    driver = tmp_path / "usr/local/Ascend/driver/lib64"
    driver.mkdir(parents=True)
    toolkit = tmp_path / "usr/local/Ascend/ascend-toolkit/8.0.0/lib64"
    toolkit.mkdir(parents=True)
    (toolkit / "libascendcl.so").write_text("")
    # `latest` is an absolute link, as installers make it: must resolve inside the root
    os.symlink(
        "/usr/local/Ascend/ascend-toolkit/8.0.0",
        tmp_path / "usr/local/Ascend/ascend-toolkit/latest",
    )
    atb = tmp_path / "usr/local/Ascend/nnal/atb/latest/atb/cxx_abi_1/lib"
    atb.mkdir(parents=True)
    os.symlink("libatb.so.missing", atb / "libatb.so")  # dangling: not usable
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/ld-file").write_text("")
    return tmp_path


def test_ld_library_dirs(libroot: Path) -> None:
    env = {
        "LD_LIBRARY_PATH": ":".join(
            [
                "/usr/local/Ascend/driver/lib64",
                "/usr/local/Ascend/driver/lib64/common",
                "/usr/local/Ascend/ascend-toolkit/latest/lib64",
                "/usr/local/Ascend/nnal/atb/latest/atb/cxx_abi_1/lib",
                "/etc/ld-file",
                "relative/lib",
            ]
        )
    }
    found = read_ld_library_dirs(LiveHost(root=str(libroot), env=env), env)
    assert [(d.path, d.kind) for d in found.dirs] == [
        ("/usr/local/Ascend/driver/lib64", "dir"),
        ("/usr/local/Ascend/driver/lib64/common", "missing"),
        ("/usr/local/Ascend/ascend-toolkit/latest/lib64", "dir"),
        ("/usr/local/Ascend/nnal/atb/latest/atb/cxx_abi_1/lib", "dir"),
        ("/etc/ld-file", "file"),
        ("relative/lib", None),
    ]
    acl = found.libraries["libascendcl.so"]
    assert acl.found_in == "/usr/local/Ascend/ascend-toolkit/latest/lib64"
    assert acl.found is True
    atb = found.libraries["libatb.so"]
    assert atb.found_in is None
    assert atb.found is False


def test_ld_library_dirs_not_recorded_makes_absence_unknown(libroot: Path) -> None:
    atb_dir = "/usr/local/Ascend/nnal/atb/latest/atb/cxx_abi_1/lib"
    env = {"LD_LIBRARY_PATH": f"/usr/local/Ascend/driver/lib64:{atb_dir}:/opt/x"}
    host = _Unrecorded(str(libroot), {"/opt/x", f"{atb_dir}/libatb.so"})
    found = read_ld_library_dirs(host, env)
    assert found.dirs[2].kind == "not_recorded"
    atb = found.libraries["libatb.so"]
    assert atb.found is None
    assert atb.unknown_in == (atb_dir, "/opt/x")
    assert found.libraries["libascendcl.so"].found is None


def test_ld_library_dirs_unset() -> None:
    found = read_ld_library_dirs(LiveHost(env={}), {})
    assert found.dirs == ()
    assert found.libraries["libascendcl.so"].found is False
