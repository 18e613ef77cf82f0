"""`ascend-console --pid PID`: the host panel watches the target's log disk and names it, and
the doctor screen judges the same target as `ascend-doctor --pid`."""

from __future__ import annotations

from pathlib import Path

import pytest
from target_fixtures import fake_vllm

from console.cli import UsageError, observe, parse_options
from console.options import ConsoleOptions
from console.ui.app import ConsoleApp
from console.ui.widgets.host import HostPanel
from tests.console.fakes import FakeEngine, fake_backend


async def test_the_panels_and_the_doctor_judge_the_target(tmp_path: Path) -> None:
    logs = tmp_path / "svc-logs"
    env = {"ASCEND_GLOBAL_LOG_LEVEL": "1", "ASCEND_PROCESS_LOG_PATH": str(logs)}
    with fake_vllm(tmp_path, env) as server:
        options, observed = observe(parse_options(["--no-model", "--pid", str(server.pid)]))
    assert options.pid == server.pid and options.log_dir == str(logs)
    assert observed.target.pid == server.pid
    app = ConsoleApp(ConsoleOptions(interval_s=3600, log_dir=options.log_dir,
                                    sample_live=False),
                     backend=fake_backend(FakeEngine()), host=observed.host,
                     target=observed.target)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        subtitle = str(app.query_one(HostPanel).border_subtitle)
        assert subtitle.startswith(f"process {server.pid} (vllm serve ")
    run = app.run_doctor()
    level = next(r for r in run.results if r.id == "logging.level")
    assert level.status == "warn" and "level 1 (INFO)" in level.summary
    assert level.evidence[0].startswith(f"environment judged: process {server.pid}")


def test_a_pid_that_is_not_there_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="no such process"):
        observe(parse_options(["--no-model", "--pid", "999999999"]))
