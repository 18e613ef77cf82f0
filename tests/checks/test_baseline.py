"""Baselines: `baseline record`, `--baseline FILE` and the baseline.drift check."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import FakeRoot
from machines import A2, build_a2

from checks.baseline import (
    Baseline,
    NpuInventory,
    TokenizerFingerprint,
    compare,
    from_data,
    load_baseline,
    to_data,
)
from checks.builtin.baseline import baseline_drift
from checks.cli import main
from checks.context import Context
from checks.policy import load_policy
from probes.live import LiveHost


def with_env(host: LiveHost, **env: str) -> LiveHost:
    return LiveHost(root=host.root, env=dict(host.env) | env, python=host.python)


def record(root: FakeRoot, host: LiveHost, out: Path) -> dict[str, Any]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("checks.cli.os.environ", dict(host.env))
        code = main(["baseline", "record", "--root", str(root.path), "--python",
                     "/usr/bin/python3", "-o", str(out)])
    assert code == 0
    data = yaml.safe_load(out.read_text())
    assert isinstance(data, dict)
    return data


def drift(root: FakeRoot, host: LiveHost, baseline: Path, capsys: pytest.CaptureFixture[str],
          *extra: str) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("checks.cli.os.environ", dict(host.env))
        code = main(["--root", str(root.path), "--python", "/usr/bin/python3", "--json",
                     "--only", "baseline.drift", "--baseline", str(baseline), *extra])
    report = json.loads(capsys.readouterr().out)
    return code, report["results"][0]


def test_record_writes_versions_environment_and_inventory(fake_root: FakeRoot,
                                                          tmp_path: Path) -> None:
    spec = A2(env={"ASCEND_RT_VISIBLE_DEVICES": "0,1", "ASCEND_OBS_SECRET_KEY": "s3cr3t-value"})
    data = record(fake_root, build_a2(fake_root, spec), tmp_path / "base.yaml")
    assert data["schema"] == "ascend-baseline/1"
    assert data["versions"] == {
        "driver": "25.0.rc1.1", "firmware": "7.7.0.1.231", "cann": "8.3.RC2", "nnal": "8.3.RC2",
        "torch": "2.7.1", "torch-npu": "2.7.1.post1", "transformers": "4.57.1",
        "tokenizers": "0.22.1", "vllm": "0.11.0", "vllm-ascend": "0.11.0"}
    assert data["environment"]["ASCEND_RT_VISIBLE_DEVICES"] == "0,1"
    assert data["environment"]["ASCEND_OBS_SECRET_KEY"] == "<redacted>"
    assert "s3cr3t-value" not in (tmp_path / "base.yaml").read_text()
    assert data["npu"]["count"] == 8
    assert set(data["npu"]["chips"]) == {"910B4"} and set(data["npu"]["hbm_total_mb"]) == {32768}


def test_same_machine_passes_and_drift_is_listed(fake_root: FakeRoot, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    base = tmp_path / "base.yaml"
    host = build_a2(fake_root)
    record(fake_root, host, base)
    code, result = drift(fake_root, host, base, capsys)
    assert (code, result["status"]) == (0, "pass"), result
    assert "matches the baseline" in result["summary"]

    data = yaml.safe_load(base.read_text())
    data["versions"]["torch-npu"] = "2.6.0"
    data["environment"]["ASCEND_GLOBAL_LOG_LEVEL"] = "3"
    data["npu"]["hbm_total_mb"][0] = 65536
    base.write_text(yaml.safe_dump(data))
    code, result = drift(fake_root, host, base, capsys)
    assert (code, result["status"]) == (2, "fail")
    evidence = "\n".join(result["evidence"])
    assert "versions.torch-npu: 2.6.0 -> 2.7.1.post1" in evidence
    assert "environment.ASCEND_GLOBAL_LOG_LEVEL: 3 -> absent" in evidence
    assert "npu.hbm_total_mb: 32768 x7, 65536 x1 -> 32768 x8" in evidence


def test_environment_drift_warns_and_policy_can_relax_versions(
        fake_root: FakeRoot, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = tmp_path / "base.yaml"
    healthy = build_a2(fake_root)
    record(fake_root, healthy, base)
    host = with_env(healthy, ASCEND_LAUNCH_BLOCKING="1")
    code, result = drift(fake_root, host, base, capsys)
    assert (code, result["status"]) == (1, "warn")
    assert "environment.ASCEND_LAUNCH_BLOCKING: absent -> 1" in result["summary"]

    data = yaml.safe_load(base.read_text())
    data["versions"]["cann"] = "8.2.RC1"
    base.write_text(yaml.safe_dump(data))
    policy = tmp_path / "policy.yaml"
    policy.write_text("baseline:\n  version_drift_is: warn\n  environment_drift_is: pass\n")
    code, result = drift(fake_root, host, base, capsys, "--policy", str(policy))
    assert (code, result["status"]) == (1, "warn")
    assert "versions.cann: 8.2.RC1 -> 8.3.RC2" in result["summary"]


def test_without_baseline_the_check_skips(fake_root: FakeRoot,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    host = build_a2(fake_root)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("checks.cli.os.environ", dict(host.env))
        main(["--root", str(fake_root.path), "--json", "--only", "baseline.drift"])
    result = json.loads(capsys.readouterr().out)["results"][0]
    assert result["status"] == "skip" and "--baseline" in result["summary"]


@pytest.mark.parametrize(("content", "words"), [
    ("schema: ascend-baseline/2\n", "ascend-baseline/1"),
    ("schema: ascend-baseline/1\nversions: {torch: 2.10}\n", "versions.torch"),
    ("{not: [yaml\n", "not valid YAML"),
    ("- a list\n", "mapping"),
])
def test_bad_baseline_file_is_exit_3(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     content: str, words: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    assert main(["--baseline", str(path), "--only", "baseline.drift"]) == 3
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(path) in err and words in err


def _base(**kw: Any) -> Baseline:
    values: dict[str, Any] = {"recorded_at": "T", "host": "h", "versions": {"cann": "8.3.RC2"},
                              "environment": {}, "npu": NpuInventory(1, ("910B4",), (65536,))}
    values.update(kw)
    return Baseline(**values)


def test_unknown_now_is_never_a_difference() -> None:
    now = _base(versions={}, npu=None, unknown={"versions.cann": "not recorded",
                                                "npu": "`npu-smi info` was not recorded"})
    drifts, unknown = compare(_base(), now)
    assert drifts == []
    assert set(unknown) == {"versions.cann", "npu.count", "npu.chips", "npu.hbm_total_mb"}


def test_yaml_round_trip_of_a_full_baseline() -> None:
    tok = TokenizerFingerprint(151669, {"eos_token_id": 151645, "bos_token_id": None}, "hi",
                               (1, 2, 3), "int64", "int64")
    base = _base(tokenizer=tok, environment={"ASCEND_X": "1"})
    assert from_data(yaml.safe_load(yaml.safe_dump(to_data(base)))) == base


def test_record_from_a_recording_and_compare(fake_root: FakeRoot, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    host = build_a2(fake_root)
    bundle = tmp_path / "a2.tar.gz"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("checks.cli.os.environ", dict(host.env))
        assert main(["bundle", "--root", str(fake_root.path), "--python", "/usr/bin/python3",
                     "--no-logs", "-o", str(bundle)]) == 0
    capsys.readouterr()
    base = tmp_path / "base.yaml"
    assert main(["baseline", "record", "--from", str(bundle), "-o", str(base)]) == 0
    assert main(["--from", str(bundle), "--baseline", str(base), "--json",
                 "--only", "baseline.drift"]) == 0
    result = json.loads(capsys.readouterr().out)["results"][0]
    assert result["status"] == "pass", result


def test_tokenizer_fingerprint_detects_another_tokenizer(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    from tokenizer_fixtures import write_qwen3_model_dir

    model = write_qwen3_model_dir(tmp_path / "model")
    base = tmp_path / "base.yaml"
    assert main(["baseline", "record", "--model", str(model), "-o", str(base)]) == 0
    data = yaml.safe_load(base.read_text())
    tok = data["tokenizer"]
    assert tok["ids_dtype"] == "int64" and tok["vocab_size"] > 151000
    assert tok["special_ids"]["eos_token_id"] == 151645 and len(tok["ids"]) > 5
    argv = ["--model", str(model), "--baseline", str(base), "--json", "--only", "baseline.drift"]
    capsys.readouterr()
    main(argv)
    assert json.loads(capsys.readouterr().out)["results"][0]["status"] in ("pass", "warn")

    tok["ids"][1] += 1
    base.write_text(yaml.safe_dump(data, allow_unicode=True))
    main(argv)
    result = json.loads(capsys.readouterr().out)["results"][0]
    assert result["status"] == "fail"
    assert any(line.startswith("tokenizer.probe_ids:") for line in result["evidence"])
    finding = baseline_drift(Context(LiveHost(), load_policy(), model_dir=model,
                                     baseline=load_baseline(base)))
    assert "tokenizer-drift" in finding.rules


def test_module_entry_point_gives_one_line_errors(tmp_path: Path) -> None:
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-m", "checks.cli", "--baseline",
                          str(tmp_path / "missing.yaml")], cwd=root, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 3
    assert out.stderr.strip().splitlines() == [
        f"ascend-doctor: --baseline {tmp_path / 'missing.yaml'}: cannot read "
        "(No such file or directory)"]


# -- the rules the findings name (tests/checks/test_check_rules.py) ---------------------------


def test_each_kind_of_drift_names_its_rule(fake_root: FakeRoot, tmp_path: Path) -> None:
    host = build_a2(fake_root)
    data = record(fake_root, host, tmp_path / "base.yaml")
    data["versions"]["torch-npu"] = "2.6.0"
    data["environment"]["ASCEND_GLOBAL_LOG_LEVEL"] = "3"
    data["npu"]["hbm_total_mb"][0] = 65536
    finding = baseline_drift(Context(host, load_policy(), baseline=from_data(data)))
    assert finding.status == "fail"
    assert set(finding.rules) == {"version-drift", "environment-drift", "inventory-drift"}
    assert baseline_drift(Context(host, load_policy())).rules == ("no-baseline",)


def test_nothing_comparable_skips(fake_root: FakeRoot, tmp_path: Path) -> None:
    from probes.recording.recorder import RecordingHost
    from probes.recording.snapshot import SnapshotHost

    empty = RecordingHost(LiveHost(root=str(fake_root.path), env={}))
    assert empty.env == {}  # the environment is recorded (empty), nothing else is
    nothing = SnapshotHost(empty.save(tmp_path / "nothing-recorded"))
    finding = baseline_drift(Context(nothing, load_policy(), baseline=_base()))
    assert finding.status == "skip", finding
    assert finding.rules == ("nothing-compared",)
