"""Fourth thread harvest H (issue #25): serving.flags rules from triaged vLLM-Ascend threads and
fixing PRs of v0.19 .. v0.26 whose maintainers state the cause. Each rule fires on the
thread's shape and on a variant in its scope, and stays quiet on the healthy twin the thread
or PR names (the other value, the replacing --additional-config key, an earlier release or
another chip)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from serving_fixtures import QWEN3, QWEN3_5, QWEN3_5_MOE, served

from checks.builtin.serving_flags import serving_flags
from checks.model import Finding


def flags(tmp_path: Path, args: list[str], release: str, config: dict[str, Any],
          chip: str = "A3", env: dict[str, str] | None = None) -> Finding:
    with served(tmp_path, args, release=release, config=config, chip=chip, env=env) as ctx:
        return serving_flags(ctx)


def additional(config: dict[str, Any]) -> list[str]:
    return ["--additional-config", json.dumps(config)]


def npugraph_ex(on: bool) -> list[str]:
    return additional({"ascend_compilation_config": {"enable_npugraph_ex": on}})


def test_npugraph_ex_on_310p_warns(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#10874 and #12469: not supported on Atlas inference products;
    the tutorial's twin sets it to false, and A2/A3 keep it."""
    rule = "npugraph-ex-310p"
    hit = flags(tmp_path / "a", ["-tp", "4", *npugraph_ex(True)], "0.21.0rc1", QWEN3_5,
                chip="310P")
    later = flags(tmp_path / "b", ["-tp", "2", *npugraph_ex(True)], "0.23.0", QWEN3_5_MOE,
                  chip="310P")
    off = flags(tmp_path / "c", ["-tp", "2", *npugraph_ex(False)], "0.23.0", QWEN3_5_MOE,
                chip="310P")
    unset = flags(tmp_path / "d", ["-tp", "2"], "0.23.0", QWEN3_5_MOE, chip="310P")
    a2 = flags(tmp_path / "e", ["-tp", "2", *npugraph_ex(True)], "0.23.0", QWEN3_5_MOE,
               chip="A2")
    assert hit.status == "warn" and "npugraph-ex-310p" in hit.rules
    assert rule in later.rules and rule not in off.rules + unset.rules + a2.rules


def test_weight_nz_mode_2_on_an_unquantized_qwen3_5_moe_warns(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#10014 / #10287, spelt as the key #9064 introduced."""
    rule = "nz-narrow-weights-qwen3-5-moe-config"
    hit = flags(tmp_path / "a", additional({"weight_nz_mode": 2}), "0.21.0rc1", QWEN3_5_MOE)
    later = flags(tmp_path / "b", additional({"weight_nz_mode": 2}), "0.23.0", QWEN3_5_MOE)
    default = flags(tmp_path / "c", additional({"weight_nz_mode": 1}), "0.21.0rc1",
                    QWEN3_5_MOE)
    dense = flags(tmp_path / "d", additional({"weight_nz_mode": 2}), "0.21.0rc1", QWEN3_5)
    before_key = flags(tmp_path / "e", additional({"weight_nz_mode": 2}), "0.19.1rc1",
                       QWEN3_5_MOE)
    assert hit.status == "warn" and "nz-narrow-weights-qwen3-5-moe-config" in hit.rules
    assert rule in later.rules and rule not in default.rules + dense.rules + before_key.rules


def test_deprecated_nz_variable_warns_from_0_20_2rc1(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#11624 (maintainer: use weight_nz_mode), #9064, #14830."""
    rule = "env-nz-deprecated"
    hit = flags(tmp_path / "a", [], "0.22.1rc1", QWEN3, env={"VLLM_ASCEND_ENABLE_NZ": "0"})
    other = flags(tmp_path / "b", [], "0.20.2rc1", QWEN3_5_MOE,
                  env={"VLLM_ASCEND_ENABLE_NZ": "2"})
    key = flags(tmp_path / "c", additional({"weight_nz_mode": 0}), "0.22.1rc1", QWEN3)
    older = flags(tmp_path / "d", [], "0.19.1rc1", QWEN3, env={"VLLM_ASCEND_ENABLE_NZ": "0"})
    assert hit.status == "warn" and "env-nz-deprecated" in hit.rules
    assert rule in other.rules and rule not in key.rules + older.rules


def deprecated(tmp_path: Path, variable: str, key: dict[str, Any]) -> list[list[str]]:
    """The rules of: the variable set on v0.21.0rc1, set to 0 on v0.26.0rc1, the replacing key
    instead (v0.21.0rc1), and the variable on v0.19.0rc1 (before the migration)."""
    runs = [(["-tp", "16"], "0.21.0rc1", {variable: "1"}),
            (["-tp", "8"], "0.26.0rc1", {variable: "0"}),
            (["-tp", "16", *additional(key)], "0.21.0rc1", None),
            (["-tp", "16"], "0.19.0rc1", {variable: "1"})]
    return [list(flags(tmp_path / str(n), args, release, QWEN3_5_MOE, env=env).rules)
            for n, (args, release, env) in enumerate(runs)]


def test_deprecated_mlapo_variable_warns(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#9064 (migration), #10381 (RFC), #14829 (no longer read)."""
    hit, later, moved, older = deprecated(tmp_path, "VLLM_ASCEND_ENABLE_MLAPO",
                                          {"enable_mlapo": True})
    assert "env-mlapo-deprecated" in hit and "env-mlapo-deprecated" in later  # rules
    assert "env-mlapo-deprecated" not in moved + older  # rules


def test_deprecated_fused_mc2_variable_warns(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#9064, #14637 (dropping it silently turns fused MC2 off)."""
    hit, later, moved, older = deprecated(tmp_path, "VLLM_ASCEND_ENABLE_FUSED_MC2",
                                          {"enable_fused_mc2": 1})
    assert "env-fused-mc2-deprecated" in hit and "env-fused-mc2-deprecated" in later  # rules
    assert "env-fused-mc2-deprecated" not in moved + older  # rules


def test_deprecated_balance_scheduling_variable_warns(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#9064, #10381."""
    hit, later, moved, older = deprecated(tmp_path, "VLLM_ASCEND_BALANCE_SCHEDULING",
                                          {"enable_balance_scheduling": True})
    rule = "env-balance-scheduling-deprecated"
    assert "env-balance-scheduling-deprecated" in hit and rule in later  # rules
    assert rule not in moved + older  # rules
