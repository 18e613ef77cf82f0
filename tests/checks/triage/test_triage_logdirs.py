"""A process's log directories from its environment, read under its root."""

from __future__ import annotations

from pathlib import Path

from checks.triage import logdirs


def test_the_documented_precedence_and_the_root(tmp_path: Path) -> None:
    root = tmp_path / "rootfs"
    for sub in ("work/log/debug/plog", "work/log/run/device-3", "home/u/ascend/log/run/plog"):
        (root / sub).mkdir(parents=True)
    env = {"ASCEND_WORK_PATH": "/work", "HOME": "/home/u"}
    found = logdirs.from_environment(env, str(root), "process 7")
    assert found.directories == (root / "work/log/debug/plog", root / "work/log/run/device-3")
    assert any("from ASCEND_WORK_PATH" in n and f"read under {root}" in n for n in found.notes)
    home_only = logdirs.from_environment({"HOME": "/home/u"}, str(root), "process 7")
    assert home_only.directories == (root / "home/u/ascend/log/run/plog",)


def test_mindie_service_logs_are_read_when_present(tmp_path: Path) -> None:
    (tmp_path / "root" / "mindie" / "log" / "debug").mkdir(parents=True)
    found = logdirs.from_environment({"HOME": "/root"}, str(tmp_path), "process 9")
    assert found.directories == (tmp_path / "root/mindie/log/debug",)
    assert any("none of" in n for n in found.notes)


def test_no_home_and_no_variables_is_said(tmp_path: Path) -> None:
    found = logdirs.from_environment({}, str(tmp_path), "process 9")
    assert found.directories == ()
    assert any("HOME not set" in n for n in found.notes)
