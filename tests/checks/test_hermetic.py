"""Tests never depend on what else runs on the machine: with a `vllm serve` process beside
them (a developer's Ascend box), the tests that ran the doctor without a target give the same
answers, because they name one."""

from __future__ import annotations

from pathlib import Path

import pytest
from target_fixtures import fake_vllm
from test_cli import installed_program


def test_a_serving_process_beside_the_tests_is_not_judged(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a server that would fail or warn every environment check it was judged by
    loud = {"ASCEND_GLOBAL_LOG_LEVEL": "0", "ASCEND_SLOG_PRINT_TO_STDOUT": "1",
            "HOME": str(tmp_path)}
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "NO_COLOR": "1"}
    with fake_vllm(tmp_path, loud) as server:
        out = installed_program(env)
    assert str(server.pid) not in out.stdout
    assert out.returncode == 0, out.stdout[-2000:]
    assert "SKIP  npu.health" in out.stdout and "npu-smi not found" in out.stdout
    assert "level 0 (DEBUG)" not in out.stdout
