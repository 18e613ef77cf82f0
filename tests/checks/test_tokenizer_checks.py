from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from checks.builtin.tokenizer import (
    IdObservation,
    library_drift,
    on_this_machine,
    tokenizer_dtype,
)
from checks.builtin.tokenizer_ids import (
    judge_token_ids,
    narrowed,
    round_trip,
    tokenizer_token_ids,
)
from checks.context import Context
from checks.model import CheckFn, Finding
from checks.policy import load_policy
from checks.registry import all_checks
from probes.host import Host
from probes.live import LiveHost
from probes.recording.recorder import RecordingHost
from tests.tokenizer_fixtures import qwen3_moe_config, write_qwen3_model_dir

QWEN3_MARKERS = (("<|im_start|>", 151644), ("<|im_end|>", 151645))
PROBE = (151644, 8948, 198, 108386, 151645, 198, 151644, 77091, 198)


def ctx_for(model: Path | None, host: object | None = None) -> Context:
    live = LiveHost(root="/", env={})
    return Context(host or live, load_policy(None), model_dir=model)  # type: ignore[arg-type]


def text_of(finding: Finding) -> str:
    return "\n".join([finding.summary, *finding.evidence, finding.remedy])


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_qwen3_model_dir(tmp_path_factory.mktemp("qwen3") / "model")


def needs_transformers() -> None:
    pytest.importorskip("transformers")


# -- registration and when the checks do not apply ---------------------------------------


def test_both_checks_are_registered_under_tokenizer() -> None:
    found = {c.id: c for c in all_checks()}
    assert found["tokenizer.dtype"].category == "tokenizer"
    assert found["tokenizer.token-ids"].category == "tokenizer"
    assert found["tokenizer.token-ids"].playbook_id == "tokenizer.token-ids"


@pytest.mark.parametrize("fn", [tokenizer_dtype, tokenizer_token_ids])
def test_no_model_skips(fn: CheckFn) -> None:
    finding = fn(ctx_for(None))
    assert finding.status == "skip" and finding.rules == ("tokenizer-not-loaded",)
    assert "no --model given" in finding.summary


@pytest.mark.parametrize("fn", [tokenizer_dtype, tokenizer_token_ids])
def test_another_root_is_read_through_it(fn: CheckFn, healthy: Path, tmp_path: Path) -> None:
    needs_transformers()
    shutil.copytree(healthy, tmp_path / "tree" / "models" / "q")
    ctx = ctx_for(Path("/models/q"), LiveHost(root=str(tmp_path / "tree"), env={}))
    finding = fn(ctx)
    assert finding.status in ("pass", "warn"), finding
    assert "not on this machine" not in text_of(finding)


@pytest.mark.parametrize("fn", [tokenizer_dtype, tokenizer_token_ids])
def test_a_recording_builds_the_recorded_tokenizer_json(fn: CheckFn, healthy: Path,
                                                        tmp_path: Path) -> None:
    from probes.recording.snapshot import SnapshotHost

    needs_transformers()
    recorded = RecordingHost(LiveHost(root="/", env={}))
    live = fn(ctx_for(healthy, recorded))
    assert live.status == "pass"
    bundle = tmp_path / "r.tar.gz"
    recorded.save(bundle)
    replayed = fn(ctx_for(healthy, SnapshotHost(bundle)))
    assert (replayed.status, replayed.summary, replayed.rules) == \
        (live.status, live.summary, live.rules)


@pytest.mark.parametrize("fn", [tokenizer_dtype, tokenizer_token_ids])
def test_a_recording_without_tokenizer_json_skips(fn: CheckFn, healthy: Path,
                                                  tmp_path: Path) -> None:
    """Only tokenizer.json is built from recorded text; other layouts need their directory."""
    from probes.recording.snapshot import SnapshotHost

    needs_transformers()
    model = tmp_path / "model"
    shutil.copytree(healthy, model)
    (model / "tokenizer.json").unlink()
    (model / "vocab.json").write_text('{"a": 0}', encoding="utf-8")
    (model / "merges.txt").write_text("#version: 0.2\n", encoding="utf-8")
    recorded = RecordingHost(LiveHost(root="/", env={}))
    fn(ctx_for(model, recorded))
    bundle = tmp_path / "r.tar.gz"
    recorded.save(bundle)
    finding = fn(ctx_for(model, SnapshotHost(bundle)))
    assert finding.status == "skip", finding
    assert "not on this machine" in finding.summary


def test_which_hosts_are_this_machine(tmp_path: Path) -> None:
    live = LiveHost(root="/", env={})
    assert on_this_machine(live)
    assert on_this_machine(RecordingHost(live))
    assert not on_this_machine(LiveHost(root=str(tmp_path), env={}))
    assert not on_this_machine(object())


def test_a_directory_without_a_tokenizer_warns(tmp_path: Path) -> None:
    needs_transformers()
    (tmp_path / "config.json").write_text(json.dumps(qwen3_moe_config()))
    finding = tokenizer_token_ids(ctx_for(tmp_path))
    assert finding.status == "warn" and finding.rules == ("tokenizer-not-loaded",)
    assert "no tokenizer files in" in finding.summary
    assert "tokenizer.json" in finding.summary


def test_a_broken_tokenizer_file_warns(tmp_path: Path) -> None:
    needs_transformers()
    (tmp_path / "config.json").write_text(json.dumps(qwen3_moe_config()))
    (tmp_path / "tokenizer.json").write_text("{not json")
    finding = tokenizer_dtype(ctx_for(tmp_path))
    assert finding.status == "warn"
    assert "cannot load a tokenizer" in finding.summary


# -- the real Qwen3 tokenizer ------------------------------------------------------------


def test_healthy_qwen3_passes_both(healthy: Path) -> None:
    needs_transformers()
    ctx = ctx_for(healthy)
    dtype, ids = tokenizer_dtype(ctx), tokenizer_token_ids(ctx)
    assert dtype.status == "pass", text_of(dtype)
    assert ids.status == "pass", text_of(ids)
    assert dtype.summary == ("special tokens are in the vocabulary; a turn ends with "
                             "<|im_end|>, a token the engine stops on")
    assert "loaded with the doctor's tokenizers " in text_of(dtype)
    assert "largest id 151668 < vocab_size 151936" in ids.summary
    assert "<|im_start|> = 151644" in text_of(ids)
    assert "uint16 would corrupt" in text_of(ids)


def test_the_tokenizer_is_loaded_once_per_run(healthy: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    needs_transformers()
    import checks.builtin.tokenizer as module

    calls: list[str] = []
    real_files, real_load = module.tokenizer_files, module.load_files

    def counting_files(directory: Path, host: Host, model_dir: Path | None = None) -> object:
        calls.append(f"files {directory}")
        return real_files(directory, host, model_dir)

    def counting_load(files: Any, host: Host) -> object:
        calls.append(f"load {files.directory}")
        return real_load(files, host)

    monkeypatch.setattr(module, "tokenizer_files", counting_files)
    monkeypatch.setattr(module, "load_files", counting_load)
    ctx = ctx_for(healthy)
    tokenizer_dtype(ctx)
    tokenizer_token_ids(ctx)
    assert calls == [f"files {healthy}", f"load {healthy}"]


def test_a_small_vocab_size_fails_naming_the_largest_id(tmp_path: Path) -> None:
    needs_transformers()
    model = write_qwen3_model_dir(tmp_path / "m", config=qwen3_moe_config(vocab_size=65536))
    finding = tokenizer_token_ids(ctx_for(model))
    assert finding.status == "fail" and finding.rules[0] == "id-past-embedding"
    assert "151668" in finding.summary and "65536" in finding.summary
    assert "tokenizer.token-ids" in finding.remedy


def test_vocab_size_under_text_config_is_read(tmp_path: Path) -> None:
    needs_transformers()
    config = qwen3_moe_config()
    config["text_config"] = {"vocab_size": config.pop("vocab_size")}
    model = write_qwen3_model_dir(tmp_path / "m", config=config)
    assert tokenizer_token_ids(ctx_for(model)).status == "pass"


def test_a_qwen3_tokenizer_on_a_qwen35_embedding_fails(tmp_path: Path) -> None:
    needs_transformers()
    model = write_qwen3_model_dir(tmp_path / "m", config=qwen3_moe_config(vocab_size=248320))
    finding = tokenizer_token_ids(ctx_for(model))
    assert finding.status == "fail" and finding.rules == ("foreign-tokenizer",)
    assert finding.summary.startswith("a Qwen3 tokenizer (151669 ids) on a Qwen3.5/3.6 model "
                                      "(vocab_size 248320)")
    assert "huggingface.co/Qwen/Qwen3.6-35B-A3B" in finding.summary


def test_an_unknown_gap_still_warns(tmp_path: Path) -> None:
    needs_transformers()
    model = write_qwen3_model_dir(tmp_path / "m", config=qwen3_moe_config(vocab_size=200000))
    finding = tokenizer_token_ids(ctx_for(model))
    assert finding.status == "warn" and finding.rules == ("spare-embedding-rows",)
    assert "another model" in finding.summary


def test_a_clamped_eos_in_generation_config_warns(tmp_path: Path) -> None:
    needs_transformers()
    model = write_qwen3_model_dir(tmp_path / "m", generation_config={"eos_token_id": [1]})
    finding = tokenizer_token_ids(ctx_for(model))
    assert finding.status == "warn" and finding.rules == ("config-id-not-special",)
    assert "generation_config.json eos_token_id = 1" in finding.summary


# -- tokenizer.dtype's library drift -----------------------------------------------------


def test_tokenizer_libraries_that_left_the_baseline_warn(healthy: Path) -> None:
    from checks.baseline import Baseline
    from probes.host import PythonEnvironment

    ctx = ctx_for(healthy)
    ctx.fact("python", lambda: PythonEnvironment(
        interpreter="/opt/venv/bin/python",
        packages={"tokenizers": tokenizers_version(), "transformers": "4.57.1"}))
    ctx.baseline = Baseline("2026-11-01T00:00:00Z", "validated",
                            versions={"transformers": "4.51.0"})
    finding = tokenizer_dtype(ctx)
    assert finding.status == "warn" and finding.rules == ("library-drift",)
    assert finding.summary.startswith("transformers 4.57.1 here, 4.51.0 in the baseline")
    assert "record a new baseline" in finding.remedy


def test_library_drift_compares_the_deployment_with_the_baseline(tmp_path: Path) -> None:
    from checks.baseline import Baseline
    from probes.host import PythonEnvironment

    ctx = ctx_for(tmp_path)
    ctx.fact("python", lambda: PythonEnvironment(
        interpreter="/opt/venv/bin/python", packages={"transformers": "4.57.1"}))
    assert library_drift(ctx) == []  # no --baseline: nothing to compare
    ctx.baseline = Baseline("2026-11-01T00:00:00Z", "validated",
                            versions={"transformers": "4.51.0", "tokenizers": "0.21.0",
                                      "torch": "2.7.1"})
    drift = library_drift(ctx)
    assert len(drift) == 2
    assert drift[0].startswith("transformers 4.57.1 here, 4.51.0 in the baseline")
    assert drift[1].startswith("tokenizers is absent here, 0.21.0 in the baseline")
    ctx.baseline = Baseline("t", "h", versions={"transformers": "4.57.1"})
    assert library_drift(ctx) == []


@pytest.mark.parametrize("value", [0, 1, 65535, 65536, 151644, 2**31 - 1, 2**31, 2**40, -5])
@pytest.mark.parametrize("dtype", ["int64", "int32", "int16", "uint16", "uint8"])
def test_narrowing_is_what_numpy_does(value: int, dtype: str) -> None:
    import numpy as np

    assert narrowed(value, dtype) == int(np.asarray([value], dtype=np.int64).astype(dtype)[0])


# -- judging tokenizer.token-ids ---------------------------------------------------------


def ids_seen(**overrides: object) -> IdObservation:
    values: dict[str, object] = dict(
        tokenizer_size=151669, max_added_id=151668, vocab_size=151936, probe_ids=PROBE,
        probe_path="chat template", marker_ids=QWEN3_MARKERS,
        config_ids=(("config.json eos_token_id", 151645),),
        known_ids=frozenset(range(151643, 151669)))
    values.update(overrides)
    return IdObservation(**values)  # type: ignore[arg-type]


def test_qwen3_ids_pass() -> None:
    finding = judge_token_ids(ids_seen())
    assert finding.status == "pass"
    assert "uint16 would corrupt 5 of 9 probe ids (151644 -> 20572" in text_of(finding)


def test_an_id_past_the_embedding_fails() -> None:
    finding = judge_token_ids(ids_seen(vocab_size=151643))
    assert finding.status == "fail" and finding.rules[0] == "id-past-embedding"
    assert "id 151668" in finding.summary and "151643 rows" in finding.summary


def test_a_probe_id_past_the_embedding_fails() -> None:
    finding = judge_token_ids(ids_seen(tokenizer_size=100, max_added_id=99, vocab_size=1000,
                                       known_ids=frozenset(), config_ids=()))
    assert finding.status == "fail"
    assert "id 151645" in finding.summary


def test_a_config_id_past_the_embedding_fails() -> None:
    finding = judge_token_ids(ids_seen(config_ids=(("config.json pad_token_id", 200000),)))
    assert finding.status == "fail" and finding.rules == ("config-id-past-vocab",)
    assert "pad_token_id = 200000" in finding.summary


def test_a_declared_tokenizer_vocab_smaller_than_the_tokenizer_fails() -> None:
    declared = (("tokenizer_config.json vocab_size", 65536),)
    finding = judge_token_ids(ids_seen(declared_vocab=declared))
    assert finding.status == "fail" and finding.rules == ("declared-vocab-too-small",)
    assert "tokenizer_config.json vocab_size = 65536" in finding.summary


def test_no_vocab_size_warns() -> None:
    finding = judge_token_ids(ids_seen(vocab_size=None))
    assert finding.status == "warn" and finding.rules == ("no-vocab-size",)
    assert "no vocab_size" in finding.summary


def test_round_trip_shows_what_narrowing_does() -> None:
    assert round_trip([151644, 100], "int64") == []
    assert round_trip([151644, 100], "int32") == []
    assert round_trip([151644, 100], "uint16") == [(151644, 151644 - 2 * 65536)]


# -- issue #11: partial copies, the fast path, library versions, template budget ---------


def config_only_copy(healthy: Path, where: Path) -> Path:
    """tokenizer_config.json without tokenizer.json: a common partial copy."""
    where.mkdir()
    for name in ("config.json", "generation_config.json", "tokenizer_config.json"):
        (where / name).write_bytes((healthy / name).read_bytes())
    return where


def test_tokenizer_config_alone_fails_both_naming_the_missing_files(healthy: Path,
                                                                    tmp_path: Path) -> None:
    needs_transformers()  # transformers builds a 26-token tokenizer from it
    ctx = ctx_for(config_only_copy(healthy, tmp_path / "partial"))
    dtype, ids = tokenizer_dtype(ctx), tokenizer_token_ids(ctx)
    missing = "has tokenizer_config.json but none of tokenizer.json, vocab.json + merges.txt"
    assert dtype.status == "fail", text_of(dtype)
    assert dtype.rules == ids.rules == ("vocabulary-too-small",)
    assert "the tokenizer turns the probe text into no ids" in dtype.summary
    assert missing in dtype.summary
    assert ids.status == "fail", text_of(ids)
    assert "the tokenizer holds 26 ids, far fewer than vocab_size 151936" in ids.summary
    assert missing in ids.summary
    assert "tokenizer.json, or vocab.json + merges.txt" in ids.remedy


def test_tokenizer_json_is_read_without_transformers(healthy: Path) -> None:
    script = (
        "import sys; from pathlib import Path\n"
        "from checks.context import Context; from checks.policy import load_policy\n"
        "from probes.live import LiveHost\n"
        "from checks.builtin.tokenizer import tokenizer_dtype\n"
        "from checks.builtin.tokenizer_ids import tokenizer_token_ids\n"
        f"ctx = Context(LiveHost(root='/', env={{}}), load_policy(None), "
        f"model_dir=Path({str(healthy)!r}))\n"
        "print(tokenizer_dtype(ctx).status, tokenizer_token_ids(ctx).status,\n"
        "      'transformers' in sys.modules, 'torch' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120, cwd=Path(__file__).resolve().parents[2])
    assert out.stdout.split() == ["pass", "pass", "False", "False"], out.stderr[-2000:]


def test_a_model_without_tokenizer_json_loads_through_transformers(tmp_path: Path) -> None:
    needs_transformers()
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"<pad>": 0, "a": 1, "b": 2, "ab": 3, "Ġ": 4}
    bpe = Tokenizer(models.BPE(vocab=vocab, merges=[("a", "b")]))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.model.save(str(tmp_path))  # vocab.json + merges.txt, no tokenizer.json
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "GPT2Tokenizer", "pad_token": "<pad>"}))
    (tmp_path / "config.json").write_text(json.dumps({"vocab_size": 8}))
    finding = tokenizer_token_ids(ctx_for(tmp_path))
    assert "loaded with the doctor's transformers " in text_of(finding)


def test_a_judged_interpreter_with_other_libraries_is_said(healthy: Path) -> None:
    from probes.host import PythonEnvironment

    ctx = ctx_for(healthy)
    ctx.fact("python", lambda: PythonEnvironment(
        interpreter="/opt/venv/bin/python", packages={"tokenizers": "0.19.1"}))
    finding = tokenizer_dtype(ctx)
    assert finding.status == "pass"
    assert finding.summary.endswith("(loaded with tokenizers " + tokenizers_version()
                                    + "; /opt/venv/bin/python has tokenizers 0.19.1)")


def tokenizers_version() -> str:
    from importlib import metadata

    return metadata.version("tokenizers")


def test_a_looping_chat_template_stops_within_its_budget(healthy: Path, tmp_path: Path) -> None:
    model = tmp_path / "looping"
    shutil.copytree(healthy, model)
    (model / "chat_template.jinja").write_text(
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}")
    finding = tokenizer_token_ids(ctx_for(model))
    assert finding.status == "warn" and finding.rules == ("template-unfinished",)
    assert "the chat template did not finish: chat template (chat_template.jinja) not used: " \
        "stopped: more than 200000 steps" in finding.summary
    assert "probe (plain encode" in text_of(finding)


def test_round_trip_is_evidence_not_a_verdict() -> None:
    finding = judge_token_ids(ids_seen(vocab_size=None, probe_ids=(2**40,), config_ids=()))
    assert finding.status == "warn"  # only for the missing vocab_size
    assert "int32: 1 changed" in text_of(finding)
    assert "int32" not in finding.summary


def test_prefetch_observes_in_a_child_what_the_checks_would_observe(healthy: Path) -> None:
    """In a fresh interpreter: this test process may hold threads (the engine's helpers), and
    with threads running nothing is forked."""
    script = f"""
import json, os
import checks.builtin.tokenizer as module
from checks.builtin.tokenizer_ids import tokenizer_token_ids
from checks.context import Context
from checks.policy import load_policy
from probes.forked import can_fork
from probes.live import LiveHost
from pathlib import Path
model = Path({str(healthy)!r})
here = Context(LiveHost(), load_policy(None), model_dir=model)
ctx = Context(LiveHost(), load_policy(None), model_dir=model)
could = can_fork()
module.prefetch(ctx)
module.prefetch(ctx)
forked = ctx.fact(module.FORKED_FACT, lambda: None)
print(json.dumps({{
    "could_fork": could,
    "forked": forked is not None and forked.forked,
    "same": module.observed(ctx) == module.observe(module.files_of(here), here.host),
    "same_findings": (tokenizer_token_ids(ctx) == tokenizer_token_ids(here)
                      and module.tokenizer_dtype(ctx) == module.tokenizer_dtype(here)),
}}))
"""
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    if not out["could_fork"]:
        pytest.skip("forking needs one thread and 2 cores")
    assert out["forked"] and out["same"] and out["same_findings"]


def test_a_child_that_gives_no_answer_is_a_warning(healthy: Path) -> None:
    import checks.builtin.tokenizer as module
    from probes.forked import Forked

    ctx = ctx_for(healthy)

    class Silent(Forked[Any]):
        def result(self, timeout_s: float) -> Any:
            raise module.ForkedError("the child process did not reply in time")

    ctx.know(module.FORKED_FACT, Silent(lambda: None))
    finding = tokenizer_dtype(ctx)
    assert finding.status == "warn"
    assert finding.summary == ("the tokenizer was not loaded: the child process did not reply "
                               "in time")
    assert finding.rules == ("tokenizer-not-loaded",)


def test_the_runner_prefetches_before_its_threads_start(healthy: Path) -> None:
    from checks.runner import run_checks

    seen: list[int] = []
    check = next(c for c in all_checks() if c.id == "tokenizer.dtype")
    assert check.prefetch is not None

    def prefetch(ctx: Context) -> None:
        seen.append(threading.active_count())

    before = threading.active_count()
    run = run_checks([dataclasses.replace(check, prefetch=prefetch)], ctx_for(healthy))
    assert seen == [before]  # no check thread had started
    assert run.results[0].status == "pass"
