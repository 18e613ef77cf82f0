"""Big or hostile pasted inputs (issue #16): bounded, linear, never a traceback.

- over MAX_INPUT_BYTES or MAX_INPUT_LINES: refused with one ParseError line naming the limit;
- a number longer than any npu-smi prints (more than 4,300 digits reaches Python's int-string
  limit): a warning and null, in every kind of output;
- random mixtures of junk, key/value lines, watch rows and box rows: a reading that serialises
  as strict JSON, or ParseError; nothing else;
- the worst inputs run through the real CLI in a subprocess under a peak-RSS bound.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from probes.errors import ParseError
from probes.inventory import parse_output
from probes.npu_smi.registry import MAX_INPUT_BYTES, MAX_INPUT_LINES
from tests.npu_smi_fixtures import npu_smi_sample

ROOT = Path(__file__).resolve().parents[2]
WALL = "9" * 5000  # past int()'s 4,300-digit limit
RSS_LIMIT_MB = 300


def strict_json(doc: object) -> str:
    """The document as JSON that any reader accepts (no NaN, no Infinity)."""
    return json.dumps(doc, allow_nan=False)


# -- limits ---------------------------------------------------------------------------------


def test_too_many_lines_is_one_clear_refusal() -> None:
    text = "x\n" * (MAX_INPUT_LINES + 1)
    with pytest.raises(ParseError, match=f"{MAX_INPUT_LINES + 1:,} lines, more than the "
                                         f"{MAX_INPUT_LINES:,}"):
        parse_output(text, "pasted.txt")


def test_too_many_bytes_is_one_clear_refusal() -> None:
    text = "\tKey                            : 1\n" * (MAX_INPUT_BYTES // 36 + 1)
    with pytest.raises(ParseError, match=r"pasted\.txt: more than 8 MiB"):
        parse_output(text, "pasted.txt")


def test_at_the_line_limit_a_watch_log_still_parses() -> None:
    header, *rows = npu_smi_sample("041").splitlines()
    body = [rows[i % len(rows)] for i in range(MAX_INPUT_LINES - 1)]
    reading = parse_output("\n".join([header, *body]) + "\n")
    assert reading.kind == "watch" and len(reading.document["rows"]) == MAX_INPUT_LINES - 1


# -- implausible numbers --------------------------------------------------------------------


def _table_with(temp: str, hbm_used: str) -> str:
    return (npu_smi_sample("014").replace("| 87.2        33 ", f"| 87.2        {temp} ", 1)
            .replace("2654 / 32768", f"{hbm_used} / 32768", 1))


@pytest.mark.parametrize(("text", "where"), [
    (_table_with(WALL, "2654"), "Temp(C) value of 5000 digits is implausible: null"),
    (_table_with("33", WALL), "HBM-Usage(MB) value of 5000 digits is implausible: null"),
    (f"NpuID(Idx)  Temp(C)\n0           {WALL}\n", "Temp(C) value of 5000 digits is implausible"),
    (f"\tNPU ID                         : 0\n\tHBM Capacity(MB)               : {WALL}\n",
     "HBM Capacity(MB) value of 5000 digits is implausible: null"),
    (f"\tTotal Count                    : {WALL}\n\n\tNPU ID                         : 0\n",
     "Total Count value of 5000 digits is implausible: null"),
])
def test_a_wall_of_digits_is_a_warning_and_null(text: str, where: str) -> None:
    reading = parse_output(text)
    doc = reading.document
    assert any(where in warning for warning in doc["warnings"]), doc["warnings"]
    assert WALL not in strict_json({k: v for k, v in doc.items() if k != "warnings"})


def test_a_wall_of_digits_in_ids_and_codes_never_raises() -> None:
    for text in (f"dcmi module initialize failed. ret is -{WALL}\n",
                 f"\tProcess id:{WALL} Process name:python Process memory(MB):{WALL}\n"
                 "\tChip ID                        : 0\n",
                 f"\tNPU ID                         : {WALL}\n"
                 "\tChip Count                     : 1\n",
                 f"NPU ID    Chip ID    Chip Logic ID    Chip Name\n{WALL}    0    0    x\n"):
        reading = parse_output(text)
        strict_json(reading.document)
    assert parse_output(f"dcmi module initialize failed. ret is -{WALL}\n").document[
        "code"] is None


# -- random mixtures ------------------------------------------------------------------------

NUMBER = st.one_of(st.integers(-10, 10**6).map(str), st.just(WALL), st.just("9" * 4301),
                   st.just("1" * 400 + ".5"), st.just("NA"), st.just("-"))
JUNK = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=60)
LINE = st.one_of(
    JUNK,
    st.builds(lambda k, v: f"\t{k:<30} : {v}", st.sampled_from(
        ["NPU ID", "Chip ID", "Chip Count", "HBM Temperature(C)", "NPU Temperature (C)",
         "Health Status", "Error Code", "Chip Name", "Aicore Usage Rate(%)"]), NUMBER),
    st.builds(lambda a, b, c: f"{a:<12}{b:<12}{c:<12}", NUMBER, NUMBER, NUMBER),
    st.builds(lambda a, b: f"| {a}     910B4 | OK | 87.2 {b} 0 / 0 |", NUMBER, NUMBER),
    st.sampled_from(["NpuID(Idx)  ChipId(Idx) Temp(C)", "\t   NPU0       NPU1",
                     "NPU0       X          HCCS", "$ npu-smi info", "[root@h ~]# npu-smi info",
                     "dcmi module initialize failed. ret is -8005", "Usage: npu-smi info",
                     "\tProcess id:12 Process name:py Process memory(MB):3"]),
)
PREFIX = st.sampled_from(["", npu_smi_sample("014"), npu_smi_sample("041"), npu_smi_sample("010"),
                          npu_smi_sample("047"), npu_smi_sample("031")])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prefix=PREFIX, lines=st.lists(LINE, max_size=40))
def test_any_mixture_gives_strict_json_or_one_parse_error(prefix: str, lines: list[str]) -> None:
    text = prefix + "\n".join(lines)
    try:
        reading = parse_output(text)
    except ParseError as exc:
        assert "\n" not in str(exc)  # one line on stderr
        return
    strict_json(reading.document)


# -- the worst inputs through the CLI, in a subprocess, under an RSS bound --------------------

# VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the forking parent (pytest, holding
# these inputs); VmHWM belongs to the address space this interpreter was exec'd into.
RUN_AND_MEASURE = """
import contextlib, io, re, sys
from pathlib import Path
from checks.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    code = main(["npu", "--from-file", sys.argv[1], "--json"])
status = Path("/proc/self/status").read_text()
peak_kb = int(re.search(r"VmHWM:\\s+(\\d+) kB", status).group(1))
print(code, peak_kb // 1024, len(out.getvalue()))
"""


def _watch_log(lines: int) -> str:
    header, *rows = npu_smi_sample("041").splitlines()
    return "\n".join([header, *(rows[i % len(rows)] for i in range(lines - 1))]) + "\n"


WORST = {
    # the largest accepted output with the most objects per line
    "watch-at-limit": (_watch_log(MAX_INPUT_LINES), 0),
    # a million lines: refused without being read whole
    "million-kv-lines": ("\tField                          : 1\n" * 1_000_000, 3),
    "million-short-lines": ("x\n" * 1_000_000, 3),
    # one line of 8 MiB that every detector looks at
    "one-huge-line": ("dcmi npu-smi " * (MAX_INPUT_BYTES // 13 - 1), 3),
}


@pytest.mark.parametrize("name", sorted(WORST))
def test_worst_inputs_stay_under_the_rss_bound(tmp_path: Path, name: str) -> None:
    text, exit_code = WORST[name]
    path = tmp_path / f"{name}.txt"
    path.write_text(text)
    done = subprocess.run([sys.executable, "-c", RUN_AND_MEASURE, str(path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)  # a hang guard only
    assert done.returncode == 0, done.stderr[-2000:]
    code, peak_mb, _ = (int(word) for word in done.stdout.split())
    assert code == exit_code, done.stderr[-500:]
    assert peak_mb < RSS_LIMIT_MB, f"{name}: peak RSS {peak_mb} MB"
    if exit_code == 3:
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
