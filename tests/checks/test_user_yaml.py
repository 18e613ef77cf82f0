"""Hostile --policy and --baseline files: exit 3, one line naming the file (and the key where
there is one), never a traceback; bounded (the memory bound: tests/checks/test_bounded.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checks.cli import main
from checks.policy import PolicyError, load_policy

# 445 bytes: nine levels of nine aliases, 9**9 strings once expanded (2.1 GB, a 722 MB error)
ALIAS_BOMB = (
    'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    + "".join(f"{chr(98 + i)}: &{chr(98 + i)} [{','.join(['*' + chr(97 + i)] * 9)}]\n"
              for i in range(8))
    + "runner:\n  check_timeout_s: *i\n"
)

HOSTILE: dict[str, tuple[bytes, str]] = {
    "alias bomb": (ALIAS_BOMB.encode(), "aliases"),
    "deep nesting": (b"runner: " + b"[" * 100_000 + b"]" * 100_000 + b"\n", "nested deeper"),
    "latin-1": ("npu:\n  temperature_warn_c: 80  # café\n".encode("latin-1"), "not UTF-8"),
    "utf-16": ("npu:\n  temperature_warn_c: 80\n".encode("utf-16"), "not UTF-8"),
    "inf timeout": (b"runner:\n  check_timeout_s: .inf\n", "runner.check_timeout_s"),
    "nan timeout": (b"runner:\n  check_timeout_s: .nan\n", "runner.check_timeout_s"),
    "negative timeout": (b"runner:\n  check_timeout_s: -5\n", "runner.check_timeout_s"),
    "zero output cap": (b"runner:\n  command_output_mb: 0\n", "runner.command_output_mb"),
    "4000 digits": (b"runner:\n  check_timeout_s: " + b"9" * 4000 + b"\n",
                    "runner.check_timeout_s"),
    "5000 digits": (b"runner:\n  check_timeout_s: " + b"9" * 5000 + b"\n",
                    "runner.check_timeout_s"),
    "huge float": (b"npu:\n  temperature_warn_c: 1e400\n", "npu.temperature_warn_c"),
    "waiver with a time": (b"waivers:\n  - {id: npu.health, reason: r, "
                           b"expires: 2099-01-01 12:00:00}\n", "'npu.health'"),
    "impossible date": (b"waivers:\n  - {id: npu.health, reason: r, expires: 2099-02-30}\n",
                        "not a date in the calendar"),
    "date with a zone": (b"waivers:\n  - {id: npu.health, reason: r, "
                         b"expires: 2099-01-01T00:00:00Z}\n", "'npu.health'"),
    "python tag": (b"runner: !!python/object/apply:os.system ['true']\n", "not valid YAML"),
    "huge file": (b"# " + b"x" * (2 * 1024 * 1024) + b"\n", "larger than"),
    "binary": (bytes(range(256)) * 4, "not UTF-8"),
}


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    code = main(argv)
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.err.strip().splitlines()


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_policy_is_exit_3_with_one_line(case: str, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    data, expected = HOSTILE[case]
    path = tmp_path / "hostile-policy.yaml"
    path.write_bytes(data)
    code, lines = run(["--policy", str(path), "--only", "logging.level", "--json"], capsys)
    assert code == 3
    assert len(lines) == 1 and "hostile-policy.yaml" in lines[0], lines
    assert expected in lines[0], lines[0]
    assert len(lines[0]) < 400


@pytest.mark.parametrize("case", ["alias bomb", "deep nesting", "latin-1", "utf-16",
                                  "python tag", "huge file", "binary"])
def test_hostile_baseline_is_exit_3_with_one_line(case: str, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    data, _ = HOSTILE[case]
    path = tmp_path / "hostile-baseline.yaml"
    path.write_bytes(data.replace(b"runner:", b"schema: ascend-baseline/1\nversions:"))
    code, lines = run(["--baseline", str(path), "--only", "logging.level", "--json"], capsys)
    assert code == 3
    assert len(lines) == 1 and "hostile-baseline.yaml" in lines[0], lines
    assert len(lines[0]) < 400


@pytest.mark.parametrize("body", [
    "schema: ascend-baseline/1\ntokenizer: {vocab_size: .inf, ids: [], ids_dtype: x}\n",
    "schema: ascend-baseline/1\nnpu: {count: 99999999999999999999999, chips: []}\n",
    "schema: ascend-baseline/1\nversions: {torch: [1, 2]}\n",
    "schema: ascend-baseline/1\ntokenizer: {vocab_size: 5}\n",
])
def test_bad_baseline_values_name_the_key(body: str, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "b.yaml"
    path.write_text(body)
    code, lines = run(["--baseline", str(path), "--only", "logging.level", "--json"], capsys)
    assert code == 3 and len(lines) == 1
    assert any(key in lines[0] for key in ("vocab_size", "npu.count", "versions.torch", "ids"))


def test_a_waiver_date_parses(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text("waivers:\n  - {id: npu.health, reason: r, expires: '2099-01-31'}\n")
    waiver = load_policy(path).waiver_for("npu.health")
    assert waiver is not None and str(waiver.expires) == "2099-01-31"


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(alphabet=st.sampled_from(list("ab:-[]{},&*!\n\t .9#'\"é")),
                    max_size=120))
def test_random_policies_load_or_give_one_line(tmp_path: Path, text: str) -> None:
    path = tmp_path / "random.yaml"
    path.write_text(text, encoding="utf-8")
    try:
        load_policy(path)
    except PolicyError as exc:
        assert str(exc).startswith(str(path))
