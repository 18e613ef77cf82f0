from __future__ import annotations

import datetime as dt
import subprocess
import sys
from pathlib import Path

import pytest

from checks.policy import PolicyError, load_policy


def test_defaults_load_with_sources() -> None:
    policy = load_policy()
    assert policy.get("npu", "hbm_temperature_alarm_c") == 95
    assert policy.get("runner", "check_timeout_s") > 0
    assert policy.waivers == ()
    assert policy.source == "built-in defaults"


def test_every_default_threshold_names_a_source() -> None:
    text = (Path(__file__).parents[2] / "checks" / "policy.yaml").read_text()
    sections = [b for b in text.split("\n\n") if ":" in b and not b.startswith("#")]
    for block in sections:
        assert "#" in block, f"a policy section without a source comment:\n{block}"


def test_override_changes_only_given_keys(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("npu:\n  temperature_above_peers_warn_c: 10\n")
    policy = load_policy(path)
    assert policy.get("npu", "temperature_above_peers_warn_c") == 10
    assert policy.get("npu", "hbm_temperature_alarm_c") == 95
    assert policy.source == str(path)


@pytest.mark.parametrize(("text", "message"), [
    ("npu:\n  hbm_temprature_alarm_c: 90\n", "unknown key 'npu.hbm_temprature_alarm_c'"),
    ("nup:\n  x: 1\n", "unknown section 'nup'"),
    ("npu:\n  hbm_temperature_alarm_c: hot\n", "'npu.hbm_temperature_alarm_c' must be"),
    ("logging:\n  production: 1\n", "'logging.production' must be bool"),
    ("- a\n- b\n", "a policy is a mapping"),
    ("npu: [\n", "not valid YAML"),
    ("waivers:\n  - {id: x}\n", "each waiver needs"),
    ("waivers:\n  - {id: x, reason: y, expires: soon}\n", "YYYY-MM-DD"),
])
def test_bad_policies_are_refused_with_the_key(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(PolicyError, match=message.replace("(", r"\(").replace(".", r"\.")):
        load_policy(path)


def test_missing_policy_file_names_it(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match=r"nope\.yaml"):
        load_policy(tmp_path / "nope.yaml")


def test_waivers_parse_and_expire(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text("waivers:\n  - id: pcie.contention\n    reason: known x8 riser\n"
                    "    expires: 2027-01-31\n")
    waiver = load_policy(path).waiver_for("pcie.contention")
    assert waiver is not None and waiver.reason == "known x8 riser"
    assert waiver.active(dt.date(2027, 1, 31))
    assert not waiver.active(dt.date(2027, 2, 1))


def test_the_json_copies_of_the_built_in_data_are_fresh_and_equal_to_the_yaml() -> None:
    import yaml

    from checks import datafiles

    for name in datafiles.SOURCES:
        copy = datafiles.copy_path(name)
        assert copy.read_text(encoding="utf-8") == datafiles.render_copy(name), (
            f"{copy} is stale: run `python -m checks.datafiles`")
        text = (datafiles.PACKAGE_DIR / name).read_text(encoding="utf-8")
        assert datafiles.load(name) == yaml.safe_load(text), name


def test_an_edited_yaml_without_a_fresh_copy_is_read_as_yaml(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    from checks import datafiles

    (tmp_path / "policy.yaml").write_text("runner:\n  check_timeout_s: 7  # edited\n")
    (tmp_path / "policy.json").write_text(
        '{"format": "ascend-doctor-data/1", "fingerprint": "crc32:00000000:1", '
        '"data": {"runner": {"check_timeout_s": 30}}}')
    monkeypatch.setattr(datafiles, "PACKAGE_DIR", tmp_path)
    assert datafiles.load("policy.yaml") == {"runner": {"check_timeout_s": 7}}
    (tmp_path / "policy.json").write_text(datafiles.render_copy("policy.yaml"))
    assert datafiles.load("policy.yaml") == {"runner": {"check_timeout_s": 7}}
    (tmp_path / "policy.json").write_text("{not json")
    assert datafiles.load("policy.yaml") == {"runner": {"check_timeout_s": 7}}


def test_a_run_with_the_default_policy_does_not_import_yaml() -> None:
    code = ("import sys; from checks.policy import load_policy; "
            "from checks.builtin.versions import compat_data; load_policy(); compat_data(); "
            "print('yaml' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True)
    assert out.stdout.strip() == "False"
