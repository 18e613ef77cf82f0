"""`npu-smi info` main table: every corpus sample, checked value by value, plus hand-written
inputs for layouts the corpus lacks (26.0.rc1 116 columns, an A3 with processes)."""

from __future__ import annotations

import pytest

from probes.errors import ParseError
from probes.npu_smi import ChipRow, NpuInfo, ProcessRow, parse_info, to_json
from tests.npu_smi_fixtures import npu_smi_sample


def parse(number: str) -> NpuInfo:
    return parse_info(npu_smi_sample(number))


def column(info: NpuInfo, name: str) -> list[object]:
    return [getattr(chip, name) for chip in info.chips]


# ----------------------------------------------------------------------------- 310 layouts


def test_001_80_col_310_four_chips_on_card_215() -> None:
    info = parse("001")
    assert (info.npu_smi_version, info.driver_version) == ("20.2.0", "20.2.0")
    assert info.layout == "310-legacy"
    assert column(info, "npu_id") == [215] * 4
    assert column(info, "chip_id") == [0, 1, 2, 3]
    assert column(info, "logic_id") == [0, 1, 2, 3]
    assert column(info, "temperature_c") == [56, 57, 57, 55]
    assert column(info, "bus_id") == [
        "0000:DA:00.0", "0000:DC:00.0", "0000:DD:00.0", "0000:DB:00.0"
    ]
    first = info.chips[0]
    assert (first.name, first.health, first.power_w, first.aicore_percent) == ("310", "OK", 12.8, 0)
    assert (first.memory_used_mb, first.memory_total_mb) == (2703, 8192)
    # this layout has neither hugepages nor HBM nor a process section
    assert (first.hugepages_used, first.hbm_used_mb, first.hbm_total_mb) == (None, None, None)
    assert info.processes == () and info.processes_known is False
    assert info.warnings == ()


def test_002_102_col_tool_and_driver_versions_differ() -> None:
    info = parse("002")
    assert (info.npu_smi_version, info.driver_version) == ("21.0.4", "21.0.4.B030")
    assert info.layout == "310-wide"
    assert column(info, "npu_id") == [6] * 4
    assert column(info, "chip_id") == [0, 1, 2, 3]
    assert column(info, "logic_id") == [3, 4, 5, 6]
    assert column(info, "temperature_c") == [73, 74, 70, 65]
    # the misaligned hugepages cell (`0       / 970`) still reads as one pair
    assert column(info, "hugepages_used") == [0] * 4
    assert column(info, "hugepages_total") == [970] * 4
    assert column(info, "memory_used_mb") == [2703, 2867, 2867, 2867]
    assert info.processes_known is False
    assert info.warnings == ()


def test_023_106_col_single_310_idle_process_table() -> None:
    info = parse("023")
    assert info.npu_smi_version == "23.0.0" and info.layout == "310-wide"
    assert info.chips == (
        ChipRow(npu_id=0, chip_id=0, logic_id=0, name="310", health="OK", power_w=12.8,
                temperature_c=61, aicore_percent=0, bus_id="0000:01:00.0", memory_used_mb=577,
                memory_total_mb=7759, hugepages_used=0, hugepages_total=969),
    )
    assert info.processes == () and info.processes_known is True
    assert info.warnings == ()


@pytest.mark.parametrize(
    ("number", "card", "temps", "mem_used", "mem_total", "version"),
    [
        ("049", 2, [45, 43], [1529, 1412], [44280, 43693], "25.2.0"),
        ("050", 1, [59, 58], [1397, 1520], [44280, 43693], "24.1.rc2"),
    ],
)
def test_300i_duo_two_chips_share_a_bus_id(
    number: str, card: int, temps: list[int], mem_used: list[int], mem_total: list[int],
    version: str,
) -> None:
    info = parse(number)
    assert info.npu_smi_version == version and info.layout == "310-wide"
    assert column(info, "npu_id") == [card, card]
    assert column(info, "chip_id") == [0, 1]
    assert column(info, "logic_id") == [0, 1]
    assert column(info, "name") == ["310P3", "310P3"]
    assert column(info, "power_w") == [None, None]  # 310P prints NA
    assert column(info, "temperature_c") == temps
    assert column(info, "bus_id") == ["0000:01:00.0", "0000:01:00.0"]
    assert column(info, "memory_used_mb") == mem_used
    assert column(info, "memory_total_mb") == mem_total
    assert column(info, "hbm_total_mb") == [None, None]
    # the source cut the output before the process section: unknown, not idle
    assert info.processes_known is False
    assert info.warnings == ()


def test_051_five_digit_memory_glued_to_slash_and_cut_second_chip() -> None:
    info = parse("051")
    assert info.npu_smi_version == "25.5.0"
    first, second = info.chips
    assert (first.memory_used_mb, first.memory_total_mb) == (37623, 44278)
    assert (first.hugepages_used, first.hugepages_total) == (18047, 18047)
    assert (first.chip_id, first.logic_id, first.bus_id) == (0, 0, "0000:01:00.0")
    # the second chip lost its second row: what row 1 says is kept, the rest is unknown
    assert (second.npu_id, second.hugepages_used, second.temperature_c) == (0, 18135, 58)
    assert (second.chip_id, second.bus_id, second.memory_used_mb) == (None, None, None)
    assert any("without its second row" in w for w in info.warnings)
    assert info.processes_known is False


def test_064_310b4_alarm_bus_na_trailing_spaces() -> None:
    info = parse("064")
    (chip,) = info.chips
    assert (chip.name, chip.health, chip.power_w, chip.temperature_c) == ("310B4", "Alarm", 0.0, 65)
    assert chip.bus_id is None
    assert (chip.memory_used_mb, chip.memory_total_mb) == (3628, 15609)
    assert (chip.hugepages_used, chip.hugepages_total) == (15, 15)
    assert info.processes_known is False  # 310B prints no process section
    assert info.warnings == ()


def test_067_card_id_32896_and_trailing_mapping_output() -> None:
    info_text, _, _ = npu_smi_sample("067").partition("\n#")
    info = parse_info(info_text)
    assert info.npu_smi_version == "25.5.2"
    (chip,) = info.chips
    assert (chip.npu_id, chip.chip_id, chip.logic_id, chip.name) == (32896, 0, 0, "310P3")
    assert (chip.power_w, chip.temperature_c, chip.bus_id) == (None, 54, "0000:00:00.0")
    assert (chip.memory_used_mb, chip.memory_total_mb) == (1904, 44213)
    assert info.processes == () and info.processes_known is True
    assert info.warnings == ()


def test_067_whole_file_reports_the_mapping_lines_as_warnings() -> None:
    info = parse("067")
    assert len(info.chips) == 1
    assert len(info.warnings) == 4
    assert "Chip Logic ID" in info.warnings[1]


# ----------------------------------------------------------------------------- 910 / HBM layouts


def test_003_93_col_910a_ddr_and_hbm() -> None:
    info = parse("003")
    assert info.npu_smi_version == "22.0.3.1" and info.layout == "hbm"
    assert column(info, "npu_id") == list(range(8))
    assert column(info, "chip_id") == [0] * 8
    assert column(info, "name") == ["910A"] * 8
    assert column(info, "power_w") == [67.2, 63.3, 64.8, 191.7, 66.4, 62.7, 64.5, 191.4]
    assert column(info, "temperature_c") == [43, 38, 34, 42, 44, 33, 35, 40]
    assert column(info, "memory_used_mb") == [1867, 1867, 1868, 1866, 1867, 1865, 1865, 1866]
    assert column(info, "memory_total_mb") == [15077] * 8
    assert column(info, "hbm_used_mb") == [0] * 8
    assert column(info, "hbm_total_mb") == [32768] * 8
    assert column(info, "hugepages_total") == [15] * 8
    assert column(info, "logic_id") == [None] * 8 and column(info, "phy_id") == [None] * 8
    assert info.chips[7].bus_id == "0000:3D:00.0"
    assert info.processes_known is False


def test_004_masked_names_warning_health_four_processes_per_card() -> None:
    info = parse("004")
    assert info.npu_smi_version == "24.1.RC2"
    assert column(info, "name") == ["xxx"] * 8
    assert column(info, "health") == ["OK"] * 3 + ["Warning"] + ["OK"] * 3 + ["Warning"]
    assert info.chips[3].power_w == 206.9
    assert (info.chips[3].memory_used_mb, info.chips[3].memory_total_mb) == (3616, 15039)
    assert column(info, "hugepages_used") == [1232] * 8
    assert len(info.processes) == 32 and info.processes_known is True
    assert info.processes[0] == ProcessRow(npu_id=0, chip_id=0, pid=37656,
                                           name="hlt_host_devmm_", memory_mb=686)
    assert [p.npu_id for p in info.processes] == [n for n in range(8) for _ in range(4)]
    assert info.processes[-1].pid == 37663
    assert {p.name for p in info.processes} == {"hlt_host_devmm_"}
    assert info.warnings == ()


def test_014_98_col_910b4_eight_idle_cards() -> None:
    info = parse("014")
    assert (info.npu_smi_version, info.driver_version) == ("25.0.rc1.1", "25.0.rc1.1")
    assert info.layout == "hbm"
    assert column(info, "npu_id") == list(range(8))
    assert column(info, "name") == ["910B4"] * 8
    assert column(info, "power_w") == [87.2, 82.7, 82.7, 89.1, 84.5, 84.8, 87.1, 81.6]
    assert column(info, "temperature_c") == [33, 33, 33, 34, 39, 37, 38, 37]
    assert column(info, "hbm_used_mb") == [2654] * 7 + [2653]
    assert column(info, "hbm_total_mb") == [32768] * 8
    assert column(info, "memory_total_mb") == [0] * 8
    assert column(info, "bus_id")[:2] == ["0000:C1:00.0", "0000:C2:00.0"]
    assert info.processes == () and info.processes_known is True
    assert info.warnings == ()


def test_039_misaligned_masked_doc_with_python_processes() -> None:
    info = parse("039")
    assert (info.npu_smi_version, info.driver_version) == ("23.0.rc3", "23.0.rc2.3")
    assert column(info, "name") == ["xxx"] * 8
    assert column(info, "hbm_used_mb") == [30710, 30710, 30710, 30709, 30709, 30709, 30710, 30710]
    assert column(info, "hugepages_used") == [1123] * 8
    assert column(info, "power_w")[0] == 73.4
    assert [(p.npu_id, p.pid, p.name, p.memory_mb) for p in info.processes][:2] == [
        (0, 139667, "python", 30780),
        (1, 139577, "python", 30782),
    ]
    assert len(info.processes) == 8 and info.processes_known is True
    assert info.warnings == ()


def test_048_process_section_cut_means_unknown_not_idle() -> None:
    info = parse("048")
    assert info.npu_smi_version == "24.1.rc1.b030"
    assert column(info, "name") == ["910B3"] * 8
    assert column(info, "hbm_used_mb") == [3318, 3314, 3314, 3314, 3314, 3314, 3314, 3315]
    assert column(info, "hbm_total_mb") == [65536] * 8
    assert column(info, "power_w")[6] == 103.8
    assert info.processes == () and info.processes_known is False


def test_052_910prob_with_ddr_and_hbm() -> None:
    info = parse("052")
    assert info.npu_smi_version == "24.1.0"
    first, second = info.chips
    assert (first.name, first.power_w, first.temperature_c) == ("910ProB", 78.0, 38)
    assert (first.memory_used_mb, first.memory_total_mb) == (2387, 13553)
    assert (first.hbm_used_mb, first.hbm_total_mb) == (18, 32768)
    assert (second.memory_used_mb, second.memory_total_mb, second.hbm_used_mb) == (1840, 15665, 8)
    assert info.warnings == ()


def test_053_masked_bus_id_kept_as_printed() -> None:
    info = parse("053")
    assert column(info, "name") == ["910B4-1", "910B4-1"]
    assert column(info, "bus_id") == ["0000:xx:00.0", "0000:xx:00.0"]
    assert column(info, "hbm_used_mb") == [3197, 3197]
    assert column(info, "hbm_total_mb") == [65536, 65536]
    assert column(info, "power_w") == [91.3, 88.1]
    assert info.warnings == ()


def test_055_a3_second_row_has_chip_and_phy_id() -> None:
    info = parse("055")
    assert info.npu_smi_version == "24.1.rc3.7" and info.layout == "hbm-a3"
    die0, die1, cut = info.chips
    assert (die0.npu_id, die0.chip_id, die0.phy_id, die0.power_w) == (0, 0, 0, 178.8)
    assert (die1.npu_id, die1.chip_id, die1.phy_id, die1.power_w) == (0, 1, 1, None)
    assert (die0.bus_id, die1.bus_id) == ("0000:9D:00.0", "0000:9F:00.0")
    assert (die0.hbm_used_mb, die1.hbm_used_mb) == (3397, 3186)
    assert (cut.npu_id, cut.power_w, cut.chip_id) == (1, 185.4, None)
    assert info.processes_known is False


def test_065_a3_four_dies_mixed_process_blocks() -> None:
    info = parse("065")
    assert info.layout == "hbm-a3"
    assert [(c.npu_id, c.chip_id, c.phy_id) for c in info.chips] == [
        (0, 0, 0), (0, 1, 1), (1, 0, 2), (1, 1, 3)
    ]
    assert column(info, "power_w") == [162.8, None, 167.1, None]
    assert column(info, "hbm_used_mb") == [3133, 2876, 3116, 10568]
    assert info.processes == (
        ProcessRow(npu_id=1, chip_id=1, pid=990711, name="python", memory_mb=7746),
    )
    assert info.processes_known is True
    assert info.warnings == ()


def test_025_soft_partition_container_same_bus_and_phy() -> None:
    info = parse("025")
    assert (info.npu_smi_version, info.driver_version) == ("xxx.xxx.xxx", "xxx.xxx.xxx")
    assert info.layout == "hbm-a3+container"
    assert [(c.chip_id, c.phy_id, c.bus_id) for c in info.chips] == [
        (0, 0, "0000:9D:00.0"), (1, 0, "0000:9D:00.0")
    ]
    assert column(info, "power_w") == [157.3, None]
    assert column(info, "hbm_used_mb") == [3130, 3130]
    assert info.processes == () and info.processes_known is True
    assert info.warnings == ()


def test_059_whitespace_collapsed_keeps_0k_and_warns() -> None:
    info = parse("059")
    assert info.npu_smi_version == "25.0.rc1.1"
    assert column(info, "npu_id") == [0, 1, 2, 3]
    assert column(info, "health") == ["0K"] * 4
    assert column(info, "power_w") == [89.2, 87.7, 88.6, 86.2]
    assert column(info, "temperature_c") == [39, 40, 38, 40]
    assert column(info, "hbm_used_mb") == [1460, 1479, 1259, 1643]
    assert column(info, "hbm_total_mb") == [44280, 43693, 44216, 43757]
    assert column(info, "bus_id") == [
        "0000:81:00.0", "0000:41:00.0", "0000:82:00.0", "0000:42:00.0"
    ]
    assert sum("'0K'" in w for w in info.warnings) == 4
    assert any("NPU:" in w for w in info.warnings)  # the stray line before the table


# ----------------------------------------------------------------------------- hand-written


def box(cells: list[str], widths: list[int]) -> str:
    """One table row as npu-smi pads it: each cell is ` text` padded to its column width."""
    padded = (f" {text}".ljust(width) for text, width in zip(cells, widths, strict=True))
    return "|" + "|".join(padded) + "|"


def border(widths: list[int], fill: str = "-") -> str:
    return "+" + "+".join(fill * width for width in widths) + "+"


# FORMATS.md §1.3: 26.0.rc1, HBM layout with a 70-wide third column, 116 columns in all
W26 = [27, 15, 70]
W26_PROC = [27, 15, 20, 23, 25]
TABLE_26 = "\n".join([
    border([114]),
    box(["npu-smi 26.0.rc1                 Version: 26.0.rc1"], [114]),
    border(W26),
    box(["NPU   Name", "Health",
         "Power(W)             Temp(C)                 Hugepages-Usage(page)"], W26),
    box(["Chip", "Bus-Id", "AICore(%)            Memory-Usage(MB)        HBM-Usage(MB)"], W26),
    border(W26, "="),
    box(["0     910B3", "OK", "97.3                 41                      0    / 0"], W26),
    box(["0", "0000:C1:00.0", "12                   0    / 0               53444/ 65536"], W26),
    border(W26, "="),
    box(["1     910B3", "Critical", "NA                   NA                      0    / 0"], W26),
    box(["0", "0000:C2:00.0", "0                    0    / 0               2654 / 65536"], W26),
    border(W26, "="),
    border(W26),
    box(["NPU     Chip", "Process id", "Process name", "Process memory(MB)",
         "Process id in container"], W26_PROC),
    border(W26, "="),
    box(["0       0", "19334", "VLLMWorker_TP", "58472", "211"], W26_PROC),
    box(["0       0", "19335", "", "1024", "-"], W26_PROC),
    border(W26, "="),
    box(["No running processes found in NPU 1"], [114]),
    border(W26, "="),
]) + "\n"


def test_handwritten_26_0_rc1_116_col_layout() -> None:
    assert {len(line) for line in TABLE_26.splitlines()} == {116}
    info = parse_info(TABLE_26)
    assert (info.npu_smi_version, info.driver_version) == ("26.0.rc1", "26.0.rc1")
    assert info.layout == "hbm+container"
    hot, critical = info.chips
    assert hot == ChipRow(npu_id=0, chip_id=0, name="910B3", health="OK", power_w=97.3,
                          temperature_c=41, aicore_percent=12, bus_id="0000:C1:00.0",
                          memory_used_mb=0, memory_total_mb=0, hbm_used_mb=53444,
                          hbm_total_mb=65536, hugepages_used=0, hugepages_total=0)
    assert (critical.health, critical.power_w, critical.temperature_c) == ("Critical", None, None)
    assert info.processes == (
        ProcessRow(npu_id=0, chip_id=0, pid=19334, name="VLLMWorker_TP", memory_mb=58472,
                   container_pid=211),
        ProcessRow(npu_id=0, chip_id=0, pid=19335, name="", memory_mb=1024, container_pid=None),
    )
    assert info.processes_known is True
    assert info.warnings == ()


W98 = [27, 15, 52]
W98_PROC = [27, 15, 26, 25]
A3_WITH_PROCESSES = "\n".join([
    "DrvMngGetConsoleLogLevel failed. (g_conLogLevel=3)",
    border([96]),
    box(["npu-smi 25.2.3                   Version: 25.2.3"], [96]),
    border(W98),
    box(["NPU   Name", "Health", "Power(W)    Temp(C)           Hugepages-Usage(page)"], W98),
    box(["Chip  Phy-ID", "Bus-Id", "AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)"], W98),
    border(W98, "="),
    box(["0     Ascend910", "OK", "232.5       52                0    / 0"], W98),
    box(["0     0", "0000:9D:00.0", "17          0    / 0          53444/ 65536"], W98),
    border([96]),
    box(["0     Ascend910", "OK", "-           50                0    / 0"], W98),
    box(["1     1", "0000:9F:00.0", "0           0    / 0          3186 / 65536"], W98),
    border(W98, "="),
    border(W98),
    box(["NPU     Chip", "Process id", "Process name", "Process memory(MB)"], W98_PROC),
    border(W98, "="),
    box(["0       0", "19334", "VLLMWorker_TP", "58472"], W98_PROC),
    box(["0       1", "19334", "", "412"], W98_PROC),
    border(W98, "="),
    "[WARNING]The driver package may not be completely installed, which may cause function"
    " abnormal. Please reinstall it.",
]) + "\n"


def test_a3_processes_json_contract() -> None:
    info = parse_info(A3_WITH_PROCESSES)
    doc = to_json(info)
    assert doc["schema"] == "ascend-npu/1" and doc["kind"] == "info"
    assert (doc["npu_smi_version"], doc["driver_version"]) == ("25.2.3", "25.2.3")
    assert doc["chips"][0] == {
        "npu_id": 0, "chip_id": 0, "phy_id": 0, "logic_id": None, "name": "Ascend910",
        "health": "OK", "power_w": 232.5, "temperature_c": 52, "aicore_percent": 17,
        "bus_id": "0000:9D:00.0", "memory_used_mb": 0, "memory_total_mb": 0,
        "hbm_used_mb": 53444, "hbm_total_mb": 65536, "hugepages_used": 0, "hugepages_total": 0,
        "npu_util_percent": None,
    }
    assert doc["chips"][1]["power_w"] is None and doc["chips"][1]["phy_id"] == 1
    assert doc["processes"] == [
        {"npu_id": 0, "chip_id": 0, "pid": 19334, "name": "VLLMWorker_TP", "memory_mb": 58472,
         "container_pid": None},
        {"npu_id": 0, "chip_id": 1, "pid": 19334, "name": "", "memory_mb": 412,
         "container_pid": None},
    ]
    assert doc["processes_known"] is True and doc["layout"] == "hbm-a3"
    # noise before and the driver trailer after are reported, never dropped
    assert len(doc["warnings"]) == 2
    assert "DrvMngGetConsoleLogLevel" in doc["warnings"][0]
    assert "driver package may not be completely installed" in doc["warnings"][1]


def test_process_section_missing_a_card_is_unknown() -> None:
    # the rows now name card 5: card 0 has neither rows nor a "No running processes" line
    cut = A3_WITH_PROCESSES.replace("| 0       0 ", "| 5       0 ")
    cut = cut.replace("| 0       1 ", "| 5       1 ")
    info = parse_info(cut)
    assert info.processes_known is False
    assert any("process section incomplete" in w for w in info.warnings)


def test_process_section_cut_after_a_row_is_unknown() -> None:
    lines = A3_WITH_PROCESSES.splitlines()
    info = parse_info("\n".join(lines[:-2]))  # stops after the last process row
    assert len(info.processes) == 2 and info.processes_known is False


def test_not_a_table_raises_parse_error() -> None:
    with pytest.raises(ParseError) as caught:
        parse_info("dcmi module initialize failed. ret is -8005\n")
    assert caught.value.what == "npu-smi info"


def test_empty_text_raises_parse_error() -> None:
    with pytest.raises(ParseError):
        parse_info("")


def test_row_with_non_numeric_value_warns_and_keeps_the_rest() -> None:
    text = npu_smi_sample("014").replace("| 87.2        33 ", "| hot         33 ", 1)
    info = parse_info(text)
    assert info.chips[0].power_w is None and info.chips[0].temperature_c == 33
    assert any("Power(W) value 'hot'" in w for w in info.warnings)
