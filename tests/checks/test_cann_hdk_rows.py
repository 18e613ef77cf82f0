"""The CANN -> Ascend HDK rows of checks/data/compat.yaml as versions.parity judges them: a
driver the CANN release notes declare passes, one they do not declare fails, and a newer one
whose compatible_version names the toolkit's family warns (the rules of the existing rows).

CANN 9.0.1 (the CANN of vLLM-Ascend v0.23.0rc1 and MindIE 3.1.0) declares HDK 26.0.RC3, 25.5.5,
26.0.RC1, 25.5.2 and 25.5.1 (hicann/release-management 9.0.1/release-notes.md).
"""

from __future__ import annotations

import pytest
from conftest import FakeRoot
from test_versions_check import driver_info, install_stack, run, toolkit_info

from checks.builtin.compat import hdk_row

PACKAGES = {"torch": "2.10.0", "torch_npu": "2.10.0.post2"}  # vLLM-Ascend v0.23.0rc1's row
TOOLKIT = toolkit_info("9.0.1", "V100R001C30SPC101B100")


def test_the_9_0_1_row_is_the_release_notes_list() -> None:
    row = hdk_row("9.0.1")
    assert row is not None and row.kind == "complete"
    assert [h for h, _ in row.entries] == ["26.0.RC3", "25.5.5", "26.0.RC1", "25.5.2", "25.5.1"]
    assert "9.0.1/release-notes.md" in row.source


@pytest.mark.parametrize("driver", ["26.0.rc3", "25.5.5", "25.5.2.1"])
def test_a_driver_the_9_0_1_notes_declare_passes(fake_root: FakeRoot, driver: str) -> None:
    install_stack(fake_root, toolkit=TOOLKIT, nnal="9.0.1", firmware="",
                  driver=driver_info(driver, None))
    found = run(fake_root, PACKAGES)
    assert "driver-hdk-table" not in found.rules, found
    assert any(e.startswith(f"ok: driver {driver} is an HDK ") and
               e.endswith("release declared for CANN 9.0.1") for e in found.evidence)


def test_an_older_driver_the_notes_do_not_declare_fails(fake_root: FakeRoot) -> None:
    """vLLM-Ascend v0.23.0rc1's CANN on a host left at HDK 25.3.RC1."""
    install_stack(fake_root, toolkit=TOOLKIT, nnal="9.0.1", firmware="",
                  driver=driver_info("25.3.rc1", "[V100R001C30]"))
    found = run(fake_root, PACKAGES)
    assert found.status == "fail" and "driver-hdk-table" in found.rules
    assert "driver 25.3.rc1 is not an HDK release declared for CANN 9.0.1 (26.0.RC3, 25.5.5, " \
        "26.0.RC1, 25.5.2, 25.5.1; hicann/release-management 9.0.1/release-notes.md" \
        in found.summary


@pytest.mark.parametrize(("families", "status"), [("[V100R001C30]", "warn"),
                                                  ("[V100R001C29]", "fail")])
def test_a_newer_driver_warns_only_when_it_names_the_toolkits_family(
        fake_root: FakeRoot, families: str, status: str) -> None:
    install_stack(fake_root, toolkit=TOOLKIT, nnal="9.0.1", firmware="",
                  driver=driver_info("26.1.0", families))
    found = run(fake_root, PACKAGES)
    assert found.status == status, found
    assert "driver-hdk-table" in found.rules
