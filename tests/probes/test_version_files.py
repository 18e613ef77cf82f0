from __future__ import annotations

import pytest

from probes.errors import ParseError
from probes.version_files import (
    DriverVersionInfo,
    FirmwareVersionInfo,
    PackageRequirement,
    driver_accepted_by_firmware,
    firmware_in_driver_range,
    innerversion_family,
    parse_ascend_install_info,
    parse_driver_version_info,
    parse_firmware_version_info,
    parse_install_info,
    parse_mindie_version_info,
    parse_nnal_version_info,
    parse_pip_packages,
    parse_version_cfg,
    requirement_satisfied,
)
from probes.versions import parse_version
from tests.npu_smi_fixtures import npu_smi_sample


def split_sample_035() -> tuple[str, str]:
    """Sample 035 holds two files, each introduced by a `# cat <path>` comment line."""
    chunks: list[list[str]] = []
    for line in npu_smi_sample("035").splitlines():
        if line.startswith("#"):
            chunks.append([])
        elif chunks:
            chunks[-1].append(line)
    toolkit, nnae = ("\n".join(c) for c in chunks)
    return toolkit, nnae


# --- driver -----------------------------------------------------------------------------


def test_driver_033() -> None:
    info = parse_driver_version_info(npu_smi_sample("033"))
    assert info.version == "23.0.7"
    assert info.package_version == "23.0.7"
    assert info.innerversion == "V100R001C15SPC012B220"
    assert info.compatible_families == ("V100R001C29", "V100R001C30", "V100R001C13", "V100R001C15")
    assert info.compatible_fw_ranges == (("7.0.0", "7.1.99"),)
    assert info.components["ascendhal_version"] == "7.35.19"
    assert info.components["tsfw_version"] == "1.0"
    assert info.warnings == ()
    assert info.parsed == parse_version("23.0.7")


def test_driver_040_without_package_version() -> None:
    info = parse_driver_version_info(npu_smi_sample("040"))
    assert info.package_version is None
    assert info.driver_version == "24.1.rc1"
    assert info.compatible_fw_ranges == (("7.0.0", "7.2.99"),)
    assert info.compatible_families[-1] == "V100R001C17"


def test_driver_keys_case_insensitive_unknown_kept_and_bad_lines_warned() -> None:
    text = (
        "VERSION=25.0.rc1.1\nINNERVERSION=V100R001C21SPC002B220\nPackage_Version=25.0.rc1.1\n"
        "compatible_version_fw=[6.4.0,6.4.99],[7.0.0,7.7.99]\nbuild_time=2025\ngarbage line\n"
    )
    info = parse_driver_version_info(text)
    assert info.version == "25.0.rc1.1"
    assert info.innerversion == "V100R001C21SPC002B220"
    assert info.compatible_fw_ranges == (("6.4.0", "6.4.99"), ("7.0.0", "7.7.99"))
    assert info.extra == {"build_time": "2025"}
    assert len(info.warnings) == 1
    assert "line 6" in info.warnings[0]


@pytest.mark.parametrize("text", ["", "hello world\n", "foo=bar\n", npu_smi_sample("014")])
def test_driver_rejects_unrecognisable(text: str) -> None:
    with pytest.raises(ParseError):
        parse_driver_version_info(text)


# --- firmware ---------------------------------------------------------------------------


def test_firmware_034() -> None:
    info = parse_firmware_version_info(npu_smi_sample("034"))
    assert info.version == "7.1.0.11.220"
    assert info.firmware_version == "1.0"
    assert info.package_version == "23.0.7"
    assert info.compatible_drv == (("23.0.rc3", "23.0.rc3."), ("23.0.0", "23.0.0."))
    assert info.parsed == parse_version("7.1.0.11.220")


def test_firmware_rejects_unrecognisable() -> None:
    with pytest.raises(ParseError):
        parse_firmware_version_info("nothing here\n")


def test_firmware_in_driver_range_corpus_pair() -> None:
    driver = parse_driver_version_info(npu_smi_sample("033"))
    firmware = parse_firmware_version_info(npu_smi_sample("034"))
    assert firmware_in_driver_range("7.1.0.11.220", driver) is True
    assert firmware_in_driver_range(parse_version("7.1.0.11.220"), driver) is True
    assert firmware_in_driver_range("7.3.0.1.231", driver) is False
    assert firmware_in_driver_range("6.4.0.4.220", driver) is False
    assert driver_accepted_by_firmware(driver.driver_version or "", firmware) is True


def test_firmware_range_multiple_ranges_and_absent() -> None:
    driver = DriverVersionInfo(compatible_fw_ranges=(("6.4.0", "6.4.99"), ("7.0.0", "7.7.99")))
    assert firmware_in_driver_range("6.4.0.4.220", driver) is True
    assert firmware_in_driver_range("7.7.0.1.231", driver) is True
    assert firmware_in_driver_range("7.8.0.6.201", driver) is False
    assert firmware_in_driver_range("7.1.0", DriverVersionInfo()) is None
    assert firmware_in_driver_range("not a version", driver) is None


def test_driver_accepted_by_firmware_prefixes() -> None:
    fw = FirmwareVersionInfo(
        compatible_drv=(("23.0.rc3", "23.0.rc3."), ("23.0.0", "23.0.0."), ("24.1", "24.1."),
                        ("25.0", "25.0."))
    )
    assert driver_accepted_by_firmware("23.0.rc3", fw) is True
    assert driver_accepted_by_firmware("23.0.RC3.2", fw) is True  # case-insensitive
    assert driver_accepted_by_firmware("23.0.0", fw) is True
    assert driver_accepted_by_firmware("23.0.3", fw) is True  # final patch of the 23.0.0 line
    assert driver_accepted_by_firmware("24.1.rc2", fw) is True
    assert driver_accepted_by_firmware("25.0.rc1.1", fw) is True
    assert driver_accepted_by_firmware(parse_version("25.0.RC1.1"), fw) is True
    assert driver_accepted_by_firmware("23.0.rc2", fw) is False
    assert driver_accepted_by_firmware("25.5.0", fw) is False
    assert driver_accepted_by_firmware("24.10.0", fw) is False
    assert driver_accepted_by_firmware("23.0.1", FirmwareVersionInfo()) is None


# --- install.info -----------------------------------------------------------------------


def test_toolkit_install_info_019_and_021() -> None:
    new = parse_install_info(npu_smi_sample("019"))
    assert new.package_name == "Ascend-cann-toolkit"
    assert new.version == "8.5.0"
    assert new.innerversion == "V100R001C25B048"
    assert new.family == "V100R001C25"
    assert new.arch == "aarch64"
    assert new.os == "linux"
    assert new.path == "/usr/local/Ascend/ascend-toolkit/8.5.0/aarch64-linux"
    assert new.compatible_families[-1] == "V100R001C23"
    old = parse_install_info(npu_smi_sample("021"))
    assert old.version == "8.3.RC2"
    assert old.family == "V100R001C23"
    assert old.parsed is not None
    assert old.parsed < new.parsed  # type: ignore[operator]


def test_install_info_035_two_files() -> None:
    toolkit_text, nnae_text = split_sample_035()
    toolkit = parse_install_info(toolkit_text)
    assert toolkit.version == "7.0.T10"
    assert toolkit.family == "V100R001C13"
    nnae = parse_install_info(nnae_text, "ascend_nnae_install.info")
    assert nnae.package_name == "Ascend-cann-nnae"
    assert nnae.version == "8.0.RC3"
    assert nnae.arch == "x86_64"
    assert nnae.compatible_groups == (("V100R001C13", "V100R001C19"), ("V100R001C30",))
    assert nnae.compatible_families == ("V100R001C13", "V100R001C19", "V100R001C30")
    # the comment lines of the whole sample are skipped, not counted as malformed
    assert parse_install_info(npu_smi_sample("035")).warnings == ()


def test_install_info_rejects_unrecognisable() -> None:
    with pytest.raises(ParseError):
        parse_install_info("x=1\ny=2\n")


@pytest.mark.parametrize(
    ("inner", "family"),
    [("V100R001C21SPC001B238", "V100R001C21"), ("V100R001C25B048", "V100R001C25"),
     ("v100r001c13b222", "V100R001C13"), ("8.0.RC1", None), ("", None)],
)
def test_innerversion_family(inner: str, family: str | None) -> None:
    assert innerversion_family(inner) == family


def test_ascend_install_info() -> None:
    text = (
        "UserName=HwHiAiUser\nUserGroup=HwHiAiUser\nDriver_Install_Type=full\n"
        "Driver_Install_Path_Param=/opt/Ascend\nFirmware_Install_Path_Param=/opt/Ascend\n"
    )
    info = parse_ascend_install_info(text)
    assert info.driver_install_path == "/opt/Ascend"
    assert info.firmware_install_path == "/opt/Ascend"
    assert info.extra["username"] == "HwHiAiUser"
    with pytest.raises(ParseError):
        parse_ascend_install_info("\n\n")


# --- version.cfg ------------------------------------------------------------------------


def test_version_cfg_045() -> None:
    cfg = parse_version_cfg(npu_smi_sample("045"))
    assert cfg.running["toolkit"].version == "8.1.RC1"
    assert cfg.running["toolkit"].inner == "7.7.T20.0.B210"
    assert cfg.running["opp_kernel"].version == "8.1.RC1"
    assert cfg.upgrade["runtime"].inner == "7.7.T20.0.B210"
    assert cfg.running_version == "8.1.RC1"
    kernel = cfg.installed["opp_kernel"]
    assert [b.version for b in kernel] == ["8.1.T6", "8.1.RC1", "8.1.RC1"]
    assert kernel[1].inner == "7.7.T12.0.B078"
    assert len(cfg.installed["runtime"]) == 2
    assert cfg.warnings == ()


def test_version_cfg_bad_and_unknown_lines() -> None:
    cfg = parse_version_cfg(
        "runtime_running_version=[7.3.0.1.231:8.0.RC2]\nhccl_running_version=[broken]\nfoo=bar\n"
    )
    assert cfg.running_version == "8.0.RC2"
    assert cfg.extra == {"foo": "bar"}
    assert len(cfg.warnings) == 1
    with pytest.raises(ParseError):
        parse_version_cfg("foo=bar\n")


# --- NNAL / ATB -------------------------------------------------------------------------


def test_nnal_installed_shape() -> None:
    text = (
        "Ascend-cann-atb : 8.2.RC2\nAscend-cann-atb Version : 8.2.RC2.B030\n"
        "Platform : aarch64\nbranch :\ncommit id : 1a2b3c\n"
    )
    info = parse_nnal_version_info(text)
    assert info.shape == "installed"
    assert info.package == "ascend-cann-atb"
    assert info.version == "8.2.RC2"
    assert info.full_version == "8.2.RC2.B030"
    assert info.platform == "aarch64"
    assert info.branch is None
    assert info.commit_id == "1a2b3c"
    assert info.parsed == parse_version("8.2.rc2")


def test_nnal_dev_build_shape() -> None:
    text = "Ascend-cann-atb : 8.0.T63\nAscend-cann-atb Version : 8.0.T63.B020\n"
    info = parse_nnal_version_info(text)
    assert info.version == "8.0.T63"
    assert info.full_version == "8.0.T63.B020"


def test_nnal_source_shape_with_requirements() -> None:
    text = (
        'Version=8.5.0\nrequired_package_toolkit_version>="8.2"\n'
        'required_package_hccl_version>="8.2"\nrequired_package_runtime_version="8.5"\n'
    )
    info = parse_nnal_version_info(text)
    assert info.shape == "source"
    assert info.version == "8.5.0"
    assert info.requirements[0] == PackageRequirement("toolkit", ">=", "8.2")
    assert [r.package for r in info.requirements] == ["toolkit", "hccl", "runtime"]
    assert info.requirements[2].op == "="
    with pytest.raises(ParseError):
        parse_nnal_version_info("   \n# only a comment\n")


@pytest.mark.parametrize(
    ("req", "installed", "ok"),
    [
        (PackageRequirement("toolkit", ">=", "8.2"), "8.2.RC1", False),  # RC precedes 8.2.0
        (PackageRequirement("toolkit", ">=", "8.2"), "8.3.RC1", True),
        (PackageRequirement("toolkit", ">=", "8.2"), "8.1.RC1", False),
        (PackageRequirement("toolkit", "=", "8.2"), "8.2.RC1", True),
        (PackageRequirement("toolkit", "=", "8.2"), "8.20.0", False),
        (PackageRequirement("toolkit", "!=", "8.2"), "8.3.0", True),
        (PackageRequirement("toolkit", "<", "9.0"), "8.5.0", True),
        (PackageRequirement("toolkit", ">=", "x"), "8.5.0", None),
    ],
)
def test_requirement_satisfied(req: PackageRequirement, installed: str, ok: bool | None) -> None:
    assert requirement_satisfied(req, installed) is ok


# --- MindIE -----------------------------------------------------------------------------


def test_mindie_version_info() -> None:
    text = (
        "Ascend-mindie : MindIE 2.1.RC2.B080\nmindie-rt: 2.1.RC2.B080\nmindie-torch: 2.1.RC2\n"
        "mindie-service: 2.1.RC2.B080\nmindie-llm: 2.1.RC2.B080\nPlatform : aarch64\n"
        "builder : ci\n"
    )
    info = parse_mindie_version_info(text)
    assert info.version == "2.1.RC2.B080"
    assert info.components["mindie-rt"] == "2.1.RC2.B080"
    assert info.components["mindie-torch"] == "2.1.RC2"
    assert info.platform == "aarch64"
    assert info.extra == {"builder": "ci"}
    assert info.parsed == parse_version("2.1.rc2.b080")
    with pytest.raises(ParseError):
        parse_mindie_version_info("Version=1.0\n")


# --- pip --------------------------------------------------------------------------------


def test_pip_list_036() -> None:
    pip = parse_pip_packages(npu_smi_sample("036"))
    assert pip.packages == {
        "torch": "1.11.0", "torch-npu": "2.1.0.post8.dev20241009", "mindspore": "2.3.0",
    }
    assert pip.version_of("torch_npu") == "2.1.0.post8.dev20241009"
    assert pip.warnings == ()


def test_collect_env_lines() -> None:
    text = (
        "Versions of relevant libraries:\n[pip3] numpy==1.26.4\n[pip3] torch==2.8.0+cpu\n"
        "[pip3] torch_npu==2.8.0\n[conda] torch-npu 2.8.0 pypi_0 pypi\n"
        "Package    Version\n---------- -------\nvllm       0.10.1 /src/vllm\n"
    )
    pip = parse_pip_packages(text)
    assert pip.version_of("torch") == "2.8.0+cpu"
    assert pip.version_of("Torch-NPU") == "2.8.0"
    assert pip.version_of("vllm") == "0.10.1"
    assert pip.version_of("numpy") == "1.26.4"
    assert len(pip.warnings) == 1  # the "Versions of relevant libraries:" heading


def test_pip_rejects_unrecognisable() -> None:
    with pytest.raises(ParseError):
        parse_pip_packages("$ pip list\nno packages here\n")
