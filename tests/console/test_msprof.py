from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from console.msprof import MsprofError, read_conflicts, read_hbm, read_profile
from tests.conftest import CORPUS_DIR

MSPROF = CORPUS_DIR / "msprof"
CONFLICT = MSPROF / "msopprof_ResourceConflictRatio_A2_sample_from_doc_figure.csv"
BASIC = MSPROF / "msopprof_OpBasicInfo_sample_from_doc_figure.csv"
HBM = MSPROF / "msprof_hbm_sample_from_doc_figure.csv"
HEADERS = MSPROF / "op_summary_A2_task-based_headers_from_msprof_smoke_config.txt"


def _op_summary_header() -> str:
    lines = HEADERS.read_text().splitlines()
    marker = lines.index("# --aic-metrics=ResourceConflictRatio")
    return lines[marker + 1]


def test_msprof_op_directory_from_the_corpus(tmp_path: Path) -> None:
    opprof = tmp_path / "OPPROF_20250101_ABC"
    opprof.mkdir()
    shutil.copy(CONFLICT, opprof / "ResourceConflictRatio.csv")
    shutil.copy(BASIC, opprof / "OpBasicInfo.csv")
    [op] = read_conflicts(tmp_path)
    assert op.operator == "matmul_leakyrelu_custom_0_mix_aic" and op.op_type == "mix"
    assert op.rows == 8 and op.source == "OPPROF_20250101_ABC/ResourceConflictRatio.csv"
    assert op.bank_cflt_ratio == 0.0
    assert op.bankgroup_cflt_ratio == pytest.approx(0.00187, abs=2e-5)
    assert op.total_cflt_ratio == pytest.approx(op.bankgroup_cflt_ratio)
    assert op.worst_ratio == 0.001904
    assert op.conflict_ratio == op.bankgroup_cflt_ratio


def test_several_operators_sorted_worst_first(tmp_path: Path) -> None:
    text = CONFLICT.read_text()
    for name, scale in (("add_custom", 1), ("softmax_custom", 100)):
        op_dir = tmp_path / "OPPROF_x" / name
        op_dir.mkdir(parents=True)
        body = text if scale == 1 else text.replace("0.0019", "0.19").replace("0.0018", "0.18")
        (op_dir / "ResourceConflictRatio_20250101.csv").write_text(body)
    ops = read_conflicts(tmp_path)
    assert [o.operator for o in ops] == ["softmax_custom", "add_custom"]
    assert ops[0].conflict_ratio > 0.1


def test_op_summary_rows_grouped_per_operator(tmp_path: Path) -> None:
    header = _op_summary_header()
    assert header.endswith("aiv_vec_bankgroup_cflt_ratio,aiv_vec_bank_cflt_ratio,"
                           "aiv_vec_resc_cflt_ratio")
    n = len(header.split(","))

    def row(name: str, op_type: str, cycles: int, bankgroup: str, bank: str) -> str:
        cells = ["N/A"] * n
        cells[header.split(",").index("Op Name")] = name
        cells[header.split(",").index("OP Type")] = op_type
        cells[-4], cells[-3], cells[-2], cells[-1] = str(cycles), bankgroup, bank, "0.01"
        return ",".join(cells)

    out = tmp_path / "PROF_1" / "mindstudio_profiler_output"
    out.mkdir(parents=True)
    (out / "op_summary_20250101.csv").write_text("\n".join([
        header,
        row("Add_1", "Add", 1000, "0.1", "0.2"),
        row("Add_1", "Add", 3000, "0.1", "0.6"),
        row("Cast_2", "Cast", 500, "0.05", "0.05"),
        row("Hccl", "hcom", 0, "N/A", "N/A"),
    ]) + "\n")
    ops = read_conflicts(tmp_path)
    assert [o.operator for o in ops] == ["Add_1", "Cast_2", "Hccl"]
    add = ops[0]
    assert add.rows == 2 and add.op_type == "Add"
    assert add.bank_cflt_ratio == pytest.approx((0.2 * 1000 + 0.6 * 3000) / 4000)  # cycle-weighted
    assert add.worst_ratio == 0.6 and add.resc_cflt_ratio == pytest.approx(0.01)
    assert add.total_cflt_ratio is None
    assert ops[2].bank_cflt_ratio is None and ops[2].conflict_ratio == 0.0


def test_hbm_total_is_the_sum_of_units_not_the_average(tmp_path: Path) -> None:
    out = tmp_path / "PROF_1" / "mindstudio_profiler_output"
    out.mkdir(parents=True)
    shutil.copy(HBM, out / "hbm_20250101.csv")
    [hbm] = read_hbm(tmp_path)
    assert hbm.device_id == 0 and hbm.units == 4
    assert hbm.read_mb_s == pytest.approx(10.08 + 9.409 + 9.391 + 9.394)
    assert hbm.write_mb_s == pytest.approx(2.176 + 1.49 + 1.125 + 1.157)


def test_directory_without_conflict_data_gives_a_note(tmp_path: Path) -> None:
    shutil.copy(MSPROF / "kernel_details_A2_PipeUtilization_fixture.csv",
                tmp_path / "op_summary_1.csv")  # another --aic-metrics: not conflicts
    (tmp_path / "hbm_1.csv").write_text("a,b\n1,2\n")
    report = read_profile(tmp_path)
    assert report.conflicts == () and report.hbm == ()
    assert any("no ResourceConflictRatio data" in n for n in report.notes)
    assert any("hbm_1.csv: skipped" in n for n in report.notes)


def test_resource_conflict_file_without_columns_is_noted(tmp_path: Path) -> None:
    (tmp_path / "ResourceConflictRatio.csv").write_text("block_id,x\n0,1\n")
    report = read_profile(tmp_path)
    assert report.conflicts == ()
    assert any("ResourceConflictRatio.csv: skipped" in n for n in report.notes)


def test_missing_or_file_path_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(MsprofError, match=r"nope: no such msprof output directory"):
        read_conflicts(tmp_path / "nope")
    with pytest.raises(MsprofError, match=r"not a directory"):
        read_conflicts(CONFLICT)


def test_an_unreadable_csv_is_a_note_and_the_others_are_still_read(tmp_path: Path) -> None:
    (tmp_path / "ResourceConflictRatio.csv").write_bytes(b"\xff\xfe\xfa not utf-8\n")
    (tmp_path / "hbm_0.csv").write_bytes(b"Device_id,Metric\n\xff\n")
    shutil.copy(HBM, tmp_path / "hbm_1.csv")
    report = read_profile(tmp_path)
    unreadable = [n for n in report.notes if "skipped, unreadable" in n]
    assert [n.split(":")[0] for n in unreadable] == ["ResourceConflictRatio.csv", "hbm_0.csv"]
    assert [h.source for h in report.hbm] == ["hbm_1.csv"]
