"""The terminal report of a doctor run, as short as `flutter doctor`: one line per check
(status, id, summary, a long one cut after a whole clause; a skip reason said once, later skips
for it point back), then each distinct fix once with the checks it is for. `--verbose` adds the
evidence and the rules, keeps every summary whole, and repeats every skip reason."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TextIO

from checks import TOOL_VERSION
from checks.cli.ansi import Span, Writer
from checks.model import Result, Status
from checks.report import HostInfo, target_lines
from checks.runner import Run
from probes.target.model import Target

_LABEL: Mapping[Status, tuple[str, str]] = {
    "pass": ("PASS", "green"),
    "warn": ("WARN", "yellow"),
    "fail": ("FAIL", "bold red"),
    "skip": ("SKIP", "dim"),
    "error": ("ERROR", "magenta"),
}
_VERDICT = {0: ("no problems found", "green"), 1: ("usable, with warnings", "yellow"),
            2: ("NOT ready", "bold red")}
_PROBLEMS = ("warn", "fail", "error")
_ID_WIDTH = 22
_DETAIL_INDENT = 8
# A summary longer than this is cut after a whole clause in the report (never in --verbose or
# --json), so a check with many reasons still leaves the report one screen at 80 x 24.
BRIEF_CHARS = 320
# (status, singular, plural) of the summary line's counts
_COUNT_WORDS: tuple[tuple[Status, str, str], ...] = (
    ("pass", "passed", "passed"), ("warn", "warning", "warnings"), ("fail", "failed", "failed"),
    ("skip", "skipped", "skipped"), ("error", "error", "errors"))


def render_terminal(run: Run, host: HostInfo, stream: TextIO, verbose: bool = False,
                    color: bool | None = None, width: int | None = None,
                    endpoint_url: str | None = None) -> None:
    """`endpoint_url`: the run's --endpoint, to say when it is not the target's server."""
    out = Writer(stream, color, width)
    out.line((f"ascend-doctor {TOOL_VERSION} — {host.description}", "bold"))
    for number, text in enumerate(target_lines(host.target, host.replay)):
        style = "bold" if number == 0 else ("yellow" if text.startswith("  !") else "dim")
        out.line((text, style))
    out.line((f"python: {host.python}   policy: {host.policy}"
              + (f"   model: {host.model}" if host.model else ""), ""))
    stream.write("\n")
    if verbose:
        for result in run.results:
            _verbose_result(result, out)
    else:
        for line in result_lines(run.results):
            out.line(*line, hang=_DETAIL_INDENT)
    hint = endpoint_hint(host.target, run.results, endpoint_url)
    if hint:
        out.line(("  ", ""), (hint, "dim"), hang=_DETAIL_INDENT)
    fixes = list(fix_lines(run.results))  # a generator is always true
    if fixes:
        stream.write("\n")
        for line in fixes:
            out.line(*line, hang=_DETAIL_INDENT)
    stream.write("\n")
    out.line(*summary_line(run, verbose), hang=0)


def result_lines(results: Sequence[Result]) -> Iterator[tuple[Span, ...]]:
    """One line per check; a skip reason already said points to the check that said it."""
    first_for: dict[str, str] = {}  # skip reason -> the check that said it first
    for result in results:
        said_by = first_for.get(result.summary) if result.status == "skip" else None
        if said_by is None:
            if result.status == "skip":
                first_for[result.summary] = result.id
            yield _status_line(result.status, result.id, brief(result.summary))
        else:
            label, style = _LABEL["skip"]
            yield (("  ", ""), (f"{label:<5}", style), (f" {result.id:<{_ID_WIDTH}} ", "bold"),
                   (f"same reason as {said_by}", "dim"))


def served_port(target: Target) -> int | None:
    """The port a vLLM target's own command line names (`--port N`, `--port=N`); None when it
    names none (its default is not assumed)."""
    proc = target.process
    if proc is None or target.serving.server != "vllm":
        return None
    args = list(proc.cmdline)
    for index, arg in enumerate(args):
        value = (args[index + 1] if arg == "--port" and index + 1 < len(args)
                 else arg.removeprefix("--port=") if arg.startswith("--port=") else None)
        if value is not None and value.isdigit() and 0 < int(value) < 65536:
            return int(value)
    return None


def endpoint_hint(target: Target, results: Sequence[Result],
                  endpoint_url: str | None = None) -> str:
    """Where the endpoint checks would look when they did not run but the target serves; or
    that they looked at another server than the target (a port of this machine it does not
    serve), so the two groups of verdicts are about different processes."""
    port = served_port(target)
    if port is None:
        return ""
    if endpoint_url is None:
        ran = any(r.id.startswith("endpoint.") and r.status != "skip" for r in results)
        return "" if ran else (f"the target serves on port {port}: add --endpoint "
                               f"http://127.0.0.1:{port}/v1 to check what it answers")
    host, endpoint_port = _local_port(endpoint_url)
    if host and endpoint_port is not None and endpoint_port != port:
        return (f"--endpoint is port {endpoint_port} of this machine, the target serves on port "
                f"{port}: the endpoint.* verdicts are about another process than the others")
    return ""


def _local_port(url: str) -> tuple[bool, int | None]:
    """(the URL names this machine by a loopback name, its port or None)."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    except ValueError:
        return False, None
    return parts.hostname in ("127.0.0.1", "localhost", "::1"), port


def brief(summary: str) -> str:
    """`summary` cut after the last whole clause ("; ") that fits BRIEF_CHARS, saying that the
    rest is in --verbose; the first clause is always kept whole."""
    if len(summary) <= BRIEF_CHARS:
        return summary
    clauses = summary.split("; ")
    kept = clauses[:1]
    for clause in clauses[1:]:
        if len("; ".join([*kept, clause])) > BRIEF_CHARS:
            break
        kept.append(clause)
    return summary if len(kept) == len(clauses) else "; ".join(kept) + "; … (more: --verbose)"


def _status_line(status: Status, what: str, summary: str) -> tuple[Span, ...]:
    label, style = _LABEL[status]
    return (("  ", ""), (f"{label:<5}", style), (f" {what:<{_ID_WIDTH}} ", "bold"),
            (summary, ""))


def fix_lines(results: Sequence[Result]) -> Iterator[tuple[Span, ...]]:
    """Each distinct fix once, with the checks it is for and where to read more."""
    by_fix: dict[str, list[Result]] = {}
    for result in results:
        if result.status in _PROBLEMS and result.remedy:
            by_fix.setdefault(result.remedy, []).append(result)
    unfixed = [r for r in results if r.status in _PROBLEMS and not r.remedy]
    if not by_fix and not unfixed:
        return
    yield (("to fix:", "bold"),)
    for remedy, fixed in by_fix.items():
        ids = ", ".join(r.id for r in fixed)
        yield (("  ", ""), (f"{ids}: ", "bold"), (remedy, ""))
        yield _see(fixed)
    for result in unfixed:
        yield (("  ", ""), (f"{result.id}: ", "bold"), ("no fix known; read its playbook", "dim"))
        yield _see([result])


def _see(results: Sequence[Result]) -> tuple[Span, ...]:
    first, *others = dict.fromkeys(r.playbook or r.id for r in results)
    more = "".join(f", or explain {book}" for book in others)  # explain takes one ID
    return ((" " * 4, ""), (f"see: ascend-doctor explain {first}{more}", "cyan"))


def _verbose_result(result: Result, out: Writer) -> None:
    out.line(*_status_line(result.status, result.id, result.summary), hang=_DETAIL_INDENT)
    if result.waiver:
        _detail(out, f"waived: {result.waiver}", "dim")
    if result.rules:
        _detail(out, f"rules: {', '.join(result.rules)}", "dim")
    for item in result.evidence:
        _detail(out, f"· {item}", "dim")


def _detail(out: Writer, text: str, style: str = "") -> None:
    out.line((" " * _DETAIL_INDENT, ""), (text, style), hang=_DETAIL_INDENT + 2)


def count_words(counts: Mapping[Status, int]) -> list[str]:
    """"1 warning", "2 warnings": each non-zero count with its word."""
    return [f"{counts[s]} {one if counts[s] == 1 else many}"
            for s, one, many in _COUNT_WORDS if counts[s]]


def summary_line(run: Run, verbose: bool = False) -> tuple[Span, ...]:
    noun = "check" if len(run.results) == 1 else "checks"
    verdict, style = _VERDICT[run.exit_code()]
    hint = ("" if verbose or not any(r.evidence for r in run.results)
            else " (--verbose shows the evidence)")
    return ((f"{len(run.results)} {noun}: " + ", ".join(count_words(run.counts())) + " in "
             f"{run.duration_ms / 1000:.1f} s — ", ""), (verdict, style), (hint, "dim"))
