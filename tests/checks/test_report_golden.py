"""Golden outputs of the three report formats on one fixture machine.

Regenerate after an intended change with `UPDATE_GOLDEN=1 pytest tests/checks/test_report_golden.py`
and review the diff like code.
"""

from __future__ import annotations

import json
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from conftest import CORPUS_DIR, FakeRoot
from machines import A2, build_a2, fixture_policy

from checks.cli import main

GOLDEN = Path(__file__).parent / "golden"
FAULTY = A2(env={"ASCEND_GLOBAL_LOG_LEVEL": "1"}, link_x8=("c1",),
            packages={"torch": "2.6.0", "torch_npu": "2.5.1.post1"})


def run(root: FakeRoot, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    host = build_a2(root, FAULTY)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("checks.cli.os.environ", dict(host.env))
        mp.delenv("NO_COLOR", raising=False)
        code = main(["--root", str(root.path), "--python", "/usr/bin/python3",
                     "--policy", str(fixture_policy(root)), *argv])
    return code, capsys.readouterr().out


def normalise(text: str, root: FakeRoot) -> str:
    text = text.replace(str(root.path.parent), "<tmp>")
    text = re.sub(r'"duration_ms": [0-9.]+', '"duration_ms": 0', text)
    text = re.sub(r'time="[0-9.]+"', 'time="0"', text)
    text = re.sub(r"in [0-9.]+ s —", "in 0.0 s —", text)
    text = re.sub(r"[0-9,.]+ MB free of [0-9,.]+ MB", "<free> MB free of <total> MB", text)
    text = re.sub(r'"generated_at": "[^"]+"', '"generated_at": "<now>"', text)
    return re.sub(r'"tool_version": "[^"]+"', '"tool_version": "<version>"', text)


def compare(name: str, actual: str) -> None:
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(actual)
    assert actual == path.read_text(), f"{name} differs; UPDATE_GOLDEN=1 to accept"


def test_terminal_report(fake_root: FakeRoot, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(fake_root, capsys)
    assert code == 2
    compare("a2-faulty.txt", normalise(out, fake_root))


def test_json_report(fake_root: FakeRoot, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(fake_root, capsys, "--json")
    doc = json.loads(out)
    assert doc["schema"] == "ascend-doctor/1" and doc["exit_code"] == code == 2
    assert set(doc["counts"]) == {"pass", "warn", "fail", "skip", "error"}
    compare("a2-faulty.json", normalise(out, fake_root))


def test_junit_report(fake_root: FakeRoot, tmp_path: Path,
                      capsys: pytest.CaptureFixture[str]) -> None:
    junit = tmp_path / "doctor.xml"
    code, _ = run(fake_root, capsys, "--junit", str(junit))
    suite = ET.parse(junit).getroot()
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert cases["versions.parity"].find("failure") is not None
    assert cases["logging.level"].find("failure") is None
    assert cases["logging.level"].find("system-out") is not None
    assert cases["checkpoint.format"].find("skipped") is not None
    assert suite.get("failures") == "1" and code == 2
    compare("a2-faulty.xml", normalise(junit.read_text(), fake_root))


def test_the_json_timestamp_is_datetimes_utc_isoformat() -> None:
    import datetime as dt

    from checks.report import _utc_now

    before = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    stamp = _utc_now()
    after = dt.datetime.now(dt.timezone.utc)
    parsed = dt.datetime.fromisoformat(stamp)
    assert parsed.isoformat(timespec="seconds") == stamp
    assert parsed.utcoffset() == dt.timedelta(0) and before <= parsed <= after


def test_the_json_timestamp_reads_the_precise_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not C's time(): that coarse clock can still show the previous second, and the stamp
    then came out before a datetime.now() taken just ahead of it (seen in CI)."""
    import time

    from checks.report import _utc_now

    monkeypatch.setattr(time, "time", lambda: 1_700_000_000.999)
    assert _utc_now() == "2023-11-14T22:13:20+00:00"


def test_the_rules_that_decided_a_result_are_reported(
        fake_root: FakeRoot, capsys: pytest.CaptureFixture[str]) -> None:
    """`results[].rules` in --json (always present, empty when no rule decided), and a `rules:`
    line under the result with --verbose."""
    host = build_a2(fake_root, A2())
    sample = next((CORPUS_DIR / "npu-smi").glob("014-*.txt")).read_text()
    table = fake_root.file("/srv/info.txt", re.sub(  # NPU 3's Temp(C) printed as NA
        r"^(\| 3     910B4 .*?\| \S+\s+)\d+(\s)", r"\1NA\2", sample, flags=re.M))
    fake_root.script("/usr/local/bin/npu-smi", f'[ "$*" = info ] && cat "{table}"\n')
    argv = ["--root", str(fake_root.path), "--python", "/usr/bin/python3",
            "--only", "npu.temperature,npu.health"]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("checks.cli.os.environ", dict(host.env))
        main([*argv, "--json"])
        doc = json.loads(capsys.readouterr().out)
        main([*argv, "--verbose"])
        verbose = capsys.readouterr().out
        main(argv)
        plain = capsys.readouterr().out
    rules = {r["id"]: r["rules"] for r in doc["results"]}
    assert rules == {"npu.health": [], "npu.temperature": ["no-temperature"]}
    assert "        rules: no-temperature\n" in verbose and "rules:" not in plain
