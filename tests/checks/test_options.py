"""The options objects: built once from the command line, frozen, and the only thing below
the CLI that knows what was typed."""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest

from checks.cli import (
    baseline_record_options,
    bundle_options,
    npu_options,
    run_options,
)
from checks.cli import parser as cli_parser
from checks.cli.parser import build_parser, parse_args
from checks.command_options import BaselineRecordOptions, BundleOptions, NpuOptions
from checks.options import HostOptions, RunOptions

ROOT = Path(__file__).resolve().parents[2]


def test_run_options_carry_every_flag() -> None:
    args = build_parser().parse_args([
        "--root", "/mnt/img", "--python", "/opt/venv/bin/python", "--timeout", "4",
        "--model", "/models/q", "--policy", "p.yaml", "--only", "a.b, c.d", "--skip", "e.f",
        "--junit", "r.xml", "-v", "--baseline", "b.yaml", "--prometheus", "d.prom"])
    assert run_options(args) == RunOptions(
        host=HostOptions(root="/mnt/img", python="/opt/venv/bin/python", timeout_s=4.0),
        model="/models/q", policy=Path("p.yaml"), only=("a.b", "c.d"), skip=("e.f",),
        junit=Path("r.xml"), verbose=True, baseline=Path("b.yaml"),
        prometheus=Path("d.prom"))


def test_defaults_are_the_options_defaults() -> None:
    assert run_options(build_parser().parse_args([])) == RunOptions()
    assert npu_options(build_parser().parse_args(["npu"])) == NpuOptions()
    assert bundle_options(build_parser().parse_args(["bundle"])) == BundleOptions()
    record = build_parser().parse_args(["baseline", "record"])
    assert baseline_record_options(record) == BaselineRecordOptions()


def test_sub_command_options() -> None:
    npu = npu_options(build_parser().parse_args(["npu", "--from", "rec", "--json"]))
    assert npu == NpuOptions(host=HostOptions(from_path="rec"), json=True)
    bundle = bundle_options(build_parser().parse_args(
        ["bundle", "-o", "out.tar.gz", "--no-logs", "--metrics", "m.sqlite",
         "--redact-hostnames", "--model", "/m"]))
    assert bundle == BundleOptions(model="/m", output=Path("out.tar.gz"), include_logs=False,
                                   metrics=Path("m.sqlite"), redact_hostnames=True)
    for out, expected in (("-", None), ("base.yaml", Path("base.yaml"))):
        args = build_parser().parse_args(["baseline", "record", "-o", out])
        assert baseline_record_options(args).output == expected


def test_options_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        RunOptions().verbose = True  # type: ignore[misc]


def test_only_the_cli_knows_argparse() -> None:
    """Commands, bundles, baselines and reports take options objects, never the namespace."""
    importers = []
    for path in sorted((ROOT / "checks").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if "argparse" in names:
                importers.append(path.relative_to(ROOT).as_posix())
    assert importers == ["checks/cli/__init__.py", "checks/cli/parser.py"]


RUN_LINES = [[], ["--json"], ["--model", "/m", "--only", "a.b", "-v"], ["--pid", "12"],
             ["--from", "rec", "--junit", "r.xml"]]
OTHER_LINES = [["-h"], ["--he"], ["lst"], ["--pid", "abc"], ["--model"], ["--json", "--junit", "x"],
               ["-v", "list"], ["--model", "list"], ["npu", "--json"], ["stray"]]


def _outcome(parse: Callable[[list[str]], object], argv: list[str],
             capsys: pytest.CaptureFixture[str]) -> tuple[object, str, str]:
    try:
        result: object = vars(parse(argv))
    except SystemExit as exc:
        result = ("exit", exc.code)
    out = capsys.readouterr()
    return result, out.out, out.err


@pytest.mark.parametrize("argv", RUN_LINES + OTHER_LINES, ids=" ".join)
def test_the_quick_parser_answers_as_the_full_one(argv: list[str],
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """A command line without a sub-command is parsed without building the sub-commands'
    parsers; help, errors and sub-commands get the full parser's own words."""
    quick = _outcome(parse_args, argv, capsys)
    full = _outcome(lambda a: build_parser().parse_args(a), argv, capsys)
    assert quick == full


def test_a_run_builds_no_sub_command_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []
    monkeypatch.setattr(cli_parser, "build_parser", lambda: built.append("full") or build_parser())
    for argv in RUN_LINES:
        parse_args(argv)
    assert built == []
    parse_args(["list"])
    assert built == ["full"]


def test_the_quick_parser_knows_every_sub_command() -> None:
    import argparse

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert set(cli_parser.COMMANDS) == set(sub.choices)
