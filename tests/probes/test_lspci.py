from __future__ import annotations

from pathlib import Path

import pytest

from probes.errors import ParseError
from probes.lspci import parse_lspci, parse_lspci_line

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "npu-smi"


def _corpus(name: str) -> str:
    return (CORPUS / name).read_text()


def test_corpus_910b4_d802() -> None:
    listing = parse_lspci(_corpus("017-lspci-grep-d802-910B4-8cards.txt"))
    assert listing.ignored_lines == ()
    assert [d.address for d in listing.devices] == [
        "01:00.0",
        "02:00.0",
        "41:00.0",
        "42:00.0",
        "81:00.0",
        "82:00.0",
        "c1:00.0",
        "c2:00.0",
    ]
    for device in listing.devices:
        assert device.class_name == "Processing accelerators"
        assert device.vendor_name == "Huawei Technologies Co., Ltd."
        assert device.device_id == "d802"
        assert device.revision == "20"
        assert device.is_huawei
        assert device.family == "Ascend 910B (A2)"
    assert listing.devices[6].sysfs_address == "0000:c1:00.0"
    assert listing.devices[6].line_no == 7


def test_corpus_910a_d801() -> None:
    listing = parse_lspci(_corpus("030-lspci-grep-acce-910A-d801-8cards.txt"))
    assert len(listing.devices) == 8
    assert [d.bus for d in listing.devices] == ["3d", "3e", "60", "61", "b1", "b2", "da", "db"]
    assert {d.device_id for d in listing.devices} == {"d801"}
    assert {d.family for d in listing.devices} == {"Ascend 910"}
    assert {d.revision for d in listing.devices} == {"20"}


def test_nn_with_domain() -> None:
    line = (
        "0000:c1:00.0 Processing accelerators [1200]: Huawei Technologies Co., Ltd. "
        "Device [19e5:d803] (rev 20)"
    )
    device = parse_lspci_line(line)
    assert device is not None
    assert device.address == "0000:c1:00.0"
    assert device.sysfs_address == "0000:c1:00.0"
    assert device.domain == "0000"
    assert device.class_code == "1200"
    assert device.vendor_id == "19e5"
    assert device.device_id == "d803"
    assert device.family == "Ascend 910_93 (A3)"


def test_named_device_is_not_split_by_guessing() -> None:
    line = "00:1f.6 Ethernet controller: Intel Corporation Ethernet Connection (2) I219-LM (rev 10)"
    device = parse_lspci_line(line)
    assert device is not None
    assert device.class_name == "Ethernet controller"
    assert device.description == "Intel Corporation Ethernet Connection (2) I219-LM"
    assert device.vendor_name is None
    assert device.device_id is None
    assert device.revision == "10"
    assert device.family is None


def test_other_vendor_with_a_clashing_id_gets_no_family() -> None:
    device = parse_lspci_line("05:00.0 Non-Volatile memory controller: Acme Inc. Device d802")
    assert device is not None
    assert device.device_id == "d802"
    assert device.revision is None
    assert not device.is_huawei
    assert device.family is None


def test_noise_lines_are_kept_aside() -> None:
    text = "$ lspci | grep d802\n\n" + _corpus("017-lspci-grep-d802-910B4-8cards.txt")
    listing = parse_lspci(text)
    assert len(listing.devices) == 8
    assert listing.ignored_lines == ("$ lspci | grep d802",)
    assert listing.devices[0].line_no == 3


def test_empty_output_is_no_devices() -> None:
    assert parse_lspci("").devices == ()
    assert parse_lspci("\n  \n").devices == ()


def test_text_without_any_device_line_is_a_parse_error() -> None:
    with pytest.raises(ParseError, match="no lspci device line"):
        parse_lspci("bash: lspci: command not found\n", what="pasted lspci")
