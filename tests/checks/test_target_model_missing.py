"""A target whose command line names a model that is not there: the model checks say so,
instead of "no --model given" as if nothing had been named."""

from __future__ import annotations

from pathlib import Path

import pytest
from target_fixtures import fake_vllm

from checks.cli import main


def test_the_targets_missing_model_is_named(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "models" / "gone"
    with fake_vllm(tmp_path, {"HOME": str(tmp_path)}, tail=("serve", str(missing), "-tp", "2")
                   ) as server:
        code = main(["--pid", str(server.pid), "--only", "checkpoint.format,npu.hbm-fit"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"the target's model {missing} (`vllm serve {missing}`" in out
    assert "neither a directory on its machine nor in its Hugging Face cache" in out


def test_without_a_model_anywhere_the_reason_stays_short(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with fake_vllm(tmp_path, {"HOME": str(tmp_path)}, tail=("serve",)) as server:
        main(["--pid", str(server.pid), "--only", "checkpoint.format"])
    out = capsys.readouterr().out
    assert "SKIP  checkpoint.format      no --model given\n" in out
