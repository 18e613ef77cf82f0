"""Held-out field incidents rebuilt as deployments, and how many the doctor catches.

Each incident (`tests/data/heldout/*.yaml`, one per public issue thread, collected before
looking at what the doctor says of them) is rebuilt the way its user met it: a real process
whose argv is the user's command line and whose environment is theirs, a PYTHONPATH of
`*.dist-info` packages at their versions, the model's real config.json, and a fake `npu-smi`
on the doctor's PATH that replays a recorded output of their chip (`tests/corpus/npu-smi`).
`ascend-doctor --pid PID --json` then runs as a subprocess, and the incident is scored:

- caught: the check whose rule explains the cause warns or fails, with one of the rules the
  incident names (none named: any warning or failure of that check); where a review after a
  measure read a clause of the check's summary as another cause (a different known issue of
  the same release, a stand-in's artefact), `expect.unrelated` lists it and a catch needs a
  clause besides those (and besides "not in our data");
- twin clean: on the healthy twin (the same deployment with the cause fixed) that check does
  not warn or fail with those rules for the same reason (a clause of its summary that it also
  gave the incident): another known issue of the twin's release is not the incident's cause.

"Strictly" counts an incident caught only when its twin is clean too: a rule that fires on
both is not the incident's cause. Both are also counted loosely (the check warns or fails at
all, whatever the rule), because a "not in our data" warning says something without naming
the cause.

Incidents whose deployment cannot be rebuilt (runtime-only bugs, a deployment the thread
does not state) carry `not_rebuildable: <why>` and leave the denominator. `batch` says when an
incident was collected (1 when absent): each batch is reported on its own, because a batch the
rules were tuned on is no longer held out.

    PYTHONPATH=$PWD .venv/bin/python bench/bench_heldout.py [--only ID,...] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
HELDOUT_DIR = ROOT / "tests" / "data" / "heldout"
NPU_SMI_DIR = ROOT / "tests" / "corpus" / "npu-smi"
MODELS_DIR = ROOT / "tests" / "data" / "models"
READY_TIMEOUT_S = 30.0
DOCTOR_TIMEOUT_S = 180
# what the stand-in server does: say it is ready, then wait until it is killed
SERVER_BODY = "import time\nprint('ready', flush=True)\ntime.sleep(600)\n"
PYTHON_NAMES = frozenset({"python", "python3"})
FLAGGED = frozenset({"warn", "fail"})
NOT_IN_DATA = "not in our data"
INCIDENT_FIELDS = ("id", "url", "cause", "basis", "class", "expect")
DEPLOYMENT_FIELDS = frozenset({"argv", "env", "npu_smi", "model", "packages", "site_files",
                               "stated"})


class HeldoutError(ValueError):
    """A held-out file that cannot be read as an incident (one line: file, field, what to do)."""


@dataclass(frozen=True)
class Deployment:
    argv: tuple[str, ...]  # the user's command line; "{model}" stands for the model directory
    env: Mapping[str, str]
    npu_smi: str | None  # a recorded `npu-smi info` of their chip (file in tests/corpus/npu-smi)
    # {"name", "from"} (a tests/data/models config, with `drop`/`set`) or {"name", "config"};
    # `files`: other JSON files of the checkpoint (quant_model_description.json)
    model: Mapping[str, Any]
    packages: Mapping[str, str]
    # files a package holds beside its dist-info (`vllm_ascend/_build_info.py`): path -> text
    site_files: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Incident:
    id: str
    url: str
    cause: str
    check: str
    rules: tuple[str, ...]
    deployment: Deployment | None
    twin: Deployment | None
    not_rebuildable: str | None
    path: Path
    batch: int = 1
    # clauses of the check's summary a reviewer read, after a measure, as not the incident's
    # cause (another known issue of the same release, a stand-in's artefact): `expect.unrelated`
    unrelated: tuple[str, ...] = ()


@dataclass(frozen=True)
class Verdict:
    status: str
    rules: tuple[str, ...]
    summary: str


@dataclass(frozen=True)
class Outcome:
    incident: Incident
    seen: Mapping[str, Verdict]  # check id -> verdict on the incident's deployment
    twin_seen: Mapping[str, Verdict]
    caught: bool  # flagged with one of the incident's rules
    twin_clean: bool  # the twin is not flagged with them for the incident's reason

    @property
    def flagged(self) -> bool:
        """The expected check warns or fails at all (any rule)."""
        return flags_cause(self.seen.get(self.incident.check), ())

    @property
    def twin_flagged(self) -> bool:
        return flags_cause(self.twin_seen.get(self.incident.check), ())

    @property
    def twin_rule_flagged(self) -> bool:
        """The twin is flagged with the incident's rules, whatever the reason."""
        return flags_cause(self.twin_seen.get(self.incident.check), self.incident.rules)


# -- reading the incidents ---------------------------------------------------------------------


def load_incidents(directory: Path = HELDOUT_DIR) -> list[Incident]:
    return [load_incident(path) for path in sorted(directory.glob("*.yaml"))]


def load_incident(path: Path) -> Incident:
    try:
        raw = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise HeldoutError(f"{path}: not readable as YAML ({exc}); fix the file") from exc
    if not isinstance(raw, dict):
        raise HeldoutError(f"{path}: expected a mapping of incident fields")
    missing = [name for name in INCIDENT_FIELDS if name not in raw]
    if missing:
        raise HeldoutError(f"{path}: missing field(s) {', '.join(missing)}")
    expect = raw["expect"]
    if not isinstance(expect, dict) or not isinstance(expect.get("check"), str):
        raise HeldoutError(f"{path}: expect.check must name the check whose rule explains it")
    reason = raw.get("not_rebuildable")
    deployment = twin = None
    if reason is None:
        deployment = _deployment(path, raw.get("deployment"), None)
        twin = _deployment(path, raw.get("twin"), deployment)
    batch = raw.get("batch", 1)
    if not isinstance(batch, int):
        raise HeldoutError(f"{path}: batch must be a whole number (the collection it came in)")
    unrelated = expect.get("unrelated", [])
    if not isinstance(unrelated, list) or not all(isinstance(u, str) and u for u in unrelated):
        raise HeldoutError(f"{path}: expect.unrelated must be a list of summary clauses")
    return Incident(str(raw["id"]), str(raw["url"]), str(raw["cause"]), expect["check"],
                    tuple(expect.get("rules") or ()), deployment, twin, reason, path, batch,
                    tuple(unrelated))


def _deployment(path: Path, raw: object, base: Deployment | None) -> Deployment:
    """A deployment from its YAML mapping; a twin's fields replace its incident's."""
    what = "twin" if base else "deployment"
    if not isinstance(raw, dict):
        raise HeldoutError(f"{path}: `{what}` must be a mapping (or set `not_rebuildable`)")
    unknown = set(raw) - DEPLOYMENT_FIELDS - {"fix"}
    if unknown:
        raise HeldoutError(f"{path}: {what} has unknown field(s) {', '.join(sorted(unknown))}")
    if base is None and not raw.get("argv"):
        raise HeldoutError(f"{path}: deployment.argv is required (the user's command line)")
    if base is not None and not raw.get("fix"):
        raise HeldoutError(f"{path}: twin.fix must say what the healthy twin changes")
    model = raw.get("model", base.model if base else None)
    if not isinstance(model, dict) or "name" not in model or not ({"from", "config"} & set(model)):
        raise HeldoutError(f"{path}: {what}.model needs `name` and `from` or `config`")
    return Deployment(
        argv=tuple(str(a) for a in raw.get("argv", base.argv if base else ())),
        env={str(k): str(v) for k, v in (raw.get("env", base.env if base else {}) or {}).items()},
        npu_smi=raw.get("npu_smi", base.npu_smi if base else None),
        model=model,
        packages={str(k): str(v) for k, v in
                  (raw.get("packages", base.packages if base else {}) or {}).items()},
        site_files={str(k): str(v) for k, v in
                    (raw.get("site_files", base.site_files if base else {}) or {}).items()})


# -- building a deployment ---------------------------------------------------------------------


def model_config(model: Mapping[str, Any]) -> dict[str, Any]:
    if "from" in model:
        config = json.loads((MODELS_DIR / str(model["from"]) / "config.json").read_text())
        for key in model.get("drop", ()):
            config.pop(key, None)
        return {**config, **(model.get("set") or {})}
    return dict(model["config"])


def _write_site(where: Path, packages: Mapping[str, str], module: str | None,
                files: Mapping[str, str] | None = None) -> Path:
    """`*.dist-info` of each package and the package `files`; with `module` (a `python -m`
    target), that module too."""
    where.mkdir(parents=True, exist_ok=True)
    for name, version in packages.items():
        meta = where / f"{name}-{version}.dist-info" / "METADATA"
        meta.parent.mkdir(parents=True, exist_ok=True)
        meta.write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    for relative, text in (files or {}).items():
        path = where / relative
        if where.resolve() not in path.resolve().parents:
            raise HeldoutError(f"site_files: {relative!r} is outside the package directory")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    if module:
        path = where.joinpath(*module.split(".")).with_suffix(".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(SERVER_BODY)
    return where


def clean_python(where: Path) -> str:
    """An interpreter with the standard library only (a venv without site packages): the
    deployment's packages are then exactly the ones planted, not this machine's."""
    subprocess.run([getattr(sys, "_base_executable", sys.executable), "-m", "venv",
                    "--without-pip", str(where)], check=True, capture_output=True, timeout=120)
    return str(where / "bin" / "python")


def _command(work: Path, argv: Sequence[str], model_dir: Path,
             python: str) -> tuple[list[str], str | None]:
    """The process's argv: a script named like the user's program, or the interpreter running
    their script or module. Returns the argv and the module a `-m` names (it is planted)."""
    args = [a.replace("{model}", str(model_dir)) for a in argv]
    program, rest = args[0], args[1:]
    if program in PYTHON_NAMES:
        if rest[:1] == ["-m"] and len(rest) > 1:
            return [python, *rest], rest[1]
        script = work / "app" / rest[0]
        script.parent.mkdir(parents=True, exist_ok=True)
        script.write_text(SERVER_BODY)
        return [python, str(script), *rest[1:]], None
    path = work / "bin" / program
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!{python}\n{SERVER_BODY}")
    path.chmod(0o755)
    return [str(path), *rest], None


@contextmanager
def running(argv: Sequence[str], env: Mapping[str, str]) -> Iterator[int]:
    """Start `argv`, wait for its `ready` line, yield its pid, kill its group at the end."""
    proc = subprocess.Popen(list(argv), env=dict(env), stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], READY_TIMEOUT_S)
        if not ready or b"ready" not in proc.stdout.readline():
            raise RuntimeError(f"{argv[:2]} did not start (exit {proc.poll()})")
        yield proc.pid
    finally:
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


@contextmanager
def deployed(deployment: Deployment, work: Path, python: str) -> Iterator[tuple[int, Path]]:
    """The deployment running: yields its pid and the doctor's bin directory (npu-smi)."""
    model_dir = work / "models" / str(deployment.model["name"])
    model_dir.mkdir(parents=True)
    (model_dir / "config.json").write_text(json.dumps(model_config(deployment.model)))
    for name, content in (deployment.model.get("files") or {}).items():
        (model_dir / str(name)).write_text(json.dumps(content))
    argv, module = _command(work, deployment.argv, model_dir, python)
    site = _write_site(work / "site", deployment.packages, module, deployment.site_files)
    user_path = deployment.env.get("PYTHONPATH")
    env = {"PATH": "/usr/bin:/bin", **deployment.env,
           "PYTHONPATH": f"{site}:{user_path}" if user_path else str(site)}
    doctor_bin = work / "doctor-bin"
    doctor_bin.mkdir()
    if deployment.npu_smi:
        table = NPU_SMI_DIR / deployment.npu_smi
        script = doctor_bin / "npu-smi"
        # `info` replays their chip; the other subcommands were not recorded
        script.write_text(f'#!/bin/sh\nif [ "$*" = "info" ]; then cat "{table}"; exit 0; fi\n'
                          'echo "not recorded for this incident" >&2\nexit 1\n')
        script.chmod(0o755)
    with running(argv, env) as pid:
        yield pid, doctor_bin


def run_doctor(pid: int, doctor_bin: Path, home: Path) -> dict[str, Verdict]:
    env = {"PATH": f"{doctor_bin}:/usr/bin:/bin", "HOME": str(home), "PYTHONPATH": str(ROOT),
           "NO_COLOR": "1"}
    out = subprocess.run([sys.executable, "-m", "checks.cli", "--pid", str(pid), "--json"],
                         cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=DOCTOR_TIMEOUT_S)
    if out.returncode not in (0, 1, 2):
        raise RuntimeError(f"ascend-doctor exited {out.returncode}: {out.stderr.strip()[-300:]}")
    doc = json.loads(out.stdout)
    return {r["id"]: Verdict(r["status"], tuple(r.get("rules") or ()), r.get("summary", ""))
            for r in doc["results"]}


def observe(deployment: Deployment, python: str) -> dict[str, Verdict]:
    with tempfile.TemporaryDirectory(prefix="heldout-") as tmp:
        work = Path(tmp)
        with deployed(deployment, work, python) as (pid, doctor_bin):
            return run_doctor(pid, doctor_bin, work)


# -- scoring -----------------------------------------------------------------------------------


def flags_cause(verdict: Verdict | None, rules: Sequence[str],
                unrelated: Sequence[str] = ()) -> bool:
    """The check warns or fails for the incident's reason: one of its rules (any, if none),
    and one clause of its summary that names a reason ("not in our data" names none) and that
    a review did not read as another cause."""
    if verdict is None or verdict.status not in FLAGGED:
        return False
    if rules and not set(rules) & set(verdict.rules):
        return False
    return bool(_own_clauses(verdict, unrelated))


def _own_clauses(verdict: Verdict, unrelated: Sequence[str]) -> set[str]:
    """The clauses of the summary that name a reason: not "not in our data", not reviewed as
    unrelated."""
    return {c for c in verdict.summary.split("; ")
            if NOT_IN_DATA not in c and not any(u in c for u in unrelated)}


def same_reason(incident: Verdict | None, twin: Verdict | None, rules: Sequence[str],
                unrelated: Sequence[str] = ()) -> bool:
    """The twin is flagged with the incident's rules and says one thing it said of the
    incident (the check joins its reasons with "; "), other than what a review read as
    unrelated."""
    if incident is None or twin is None or not flags_cause(twin, rules, unrelated):
        return False
    if unrelated:
        return bool(_own_clauses(twin, unrelated) & _own_clauses(incident, unrelated))
    return bool(set(twin.summary.split("; ")) & set(incident.summary.split("; ")))


def score(incident: Incident, python: str) -> Outcome:
    """`python`: the deployments' interpreter (see clean_python)."""
    assert incident.deployment is not None and incident.twin is not None
    seen = observe(incident.deployment, python)
    twin_seen = observe(incident.twin, python)
    check = incident.check
    return Outcome(incident, seen, twin_seen,
                   caught=flags_cause(seen.get(check), incident.rules, incident.unrelated),
                   twin_clean=not same_reason(seen.get(check), twin_seen.get(check),
                                              incident.rules, incident.unrelated))


# -- the report --------------------------------------------------------------------------------


def _line(outcome: Outcome) -> str:
    incident = outcome.incident
    verdict = outcome.seen.get(incident.check)
    shown = f"{verdict.status} {','.join(verdict.rules) or '-'}" if verdict else "absent"
    flagged_elsewhere = sorted(c for c, v in outcome.seen.items()
                               if v.status in FLAGGED and c != incident.check)
    mark = "CAUGHT" if outcome.caught else "missed"
    twin = "twin clean" if outcome.twin_clean else "TWIN FALSE ALARM"
    return (f"{mark:6s} {twin:16s} {incident.id:48s} {incident.check}: {shown}"
            f"  (others flagging: {', '.join(flagged_elsewhere) or 'none'})")


def report(outcomes: Sequence[Outcome], excluded: Sequence[Incident]) -> str:
    lines = [_line(o) for o in outcomes]
    per_check: dict[str, list[Outcome]] = {}
    for outcome in outcomes:
        per_check.setdefault(outcome.incident.check, []).append(outcome)
    lines.append("")
    for check, group in sorted(per_check.items()):
        lines.append(f"{check:18s} caught {sum(o.caught for o in group)}/{len(group)}, "
                     f"twin false alarms {sum(not o.twin_clean for o in group)}")
    for batch in sorted({o.incident.batch for o in outcomes} | {i.batch for i in excluded}):
        mine = [o for o in outcomes if o.incident.batch == batch]
        lines.append(f"batch {batch}: " + _totals(mine, [i for i in excluded if i.batch == batch]))
    lines.append("all batches: " + _totals(outcomes, excluded))
    lines.append(f"twin flagged with the incident's rules for any reason: "
                 f"{sum(o.twin_rule_flagged for o in outcomes)}/{len(outcomes)}")
    lines.append(f"loosely (the check warns or fails, any rule): incident "
                 f"{sum(o.flagged for o in outcomes)}/{len(outcomes)}, twin "
                 f"{sum(o.twin_flagged for o in outcomes)}/{len(outcomes)}")
    lines.extend(f"  not rebuildable: {i.id}: {i.not_rebuildable}" for i in excluded)
    return "\n".join(lines)


def _totals(outcomes: Sequence[Outcome], excluded: Sequence[Incident]) -> str:
    caught = sum(o.caught for o in outcomes)
    strict = sum(o.caught and o.twin_clean for o in outcomes)
    alarms = sum(not o.twin_clean for o in outcomes)
    return (f"caught {caught}/{len(outcomes)} rebuildable ({_share(caught, outcomes)}), "
            f"strictly (twin clean) {strict} ({_share(strict, outcomes)}); twin false alarms "
            f"{alarms}/{len(outcomes)}; not rebuildable {len(excluded)}")


def _share(count: int, outcomes: Sequence[Outcome]) -> str:
    return f"{100 * count / len(outcomes):.0f}%" if outcomes else "n/a"


def _as_json(outcome: Outcome) -> dict[str, Any]:
    def flat(seen: Mapping[str, Verdict]) -> dict[str, Any]:
        return {c: {"status": v.status, "rules": list(v.rules), "summary": v.summary}
                for c, v in sorted(seen.items())}

    return {"id": outcome.incident.id, "batch": outcome.incident.batch,
            "check": outcome.incident.check,
            "caught": outcome.caught, "twin_clean": outcome.twin_clean,
            "flagged": outcome.flagged, "twin_flagged": outcome.twin_flagged,
            "incident": flat(outcome.seen), "twin": flat(outcome.twin_seen)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="incident ids, comma-separated")
    parser.add_argument("--batch", type=int, help="only the incidents of this batch")
    parser.add_argument("--json", type=Path, help="also write every verdict to this file")
    args = parser.parse_args(argv)
    try:
        incidents = load_incidents()
    except HeldoutError as exc:
        print(f"bench_heldout: {exc}", file=sys.stderr)
        return 2
    if args.only:
        wanted = set(args.only.split(","))
        incidents = [i for i in incidents if i.id in wanted]
    if args.batch is not None:
        incidents = [i for i in incidents if i.batch == args.batch]
    excluded = [i for i in incidents if i.not_rebuildable]
    with tempfile.TemporaryDirectory(prefix="heldout-python-") as tmp:
        python = clean_python(Path(tmp) / "venv")
        outcomes = [score(i, python) for i in incidents if not i.not_rebuildable]
    print(report(outcomes, excluded))
    if args.json:
        args.json.write_text(json.dumps([_as_json(o) for o in outcomes], indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
