"""`ascend-doctor bundle`: record this machine for diagnosis anywhere else.

Every check runs through a RecordingHost (so the recording holds exactly the questions the
doctor asks), then `npu-smi info` / `-m` for the reader's benefit and the tails of the newest
CANN plog files (checks.bundle.plog: through the same host, so recorded and redacted like the
rest), and the console's newest metric recording from its default place on the observed
machine (read through the same Host, so under --root too, but outside the recording: its file
name holds the host name, which recorded paths and listings would keep; it is stored once, as
metrics/NAME, redacted in place, its name too) unless --metrics names one.
Redaction happens on the in-memory recording, before a byte is written; the .tar.gz is
staged in a temporary directory, read back with the hostile-input reader, and moved into
place with os.replace, so a half-written bundle never exists under the final name.

Bundle layout (docs/snapshot-format.md, "Bundles"): the snapshot members plus report.json,
bundle.json, plog/ and metrics/ in one top-level folder.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import posixpath
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from checks import doctor, inputs
from checks.bundle.plog import (
    PlogCollection,
    collect_plog,
    list_names,
    redacted_plog,
    safe_name,
    tail_bytes,
)
from checks.bundle.redact import (
    RedactedRecording,
    Redaction,
    Redactor,
    redact_recording,
    summarise,
)
from checks.command_options import BundleOptions
from checks.errors import UsageError
from checks.policy import Policy, apply_output_cap
from checks.report import to_json
from checks.runner import Run
from probes.errors import HostError
from probes.host import Host
from probes.inventory import run_npu_smi
from probes.recording.model import BundleLimits, CommandRecord, Recording, SnapshotError
from probes.recording.reader import json_values_bound, load_recording
from probes.recording.recorder import RecordingHost
from probes.recording.writer import write_directory
from probes.recordings import RECORDINGS_SUFFIX, default_recordings_dir, newest_first_key
from probes.target.find import Observed
from probes.target.model import Target, shell_target
from probes.target.model import to_json as target_json
from probes.textsafe import one_line
from probes.words import counted

BUNDLE_SCHEMA = "ascend-bundle/1"
KIB = 1024
MIB = 1024 * KIB
# The reader refuses bigger members (probes.recording.model.BundleLimits): refuse them first.
MAX_METRICS_BYTES = BundleLimits().max_member_bytes
# commands.json may use half of what the reader allows the JSON members together
COMMANDS_JSON_BYTES = BundleLimits().max_json_bytes // 2
COMMANDS_JSON_VALUES = BundleLimits().max_json_values // 2


@dataclass(frozen=True)
class MetricsFound:
    """The console recording that goes into the bundle, or why none does."""

    source: str | None = None  # the file included (on the observed machine, or --metrics)
    data: bytes = field(default=b"", repr=False)
    found: int = 0  # *.sqlite files in the default place
    directory: str = ""  # the default place looked at
    note: str = ""  # why nothing is included, when nothing is (names no file: see `newest`)
    newest: str | None = None  # the newest file in the default place, included or not


@dataclass(frozen=True)
class BundleResult:
    path: Path
    size_bytes: int
    recording: Recording  # as written (redacted)
    run: Run
    plog: PlogCollection
    metrics_member: str | None
    redactions: tuple[Redaction, ...]
    members: Mapping[str, int] = field(default_factory=dict)  # extra member -> bytes
    metrics: MetricsFound = field(default_factory=MetricsFound)
    # (pseudonym, real name): shown to the person who made the bundle, never written into it
    pseudonyms: list[tuple[str, str]] = field(default_factory=list)




# -- progress --------------------------------------------------------------------------------


class Progress:
    """One line per step: a rich spinner on a terminal, plain lines on a pipe or file."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        self.stream = stream or sys.stderr
        self.console: Any = None
        if self.stream.isatty():
            from checks.terminal import make_console  # shows paths and outputs literally

            self.console = make_console(self.stream)

    @contextlib.contextmanager
    def step(self, label: str) -> Iterator[list[str]]:
        """Yields a list: append one detail string to show when the step ends."""
        detail: list[str] = []
        began = time.perf_counter()
        if self.console is not None:
            from rich.text import Text

            with self.console.status(label):
                yield detail
            self.console.print(Text.assemble(("✓", "green"), f" {label}{_detail(detail)} ",
                                             (f"({_elapsed(began)})", "dim")))
        else:
            print(one_line(f"{label} ..."), file=self.stream, flush=True)
            yield detail
            print(one_line(f"  done{_detail(detail)} ({_elapsed(began)})"), file=self.stream,
                  flush=True)


def _detail(detail: list[str]) -> str:
    return f": {detail[0]}" if detail else ""


def _elapsed(began: float) -> str:
    return f"{time.perf_counter() - began:.1f} s"



# -- the console's metric recording -------------------------------------------------------------


def find_metrics(host: Host, limit: int = MAX_METRICS_BYTES) -> MetricsFound:
    """The newest console recording in the observed machine's default place (the env of `host`,
    docs/recording.md), read through `host`; a note instead when there is none or it is too
    big."""
    try:
        env = host.env
    except HostError:
        env = {}
    directory = default_recordings_dir(env).as_posix()
    if not directory.startswith("/"):
        return MetricsFound(directory=directory, note=f"none (the default place {directory} "
                            "is not an absolute path in the observed environment)")
    names = [n for n in list_names(host, directory) if n.endswith(RECORDINGS_SUFFIX)]
    if not names:
        return MetricsFound(directory=directory, note=f"none (no recordings in {directory}; "
                            "--metrics FILE adds one)")
    newest = posixpath.join(directory, max(names, key=newest_first_key))
    found = MetricsFound(found=len(names), directory=directory, newest=newest)
    try:
        size = host.file_size(newest)
        if size > limit:
            return dataclasses.replace(found, note=f"left out: the newest is {_size(size)}, "
                                       f"over the {_size(limit)} limit of a bundle member")
        data = host.read_bytes(newest, 0, limit + 1)
    except HostError as exc:
        return dataclasses.replace(found, note="left out: the newest cannot be read "
                                   f"({type(exc).__name__})")
    if len(data) > limit:  # grew while we looked
        return dataclasses.replace(found, note=f"left out: the newest is over the "
                                   f"{_size(limit)} limit of a bundle member")
    return dataclasses.replace(found, source=newest, data=data)


# -- recording ---------------------------------------------------------------------------------


def record(observed: Observed, policy: Policy, request: doctor.Request, options: BundleOptions,
           progress: Progress
           ) -> tuple[RedactedRecording, Run, dict[str, Any], PlogCollection, MetricsFound]:
    """Judge the target as `ascend-doctor` does (checks.doctor.run) through a RecordingHost
    around its host, add the extras, and redact the result."""
    host = observed.host
    recorder = RecordingHost(host)
    with contextlib.suppress(HostError):  # a target whose environment was refused has none
        _ = recorder.env  # the environment is part of every bundle, even if no check reads it
    checks = doctor.check_selection(request)
    with progress.step(f"running {len(checks)} checks") as detail:
        judged = doctor.run(Observed(recorder, observed.target, observed.npu), policy, request)
        run, ctx, info = judged.run, judged.ctx, judged.info
        counts = run.counts()
        detail.append(", ".join(f"{n} {s}" for s, n in counts.items() if n))
    with progress.step("recording npu-smi info, info -m") as detail:
        for args in (["info"], ["info", "-m"]):
            result = run_npu_smi(recorder, args, ctx.timeout_s)  # one at a time, as the checks
            detail[:] = [result.describe()]
    plog = PlogCollection(note="left out (--no-logs)")
    if options.include_logs:
        with progress.step("reading the tails of the newest CANN plog files") as detail:
            plog = collect_plog(recorder, options.plog_files, options.plog_tail_bytes)
            detail.append(f"{len(plog.tails)} of {plog.found} files" if plog.found
                          else plog.note)
    metrics = MetricsFound(note="none (--metrics FILE adds a recording)")
    if options.metrics is None and options.find_metrics:
        with progress.step("looking for the console's newest metric recording") as detail:
            # not through the recorder: paths and listings are kept as asked, and these names
            # hold the host name (--redact-hostnames); the bytes are stored once, as metrics/
            metrics = find_metrics(host)
            detail.append(metrics.source or metrics.note)
    with progress.step("redacting secrets") as detail:
        redacted = redact_recording(fit_commands(recorder.snapshot()),
                                    options.redact_hostnames)
        target = redact_target(ctx.target, redacted.redactor)
        # the model this run judged (--model, or the target's), so a replay judges it too
        target["run_model"] = (redacted.redactor.path(str(ctx.model_dir), "target.json")
                               if ctx.model_dir is not None else None)
        redacted = dataclasses.replace(
            redacted, recording=dataclasses.replace(redacted.recording, target=target))
        report = redacted.redactor.value(to_json(run, info), "report.json")
        report["target"] = {k: v for k, v in target.items() if k != "run_model"}
        detail.append(counted(len(redacted.redactions), "place") if redacted.redactions
                      else "nothing secret-looking found")
    return redacted, run, report, plog, metrics


def redact_target(target: Target, redactor: Redactor) -> dict[str, Any]:
    """The target as target.json holds it: its command line redacted as the line it is (a
    `--api-key VALUE` pair is one finding), every other string as any text."""
    doc = target_json(target)
    if doc["process"] is not None:
        doc["process"]["cmdline"] = redact_args(doc["process"]["cmdline"], redactor)
    redacted: dict[str, Any] = redactor.value(doc, "target.json")
    return redacted


def redact_args(args: list[str], redactor: Redactor) -> list[str]:
    """Arguments redacted together, joined by spaces, with masks of the same length, then
    cut back at the same places."""
    data = " ".join(args).encode("utf-8")
    masked = redactor.data(data, "target.json cmdline")
    out, start = [], 0
    for arg in args:
        end = start + len(arg.encode("utf-8"))
        out.append(masked[start:end].decode("utf-8", errors="replace"))
        start = end + 1
    return out


def fit_commands(recording: Recording, budget_bytes: int = COMMANDS_JSON_BYTES,
                 budget_values: int = COMMANDS_JSON_VALUES) -> Recording:
    """The recording with command outputs cut so that commands.json stays within what the
    reader allows (probes.recording.model.BundleLimits: JSON bytes, and values counted by the marks
    that may start one): many programs stopped at the output cap (binary output escapes to six
    times its size in JSON) must not make a bundle that the reader refuses. Each output over
    its share keeps its beginning, and says so in `error`."""
    weights = [_weight(c.result.stdout, c.result.stderr) for c in recording.commands]
    if sum(w[0] for w in weights) <= budget_bytes and \
            sum(w[1] for w in weights) <= budget_values:
        return recording
    share = (budget_bytes // max(1, len(weights)), budget_values // max(1, len(weights)))
    commands = tuple(
        _trimmed(c, share) if w[0] > share[0] or w[1] > share[1] else c
        for c, w in zip(recording.commands, weights, strict=True))
    return dataclasses.replace(recording, commands=commands)


def _weight(stdout: str, stderr: str) -> tuple[int, int]:
    """(JSON bytes, values bound) of one command's outputs."""
    return (len(json.dumps(stdout)) + len(json.dumps(stderr)),
            json_values_bound(stdout) + json_values_bound(stderr))


def _trimmed(record: CommandRecord, share: tuple[int, int]) -> CommandRecord:
    result = record.result
    keep = share[0] // 14  # stdout and stderr, each char at most 6 bytes + slack in JSON
    while keep and _weight(result.stdout[:keep], result.stderr[:keep])[1] > share[1]:
        keep //= 2
    note = f"output trimmed to its first {keep} characters to fit the bundle"
    return dataclasses.replace(record, result=dataclasses.replace(
        result, stdout=result.stdout[:keep], stderr=result.stderr[:keep],
        error=f"{result.error}; {note}" if result.error else note))


# -- writing -------------------------------------------------------------------------------------


def default_output(recording: Recording) -> Path:
    stamp = recording.manifest.created_at.replace("-", "").replace(":", "")
    return Path(f"ascend-bundle-{safe_name(recording.manifest.hostname)}-{stamp}.tar.gz")


def read_metrics(path: Path) -> MetricsFound:
    """The --metrics FILE (a local file, as given)."""
    try:
        size = path.stat().st_size
        if size > MAX_METRICS_BYTES:
            raise UsageError(f"--metrics {path}: {size} bytes, over the {MAX_METRICS_BYTES} "
                             "byte limit of a bundle member; give a smaller recording")
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"--metrics {path}: cannot read ({exc.strerror or exc})") from None
    return MetricsFound(str(path), data)


def redact_metrics(found: MetricsFound, redacted: RedactedRecording
                   ) -> tuple[MetricsFound, tuple[str, bytes] | None]:
    """The (member, bytes) of the recording, its text redacted whole (checks.bundle.redact_sqlite),
    and `found` with its paths redacted like every other path of the bundle. A recording that
    cannot be read as SQLite is left out, never copied raw."""
    from checks.bundle.redact_sqlite import NotRedactable, rewrite

    redactor = redacted.redactor
    source = redactor.path(found.source, "bundle.json") if found.source else None
    shown = MetricsFound(source, b"", found.found, redactor.path(found.directory, "bundle.json"),
                         redactor.text(found.note, "bundle.json"),
                         redactor.path(found.newest, "bundle.json") if found.newest else None)
    if source is None:
        return shown, None
    member = f"metrics/{safe_name(posixpath.basename(source))}"
    try:
        data = rewrite(found.data, lambda text: redactor.text(text, member),
                       lambda blob: redactor.data(blob, member),
                       lambda name: redactor.path(name, member))
    except NotRedactable as exc:
        return dataclasses.replace(shown, source=None, newest=shown.newest or source,
                                   note=f"left out: {exc}; it is bundled only once its text "
                                   "can be redacted"), None
    return shown, (member, data)


def bundle_members(redacted: RedactedRecording, report: dict[str, Any], plog: PlogCollection,
                   metrics: tuple[str, bytes] | None, options: BundleOptions,
                   found: MetricsFound | None = None) -> dict[str, bytes]:
    """Everything beside the snapshot members, as member name -> bytes."""
    recording = redacted.recording
    plog = redacted_plog(plog, redacted.redactor)
    members: dict[str, bytes] = {"report.json": _json_bytes(report)}
    for tail in plog.tails:
        members[tail.member] = tail_bytes(recording, tail)
    if metrics is not None:
        members[metrics[0]] = metrics[1]
    index = {
        "schema": BUNDLE_SCHEMA,
        "created_at": recording.manifest.created_at,
        "hostname": recording.manifest.hostname,
        "tool_version": recording.manifest.tool_version,
        "report": "report.json",
        "plog": [{"path": t.path, "member": t.member, "size_bytes": t.size_bytes,
                  "offset": t.offset, "length": t.length} for t in plog.tails],
        "plog_found": plog.found,
        "plog_dirs": list(plog.dirs),
        "plog_note": redacted.redactor.text(plog.note, "bundle.json"),
        "limits": {"plog_files": options.plog_files, "plog_tail_bytes": options.plog_tail_bytes},
        "metrics": metrics[0] if metrics else None,
        "metrics_source": found.source if found else None,  # the file it was copied from
        "metrics_dir": found.directory if found else "",  # the default place looked at
        "metrics_found": found.found if found else 0,  # recordings there
        "metrics_newest": found.newest if found else None,  # included or not
        "metrics_note": found.note if found else "",
        "redact_hostnames": options.redact_hostnames,
        "redactions": [{"kind": r.kind, "where": r.where} for r in redacted.redactions],
    }
    members["bundle.json"] = _json_bytes(index)
    return members


def _json_bytes(value: object) -> bytes:
    return (json.dumps(value, indent=1, ensure_ascii=False) + "\n").encode("utf-8")


def _anonymous(member: tarfile.TarInfo) -> tarfile.TarInfo:
    # the bundle travels to other people: no local user names, ids or times of day in it
    member.uid = member.gid = 0
    member.uname = member.gname = ""
    return member


def write_bundle(out: Path, recording: Recording, members: Mapping[str, bytes]) -> int:
    """Write the bundle atomically; returns its size. Raises UsageError naming `out`."""
    top = safe_name(out.name.removesuffix(".tar.gz").removesuffix(".tgz")) or "bundle"
    partial = out.with_name(f".{out.name}.partial{os.getpid()}")
    try:
        with tempfile.TemporaryDirectory(prefix="ascend-bundle-") as staging:
            folder = Path(staging) / top
            write_directory(recording, folder)
            for name, data in members.items():
                target = folder.joinpath(*name.split("/"))
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
            with tarfile.open(partial, "w:gz") as tar:
                tar.add(folder, arcname=top, filter=_anonymous)
        # the reader is the hostile-input reader: a bundle we cannot read back is not kept
        load_recording(partial, BundleLimits())
        os.replace(partial, out)
    except SnapshotError as exc:
        raise UsageError(f"{out}: the bundle would not read back ({exc}); "
                         "report this as a bug") from None
    except OSError as exc:
        raise UsageError(f"{out}: cannot write the bundle ({exc.strerror or exc}); "
                         "choose another -o path") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            partial.unlink()
    return out.stat().st_size


def make_bundle(host: Host, options: BundleOptions, progress: Progress,
                observed: Observed | None = None) -> BundleResult:
    """Record `host` (as the target of `observed` sees it) as `options` say and write the
    bundle. Raises UsageError naming the option at fault."""
    policy = inputs.policy(options.policy)
    apply_output_cap(host, policy)
    if options.output is not None and not options.output.parent.is_dir():
        raise UsageError(f"-o {options.output}: no such directory {options.output.parent}")
    seen = Observed(host, observed.target, observed.npu) if observed else \
        Observed(host, shell_target())
    request = doctor.Request(options.host, options.model)
    given = read_metrics(options.metrics) if options.metrics else None
    redacted, run, report, plog, found = record(seen, policy, request, options, progress)
    found, metrics = redact_metrics(given or found, redacted)
    out = options.output or default_output(redacted.recording)
    members = bundle_members(redacted, report, plog, metrics, options, found)
    with progress.step(f"writing {out}") as detail:
        size = write_bundle(out, redacted.recording, members)
        detail.append(_size(size))
    pseudonyms = redacted.redactor.pseudonyms
    return BundleResult(out, size, redacted.recording, run,
                        redacted_plog(plog, redacted.redactor),
                        metrics[0] if metrics else None, redacted.redactions,
                        {name: len(data) for name, data in members.items()}, found,
                        pseudonyms.mapping() if pseudonyms else [])


# -- the summary ---------------------------------------------------------------------------------


def _size(n: int) -> str:
    if n >= MIB:
        return f"{n / MIB:.1f} MiB"
    return f"{n / KIB:.0f} KiB" if n >= KIB else f"{n} bytes"


def summary_lines(result: BundleResult) -> list[str]:
    rec = result.recording
    counts = result.run.counts()
    packages = len(rec.python.packages) if rec.python else 0
    plog_bytes = sum(t.length for t in result.plog.tails)
    lines = [
        f"wrote {result.path} ({_size(result.size_bytes)})",
        f"  recording:  {len(rec.commands)} commands, {len(rec.files)} paths, "
        f"{len(rec.env or {})} environment variables, {packages} Python packages",
        "  report.json: " + ", ".join(f"{n} {s}" for s, n in counts.items()),
        (f"  plog tails: {len(result.plog.tails)} newest of {result.plog.found} files, "
         f"{_size(plog_bytes)}" if result.plog.found else f"  plog tails: {result.plog.note}"),
        "  metrics:    " + _metrics_line(result),
    ]
    if result.redactions:
        lines.append("  redacted (values removed, names kept):")
        lines += [f"    {line}" for line in summarise(result.redactions)]
    else:
        lines.append("  redacted:   nothing secret-looking was found")
    if result.pseudonyms:
        lines.append("  names replaced (this list stays here, it is not in the bundle): "
                     + ", ".join(f"{p} = {o}" for p, o in result.pseudonyms))
    lines.append(f"replay anywhere: ascend-doctor --from {result.path}")
    return [one_line(line) for line in lines]  # paths and notes come from the observed machine


def _metrics_line(result: BundleResult) -> str:
    found = result.metrics
    if result.metrics_member is None:
        return f"{found.note}: {found.newest}" if found.newest else (found.note or "none")
    size = _size(result.members.get(result.metrics_member, 0))
    if found.directory:
        return (f"{result.metrics_member} ({size}), the newest of "
                f"{counted(found.found, 'recording')} "
                f"in {found.directory}: {found.source}")
    return f"{result.metrics_member} ({size}) from --metrics {found.source}"
