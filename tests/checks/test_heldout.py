"""The held-out incidents (tests/data/heldout) and the harness that rebuilds them
(bench/bench_heldout.py): every file is an incident the doctor could be scored on, none of them
comes from the corpus the rules were written from, and a rebuilt deployment is what the doctor
then sees through `ascend-doctor --pid PID --json` (its release, chip, command line, model).
The whole set runs in the bench; a few incidents run here."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import playbooks
from bench.bench_heldout import (
    HELDOUT_DIR,
    MODELS_DIR,
    NPU_SMI_DIR,
    HeldoutError,
    Incident,
    Verdict,
    _write_site,
    clean_python,
    flags_cause,
    load_incident,
    load_incidents,
    observe,
    same_reason,
    score,
)
from checks.registry import all_checks

ROOT = Path(__file__).resolve().parents[2]
CHECKS = {check.id: check for check in all_checks()}
# the corpus the rules were written from: a held-out thread must appear in none of it
TRAINING = (*sorted((ROOT / "tests" / "data" / "incidents").glob("*.yaml")),
            ROOT / "tests" / "checks" / "test_memory_incidents.py",
            ROOT / "tests" / "checks" / "test_serving_support.py",
            ROOT / "tests" / "checks" / "test_serving_flags.py")
INCIDENTS = load_incidents()
BY_ID = {incident.id: incident for incident in INCIDENTS}


@pytest.fixture(scope="module")
def python(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield clean_python(tmp_path_factory.mktemp("heldout") / "venv")


def test_the_set_is_big_enough_and_its_ids_are_the_file_names() -> None:
    assert len(INCIDENTS) >= 25
    assert len({i.url for i in INCIDENTS}) == len(INCIDENTS)
    for incident in INCIDENTS:
        assert incident.path.stem == incident.id
        # issue threads cite GitHub; `pg-` incidents (batch 11) cite a public page
        prefix = "https://" if incident.id.startswith("pg-") else "https://github.com/"
        assert incident.url.startswith(prefix), incident.url


@pytest.mark.parametrize("incident", INCIDENTS, ids=lambda i: i.id)
def test_every_incident_names_a_real_check_and_its_rules(incident: Incident) -> None:
    """The expected check exists and the rules named are ones its playbook lists."""
    assert incident.check in CHECKS, incident.check
    listed = playbooks.get(CHECKS[incident.check].playbook_id).rules()
    assert set(incident.rules) <= set(listed), set(incident.rules) - set(listed)


@pytest.mark.parametrize("incident", [i for i in INCIDENTS if not i.not_rebuildable],
                         ids=lambda i: i.id)
def test_every_rebuildable_incident_replays_a_recorded_chip_and_a_real_config(
        incident: Incident) -> None:
    for deployment in (incident.deployment, incident.twin):
        assert deployment is not None
        assert deployment.npu_smi and (NPU_SMI_DIR / deployment.npu_smi).is_file()
        source = deployment.model.get("from")
        assert source is None or (MODELS_DIR / str(source) / "config.json").is_file()
        assert "{model}" in deployment.argv or deployment.argv[0].startswith("python")
    assert incident.deployment != incident.twin  # the twin fixes something


def test_no_held_out_thread_is_in_the_corpus_the_rules_came_from() -> None:
    text = "\n".join(path.read_text() for path in TRAINING)
    leaked = [i.id for i in INCIDENTS if i.url in text]
    assert not leaked


def test_a_bad_file_is_one_line_naming_the_file_and_the_field(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("id: x\nurl: https://github.com/o/r/issues/1\ncause: c\nbasis: b\n"
                    "class: k\nexpect: {check: serving.support}\ndeployment: {env: {}}\n")
    with pytest.raises(HeldoutError, match=r"broken\.yaml: deployment\.argv is required"):
        load_incident(path)
    path.write_text("- not a mapping\n")
    with pytest.raises(HeldoutError, match=r"broken\.yaml: expected a mapping"):
        load_incident(path)
    assert HELDOUT_DIR.is_dir()


def test_a_cause_is_flagged_only_by_its_own_rules() -> None:
    refused = "vllm-ascend 0.11.0 does not support model type x"
    unknown = "feature mtp on vllm-ascend 0.11.0: not in our data"
    assert flags_cause(Verdict("fail", ("unsupported",), refused), ("unsupported",))
    assert not flags_cause(Verdict("warn", ("not-in-our-data",), unknown), ("unsupported",))
    assert not flags_cause(Verdict("pass", (), ""), ())
    assert flags_cause(Verdict("warn", ("anything",), refused), ())  # no rule named: any flag
    assert not flags_cause(None, ())


def test_not_in_our_data_names_no_cause_even_when_any_rule_counts() -> None:
    """A file with `rules: []` counts any flag, but "not in our data" is no reason."""
    unknown = "feature mtp on vllm-ascend 0.11.0: not in our data"
    assert not flags_cause(Verdict("warn", ("not-in-our-data",), unknown), ())
    assert flags_cause(Verdict("warn", ("not-in-our-data", "known-issue"),
                               f"{unknown}; {START}"), ())


LEAK = "known issue of vllm-ascend 0.11.0rc1: memory may leak after long serving"
START = "known issue of vllm-ascend 0.11.0rc1: this model fails at start"


def test_a_clause_reviewed_as_another_cause_does_not_catch() -> None:
    """`expect.unrelated`: a review read the leak warning as not the incident's cause."""
    leak_only = Verdict("warn", ("known-issue",), LEAK)
    both = Verdict("warn", ("known-issue",), f"{LEAK}; {START}")
    unknown = Verdict("warn", ("known-issue", "not-in-our-data"),
                      f"feature x on vllm-ascend 0.11.0rc1: not in our data; {LEAK}")
    assert flags_cause(leak_only, ("known-issue",))  # without a review it counts
    assert not flags_cause(leak_only, ("known-issue",), ("memory may leak",))
    assert flags_cause(both, ("known-issue",), ("memory may leak",))
    assert not flags_cause(unknown, ("known-issue",), ("memory may leak",))


def test_a_twin_warned_only_for_the_reviewed_clause_is_clean() -> None:
    incident = Verdict("warn", ("known-issue",), f"{LEAK}; {START}")
    twin_leak = Verdict("warn", ("known-issue",), LEAK)
    twin_same = Verdict("warn", ("known-issue",), START)
    assert same_reason(incident, twin_leak, ("known-issue",))  # unreviewed: a false alarm
    assert not same_reason(incident, twin_leak, ("known-issue",), ("memory may leak",))
    assert same_reason(incident, twin_same, ("known-issue",), ("memory may leak",))


def test_every_reviewed_clause_is_a_list_of_text(tmp_path: Path) -> None:
    source = next(i for i in INCIDENTS if i.deployment is not None).path.read_text()
    bad = tmp_path / "bad.yaml"
    bad.write_text(source.replace("expect:\n", "expect:\n  unrelated: leak\n", 1))
    with pytest.raises(HeldoutError, match=r"expect\.unrelated must be a list"):
        load_incident(bad)


def test_the_doctor_sees_the_users_release_chip_and_model(python: str) -> None:
    """va-3479: the planted release, the replayed 310P table and the config's model type reach
    serving.support; the twin's release replaces the incident's."""
    incident = BY_ID["va-3479-0110rc0-310p-qwen3-4b"]
    assert incident.deployment is not None and incident.twin is not None
    seen = observe(incident.deployment, python)["serving.support"].summary
    assert "310P" in seen and "0.11.0rc0" in seen
    twin = observe(incident.twin, python)["serving.support"].summary
    assert "0.10.0rc1" in twin and "0.11.0rc0" not in twin


def test_the_doctor_reads_the_users_command_line(python: str) -> None:
    """va-3314: -tp 4 from their command line and the 256k context of their config.json
    (no --max-model-len) are what npu.hbm-fit plans with; the twin's 65,536 replaces it."""
    outcome = score(BY_ID["va-3314-no-max-model-len-qwen3-30b"], python)
    plan = outcome.seen["npu.hbm-fit"].summary
    assert "tensor parallel 4 (command line)" in plan and "262,144 tokens" in plan
    assert "65,536 tokens" in outcome.twin_seen["npu.hbm-fit"].summary


def test_an_offline_script_runs_as_their_script(python: str) -> None:
    """va-1500: `python xzl.py` is a process the doctor finds no model on the command line of
    (the script names it inside): serving.support judges the chip without it, and fails 0.7.3
    on the replayed 310P table."""
    incident = BY_ID["va-1500-073-on-300i"]
    assert incident.deployment is not None
    verdict = observe(incident.deployment, python)["serving.support"]
    assert verdict.status == "fail" and verdict.rules == ("unsupported",)
    assert "chip family 310P" in verdict.summary


def test_each_batch_is_its_own_collection() -> None:
    """Batch 1 (the first measure), 2 (held out from the first tuning), 3 (collected after the
    second round of rule changes, before measuring): the bench reports each on its own."""
    batches = {incident.batch for incident in INCIDENTS}
    assert {1, 2, 3, 4, 5, 6} <= batches
    assert sum(incident.batch == 3 for incident in INCIDENTS) >= 10


def test_site_files_are_planted_beside_the_packages(tmp_path: Path) -> None:
    site = _write_site(tmp_path / "site", {"vllm_ascend": "0.10.0rc1"}, None,
                       {"vllm_ascend/_build_info.py": '__soc_version__ = "ASCEND910B1"\n'})
    assert (site / "vllm_ascend" / "_build_info.py").read_text().startswith("__soc_version__")
    assert (site / "vllm_ascend-0.10.0rc1.dist-info" / "METADATA").is_file()
    with pytest.raises(HeldoutError, match="outside the package directory"):
        _write_site(tmp_path / "other", {}, None, {"../escape.py": ""})
