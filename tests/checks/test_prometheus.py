"""--prometheus FILE: the textfile-collector output, read back with prometheus_client's parser."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import FakeRoot
from machines import A2, build_a2
from prometheus_client.parser import text_string_to_metric_families

from checks.cli import main
from checks.model import Result, Status
from checks.prom import STATUS_VALUE, to_prometheus
from checks.runner import Run


def _result(check_id: str, status: Status, category: str = "npu", waiver: str = "") -> Result:
    return Result(check_id, "t", category, status, "s", (), "", check_id, 1.0, waiver)


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def test_every_status_has_its_number_and_labels_are_escaped() -> None:
    run = Run((_result("a.pass", "pass"), _result("b.skip", "skip"), _result("c.warn", "warn"),
               _result("d.fail", "fail", waiver="accepted"), _result("e.error", "error"),
               _result('odd"id\\x', "pass", category="new\nline")), 1234.0)
    parsed = samples(to_prometheus(run, now_s=1700000000.0))
    status = {dict(k[1])["id"]: v for k, v in parsed.items()
              if k[0] == "ascend_doctor_check_status"}
    assert status == {"a.pass": 0, "b.skip": 1, "c.warn": 2, "d.fail": 3, "e.error": 4,
                      'odd"id\\x': 0}
    assert STATUS_VALUE == {"pass": 0, "skip": 1, "warn": 2, "fail": 3, "error": 4}
    assert parsed[("ascend_doctor_check_status",
                   (("category", "npu"), ("id", "d.fail"), ("waived", "true")))] == 3
    counts = {dict(k[1])["status"]: v for k, v in parsed.items() if k[0] == "ascend_doctor_checks"}
    assert counts == {"pass": 2, "warn": 1, "fail": 1, "skip": 1, "error": 1}
    assert parsed[("ascend_doctor_last_run_timestamp_seconds", ())] == 1700000000.0
    assert parsed[("ascend_doctor_exit_code", ())] == 2
    assert parsed[("ascend_doctor_run_duration_seconds", ())] == pytest.approx(1.234)


def test_cli_writes_the_file_atomically(fake_root: FakeRoot, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    host = build_a2(fake_root, A2(env={"ASCEND_GLOBAL_LOG_LEVEL": "0"}))
    textfile_dir = tmp_path / "textfile"
    textfile_dir.mkdir()
    prom = textfile_dir / "ascend_doctor.prom"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("checks.cli.os.environ", dict(host.env))
        code = main(["--root", str(fake_root.path), "--python", "/usr/bin/python3",
                     "--prometheus", str(prom)])
    assert code == 1
    parsed = samples(prom.read_text())
    assert parsed[("ascend_doctor_check_status",
                   (("category", "logging"), ("id", "logging.level")))] == 2
    assert [p.name for p in textfile_dir.iterdir()] == ["ascend_doctor.prom"]
    assert "logging.level" in capsys.readouterr().out  # the terminal report is still printed


def test_unwritable_target_is_exit_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--only", "logging.level", "--prometheus", str(tmp_path / "no" / "x.prom")])
    err = capsys.readouterr().err.strip()
    assert code == 3 and len(err.splitlines()) == 1 and "--prometheus" in err
