"""Every sub-command of `ascend-doctor`: run, list, explain, playbooks, npu, bundle,
baseline record, ops, bench. Each takes its options object (checks/options.py) and returns the
exit code; a bad input raises UsageError (checks/errors.py), which the CLI prints as one line."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from checks import doctor, inputs
from checks.errors import EXIT_FAIL, EXIT_OK, EXIT_USAGE, EXIT_WARN, UsageError
from checks.registry import all_checks
from checks.report import to_json, to_junit
from checks.terminal import make_console
from probes.textsafe import json_text

if TYPE_CHECKING:
    from checks.baseline.model import Baseline
    from checks.command_options import (
        BaselineRecordOptions,
        BenchOptions,
        BundleOptions,
        NpuOptions,
        OpsOptions,
    )
    from checks.options import RunOptions


def cmd_list() -> int:
    from rich.table import Table

    console = make_console()
    table = Table(title="ascend-doctor checks", title_justify="left")
    for header in ("id", "category", "looks at"):
        table.add_column(header)
    for check in all_checks():
        table.add_row(check.id, check.category, check.looks_at)
    console.print(table)
    return EXIT_OK


def cmd_explain(playbook_id: str) -> int:
    from rich.markdown import Markdown
    from rich.text import Text

    import playbooks
    from checks.sources_view import print_sources

    console = make_console()
    try:
        book = playbooks.get(playbook_id)
    except playbooks.PlaybookNotFound as exc:
        console.print(Text(f"ascend-doctor: {exc}", style="red"))
        return EXIT_USAGE
    source = f"# {book.title}\n\n{book.body}"
    if console.is_terminal:
        console.print(Markdown(source))
    else:
        # piped or redirected (pasted into a ticket): the Markdown as written, never cropped
        console.print(Text(source.rstrip("\n")), soft_wrap=True)
    if book.sources:
        print_sources(console, book.sources)
    return EXIT_OK


def cmd_playbooks(text: str, as_json: bool = False) -> int:
    """List the playbooks, or search them; exit 0 whether or not anything matched."""
    from checks.cli.playbooks_view import show

    return show(text, as_json)


def cmd_run(options: RunOptions) -> int:
    """Run the checks on the observed machine and report; the exit code says how it went."""
    policy = inputs.policy(options.policy)
    request = doctor.Request(options.host, options.model, options.only, options.skip,
                             options.tp, _baseline(options.baseline),
                             inputs.endpoint(options.endpoint))
    doctor.check_selection(request)
    judged = doctor.run(inputs.observe(options.host), policy, request)
    run, info = judged.run, judged.info
    if options.json:
        print(json_text(json.dumps(to_json(run, info), indent=2, ensure_ascii=False)))
    else:
        from checks.cli.report_terminal import render_terminal

        render_terminal(run, info, sys.stdout, options.verbose,
                        endpoint_url=options.endpoint.url if options.endpoint else None)
    if options.junit:
        _write_atomic(options.junit, to_junit(run, info))
    if options.prometheus:
        from checks.prom import to_prometheus, write_prometheus

        write_prometheus(options.prometheus, to_prometheus(run))
    return run.exit_code()


def _baseline(path: Path | None) -> Baseline | None:
    """The --baseline file, loaded before any check runs: a bad file is exit 3, not a skip."""
    if path is None:
        return None
    from checks.baseline import BaselineError, load_baseline

    try:
        return load_baseline(path)
    except BaselineError as exc:
        raise UsageError(str(exc)) from None


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        raise UsageError(f"--junit {path}: cannot write ({exc.strerror or exc})") from None


def cmd_npu(options: NpuOptions) -> int:
    """The NPU inventory: observed, or parsed from a pasted npu-smi output."""
    from probes.inventory import parse_output, read_live

    if options.from_file:
        reading = parse_output(_read_input(options.from_file), options.from_file)
    else:
        reading = read_live(inputs.make_host(options.host), timeout_s=options.host.timeout_s)
    if options.json:
        print(json_text(json.dumps(reading.document, indent=2, ensure_ascii=False)))
    else:
        from checks.cli.npu_view import render

        render(reading, make_console())
    return EXIT_FAIL if reading.is_error else EXIT_OK


def _read_input(path: str) -> str:
    # one byte over the limit is enough for the parser to refuse it (and a huge file is not read)
    from probes.npu_smi.registry import MAX_INPUT_BYTES

    if path == "-":
        return sys.stdin.read(MAX_INPUT_BYTES + 1)
    try:
        with Path(path).open("rb") as stream:
            return stream.read(MAX_INPUT_BYTES + 1).decode("utf-8", errors="replace")
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror or exc}") from None


def cmd_bundle(options: BundleOptions) -> int:
    """Record this machine into one .tar.gz and say what went into it."""
    from checks.bundle.collect import (
        Progress,
        make_bundle,
        summary_lines,
    )

    observed = inputs.observe(options.host)
    result = make_bundle(observed.host, options, Progress(), observed)
    print("\n".join(summary_lines(result)))
    return EXIT_OK


def cmd_baseline_record(options: BaselineRecordOptions) -> int:
    """Write the YAML baseline of this machine to -o FILE (atomically) or stdout."""
    from checks.baseline import to_yaml
    from checks.baseline.record import record_baseline

    observed = inputs.observe(options.host)
    now = record_baseline(observed.host, options, observed.target)
    text = to_yaml(now)
    if options.output is None:
        sys.stdout.write(text)
        return EXIT_OK
    from checks.prom import write_atomic

    write_atomic(options.output, text, "-o")
    print(f"wrote {options.output}: {len(now.versions)} versions, {len(now.environment)} "
          f"variables, {now.npu.count if now.npu else 0} NPU chips"
          f"{', tokenizer fingerprint' if now.tokenizer else ''}", file=sys.stderr)
    return EXIT_OK


def _needs_torch(command: str) -> None:
    """One line instead of a traceback where torch is not installed."""

    if importlib.util.find_spec("torch") is None:
        raise UsageError(f"`ascend-doctor {command}` runs the engine and needs torch, which is "
                         "not installed in this Python; pip install torch (and torch_npu on an "
                         "NPU box)")


def target_torch_npu(python: str) -> str:
    """The torch_npu version installed in the interpreter `python` (UsageError without one)."""
    from probes.live import LiveHost

    found = LiveHost(root="/", python=python).python_packages()
    if found.error:
        raise UsageError(f"--python {python}: {found.error}")
    version = found.version_of("torch_npu")
    if version is None:
        raise UsageError(f"--python {python}: no torch_npu installed there; pass --torch-npu "
                         "VERSION to predict for a release")
    return version


def cmd_ops(options: OpsOptions) -> int:
    """The operators --model sends to the device and whether it has kernels for them."""
    _needs_torch("ops")
    from engine.errors import EngineError
    from engine.tools.opscan import scan_path

    torch_npu = options.torch_npu
    if torch_npu is None and options.python:
        torch_npu = target_torch_npu(options.python)
    try:
        report = scan_path(Path(options.model), options.device, torch_npu, options.dtype,
                           options.fp8)
    except EngineError as exc:
        raise UsageError(str(exc)) from None
    document = report.document()
    if options.json:
        print(json_text(json.dumps(document, indent=2, ensure_ascii=False)))
    else:
        from checks.cli.ops_view import render

        render(document, make_console())
    return EXIT_WARN if report.warnings else EXIT_OK


def _comparison_document(comparison: Any) -> dict[str, Any]:
    return {"other": comparison.other, "slower_pct": comparison.slower_pct,
            "slower": [d.name for d in comparison.slower],
            "operators": [{"name": d.name, "there_s": d.then_s, "here_s": d.now_s,
                           "ratio": d.ratio, "shape_changed": d.shape_changed}
                          for d in comparison.deltas],
            "peaks": [{"name": p.name, "unit": p.unit, "there": p.then, "here": p.now}
                      for p in comparison.peaks]}


def _say_if_busy(load_before: float | None) -> None:
    """On stderr (the JSON on stdout stays a document): the machine was busy while timed."""
    import torch

    from checks.busy import busy_note

    note = busy_note(load_before, os.cpu_count(), torch.get_num_threads())
    if note:
        print(f"ascend-doctor bench: {note}", file=sys.stderr)


def cmd_bench(options: BenchOptions) -> int:
    """Micro-benchmarks of --model's hot operators; with --compare, what got slower."""
    _needs_torch("bench")
    from checks.bench_compare import CompareError, compare, load

    try:
        other = load(options.compare) if options.compare else None
    except CompareError as exc:
        raise UsageError(f"--compare {exc}") from None
    from checks.busy import load_1m
    from checks.cli.bench_view import progress_bar, render, render_comparison
    from engine.config import load_config
    from engine.errors import EngineError
    from engine.runner import parse_dtype, pick_device
    from engine.tools.bench_timing import QUICK, Settings
    from engine.tools.microbench import bench

    load_before = load_1m()  # before the bench's own threads add to it
    try:
        config = load_config(Path(options.model))
        device = pick_device(options.device)
        with progress_bar(True) as update:
            document = bench(config, device, dtype=parse_dtype(options.dtype),
                             fp8_mode=options.fp8, settings=QUICK if options.quick else Settings(),
                             progress=update, model=options.model)
    except EngineError as exc:
        raise UsageError(str(exc)) from None
    comparison = compare(document, other, options.slower_pct) if other is not None else None
    if options.output:
        from checks.prom import write_atomic

        write_atomic(options.output, json.dumps(document, indent=2) + "\n", "-o")
    if options.json:
        shown = {**document, "comparison": _comparison_document(comparison)} if comparison \
            else document
        print(json_text(json.dumps(shown, indent=2, ensure_ascii=False)))
    else:
        console = make_console()
        render(document, console)
        if comparison is not None:
            render_comparison(comparison, console)
    _say_if_busy(load_before)
    return EXIT_WARN if comparison is not None and comparison.slower else EXIT_OK


def cmd_triage(inputs: list[str], pid: int | None, since: str | None, as_json: bool) -> int:
    from checks.triage import cli

    return cli.run(cli.options_from(inputs, pid, since, as_json))
