"""`--from RECORDING --model DIR`: the model is read from this machine, its tokenizer too."""

from __future__ import annotations

from pathlib import Path

import pytest
from machines import demo_recording
from tokenizer_fixtures import write_qwen3_model_dir

from checks.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_the_tokenizer_of_a_model_on_this_machine_is_loaded(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = write_qwen3_model_dir(tmp_path / "model")
    main(["--from", str(demo_recording(tmp_path / "recorded")), "--model", str(model),
          "--only", "tokenizer.dtype"])
    out = capsys.readouterr().out
    assert "not on this machine" not in out
    assert "tokenizer.dtype" in out and "SKIP  tokenizer.dtype" not in out
