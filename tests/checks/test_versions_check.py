"""versions.parity on fake machines: real version files, a real interpreter, fake packages."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from checks.builtin.versions import compat_data, versions_parity
from checks.context import Context
from checks.model import Finding
from checks.policy import load_policy
from checks.registry import all_checks, select
from checks.runner import run_checks
from probes.live import LiveHost
from tests.conftest import CORPUS_DIR, FakeRoot
from tests.machines import site_packages

CORPUS = CORPUS_DIR / "npu-smi"
ASCEND = "/usr/local/Ascend"
DRIVER_FILE = f"{ASCEND}/driver/version.info"
FIRMWARE_FILE = f"{ASCEND}/firmware/version.info"
TOOLKIT_FILE = f"{ASCEND}/ascend-toolkit/latest/aarch64-linux/ascend_toolkit_install.info"
NNAL_FILE = f"{ASCEND}/nnal/atb/latest/version.info"
MINDIE_FILE = f"{ASCEND}/mindie/latest/version.info"
PYTHON = "/usr/bin/python3"

HEALTHY_PACKAGES = {"torch": "2.7.1", "torch_npu": "2.7.1.post1", "vllm": "0.11.0",
                    "vllm_ascend": "0.11.0"}


def corpus(name: str) -> str:
    return next(CORPUS.glob(f"{name}-*")).read_text()


def driver_accepting_c23() -> str:
    # corpus 033 with the 8.3 family accepted (C23, as observed in real 8.3 installs)
    return corpus("033").replace("[V100R001C15]\n", "[V100R001C15],[V100R001C23]\n")


def nnal_info(version: str) -> str:
    return (f"Ascend-cann-atb : {version}\nAscend-cann-atb Version : {version}.B030\n"
            "Platform : aarch64\n")


def toolkit_info(version: str, inner: str) -> str:
    return (f"package_name=Ascend-cann-toolkit\nversion={version}\ninnerversion={inner}\n"
            "arch=aarch64\nos=linux\n")


def install_stack(root: FakeRoot, *, driver: str | None = None, firmware: str | None = None,
                  toolkit: str | None = None, nnal: str | None = "8.3.RC2") -> None:
    """A driver 23.0.7 / firmware 7.1.0.11.220 / CANN 8.3.RC2 / NNAL machine (corpus files);
    `firmware=""` installs no firmware file."""
    root.file(DRIVER_FILE, driver if driver is not None else driver_accepting_c23())
    if firmware != "":
        root.file(FIRMWARE_FILE, firmware if firmware is not None else corpus("034"))
    root.file(TOOLKIT_FILE, toolkit if toolkit is not None else corpus("021"))
    if nnal is not None:
        root.file(NNAL_FILE, nnal_info(nnal))


def context(root: FakeRoot, packages: dict[str, str] | None, python: bool = True) -> Context:
    """A Context on `root` whose --python is this interpreter, seeing `packages` first."""
    env = {"PATH": "/usr/bin:/bin"}
    if python:
        # a real interpreter inside the root: a shim that execs this test's Python
        root.script(PYTHON, f'exec "{sys.executable}" "$@"\n')
        env["PYTHONPATH"] = site_packages(root.path.parent / "site", packages or {})
    host = LiveHost(root=str(root.path), env=env, python=PYTHON if python else None)
    return Context(host, load_policy())


def run(root: FakeRoot, packages: dict[str, str] | None = None, python: bool = True) -> Finding:
    return versions_parity(context(root, packages, python))


def test_healthy_machine_passes(fake_root: FakeRoot) -> None:
    install_stack(fake_root)
    found = run(fake_root, HEALTHY_PACKAGES)
    assert found.status == "pass", found
    assert found.rules == ()
    text = "\n".join(found.evidence)
    assert "firmware 7.1.0.11.220 within driver 23.0.7" in text
    assert "vllm-ascend v0.11.0 row" in text
    assert DRIVER_FILE in text


def test_torch_beside_torch_npu_of_another_torch_fails(fake_root: FakeRoot) -> None:
    install_stack(fake_root)
    found = run(fake_root, {"torch": "2.6.0", "torch_npu": "2.5.1.post1"})
    assert found.status == "fail"
    assert "torch_npu 2.5.1.post1 is built for torch 2.5.1, found torch 2.6.0" in found.summary
    assert "torch==2.5.1" in found.remedy
    # torch_npu 2.5.1.post1 (7.0.0) is not declared for CANN 8.3.RC2 either
    assert found.rules == ("torch-npu-build", "torch-npu-cann")


def test_nnal_of_another_release_fails(fake_root: FakeRoot) -> None:
    install_stack(fake_root, nnal="8.2.RC1")
    found = run(fake_root, HEALTHY_PACKAGES)
    assert found.status == "fail"
    assert "NNAL/ATB 8.2.RC1 is not the CANN 8.3.RC2 release" in found.summary
    assert "nnal 8.3.RC2" in found.remedy
    assert found.rules == ("nnal-equals-cann",)


def test_firmware_outside_driver_range_warns(fake_root: FakeRoot) -> None:
    # compatible_version_fw is a derived rule (no vendor document states its meaning)
    install_stack(fake_root, firmware=corpus("034").replace("7.1.0.11.220", "7.3.0.1.231"))
    found = run(fake_root, HEALTHY_PACKAGES)
    assert found.status == "warn"
    assert "no vendor document states" in found.summary
    assert "firmware 7.3.0.1.231" in found.summary
    assert "driver 23.0.7" in found.summary
    assert "compatible_version_fw [7.0.0,7.1.99]" in found.summary
    assert found.rules == ("firmware-driver-fields",)


def test_driver_not_accepted_by_firmware_warns(fake_root: FakeRoot) -> None:
    driver = driver_accepting_c23().replace("23.0.7", "24.1.rc1")
    install_stack(fake_root, driver=driver)
    found = run(fake_root, HEALTHY_PACKAGES)
    assert found.status == "warn"
    assert "driver 24.1.rc1 is not in firmware 7.1.0.11.220's compatible_version_drv" \
        in found.summary
    assert found.rules == ("firmware-driver-fields",)


def test_toolkit_family_not_in_driver_list_warns(fake_root: FakeRoot) -> None:
    install_stack(fake_root, driver=corpus("033"))  # lists C13..C30 but not C23
    found = run(fake_root, HEALTHY_PACKAGES)
    assert found.status == "warn"
    assert "family V100R001C23 is not in driver 23.0.7's compatible_version" in found.summary
    assert found.rules == ("innerversion-family",)


def test_unknown_newer_torch_npu_warns_not_fails(fake_root: FakeRoot) -> None:
    install_stack(fake_root)
    found = run(fake_root, {"torch": "2.14.0", "torch_npu": "2.14.0"})
    assert found.status == "warn"
    assert "torch_npu 2.14.0 is not in the compatibility data" in found.summary
    assert found.rules == ("not-in-the-data",)


def test_unknown_is_policy_applies(fake_root: FakeRoot, tmp_path: Path) -> None:
    install_stack(fake_root)
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text("versions:\n  unknown_is: pass\n")
    ctx = context(fake_root, {"torch": "2.14.0", "torch_npu": "2.14.0"})
    ctx.policy = load_policy(policy_file)
    found = versions_parity(ctx)
    assert found.status == "pass"
    assert found.rules == ()  # the summary names no problem: the policy made it a pass


def test_older_cann_declared_compatible_warns(fake_root: FakeRoot) -> None:
    # torch_npu 2.6.0.post3 is branch v2.6.0-7.2.0 (CANN 8.3.RC1); 7.2.0 declares 8.2.RC1
    install_stack(fake_root, toolkit=toolkit_info("8.2.RC1", "V100R001C22SPC001B100"),
                  nnal="8.2.RC1", driver=corpus("033").replace("[V100R001C15]\n",
                                                               "[V100R001C22]\n"))
    found = run(fake_root, {"torch": "2.6.0", "torch_npu": "2.6.0.post3"})
    assert found.status == "warn"
    assert "older but declared compatible" in found.summary
    assert "CANN 8.3.RC1" in found.remedy
    # driver 23.0.7 is not the 25.0.rc1 the install helper pairs with 8.2.RC1: a warning too
    assert found.rules == ("recommended-pair", "torch-npu-cann")


def test_torch_npu_with_known_but_unpaired_cann_fails(fake_root: FakeRoot) -> None:
    install_stack(fake_root, toolkit=corpus("019"), nnal="8.5.0",  # CANN 8.5.0
                  driver=driver_info("25.5.1", "[V100R001C25]"), firmware="")
    found = run(fake_root, {"torch": "2.5.1", "torch_npu": "2.5.1"})
    assert found.status == "fail"
    assert found.summary == ("torch_npu 2.5.1 (Ascend Extension for PyTorch 7.0.0) is declared "
                             "for CANN 8.3.RC1, 8.2.RC1, 8.1.RC1, 8.0.0, 8.0.RC3, 8.0.RC2, "
                             "found CANN 8.5.0")
    assert found.rules == ("torch-npu-cann",)


def test_vllm_ascend_row_mismatch_names_the_row(fake_root: FakeRoot) -> None:
    install_stack(fake_root)
    found = run(fake_root, {**HEALTHY_PACKAGES, "torch_npu": "2.7.1"})
    assert found.status == "fail"
    assert "vllm-ascend v0.11.0 row wants torch_npu 2.7.1.post1, found 2.7.1" in found.summary
    assert "torch_npu 2.7.1.post1" in found.remedy
    assert found.rules == ("vllm-ascend-row",)


def test_unknown_vllm_ascend_warns(fake_root: FakeRoot) -> None:
    install_stack(fake_root)
    found = run(fake_root, {**HEALTHY_PACKAGES, "vllm_ascend": "0.99.0"})
    assert found.status == "warn"
    assert "vllm-ascend 0.99.0 is not in the compatibility data" in found.summary
    assert found.rules == ("not-in-the-data",)


def test_mindie_of_another_cann_fails(fake_root: FakeRoot) -> None:
    install_stack(fake_root)
    fake_root.file(MINDIE_FILE, "Ascend-mindie : MindIE 2.1.RC2.B080\nPlatform : aarch64\n")
    found = run(fake_root, HEALTHY_PACKAGES)
    assert found.status == "fail"
    assert "MindIE 2.1.RC2 row wants CANN 8.2.RC2, found CANN 8.3.RC2" in found.summary
    assert found.rules == ("mindie-cann",)


def test_unknown_mindie_warns(fake_root: FakeRoot) -> None:
    install_stack(fake_root)
    fake_root.file(MINDIE_FILE, "Ascend-mindie : MindIE 9.9.0\n")
    found = run(fake_root, HEALTHY_PACKAGES)
    assert found.status == "warn"
    assert "MindIE 9.9.0 is not in the compatibility data" in found.summary
    assert found.rules == ("not-in-the-data",)


def test_python_error_judges_files_only(fake_root: FakeRoot) -> None:
    install_stack(fake_root, nnal="8.2.RC1")
    found = run(fake_root, python=False)  # under a root without --python: an error
    assert found.status == "fail"
    assert "NNAL/ATB 8.2.RC1" in found.summary
    assert "torch_npu not judged: the packages of the --python interpreter could not be " \
        "read" in found.summary
    assert any("python packages" in e and "not read" in e for e in found.evidence)
    assert found.rules == ("interpreter-not-judged", "nnal-equals-cann")


def test_partial_stack_says_what_was_not_found(fake_root: FakeRoot) -> None:
    fake_root.file(TOOLKIT_FILE, corpus("021"))
    found = run(fake_root, {"torch": "2.7.1"})
    assert found.status == "warn"  # no torch_npu in the judged interpreter: never a pass
    assert found.summary == ("no torch_npu in /usr/bin/python3: torch_npu and its CANN "
                             "pairing not judged")
    assert any(e.startswith("driver: not found") for e in found.evidence)
    assert any(e.startswith("NNAL/ATB: not found") for e in found.evidence)
    assert found.rules == ("interpreter-not-judged",)


def test_unparsable_version_file_warns(fake_root: FakeRoot) -> None:
    install_stack(fake_root)
    fake_root.file(FIRMWARE_FILE, "\x00\x01 not a version file\n")
    found = run(fake_root, HEALTHY_PACKAGES)
    assert found.status == "warn"
    assert found.summary.startswith(f"firmware version file unusable: {FIRMWARE_FILE}: parse:")
    assert found.rules == ("version-file-unusable",)


def test_nothing_installed_skips(fake_root: FakeRoot) -> None:
    found = run(fake_root, {"torch": "2.7.1"})  # torch alone is not an Ascend stack
    assert found.status == "skip"
    assert "no Ascend driver, CANN toolkit or torch_npu" in found.summary
    assert found.rules == ("nothing-installed",)


def test_runs_through_the_registry(fake_root: FakeRoot) -> None:
    install_stack(fake_root, nnal="8.2.RC1")
    checks = select(all_checks(), ["versions.parity"], [])
    report = run_checks(checks, context(fake_root, HEALTHY_PACKAGES))
    (result,) = report.results
    assert result.id == "versions.parity"
    assert result.status == "fail"
    assert result.rules == ("nnal-equals-cann",)


# --- issue #11: the CANN->HDK table, derived rules, vendor pairings ---------------------------


def driver_info(version: str, families: str | None) -> str:
    """A driver version.info; `families` None leaves compatible_version out."""
    lines = [f"Version={version}", "ascendhal_version=7.35.23", "Innerversion=V100R001C25B100"]
    if families is not None:
        lines.append(f"compatible_version={families}")
    return "\n".join(lines) + "\n"


def mindie_info(version: str) -> str:
    return f"Ascend-mindie : MindIE {version}\nPlatform : aarch64\n"


def test_cann_85_on_driver_23_fails_by_the_hdk_table(fake_root: FakeRoot) -> None:
    install_stack(fake_root, toolkit=corpus("019"), nnal="8.5.0")  # driver 23.0.7 (corpus)
    found = run(fake_root, {"torch": "2.9.0", "torch_npu": "2.9.0"})
    assert found.status == "fail"
    assert "driver 23.0.7 is not an HDK release declared for CANN 8.5.0 (25.5.X, 25.3.X, " \
        "25.2.X, 25.0.X" in found.summary
    assert "HDK release the CANN release notes list for CANN 8.5.0" in found.remedy
    # corpus 033's compatible_version lists no C25 family either (a derived warning)
    assert found.rules == ("driver-hdk-table", "innerversion-family")


def test_driver_in_the_hdk_table_passes_without_compatible_version(fake_root: FakeRoot) -> None:
    install_stack(fake_root, toolkit=corpus("019"), nnal="8.5.0",
                  driver=driver_info("25.5.1", None), firmware="")
    found = run(fake_root, {"torch": "2.9.0", "torch_npu": "2.9.0"})
    assert found.status == "pass", found
    assert "ok: driver 25.5.1 is an HDK 25.5.X release declared for CANN 8.5.0" in found.evidence


def test_cann_851_borrows_the_850_hdk_list(fake_root: FakeRoot) -> None:
    install_stack(fake_root, toolkit=toolkit_info("8.5.1", "V100R001C25SPC002B100"),
                  nnal="8.5.1", driver=driver_info("23.0.7", None), firmware="")
    found = run(fake_root, {"torch": "2.9.0", "torch_npu": "2.9.0"})
    assert found.status == "fail"
    assert "driver 23.0.7 is not an HDK release declared for CANN 8.5.1" in found.summary
    assert found.rules == ("driver-hdk-table",)


def test_driver_without_compatible_version_and_no_table_row_still_gets_a_verdict(
        fake_root: FakeRoot) -> None:
    install_stack(fake_root, driver=driver_info("25.0.rc1.1", None), firmware="")  # 8.3.RC2
    found = run(fake_root, HEALTHY_PACKAGES)
    assert found.status == "warn"
    assert "driver 25.0.rc1.1 with CANN 8.3.RC2 not judged" in found.summary
    assert "no compatible_version" in found.summary
    assert found.rules == ("not-in-the-data",)


@pytest.mark.parametrize(("driver", "status", "words"), [
    ("25.5.1", "warn", "driver 25.5.1 is not an HDK paired with CANN 9.1.0"),
    ("25.7.rc1", "pass", "ok: driver 25.7.rc1 is an HDK 25.7.RC1 release paired with CANN "
                         "9.1.0 on Atlas 350"),
])
def test_hdk_pairings_known_for_some_products(fake_root: FakeRoot, driver: str, status: str,
                                              words: str) -> None:
    install_stack(fake_root, toolkit=toolkit_info("9.1.0", "V100R001C11SPC001B243"),
                  nnal="9.1.0", driver=driver_info(driver, None), firmware="")
    found = run(fake_root, {"torch": "2.10.0", "torch_npu": "2.10.0.post4"})
    assert found.status == status, found
    assert words in "\n".join([found.summary, *found.evidence])
    assert found.rules == (("driver-hdk-table",) if status == "warn" else ())


def test_mindie_300_torch_npu_730_and_cann_851_pass(fake_root: FakeRoot) -> None:
    install_stack(fake_root, toolkit=toolkit_info("8.5.1", "V100R001C25SPC002B100"),
                  nnal="8.5.1", driver=driver_info("25.5.1", "[V100R001C25]"), firmware="")
    fake_root.file(MINDIE_FILE, mindie_info("3.0.0"))
    found = run(fake_root, {"torch": "2.6.0", "torch_npu": "2.6.0.post5"})
    assert found.status == "pass", found
    assert ("ok: torch_npu 2.6.0.post5 (Ascend Extension for PyTorch 7.3.0) pairs with CANN "
            "8.5.1 (MindIE 3.0.0 release row)") in found.evidence
    assert "ok: MindIE 3.0.0 pairs with CANN 8.5.1" in found.evidence


def test_newer_cann_in_the_declared_range_says_newer(fake_root: FakeRoot) -> None:
    # torch_npu 2.1.0.post13 is v2.1.0-7.1.0 (built with 8.2.RC1); 7.1.0 declares 8.3.RC1
    install_stack(fake_root, toolkit=toolkit_info("8.3.RC1", "V100R001C23SPC001B100"),
                  nnal="8.3.RC1")
    found = run(fake_root, {"torch": "2.1.0", "torch_npu": "2.1.0.post13"})
    assert found.status == "warn"
    assert "newer but declared compatible with Ascend Extension for PyTorch 7.1.0" in \
        found.summary
    assert "older" not in found.summary
    assert found.rules == ("torch-npu-cann",)


def test_pair_outside_every_vllm_row_is_not_a_tested_pairing(fake_root: FakeRoot) -> None:
    # torch_npu 2.7.1.post1 appears only in vllm-ascend rows, tested with CANN 8.3.RC2
    install_stack(fake_root, toolkit=toolkit_info("8.3.RC1", "V100R001C23SPC001B100"),
                  nnal="8.3.RC1")
    found = run(fake_root, {"torch": "2.7.1", "torch_npu": "2.7.1.post1"})
    assert found.status == "warn"
    assert found.summary == ("torch_npu 2.7.1.post1 with CANN 8.3.RC1 is not a tested pairing "
                             "(torch_npu 2.7.1.post1 is tested by vllm-ascend with CANN 8.3.RC2)")
    assert found.rules == ("torch-npu-cann",)


@pytest.mark.parametrize(("driver", "entry", "matches"), [
    ("25.5.1", "25.5.X", True), ("25.5.1.2", "25.5.1", True), ("25.5.1.b010", "25.5.1", True),
    ("26.0.rc1.1", "26.0.RC1", True), ("25.5.10", "25.5.1", False), ("25.3.0", "25.5.X", False),
    ("25", "25.5.X", False),
])
def test_hdk_entries_match_patches_and_builds(driver: str, entry: str, matches: bool) -> None:
    from checks.builtin.compat import hdk_matches

    assert hdk_matches(driver, entry) is matches


@pytest.mark.parametrize("row", compat_data().torch_npu_rows, ids=lambda r: str(r["torch_npu"]))
def test_compat_rows_parse(row: dict[str, str]) -> None:
    from probes.versions import parse_version, torch_base

    assert torch_base(parse_version(str(row["torch_npu"]))) == str(row["torch"])
    parse_version(str(row["cann"]))


# -- HDK tables read as their sources state them ------------------------------------------


@pytest.mark.parametrize(("driver", "status"), [("24.1.rc2", "pass"), ("24.1.0", "pass"),
                                                ("23.0.7", "fail")])
def test_cann_80rc1_declares_a_minimum_hdk(fake_root: FakeRoot, driver: str,
                                           status: str) -> None:
    """Its source says HDK >= 24.1.RC1: 24.1.RC2 is not "undeclared" (the healthy twin of a
    23.0.x driver, which is older than the minimum)."""
    install_stack(fake_root, toolkit=toolkit_info("8.0.RC1", "V100R001C17SPC001B100"),
                  nnal="8.0.RC1", driver=driver_info(driver, None), firmware="")
    found = run(fake_root, {"torch": "2.1.0", "torch_npu": "2.1.0.post4"})
    text = "\n".join([found.summary, *found.evidence])
    if status == "pass":
        assert f"ok: driver {driver} is at or above HDK 24.1.RC1, the minimum declared for " \
            "CANN 8.0.RC1" in text
        assert "driver-hdk-table" not in found.rules
    else:
        assert found.status == "fail" and found.rules == ("driver-hdk-table",)
        assert "older than HDK 24.1.RC1, the minimum declared for CANN 8.0.RC1" in text


@pytest.mark.parametrize(("families", "status"), [("[V100R001C29],[V100R001C30]", "warn"),
                                                  ("[V100R001C29]", "fail")])
def test_a_newer_driver_declaring_the_toolkits_family_warns(fake_root: FakeRoot, families: str,
                                                            status: str) -> None:
    """CANN 9.0.0 declares HDK 26.0.RC1/25.5.2/25.5.1; a later 26.1.0 driver whose
    compatible_version names the toolkit's C30 family warns, and without it fails."""
    install_stack(fake_root, toolkit=toolkit_info("9.0.0", "V100R001C30SPC001B100"),
                  nnal="9.0.0", firmware="", driver=driver_info("26.1.0", families))
    found = run(fake_root, {"torch": "2.9.0", "torch_npu": "2.9.0.post2"})
    assert found.status == status, found
    assert "driver-hdk-table" in found.rules
    if status == "warn":
        assert found.rules == ("driver-hdk-table",)
        assert "newer than the HDKs declared for CANN 9.0.0" in found.summary


@pytest.mark.parametrize(("driver", "status"), [("24.1.rc2", "pass"), ("24.1.rc1", "warn")])
def test_the_install_helpers_pair_is_a_warning_level(fake_root: FakeRoot, driver: str,
                                                     status: str) -> None:
    install_stack(fake_root, toolkit=toolkit_info("8.0.0", "V100R001C20SPC001B100"),
                  nnal="8.0.0", driver=driver_info(driver, None), firmware="")
    found = run(fake_root, {"torch": "2.4.0", "torch_npu": "2.4.0.post2"})
    assert found.status == status, found
    if status == "warn":
        assert found.rules == ("recommended-pair",)
        assert "not the HDK 24.1.rc2 the Ascend install helper pairs with CANN 8.0.0" \
            in found.summary
    else:
        assert "ok: driver 24.1.rc2 is the HDK 24.1.rc2 the Ascend install helper pairs with " \
            "CANN 8.0.0" in found.evidence


# -- the toolchain beside CANN: NNAL, Triton-Ascend, the ATB ABI variant ----------------------


def context_with(root: FakeRoot, packages: dict[str, str], model: str | None = None,
                 env: dict[str, str] | None = None) -> Context:
    """context() with a model directory inside the root and more environment."""
    ctx = context(root, packages)
    host = LiveHost(root=str(root.path), env={**ctx.host.env, **(env or {})}, python=PYTHON)
    return Context(host, load_policy(), model_dir=Path(model) if model else None)


def test_vllm_ascend_without_nnal_fails(fake_root: FakeRoot) -> None:
    """vllm-project/vllm-ascend#152, #10525: libatb.so not found, NNAL never installed."""
    install_stack(fake_root, nnal=None)
    found = run(fake_root, HEALTHY_PACKAGES)
    assert found.status == "fail", found
    assert "nnal-required" in found.rules
    assert "no NNAL/ATB installed beside vllm-ascend" in found.summary


def test_torch_npu_alone_does_not_need_nnal(fake_root: FakeRoot) -> None:
    install_stack(fake_root, nnal=None)
    found = run(fake_root, {"torch": "2.7.1", "torch_npu": "2.7.1.post1"})
    assert "nnal-required" not in found.rules


@pytest.mark.parametrize(("model_type", "triton", "rule"), [
    ("qwen3_next", None, True),  # vllm-project/vllm-ascend#3212: No module named 'triton'
    ("qwen3_next", "3.2.1", False),
    ("qwen3_moe", None, False),  # no Gated DeltaNet layers: nothing to require
])
def test_triton_ascend_for_gated_deltanet_models(fake_root: FakeRoot, model_type: str,
                                                  triton: str | None, rule: bool) -> None:
    install_stack(fake_root)
    fake_root.file("/models/m/config.json", f'{{"model_type": "{model_type}"}}')
    packages = {**HEALTHY_PACKAGES, **({"triton-ascend": triton} if triton else {})}
    found = versions_parity(context_with(fake_root, packages, model="/models/m"))
    assert ("triton-ascend-required" in found.rules) is rule, found
    if rule:
        assert f"no triton-ascend in {PYTHON} for a qwen3_next model" in found.summary
    elif triton:
        assert "ok: triton-ascend 3.2.1 installed for the qwen3_next model" in found.evidence


def test_without_a_model_triton_ascend_is_only_reported(fake_root: FakeRoot) -> None:
    install_stack(fake_root)
    found = run(fake_root, HEALTHY_PACKAGES)
    assert "triton-ascend-required" not in found.rules
    assert any(line.startswith("triton-ascend not installed (needed for Qwen3-Next")
               for line in found.evidence)


@pytest.mark.parametrize(("atb_abi", "torch_abi", "status"), [
    ("0", "1", "fail"), ("1", "1", "pass"), ("0", None, "unknown")])
def test_atb_variant_against_torchs_abi(fake_root: FakeRoot, tmp_path: Path, atb_abi: str,
                                        torch_abi: str | None, status: str) -> None:
    install_stack(fake_root)
    home = f"{ASCEND}/nnal/atb/latest/atb/cxx_abi_{atb_abi}"
    ctx = context_with(fake_root, HEALTHY_PACKAGES, env={"ATB_HOME_PATH": home})
    site = str(fake_root.path.parent / "site")
    cmake = "# FindTorch\n" + (f'set(TORCH_CXX_FLAGS "-D_GLIBCXX_USE_CXX11_ABI={torch_abi}")\n'
                               if torch_abi else "")
    fake_root.file(f"{site}/torch/share/cmake/Torch/TorchConfig.cmake", cmake)
    found = versions_parity(ctx)
    text = "\n".join([found.summary, *found.evidence])
    if status == "fail":
        assert "atb-abi" in found.rules
        assert f"ATB_HOME_PATH={home} is the cxx_abi_0 build but torch was built with " \
            "_GLIBCXX_USE_CXX11_ABI=1" in found.summary
        assert "--cxx_abi=1" in found.remedy
    elif status == "pass":
        assert "ok: ATB variant cxx_abi_1 matches torch's C++ ABI" in text
    else:
        assert "atb-abi" not in found.rules
        assert "torch's C++ ABI not readable" in text


@pytest.mark.parametrize("bisheng", [True, False])
def test_bisheng_beside_a_pre_85_toolkit_for_triton_models(fake_root: FakeRoot,
                                                           bisheng: bool) -> None:
    """The vllm-ascend Qwen3-Next tutorial sources <toolkit>/bisheng_toolkit/set_env.sh before
    Triton-Ascend can compile its kernels (CANN 8.3.RC2 here)."""
    install_stack(fake_root)
    if bisheng:
        fake_root.file(f"{ASCEND}/ascend-toolkit/latest/bisheng_toolkit/set_env.sh", "\n")
    fake_root.file("/models/m/config.json", '{"model_type": "qwen3_next"}')
    found = versions_parity(context_with(fake_root, {**HEALTHY_PACKAGES,
                                                     "triton-ascend": "3.2.0"}, model="/models/m"))
    where = f"{ASCEND}/ascend-toolkit/latest/bisheng_toolkit"
    if bisheng:
        assert f"ok: BiSheng toolkit at {where}" in found.evidence
        assert "bisheng-not-found" not in found.rules
    else:
        assert "bisheng-not-found" in found.rules
        assert f"no BiSheng toolkit at {where}" in found.summary


@pytest.mark.parametrize(("installed", "status"), [("24.1.rc1", "pass"), ("25.0.rc1.1", "warn")])
def test_the_loaded_driver_against_the_installed_one(fake_root: FakeRoot, installed: str,
                                                     status: str) -> None:
    """npu-smi's title reports the running driver (24.1.rc1.b030 here); version.info the
    installed files: an upgrade not yet rebooted shows as the two disagreeing."""
    from probes.inventory import parse_output

    install_stack(fake_root, driver=driver_info(installed, None), firmware="")
    ctx = context_with(fake_root, HEALTHY_PACKAGES)
    reading = parse_output(next(CORPUS.glob("048-*")).read_text())
    ctx.fact("npu", lambda: reading)
    found = versions_parity(ctx)
    if status == "pass":
        assert "ok: npu-smi reports driver 24.1.rc1.b030, as driver/version.info says" \
            in found.evidence
        assert "loaded-driver" not in found.rules
    else:
        assert "loaded-driver" in found.rules
        assert "npu-smi reports driver 24.1.rc1.b030 but driver/version.info says 25.0.rc1.1" \
            in found.summary


@pytest.mark.parametrize(("soc", "status"), [("ascend910b1", "pass"),
                                             ("ascend910_9391", "fail")])
def test_the_soc_vllm_ascend_was_built_for(fake_root: FakeRoot, soc: str, status: str) -> None:
    """An A3 image on an A2 machine: vllm_ascend/_build_info.py names the SOC_VERSION of the
    build; npu-smi shows 910B4 (A2) chips."""
    from probes.host import PythonEnvironment
    from probes.inventory import parse_output

    install_stack(fake_root)
    site = fake_root.path.parent / "built-site"
    fake_root.file(f"{site}/vllm_ascend/_build_info.py", f"__soc_version__ = '{soc}'\n")
    ctx = context_with(fake_root, HEALTHY_PACKAGES)
    real = ctx.host.python_packages()
    env = PythonEnvironment(real.interpreter, real.python_version, real.packages,
                            locations={**real.locations, "vllm-ascend": str(site)})
    ctx.fact("python", lambda: env)
    reading = parse_output(next(CORPUS.glob("014-*")).read_text())
    ctx.fact("npu", lambda: reading)
    found = versions_parity(ctx)
    if status == "pass":
        assert f"ok: vllm-ascend was built for {soc}, the A2 chips here" in found.evidence
    else:
        assert "soc-build" in found.rules
        assert f"vllm-ascend was built for SOC_VERSION {soc} (A3) but the chips here are A2" \
            in found.summary


@pytest.mark.parametrize(("kernels", "status"), [("8.1.RC1", "pass"), ("8.0.0", "warn")])
def test_operator_kernels_of_the_toolkits_release(fake_root: FakeRoot, kernels: str,
                                                  status: str) -> None:
    cfg = next(CORPUS.glob("045-*")).read_text().replace(
        "opp_kernel_running_version=[7.7.T20.0.B210:8.1.RC1]",
        f"opp_kernel_running_version=[7.7.T20.0.B210:{kernels}]")
    install_stack(fake_root, toolkit=toolkit_info("8.1.RC1", "V100R001C21SPC001B238"),
                  nnal="8.1.RC1")
    fake_root.file(f"{ASCEND}/ascend-toolkit/latest/version.cfg", cfg)
    found = run(fake_root, {"torch": "2.5.1", "torch_npu": "2.5.1"})
    if status == "pass":
        assert "ok: operator kernels 8.1.RC1 are the toolkit's release" in found.evidence
        assert "kernels-toolkit" not in found.rules
    else:
        assert "kernels-toolkit" in found.rules
        assert "operator kernels package 8.0.0 is not the toolkit's release 8.1.RC1" \
            in found.summary


def test_a_driver_community_reports_show_with_the_cann_is_not_held_to_the_helper(
        fake_root: FakeRoot) -> None:
    """CANN 8.2.RC1 with HDK 25.2.0 (what ascend-deployer installs with it) is not "not the
    recommended pair": the helper's 25.0.rc1 is one choice, not the only one."""
    install_stack(fake_root, toolkit=toolkit_info("8.2.RC1", "V100R001C22SPC001B100"),
                  nnal="8.2.RC1", driver=driver_info("25.2.0", None), firmware="")
    found = run(fake_root, {"torch": "2.5.1", "torch_npu": "2.5.1.post1"})
    assert "recommended-pair" not in found.rules, found
    assert any("25.2.0 release seen (community reports) with CANN 8.2.RC1" in line
               for line in found.evidence)


def test_cann_81rc1_with_the_hdk_its_deployer_installs(fake_root: FakeRoot) -> None:
    install_stack(fake_root, toolkit=toolkit_info("8.1.RC1", "V100R001C21SPC001B238"),
                  nnal="8.1.RC1", driver=driver_info("25.0.rc1", None), firmware="")
    found = run(fake_root, {"torch": "2.5.1", "torch_npu": "2.5.1"})
    assert "recommended-pair" not in found.rules and "driver-hdk-table" not in found.rules
