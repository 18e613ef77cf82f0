"""`npu-smi info -m`, `-l` and `watch` on the corpus (values checked), `-l` written by hand."""

from __future__ import annotations

import pytest

from probes.errors import ParseError
from probes.npu_smi import (
    ListEntry,
    MappingRow,
    NpuMapping,
    parse_list,
    parse_mapping,
    parse_watch,
    to_json,
)
from tests.npu_smi_fixtures import npu_smi_sample


def ids(mapping: NpuMapping) -> list[tuple[int, int | None, int | None]]:
    return [(row.npu_id, row.chip_id, row.logic_id) for row in mapping.rows]


# ----------------------------------------------------------------------------- -m


def test_005_minid_irregular_spacing() -> None:
    mapping = parse_mapping(npu_smi_sample("005"))
    assert ids(mapping) == [(215, 0, 0), (215, 1, 1), (215, 2, 2), (215, 3, 3)]
    assert {row.name for row in mapping.rows} == {"MiniD"}
    assert {row.phy_id for row in mapping.rows} == {None}
    assert mapping.warnings == ()


def test_006_mcu_row_has_no_logic_id() -> None:
    mapping = parse_mapping(npu_smi_sample("006"))
    assert ids(mapping) == [(6, 0, 0), (6, 1, 1), (6, 2, 2), (6, 3, 3), (6, 4, None)]
    assert mapping.rows[-1].name == "Mcu"
    assert mapping.warnings == ()


def test_007_name_with_a_space() -> None:
    mapping = parse_mapping(npu_smi_sample("007"))
    assert ids(mapping) == [(n, 0, n) for n in range(8)]
    assert {row.name for row in mapping.rows} == {"Ascend 910A"}


def test_008_mcu_after_every_card_masked_names() -> None:
    mapping = parse_mapping(npu_smi_sample("008"))
    assert len(mapping.rows) == 16
    assert mapping.rows[0] == MappingRow(npu_id=0, chip_id=0, logic_id=0, phy_id=None,
                                         name="Ascend xxx")
    assert mapping.rows[1] == MappingRow(npu_id=0, chip_id=1, logic_id=None, phy_id=None,
                                         name="Mcu")
    assert [row.logic_id for row in mapping.rows if row.name != "Mcu"] == list(range(8))


def test_009_310p_two_chips_per_card_non_contiguous_cards() -> None:
    mapping = parse_mapping(npu_smi_sample("009"))
    chips = [(r.npu_id, r.chip_id, r.logic_id) for r in mapping.rows if r.name != "Mcu"]
    assert chips == [(1, 0, 0), (1, 1, 1), (2, 0, 2), (2, 1, 3),
                     (4, 0, 4), (4, 1, 5), (5, 0, 6), (5, 1, 7)]
    assert [(r.npu_id, r.chip_id) for r in mapping.rows if r.name == "Mcu"] == [
        (1, 2), (2, 2), (4, 2), (5, 2)
    ]


def test_015_indent_and_trailing_spaces() -> None:
    mapping = parse_mapping(npu_smi_sample("015"))
    assert len(mapping.rows) == 16
    assert mapping.rows[14] == MappingRow(npu_id=7, chip_id=0, logic_id=7, phy_id=None,
                                          name="Ascend 910B4")
    assert mapping.rows[15].name == "Mcu"  # trailing spaces stripped
    assert mapping.warnings == ()


def test_026_leading_tab() -> None:
    mapping = parse_mapping(npu_smi_sample("026"))
    assert ids(mapping) == [(n, 0, n) for n in range(8)]
    assert {row.name for row in mapping.rows} == {"Ascend 910A"}
    assert mapping.warnings == ()


def test_067_second_half_is_a_mapping() -> None:
    _, _, rest = npu_smi_sample("067").partition("\n#")
    mapping_text = rest.split("\n", 1)[1]  # drop the rest of the `#` comment line
    mapping = parse_mapping(mapping_text)
    assert mapping.rows == (
        MappingRow(npu_id=32896, chip_id=0, logic_id=0, phy_id=None, name="Ascend 310P3"),
        MappingRow(npu_id=32896, chip_id=1, logic_id=None, phy_id=None, name="Mcu"),
    )
    assert mapping.warnings == ()


def test_a3_mapping_with_phy_id_column() -> None:
    text = (
        "\tNPU ID                         Chip ID                        Chip Logic ID"
        "                  Chip Phy-ID                    Chip Name\n"
        "\t0                              0                              0"
        "                              0                              Ascend910\n"
        "\t0                              1                              1"
        "                              1                              Ascend910\n"
        "\t0                              2                              -"
        "                              -                              Mcu\n"
    )
    mapping = parse_mapping(text)
    assert mapping.rows == (
        MappingRow(npu_id=0, chip_id=0, logic_id=0, phy_id=0, name="Ascend910"),
        MappingRow(npu_id=0, chip_id=1, logic_id=1, phy_id=1, name="Ascend910"),
        MappingRow(npu_id=0, chip_id=2, logic_id=None, phy_id=None, name="Mcu"),
    )
    assert to_json(mapping)["rows"][2] == {"npu_id": 0, "chip_id": 2, "logic_id": None,
                                           "phy_id": None, "name": "Mcu"}


def test_mapping_bad_row_is_a_warning() -> None:
    mapping = parse_mapping(npu_smi_sample("007") + "garbage line here\n")
    assert len(mapping.rows) == 8
    assert mapping.warnings == ("line 10: not a mapping row: garbage line here",)


def test_mapping_without_header_raises() -> None:
    with pytest.raises(ParseError):
        parse_mapping(npu_smi_sample("014"))


# ----------------------------------------------------------------------------- -l

# FORMATS.md §1.6: `\tTotal Count : N`, blank, then per card NPU ID, (Product Name,
# Serial Number), Chip Count, blank
LIST_310P = (
    "\tTotal Count                    : 2\n"
    "\n"
    "\tNPU ID                         : 1\n"
    "\tProduct Name                   : Atlas 300I Duo\n"
    "\tSerial Number                  : 033VNY10MC000123\n"
    "\tChip Count                     : 2\n"
    "\n"
    "\tNPU ID                         : 2\n"
    "\tProduct Name                   : Atlas 300I Duo\n"
    "\tSerial Number                  : NA\n"
    "\tChip Count                     : 2\n"
    "\n"
)

LIST_910 = "".join(
    f"\tNPU ID                         : {n}\n\tChip Count                     : 1\n\n"
    for n in range(8)
)


def test_list_310p_with_product_and_serial() -> None:
    listing = parse_list(LIST_310P)
    assert listing.total_count == 2
    assert listing.npus == (
        ListEntry(npu_id=1, chip_count=2, product_name="Atlas 300I Duo",
                  serial_number="033VNY10MC000123"),
        ListEntry(npu_id=2, chip_count=2, product_name="Atlas 300I Duo", serial_number=None),
    )
    assert listing.warnings == ()
    doc = to_json(listing)
    assert (doc["kind"], doc["total_count"]) == ("list", 2)
    assert [(n["npu_id"], n["chip_count"]) for n in doc["npus"]] == [(1, 2), (2, 2)]


def test_list_910_card_count_spelling_without_product_lines() -> None:
    listing = parse_list("\tCard Count                     : 8\n\n" + LIST_910)
    assert listing.total_count == 8
    assert [(e.npu_id, e.chip_count, e.product_name) for e in listing.npus] == [
        (n, 1, None) for n in range(8)
    ]
    assert listing.warnings == ()


def test_list_count_mismatch_and_unknown_key_warn() -> None:
    text = LIST_310P.replace("Total Count                    : 2", "Total Count : 3")
    listing = parse_list(text + "\tBoard Type : x\n")
    assert len(listing.npus) == 2
    assert listing.warnings == ("line 13: unexpected key 'Board Type'",
                                "count says 3, 2 NPUs listed")


def test_list_not_a_list_raises() -> None:
    with pytest.raises(ParseError):
        parse_list(npu_smi_sample("031"))


# ----------------------------------------------------------------------------- watch

WATCH_COLUMNS_9 = ("NpuID(Idx)", "ChipId(Idx)", "Pwr(W)", "Temp(C)", "AI Core(%)", "AI Cpu(%)",
                   "Ctrl Cpu(%)", "Memory(%)", "Memory BW(%)")


def test_041_scrolling_rows_with_trailing_spaces() -> None:
    table = parse_watch(npu_smi_sample("041"))
    assert table.columns == WATCH_COLUMNS_9
    assert len(table.rows) == 31
    first = table.rows[0]
    assert (first.npu_id, first.chip_id) == (2, 0)
    assert dict(first.values) == {
        "NpuID(Idx)": 2, "ChipId(Idx)": 0, "Pwr(W)": 90.1, "Temp(C)": 34, "AI Core(%)": 0,
        "AI Cpu(%)": 0, "Ctrl Cpu(%)": 2, "Memory(%)": 5, "Memory BW(%)": 0,
    }
    assert max(row.values["Pwr(W)"] or 0 for row in table.rows) == 100.1
    assert table.rows[21].values["Temp(C)"] == 35
    assert table.warnings == ()


def test_042_last_row_cut_warns() -> None:
    table = parse_watch(npu_smi_sample("042"))
    assert table.columns == WATCH_COLUMNS_9
    assert len(table.rows) == 12
    assert table.rows[1].values["AI Core(%)"] == 25
    assert table.rows[2].values["Memory BW(%)"] == 13
    assert table.rows[-1].values["Memory BW(%)"] == 6
    assert table.warnings == ("last row may be cut (shorter padding than the rows before it)",)


def test_043_no_chip_column_and_two_outputs() -> None:
    first_text, _, second_text = npu_smi_sample("043").partition(
        "\n$ npu-smi info watch -i 0 -d 2 -s pt\n")
    first = parse_watch(first_text)
    assert first.columns == ("NpuID(Idx)", "Pwr(W)", "Temp(C)", "AI Core(%)", "AI Cpu(%)",
                             "Ctrl Cpu(%)", "Memory(%)", "Memory BW(%)", "NPU Util(%)",
                             "AI Cube(%)")
    assert [row.npu_id for row in first.rows] == list(range(8))
    assert {row.chip_id for row in first.rows} == {None}
    assert [row.values["Pwr(W)"] for row in first.rows][:3] == [290.4, 292.1, 291.2]
    assert first.rows[0].values["Ctrl Cpu(%)"] == 16
    assert len(first.warnings) == 1  # the doc's last row lost its padding
    second = parse_watch(second_text)
    assert second.columns == ("NpuID(Idx)", "Pwr(W)", "Temp(C)")
    assert [(r.npu_id, r.values["Pwr(W)"], r.values["Temp(C)"]) for r in second.rows] == [
        (0, 280.8, 84), (0, 280.9, 84), (0, 280.8, 83)
    ]
    assert second.warnings == ()


def test_043_whole_file_keeps_first_table_and_warns_about_the_rest() -> None:
    table = parse_watch(npu_smi_sample("043"))
    assert len(table.rows) == 8
    assert any("npu-smi info watch -i 0" in w for w in table.warnings)
    assert sum("row cut" in w for w in table.warnings) == 3


def test_watch_placeholders_and_truncated_row() -> None:
    text = (
        "NpuID(Idx)  ChipId(Idx) Pwr(W)      Temp(C)     AI Core(%)\n"
        "0           0           180.2       40          12          \n"
        "0           1           -           NA          3           \n"
        "1           0           175.0  \n"
    )
    table = parse_watch(text)
    assert len(table.rows) == 2
    assert dict(table.rows[1].values) == {"NpuID(Idx)": 0, "ChipId(Idx)": 1, "Pwr(W)": None,
                                          "Temp(C)": None, "AI Core(%)": 3}
    assert table.warnings == (
        "line 4: row cut (3 of 5 values), not read: 1           0           175.0",)
    doc = to_json(table)
    assert doc["kind"] == "watch" and doc["columns"][2] == "Pwr(W)"
    assert doc["rows"][0] == {"npu_id": 0, "chip_id": 0,
                              "values": {"NpuID(Idx)": 0, "ChipId(Idx)": 0, "Pwr(W)": 180.2,
                                         "Temp(C)": 40, "AI Core(%)": 12}}


def test_watch_without_header_raises() -> None:
    with pytest.raises(ParseError):
        parse_watch(npu_smi_sample("005"))
