"""A newcomer's typos: a mistyped option, command or check id is named with what was meant,
and a sub-command's usage line names the sub-command, not the main usage text."""

from __future__ import annotations

import pytest

from checks.cli import main


def usage_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as exited:
        main(list(argv))
    assert exited.value.code == 3
    return capsys.readouterr().err


@pytest.mark.parametrize(("argv", "meant"), [
    (["--jsn"], "--json"),
    (["--mdoel", "/models/x"], "--model"),
    (["--onyl", "npu.health"], "--only"),
    (["triage", "--sinse", "1h", "x.log"], "--since"),
    (["explan", "npu.health"], "explain"),
    (["baseline", "recrd"], "record"),
    (["search", "garbled output"], "playbooks"),  # the word people try for the search
    (["help"], "--help"),
])
def test_a_typo_says_what_was_meant(capsys: pytest.CaptureFixture[str], argv: list[str],
                                    meant: str) -> None:
    err = usage_error(capsys, *argv)
    assert f"(did you mean {meant}?)" in err


def test_a_mistyped_option_is_named_not_its_value(capsys: pytest.CaptureFixture[str]) -> None:
    err = usage_error(capsys, "--mdoel", "/models/x")
    assert "unrecognized arguments: --mdoel" in err
    assert "invalid choice" not in err


def test_nothing_close_adds_no_guess(capsys: pytest.CaptureFixture[str]) -> None:
    assert "did you mean" not in usage_error(capsys, "--zzzzzz")


def test_a_sub_command_usage_names_the_sub_command(capsys: pytest.CaptureFixture[str]) -> None:
    err = usage_error(capsys, "baseline", "recrd")
    assert err.startswith("usage: ascend-doctor baseline ")
    assert "(the commands are listed below)" not in err


def test_a_mistyped_check_id_says_what_was_meant(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--only", "npu.helth"]) == 3
    assert "unknown check id npu.helth: did you mean npu.health?" in capsys.readouterr().err


def test_an_unknown_check_id_without_a_close_one_adds_no_guess(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--skip", "zzzz"]) == 3
    err = capsys.readouterr().err
    assert "unknown check id zzzz" in err and "did you mean" not in err


@pytest.mark.parametrize("value", ["-1", "0", "nan", "inf", "abc"])
def test_a_timeout_that_would_time_every_command_out_is_refused(
        capsys: pytest.CaptureFixture[str], value: str) -> None:
    err = usage_error(capsys, "--timeout", value, "--only", "devices.nodes")
    assert f"argument --timeout: '{value}' is not a number of seconds above 0" in err


def test_a_timeout_in_seconds_is_taken(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--timeout", "2.5", "--only", "devices.nodes", "--from", "/nonexistent"]) == 3
    assert "no such snapshot directory" in capsys.readouterr().err
