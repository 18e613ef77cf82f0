"""`ascend-doctor --endpoint URL ...`: the options, their one-line usage errors, and a stopped
server failing (exit 2, never an error)."""

from __future__ import annotations

import json

import pytest

from checks.cli import main

ONLY = ["--only", "endpoint.health,endpoint.smoke,endpoint.metrics"]


def test_a_stopped_server_fails_each_check(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--endpoint", "http://127.0.0.1:9/v1", *ONLY, "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 2
    assert {r["id"]: r["status"] for r in doc["results"]} == {
        "endpoint.health": "fail", "endpoint.smoke": "fail", "endpoint.metrics": "fail"}
    assert all("connection refused" in r["summary"] for r in doc["results"])


@pytest.mark.parametrize(("argv", "message"), [
    (["--endpoint-model", "m"], "go with --endpoint URL"),
    (["--endpoint", "ftp://x"], "--endpoint 'ftp://x': use http://HOST:PORT"),
    (["--endpoint", "http://h:8000", "--endpoint-api-key-env", "ASCEND_TEST_NO_SUCH_KEY"],
     "--endpoint-api-key-env ASCEND_TEST_NO_SUCH_KEY: that environment variable is not set"),
])
def test_usage_errors_are_one_line(argv: list[str], message: str,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*argv, *ONLY]) == 3
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_without_endpoint_the_checks_skip(capsys: pytest.CaptureFixture[str]) -> None:
    main([*ONLY, "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert {r["status"] for r in doc["results"]} == {"skip"}
    assert all(r["summary"] == "no --endpoint URL given" for r in doc["results"])
