"""The fixture A2 machine end to end through `ascend-doctor --root`: healthy, then one
planted fault at a time, each giving exactly the expected warn/fail."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import FakeRoot
from fp8_fixtures import bf16_model_tensors, fp8_model_tensors, model_config, write_model
from machines import A2, build_a2, fixture_policy

from checks.cli import main

# these need an input the healthy run does not give (--model, --baseline)
NOT_APPLICABLE = {"checkpoint.format", "checkpoint.fp8-scales", "npu.hbm-fit",
                  "tokenizer.dtype", "tokenizer.token-ids", "baseline.drift",
                  "endpoint.health", "endpoint.smoke", "endpoint.metrics", "engine.op-coverage",
                  "serving.support"}  # no --model: the model type is unknown


def doctor(root: FakeRoot, spec: A2 | None, capsys: pytest.CaptureFixture[str],
           *extra: str) -> tuple[int, dict[str, dict[str, object]]]:
    host = build_a2(root, spec)
    argv = ["--root", str(root.path), "--python", "/usr/bin/python3", "--json",
            "--policy", str(fixture_policy(root)), *extra]
    # the host built by the fixture carries the environment: hand it to the CLI's LiveHost
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("checks.cli.os.environ", dict(host.env))
        code = main(argv)
    report = json.loads(capsys.readouterr().out)
    return code, {r["id"]: r for r in report["results"]}


def statuses(results: dict[str, dict[str, object]]) -> dict[str, object]:
    return {k: v["status"] for k, v in results.items()}


def test_healthy_a2_passes_everything_it_can_judge(fake_root: FakeRoot,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    code, results = doctor(fake_root, A2(), capsys)
    for check_id, status in statuses(results).items():
        expected = "skip" if check_id in NOT_APPLICABLE else "pass"
        assert status == expected, (check_id, results[check_id])
    assert code == 0


@pytest.mark.parametrize(("spec", "check_id", "status", "words"), [
    (A2(env={"ASCEND_GLOBAL_LOG_LEVEL": "1"}), "logging.level", "warn", "level 1 (INFO)"),
    (A2(packages={"torch": "2.6.0", "torch_npu": "2.5.1.post1"}), "versions.parity", "fail",
     "torch_npu 2.5.1.post1 is built for torch 2.5.1, found torch 2.6.0"),
    (A2(link_x8=("c1",)), "pcie.contention", "warn", "0000:c1:00.0 link trained at"),
    (A2(env={"ASCEND_RT_VISIBLE_DEVICES": "0, 1"}), "cann.environment", "fail",
     "ASCEND_RT_VISIBLE_DEVICES"),
])
def test_one_planted_fault_changes_exactly_one_check(
        fake_root: FakeRoot, capsys: pytest.CaptureFixture[str], spec: A2, check_id: str,
        status: str, words: str) -> None:
    code, results = doctor(fake_root, spec, capsys)
    assert results[check_id]["status"] == status, results[check_id]
    assert words in str(results[check_id]["summary"])
    others = {k: v for k, v in statuses(results).items()
              if k != check_id and v not in ("pass", "skip")}
    assert others == {}
    assert code == (2 if status == "fail" else 1)


def test_fp8_checkpoint_on_a2_fails_format_and_passes_scales(
        fake_root: FakeRoot, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_model(fake_root.path / "models" / "qwen-fp8", fp8_model_tensors())
    code, results = doctor(fake_root, A2(), capsys, "--model", "/models/qwen-fp8",
                           "--only", "checkpoint.format,checkpoint.fp8-scales")
    assert results["checkpoint.format"]["status"] == "fail"
    assert "FP8" in str(results["checkpoint.format"]["summary"])
    assert results["checkpoint.fp8-scales"]["status"] == "pass"
    assert code == 2


def test_bf16_checkpoint_on_a2_passes_format(fake_root: FakeRoot,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    write_model(fake_root.path / "models" / "qwen-bf16", bf16_model_tensors(),
                model_config(fp8=False))
    code, results = doctor(fake_root, A2(), capsys, "--model", "/models/qwen-bf16",
                           "--only", "checkpoint.format,checkpoint.fp8-scales")
    assert statuses(results) == {"checkpoint.format": "pass", "checkpoint.fp8-scales": "skip"}
    assert code == 0
