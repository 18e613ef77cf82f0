"""The serving checks' fronts (checks.builtin.serving): a shell with no serving process, no
serving engine and none of the variables the flag rules read has nothing to lint, and says so
without importing the tables; any one of those present sends the run to the full check, and
the full check says what its front says."""

from __future__ import annotations

import sys
from pathlib import Path

from serving_fixtures import site_packages

from checks.builtin import serving
from checks.context import Context
from checks.policy import load_policy
from probes.live import LiveHost
from probes.target.model import shell_target


def shell(tmp_path: Path, env: dict[str, str], packages: dict[str, str]) -> Context:
    site = site_packages(tmp_path / "site", packages)
    host = LiveHost(root="/", env={"PATH": "/usr/bin:/bin", "PYTHONPATH": site, **env},
                    python=sys.executable)
    return Context(host, load_policy(None), target=shell_target())


def test_a_bare_shell_has_nothing_to_lint(tmp_path: Path) -> None:
    from checks.builtin.serving_flags import serving_flags

    ctx = shell(tmp_path, {}, {"torch": "2.7.1"})
    finding = serving.flags_front(ctx)
    assert finding is not None and finding.status == "skip" and finding.rules == ("no-engine",)
    assert finding.summary.startswith("nothing to lint: no serving process")
    assert serving_flags(ctx) == finding


def test_a_watched_variable_is_linted_without_an_engine(tmp_path: Path) -> None:
    assert serving.flags_front(shell(tmp_path, {"HCCL_BUFFSIZE": "512"},
                                     {"torch": "2.7.1"})) is None


def test_an_installed_engine_is_linted_and_judged(tmp_path: Path) -> None:
    ctx = shell(tmp_path, {}, {"torch": "2.7.1", "vllm_ascend": "0.11.0"})
    assert serving.flags_front(ctx) is None and serving.support_front(ctx) is None


def test_without_an_engine_support_gives_the_full_checks_verdict(tmp_path: Path) -> None:
    from checks.builtin.serving_support import serving_support

    ctx = shell(tmp_path, {}, {"torch": "2.7.1"})
    assert serving.support_front(ctx) == serving_support(ctx)
