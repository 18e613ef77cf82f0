"""Outside text is shown, never obeyed: a recording whose host name, package versions,
environment values, recorded errors and npu-smi cells carry escape sequences and rich markup
is reported literally by every sink (terminal report, `npu`, `playbooks`, --junit, --json,
errors on stderr)."""

from __future__ import annotations

import io
import json
import re
import shutil
import tarfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from conftest import CORPUS_DIR, FakeRoot
from hypothesis import given, settings
from hypothesis import strategies as st
from machines import build_a2
from test_bundle import bundle

from checks.cli import main
from checks.cli.ansi import Writer
from checks.terminal import make_console

EVIL = ("\x1b[2J\x1b[H\x1b[32mALL CHECKS PASSED\x1b[0m\nALL CHECKS PASSED [/x]"
        "[link=http://evil.example]x[/link]\x9b31m\u202e\x07")
EVIL_PROCESS = "\x1b]0;pwned\x07[/x][bold]"
OUR_COLOURS = re.compile(r"\x1b\[[0-9;]*m")  # SGR: the only sequences the doctor writes
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def hostile_recording(root: FakeRoot, tmp_path: Path,
                      capsys: pytest.CaptureFixture[str]) -> Path:
    """A real bundle of the A2 fixture, unpacked, with outside text made hostile."""
    archive = tmp_path / "good.tar.gz"
    assert bundle(root, build_a2(root), archive, "--no-logs") == 0
    capsys.readouterr()
    with tarfile.open(archive) as tar:
        tar.extractall(tmp_path / "x", filter="data")
    snap = next((tmp_path / "x").iterdir())
    edit(snap / "manifest.json", lambda d: d | {"hostname": EVIL})
    edit(snap / "python.json", lambda d: d | {"packages": d["packages"] | {"torch": EVIL}})
    edit(snap / "env.json", lambda d: d | {"ASCEND_GLOBAL_LOG_LEVEL": EVIL,
                                           "ASCEND_HOME_PATH": "/opt/" + EVIL})
    edit(snap / "files.json", lambda d: d | {"/usr/local/Ascend/firmware/version.info": {
        "text": {"error": {"type": "PathUnreadable", "reason": EVIL}}}})
    table = next((CORPUS_DIR / "npu-smi").glob("004-*")).read_text()
    table = table.replace("hlt_host_devmm_", EVIL_PROCESS, 1)
    edit(snap / "commands.json", lambda d: [
        c | {"stdout": table} if c["argv"] == ["npu-smi", "info"] else c for c in d])
    return snap


def edit(path: Path, change: object) -> None:
    data = json.loads(path.read_text())
    path.write_text(json.dumps(change(data)))  # type: ignore[operator]


def assert_literal(text: str) -> None:
    shown = OUR_COLOURS.sub("", text)
    assert not RAW_CONTROL.search(shown), repr(RAW_CONTROL.search(shown))
    assert not any(line.startswith("ALL CHECKS PASSED") for line in shown.splitlines())


def test_the_terminal_report_shows_outside_text_literally(
        fake_root: FakeRoot, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    snap = hostile_recording(fake_root, tmp_path, capsys)
    monkeypatch.setenv("FORCE_COLOR", "1")
    main(["--from", str(snap), "--verbose"])
    out = capsys.readouterr().out
    assert OUR_COLOURS.search(out)  # colour is on, and still nothing else gets through
    assert_literal(out)
    assert "\\x1b[2J" in out and "[/x][link=http://evil.example]" in out


def test_npu_shows_a_hostile_process_name_literally(fake_root: FakeRoot, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    snap = hostile_recording(fake_root, tmp_path, capsys)
    assert main(["npu", "--from", str(snap)]) == 0
    out = capsys.readouterr().out
    assert_literal(out)
    assert "\\x1b]0;pwned\\x07[/x][bold]" in out


def test_junit_is_well_formed_and_literal(fake_root: FakeRoot, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    snap = hostile_recording(fake_root, tmp_path, capsys)
    junit = tmp_path / "junit.xml"
    main(["--from", str(snap), "--junit", str(junit)])
    capsys.readouterr()
    tree = ET.parse(junit)  # well-formed whatever the recording held
    text = ET.tostring(tree.getroot(), encoding="unicode")
    assert "\\x1b[2J" in text and "\x1b" not in text


def test_json_is_the_same_data_with_nothing_a_terminal_obeys(
        fake_root: FakeRoot, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snap = hostile_recording(fake_root, tmp_path, capsys)
    main(["--from", str(snap), "--json"])
    out = capsys.readouterr().out
    assert not RAW_CONTROL.search(out)
    assert EVIL in json.loads(out)["host"]["description"]  # the value itself is intact


def test_playbooks_search_with_markup_does_not_crash(capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    assert main(["playbooks", "[/x]", "[link=http://evil.example]"]) == 0
    out = capsys.readouterr().out
    assert "[/x]" in out and "Traceback" not in out


@settings(max_examples=100, deadline=None)
@given(text=st.text(max_size=60))
def test_the_writer_never_writes_outside_control_characters(text: str) -> None:
    out = io.StringIO()
    Writer(out, color=True, width=40).line(("label ", "bold"), (text, "red"))
    shown = OUR_COLOURS.sub("", out.getvalue())
    assert not RAW_CONTROL.search(shown)
    assert shown.count("\n") == len(shown.splitlines())  # one logical line, wrapped or not


@settings(max_examples=100, deadline=None)
@given(text=st.text(max_size=60))
def test_the_rich_console_never_obeys_outside_text(text: str) -> None:
    from rich.table import Table

    out = io.StringIO()
    console = make_console(out)
    table = Table(title=text)
    table.add_column(text)
    table.add_row(text)
    console.print(table)
    console.print(text)
    assert not RAW_CONTROL.search(OUR_COLOURS.sub("", out.getvalue()))


def test_a_real_tty_title_is_not_changed(fake_root: FakeRoot, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Through a pseudo-terminal, as a user would run it: no OSC (title) sequence at all."""
    import os
    import pty
    import subprocess
    import sys

    snap = hostile_recording(fake_root, tmp_path, capsys)
    leader, follower = pty.openpty()
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    proc = subprocess.Popen([sys.executable, "-m", "checks.cli", "npu", "--from", str(snap)],
                            stdout=follower, stderr=follower, env=env)
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=60)
    os.close(leader)
    shown = b"".join(chunks).decode("utf-8", "replace")
    assert "\x1b]" not in shown and "\x07" not in shown
    assert "pwned" in shown
    shutil.rmtree(tmp_path / "x")


@pytest.mark.parametrize("name", ["/evil\nascend-doctor: bundle OK, no problems found",
                                  "snap/../\x1b[2J\x1b]0;pwned\x07x"])
def test_a_member_name_cannot_forge_a_line_on_stderr(name: str, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "forged.tar.gz"
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo(name)
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    assert main(["--from", str(path)]) == 3
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("ascend-doctor: ")
    assert not RAW_CONTROL.search(err.rstrip("\n"))
