"""Every value a check reports is cut to the line budget once, in Result.of, so a bundle whose
driver version is megabytes prints a report of kilobytes in every output."""

from __future__ import annotations

from types import SimpleNamespace

from checks.model import Finding, Result
from probes.textsafe import REPORT_MAX_LINES, REPORT_VALUE_CHARS


def test_a_result_is_cut_once_for_every_output() -> None:
    check = SimpleNamespace(id="x.y", title="t", category="c", playbook_id="x.y")
    huge = "9" * 10_000_000
    finding = Finding("warn", f"driver {huge}", (f"version.info: {huge}",) * 1000, huge)
    result = Result.of(check, finding, 1.0)  # type: ignore[arg-type]
    sizes = [len(result.summary), len(result.remedy), *map(len, result.evidence)]
    assert max(sizes) <= REPORT_VALUE_CHARS
    assert len(result.evidence) == REPORT_MAX_LINES
    assert result.summary.endswith("characters)") and "more lines" in result.evidence[-1]


def test_ordinary_values_are_untouched() -> None:
    check = SimpleNamespace(id="x.y", title="t", category="c", playbook_id="x.y")
    finding = Finding("pass", "driver 24.1.rc2", ("a", "b"), "nothing to do")
    result = Result.of(check, finding, 1.0)  # type: ignore[arg-type]
    assert (result.summary, result.evidence, result.remedy) == (
        "driver 24.1.rc2", ("a", "b"), "nothing to do")


def test_the_header_is_cut_too() -> None:
    from checks.report import HostInfo, target_lines
    from probes.target.model import shell_target

    huge = "h" * 5_000_000
    info = HostInfo(f"recording of {huge}", f"python {huge}", "default", huge)
    assert max(len(info.description), len(info.python), len(info.model or "")) <= 400
    target = shell_target()
    lines = target_lines(type(target)(**{**target.__dict__, "problems": (huge,) * 500}))
    assert len(lines) <= 64 and max(map(len, lines)) <= 400
