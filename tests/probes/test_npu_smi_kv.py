"""npu-smi `-t <type>` key/value parsers against the real corpus and hand-written outputs."""

from __future__ import annotations

import json

import pytest

from probes.errors import ParseError
from probes.npu_smi import (
    HealthReport,
    KvOutput,
    Process,
    guess_kv_kind,
    health_report,
    normalise_key,
    parse_kv,
    parse_proc_mem,
    parse_topo,
    parse_value,
    to_json,
)
from tests.npu_smi_fixtures import npu_smi_sample


def chip_ids(out: KvOutput) -> list[int | None]:
    return [block.chip_id for block in out.blocks]


# --- keys and values ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("label", "key"),
    [
        ("HBM Usage Rate(%)", "hbm_usage_rate_percent"),
        ("Temperature(C)", "temperature_c"),
        ("HBM Capacity(MB)", "hbm_capacity_mb"),
        ("Power Dissipation(W)", "power_dissipation_w"),
        ("Aicore Freq(MHZ)", "aicore_freq_mhz"),
        ("Hugepages Total(page)", "hugepages_total_page"),
        ("NPU Temperature (C)", "npu_temperature_c"),
        ("PCIe Bus Info", "pcie_bus_info"),
        ("PCIeBusInfo", "pcie_bus_info"),  # older drivers glue the words
        ("Chip Phy-ID", "chip_phy_id"),
        ("NPU Real-time Power(W)", "npu_real_time_power_w"),
        ("DDR Single Bit Aggregate Total Err Cnt", "ddr_single_bit_aggregate_total_err_cnt"),
        ("  Chip ID  ", "chip_id"),
    ],
)
def test_normalise_key(label: str, key: str) -> None:
    assert normalise_key(label) == key


def test_parse_value_keeps_identifiers_as_text() -> None:
    assert parse_value("32") == 32
    assert parse_value("69.0") == 69.0
    assert parse_value("0x19E5") == "0x19E5"
    assert parse_value("7.1.0.7.220") == "7.1.0.7.220"
    assert parse_value(" NA ") == "NA"
    assert parse_value("310", "chip_name") == "310"
    assert parse_value("80818001", "error_code") == "80818001"
    assert parse_value("0012345", "serial_number") == "0012345"
    assert parse_value("9" * 5000) is None  # no int() of a wall of digits: implausible, null
    assert parse_value("9" * 5000, "serial_number") == "9" * 5000  # identifiers stay text


# --- -t common ---------------------------------------------------------------------------------


def test_010_common_910b_with_mcu_block() -> None:
    out = parse_kv(npu_smi_sample("010"))
    assert (out.kind, out.npu_id, out.chip_count, out.warnings) == ("common", 0, 1, ())
    assert chip_ids(out) == [0, None]
    chip, mcu = out.blocks
    assert chip.name is None
    assert chip.fields["aicore_freq_mhz"] == 1000
    assert chip.fields["aicore_count"] == 32
    assert chip.fields["temperature_c"] == 46
    assert chip.fields["npu_real_time_power_w"] == 69.0
    assert chip.fields["hbm_usage_rate_percent"] == 0
    assert mcu.name == "mcu"
    assert dict(mcu.fields) == {"temperature_c": 48, "npu_real_time_power_w": 45.2}


def test_011_common_310p_two_chips_and_mcu() -> None:
    out = parse_kv(npu_smi_sample("011"))
    assert (out.kind, out.npu_id, out.chip_count) == ("common", 1, 2)
    assert chip_ids(out) == [0, 1, None]
    assert [b.fields["temperature_c"] for b in out.blocks] == [60, 59, 48]
    assert out.blocks[1].fields["aicore_cur_freq_mhz"] == 960
    assert "hbm_usage_rate_percent" not in out.blocks[0].fields
    assert out.blocks[2].name == "mcu"


def test_038_common_doc_without_blank_lines() -> None:
    out = parse_kv(npu_smi_sample("038"))
    assert (out.kind, out.npu_id) == ("common", 0)
    assert chip_ids(out) == [0]
    fields = out.blocks[0].fields
    assert fields["aicore_count"] == 30
    assert fields["aicore_freq_mhz"] == 900
    assert fields["npu_real_time_power_w"] == 71.7
    assert fields["memory_usage_rate_percent"] == 6


# --- -t usages ---------------------------------------------------------------------------------


def test_012_usages_chip_id_after_fields() -> None:
    out = parse_kv(npu_smi_sample("012"))
    assert (out.kind, out.npu_id, out.chip_count) == ("usages", 0, 1)
    assert chip_ids(out) == [0]
    fields = out.blocks[0].fields
    assert fields["ddr_capacity_mb"] == 15171
    assert fields["hbm_capacity_mb"] == 32768
    assert fields["ctrlcpu_usage_rate_percent"] == 9
    assert fields["ddr_hugepages_total_page"] == 0
    assert fields["hbm_bandwidth_usage_rate_percent"] == 0
    assert "chip_id" not in fields


def test_013_usages_310p_two_chips_dvpp() -> None:
    out = parse_kv(npu_smi_sample("013"))
    assert (out.kind, out.npu_id, out.chip_count) == ("usages", 1, 2)
    assert chip_ids(out) == [0, 1]
    first, second = out.blocks
    assert first.fields["ddr_capacity_mb"] == 44280
    assert second.fields["ddr_capacity_mb"] == 43693
    assert first.fields["ctrlcpu_usage_rate_percent"] == 2
    assert second.fields["ctrlcpu_usage_rate_percent"] == 3
    assert first.fields["dvpp_jpegd_usage_rate_percent"] == 0
    assert first.fields["vectorcore_usage_rate_percent"] == 0
    assert first.fields["ddr_bandwidth_usage_rate_percent"] == 51


def test_028_usages_910a_tab_indented() -> None:
    out = parse_kv(npu_smi_sample("028"))
    assert (out.kind, out.npu_id, out.warnings) == ("usages", 0, ())
    assert chip_ids(out) == [0]
    assert out.blocks[0].fields["ddr_capacity_mb"] == 13553
    assert out.blocks[0].fields["hbm_capacity_mb"] == 31129
    assert out.blocks[0].fields["ddr_usage_rate_percent"] == 6


def test_usages_after_a_copy_lost_chip_id_lines_splits_on_repeated_key() -> None:
    text = "\n".join(line for line in npu_smi_sample("013").splitlines() if "Chip ID" not in line)
    out = parse_kv(text, "usages")
    assert chip_ids(out) == [None, None]
    assert [b.fields["ddr_capacity_mb"] for b in out.blocks] == [44280, 43693]


# --- -t board ----------------------------------------------------------------------------------


def test_027_board_chip_910a() -> None:
    out = parse_kv(npu_smi_sample("027"))
    assert (out.kind, out.npu_id, out.warnings) == ("board", 0, ())
    assert chip_ids(out) == [0]
    fields = out.blocks[0].fields
    assert fields["chip_type"] == "Ascend"
    assert fields["chip_name"] == "910A"
    assert out.blocks[0].name is None  # only an MCU chip name marks a block
    assert fields["board_id"] == "0x02"
    assert fields["pcb_id"] == "NA"
    assert fields["bom_id"] == 1
    assert fields["vdie_id"] == "42C711D4 20B03704 4A10C8D4 14CC040A D2102003"
    assert fields["pcie_bus_info"] == "0000:61:00.0"  # colons in the value survive
    assert fields["firmware_version"] == "7.1.0.7.220"


def test_029_board_card_910a() -> None:
    out = parse_kv(npu_smi_sample("029"))
    assert (out.kind, out.npu_id, out.chip_count) == ("board", 0, 1)
    assert chip_ids(out) == [None]
    fields = out.blocks[0].fields
    assert fields["software_version"] == "23.0.5"
    assert fields["firmware_version"] == "7.1.0.7.220"
    assert fields["compatibility"] == "OK"
    assert fields["pci_vendor_id"] == "0x19E5"
    assert fields["pci_device_id"] == "0xD801"
    assert fields["slot_id"] == 0
    assert fields["class_id"] == "NA"
    assert fields["pcb_id"] == "A"


# --- -t health ---------------------------------------------------------------------------------


def test_032_health_alarm_multi_line_information() -> None:
    out = parse_kv(npu_smi_sample("032"))
    assert (out.kind, out.npu_id, out.warnings) == ("health", None, ())
    assert chip_ids(out) == [None]
    info = out.blocks[0].fields["error_information"]
    assert isinstance(info, str)
    assert info.split("\n") == [
        "ascend_monitor adda heart beat lost error",
        "node type=process-manager, sensor type=General Software, event state=The process "
        "start failed or exit abnormally",
        "node type=adda, sensor type=Heartbeat Sensor, event state=Heartbeat Lost.",
    ]
    report = health_report(out.blocks[0])
    assert report.status == "Alarm"
    assert report.error_codes == ("A4025021", "8C03A000", "8C084E00")
    assert len(report.error_information) == 3
    assert health_report(out) == report


def test_032_health_with_tab_and_blank_lines_stripped() -> None:
    text = "\n".join(line.strip() for line in npu_smi_sample("032").splitlines() if line.strip())
    report = health_report(parse_kv(text))
    assert report.error_codes == ("A4025021", "8C03A000", "8C084E00")
    assert len(report.error_information) == 3


HEALTH_OK = (
    "\tHealth Status                  : OK\n"
    "\tError Code                     : NA\n"
    "\tError Information              : NA\n"
)


def test_health_ok_hand_written() -> None:
    out = parse_kv(HEALTH_OK)
    assert out.kind == "health"
    assert health_report(out) == HealthReport(status="OK", error_codes=(), error_information=())


def test_health_reference_doc_spelling() -> None:
    report = health_report(parse_kv("Health : OK\nError Code : NA\n"))
    assert report.status == "OK"


def test_health_report_of_other_output_is_empty() -> None:
    assert health_report(parse_kv(npu_smi_sample("029"))) == HealthReport(None, (), ())


# --- -t ecc, -t memory -------------------------------------------------------------------------


def test_037_ecc_40_char_keys() -> None:
    out = parse_kv(npu_smi_sample("037"))
    assert (out.kind, out.npu_id, out.chip_count, out.warnings) == ("ecc", 1, 1, ())
    assert chip_ids(out) == [0]
    fields = out.blocks[0].fields
    assert len(fields) == 12
    assert fields["hbm_double_bit_error_count"] == 0
    assert fields["ddr_single_bit_isolated_pages_count"] == 0
    assert fields["hbm_single_bit_aggregate_total_err_cnt"] == 0


def test_062_memory_hbm_131072() -> None:
    out = parse_kv(npu_smi_sample("062"))
    assert (out.kind, out.npu_id) == ("memory", 0)
    assert chip_ids(out) == [None]
    fields = out.blocks[0].fields
    assert fields["hbm_capacity_mb"] == 131072
    assert fields["hbm_clock_speed_mhz"] == 3200
    assert fields["hbm_temperature_c"] == 63
    assert fields["hbm_manufacturer_id"] == "0x5A"
    assert fields["ddr_capacity_mb"] == 0


# --- -t temp, -t power, -t pcie-err (no verbatim sample: written from the printf formats) ------


def test_temp_with_space_before_unit() -> None:
    out = parse_kv("\tNPU Temperature (C)            : 45\n")
    assert out.kind == "temp"
    assert dict(out.blocks[0].fields) == {"npu_temperature_c": 45}


def test_temp_out_of_band_sensor_list_keeps_failed() -> None:
    out = parse_kv("NPU      (C) : 45\nHBM      (C) : Failed\nCPU      (C) : NA\n")
    assert out.kind == "temp"
    assert dict(out.blocks[0].fields) == {"npu_c": 45, "hbm_c": "Failed", "cpu_c": "NA"}


def test_power() -> None:
    out = parse_kv("\tNPU Real-time Power(W)         : 92.3\n")
    assert out.kind == "power"
    assert out.blocks[0].fields["npu_real_time_power_w"] == 92.3


def test_pcie_err() -> None:
    text = "\tPcs Rx Error Count             : 0\n\tRetry Count                    : 3\n"
    out = parse_kv(text)
    assert out.kind == "pcie-err"
    assert out.blocks[0].fields["retry_count"] == 3


def test_explicit_kind_overrides_guess_and_accepts_underscore() -> None:
    assert parse_kv("Temperature(C) : 40", "common").kind == "common"
    assert parse_kv(npu_smi_sample("061"), "proc_mem").kind == "proc-mem"


def test_unknown_kind_is_a_caller_error() -> None:
    with pytest.raises(ValueError, match="parse_topo"):
        parse_kv(npu_smi_sample("047"), "topo")


# --- -t proc-mem -------------------------------------------------------------------------------


def test_061_proc_mem_empty_name() -> None:
    out = parse_proc_mem(npu_smi_sample("061"))
    assert out.warnings == ()
    assert [chip.chip_id for chip in out.chips] == [0, 1]
    assert out.chips[0].processes == ()
    assert out.chips[1].processes == (Process(pid=3229095, name="", memory_mb=48208),)


def test_061_proc_mem_through_parse_kv() -> None:
    out = parse_kv(npu_smi_sample("061"))
    assert out.kind == "proc-mem"
    assert chip_ids(out) == [0, 1]
    assert out.blocks[0].fields["process_count"] == 0
    assert out.blocks[1].fields["process_count"] == 1
    assert out.blocks[1].fields["process_memory_mb"] == 48208


def test_proc_mem_names_and_pid_name_failure_warning() -> None:
    text = (
        "\tNPU ID                         : 3\n"
        "Process id:101 Process name:python3          Process memory(MB):2048\n"
        "Get pid name failed.\n"
        "Process id:102 Process name:mindie_llm_back  Process memory(MB):61000\n"
        "\tChip ID                        : 0\n"
        "No process in device.\n"
        "\tChip ID                        : 1\n"
    )
    out = parse_proc_mem(text)
    assert out.npu_id == 3
    assert [chip.chip_id for chip in out.chips] == [0, 1]
    assert [(p.pid, p.name, p.memory_mb) for p in out.chips[0].processes] == [
        (101, "python3", 2048),
        (102, "mindie_llm_back", 61000),
    ]
    assert len(out.warnings) == 1 and "Get pid name failed." in out.warnings[0]
    assert "line 3" in out.warnings[0]
    kv = parse_kv(text)
    assert kv.blocks[0].fields["process_memory_mb"] == 63048
    assert any("Get pid name failed." in w for w in kv.warnings)


def test_proc_mem_cut_before_chip_id() -> None:
    out = parse_proc_mem("Process id:7 Process name:a Process mem")
    assert [chip.chip_id for chip in out.chips] == [None]
    assert out.chips[0].processes == (Process(pid=7, name="a Process mem", memory_mb=None),)


def test_proc_mem_without_process_lines_is_a_parse_error() -> None:
    with pytest.raises(ParseError):
        parse_proc_mem("dcmi module initialize failed. ret is -8005\n")


# --- -t topo -----------------------------------------------------------------------------------


def test_047_topo_910b3_hccs() -> None:
    topo = parse_topo(npu_smi_sample("047"))
    assert topo.warnings == ()
    assert topo.devices == tuple(f"NPU{i}" for i in range(8))
    assert len(topo.links) == 64
    assert topo.links[("NPU0", "NPU0")] == "X"
    assert topo.links[("NPU0", "NPU7")] == "HCCS"
    assert topo.links[("NPU5", "NPU2")] == "HCCS"
    assert topo.cpu_affinity["NPU0"] == "144-167"
    assert topo.cpu_affinity["NPU3"] == "96-119"
    assert topo.cpu_affinity["NPU4"] == "0-23"
    assert topo.cpu_affinity["NPU7"] == "48-71"
    assert topo.legend["HCCS"] == "Connection traversing HCCS."
    assert topo.legend["X"] == "Self"
    assert set(topo.legend) == {"X", "SYS", "PHB", "PIX", "PXB", "HCCS", "NA"}


def test_topo_a3_phy_id_labels_without_affinity() -> None:
    text = (
        "\t   Phy-ID0    Phy-ID1    Phy-ID2\n"
        "Phy-ID0    X          SIO        XLink_SW\n"
        "Phy-ID1    SIO        X          XLink\n"
        "Phy-ID2    XLink_SW   XLink      X\n"
    )
    topo = parse_topo(text)
    assert topo.devices == ("Phy-ID0", "Phy-ID1", "Phy-ID2")
    assert topo.links[("Phy-ID0", "Phy-ID1")] == "SIO"
    assert topo.links[("Phy-ID2", "Phy-ID0")] == "XLink_SW"
    assert dict(topo.cpu_affinity) == dict.fromkeys(topo.devices)
    assert topo.warnings == ()


def test_topo_cut_row_is_kept_with_a_warning() -> None:
    text = "\n".join(npu_smi_sample("047").splitlines()[:3]) + "\nNPU2       HCCS       HC"
    topo = parse_topo(text)
    assert topo.links[("NPU2", "NPU1")] == "HC"
    assert topo.cpu_affinity["NPU2"] is None
    assert len(topo.warnings) == 1 and "line 4" in topo.warnings[0]


def test_topo_unsupported_message_is_a_parse_error() -> None:
    with pytest.raises(ParseError, match="xlink"):
        parse_topo("This device dose not support querying xlink topo.\n")


# --- errors, guessing, JSON --------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["", "\n\n", "Invalid card id.\nUsage: npu-smi info <watch|proc|-h|-m|-l|-t type>"],
)
def test_no_key_value_line_is_a_parse_error(text: str) -> None:
    with pytest.raises(ParseError) as raised:
        parse_kv(text)
    assert raised.value.what.startswith("npu-smi info -t")


def test_031_invalid_card_id_is_a_parse_error() -> None:
    with pytest.raises(ParseError):
        parse_kv(npu_smi_sample("031"))


def test_noise_lines_are_warnings_not_dropped() -> None:
    text = "DrvMngGetConsoleLogLevel failed. (g_conLogLevel=3)\n" + npu_smi_sample("028")
    out = parse_kv(text)
    assert out.kind == "usages"
    assert chip_ids(out) == [0]
    assert len(out.warnings) == 1 and "line 1" in out.warnings[0]


def test_guess_kv_kind() -> None:
    assert guess_kv_kind(["HBM Usage Rate(%)", "Aicore Usage Rate(%)", "Chip ID"]) == "usages"
    assert guess_kv_kind(["Chip ID", "HBM Usage Rate(%)", "Aicore Usage Rate(%)"]) == "common"
    assert guess_kv_kind(["Health Status"]) == "health"
    assert guess_kv_kind(["Error Code"]) == "health"
    assert guess_kv_kind(["BOM ID"]) == "board"
    assert guess_kv_kind(["Aicore Count"]) == "common"
    assert guess_kv_kind(["HBM Single Bit Error Count"]) == "ecc"
    assert guess_kv_kind(["Capacity(MB)", "Clock Speed(MHz)"]) == "memory"
    assert guess_kv_kind(["Process id"]) == "proc-mem"
    assert guess_kv_kind(["Chip Name", "Temperature(C)", "NPU Real-time Power(W)"]) == "common"
    assert guess_kv_kind(["Something Else"]) == "kv"
    assert guess_kv_kind([]) == "kv"


def test_to_json_kv_round_trips_through_json() -> None:
    data = to_json(parse_kv(npu_smi_sample("010")))
    assert json.loads(json.dumps(data)) == data
    assert data["schema"] == "ascend-npu/1"
    assert (data["kind"], data["npu_id"], data["warnings"]) == ("common", 0, [])
    assert data["blocks"][0]["chip_id"] == 0
    assert data["blocks"][0]["fields"]["aicore_freq_mhz"] == 1000
    assert data["blocks"][1] == {
        "chip_id": None,
        "name": "mcu",
        "fields": {"temperature_c": 48, "npu_real_time_power_w": 45.2},
    }


def test_to_json_proc_mem_and_topo() -> None:
    proc = to_json(parse_proc_mem(npu_smi_sample("061")))
    assert proc["kind"] == "proc-mem"
    assert proc["chips"][1] == {
        "chip_id": 1,
        "processes": [{"pid": 3229095, "name": "", "memory_mb": 48208}],
    }
    topo = to_json(parse_topo(npu_smi_sample("047")))
    assert json.loads(json.dumps(topo)) == topo
    assert topo["kind"] == "topo"
    assert topo["links"]["NPU3"]["NPU4"] == "HCCS"
    assert topo["cpu_affinity"]["NPU6"] == "48-71"


def test_facts_are_immutable() -> None:
    out = parse_kv(npu_smi_sample("012"))
    with pytest.raises(TypeError):
        out.blocks[0].fields["hbm_capacity_mb"] = 1  # type: ignore[index]


def test_value_with_colons_and_glued_colons() -> None:
    out = parse_kv("\tPCIe Bus Info : 0000:C1:00.0\n\tSome Time : 12:30:05\n")
    assert out.blocks[0].fields["pcie_bus_info"] == "0000:C1:00.0"
    assert out.blocks[0].fields["some_time"] == "12:30:05"


def test_017_lspci_lines_are_not_key_value() -> None:
    # `c1:00.0 Processing accelerators: ...`: a colon glued to text is not npu-smi's ` : `.
    with pytest.raises(ParseError):
        parse_kv(npu_smi_sample("017"))


def test_proc_mem_parser_refuses_other_kv_outputs() -> None:
    with pytest.raises(ParseError, match="proc-mem"):
        parse_proc_mem(npu_smi_sample("012"))
