"""`ascend-doctor npu` tables: every corpus sample renders, and text from the output is shown,
never obeyed (no control sequence reaches the terminal, no rich markup is interpreted)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from checks.cli.npu_view import render
from probes.inventory import parse_output
from tests.npu_smi_fixtures import npu_smi_sample

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "npu-smi"
HOSTILE = "\x1b]0;pwned\x07[/x][bold]red[link=https://x.invalid]"


def rendered(text: str) -> str:
    out = io.StringIO()
    console = Console(file=out, width=200, force_terminal=False, color_system=None)
    render(parse_output(text), console)
    return out.getvalue()


@pytest.mark.parametrize("path", sorted(CORPUS.rglob("*.txt")), ids=lambda p: p.name[:12])
def test_every_parsable_sample_renders(path: Path) -> None:
    from probes.errors import ParseError

    try:
        reading = parse_output(path.read_text(encoding="utf-8"))
    except ParseError:
        return
    out = io.StringIO()
    render(reading, Console(file=out, width=160, color_system=None))
    assert out.getvalue().strip()


def _assert_shown_not_obeyed(out: str) -> None:
    assert "\x1b" not in out and "\x07" not in out
    assert "\\x1b]0;pwned\\x07[/x][bold]red[link=https://x.invalid]" in out


def test_a_process_name_with_escapes_and_markup_is_shown_literally() -> None:
    table = npu_smi_sample("065").replace("| python                   |",
                                  f"| {HOSTILE:<24} |", 1)
    assert HOSTILE in table
    _assert_shown_not_obeyed(rendered(table))


def test_a_chip_name_and_a_warning_with_escapes_are_shown_literally() -> None:
    table = npu_smi_sample("014").replace("910B4 ", f"{HOSTILE} ", 1) + f"{HOSTILE}\n"
    out = rendered(table)
    _assert_shown_not_obeyed(out)
    assert "warning: line 50: not part of the table" in out


def test_key_value_cells_watch_cells_and_errors_are_shown_literally() -> None:
    kv = f"\tNPU ID                         : 0\n\tChip Name                      : {HOSTILE}\n"
    _assert_shown_not_obeyed(rendered(kv))
    watch = "NpuID(Idx)  Temp(C)\n0           " + HOSTILE.replace(" ", "") + "\n"
    assert "\x1b" not in rendered(watch)
    error = f"dcmi module initialize failed. ret is -8005 {HOSTILE}\n{HOSTILE}\n"
    _assert_shown_not_obeyed(rendered(error))


def test_950_table_shows_its_npu_utilisation_column() -> None:
    (path,) = (CORPUS / "constructed").glob("C05-*.txt")
    out = rendered(path.read_text())
    assert "Util%" in out and "97122/131072" in out


def test_topo_renders_as_a_matrix() -> None:
    out = rendered(npu_smi_sample("047"))
    assert "CPU Affinity" in out and "144-167" in out and "HCCS = Connection traversing" in out
