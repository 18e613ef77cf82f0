"""Outputs the parsers used to misread, each reproduced by a constructed sample
(tests/corpus/npu-smi/constructed/README.md says what each imitates), read through the one
entry point the doctor, bundles and the console use."""

from __future__ import annotations

from pathlib import Path

import pytest

from probes.inventory import parse_output
from probes.npu_smi import KvOutput, NpuInfo, NpuSmiError, Topology, detect_kind, parse
from tests.npu_smi_fixtures import npu_smi_sample

CONSTRUCTED = Path(__file__).parent.parent / "corpus" / "npu-smi" / "constructed"


def constructed(number: str) -> str:
    (path,) = CONSTRUCTED.glob(f"{number}-*.txt")
    return path.read_text(encoding="utf-8")


def test_temp_25x_chip_fields_before_chip_id_then_the_mcu_sensors() -> None:
    out = parse(constructed("C01")).result
    assert isinstance(out, KvOutput) and out.kind == "temp" and out.npu_id == 3
    chip, mcu = out.blocks
    assert (chip.chip_id, chip.name, dict(chip.fields)) == (0, None, {"npu_temperature_c": 47})
    assert (mcu.chip_id, mcu.name) == (None, "mcu")
    assert dict(mcu.fields) == {"lm75a_te_c": 38, "lm75b_te_c": 36}
    assert out.warnings == ()


def test_power_25x_chip_fields_before_chip_id() -> None:
    out = parse(constructed("C02")).result
    assert isinstance(out, KvOutput) and out.kind == "power"
    assert [(b.chip_id, dict(b.fields)) for b in out.blocks] == [
        (0, {"npu_real_time_power_w": 96.4})]


def test_common_still_opens_with_chip_id_and_mcu_name() -> None:
    out = parse(npu_smi_sample("010")).result
    assert isinstance(out, KvOutput) and out.kind == "common"
    assert [(b.chip_id, b.name) for b in out.blocks] == [(0, None), (None, "mcu")]
    assert out.blocks[1].fields["temperature_c"] == 48


def test_topo_a3_phy_id_labels_without_cpu_affinity() -> None:
    reading = parse_output(constructed("C03"))
    assert reading.kind == "topo"
    topo = reading.parsed
    assert isinstance(topo, Topology)
    assert topo.devices == tuple(f"Phy-ID{n}" for n in range(16))
    assert topo.links[("Phy-ID0", "Phy-ID1")] == "SIO"
    assert topo.links[("Phy-ID0", "Phy-ID2")] == "HCCS"
    assert topo.links[("Phy-ID15", "Phy-ID15")] == "X"
    assert set(topo.cpu_affinity.values()) == {None}
    assert topo.legend["SIO"] == "Connection traversing SIO." and topo.warnings == ()


def test_topo_npu_matrix_without_cpu_affinity() -> None:
    reading = parse_output(constructed("C04"))
    assert reading.kind == "topo"
    doc = reading.document
    assert doc["devices"] == [f"NPU{n}" for n in range(8)]
    assert doc["links"]["NPU3"]["NPU4"] == "HCCS" and doc["links"]["NPU3"]["NPU3"] == "X"
    assert doc["warnings"] == [] and set(doc["cpu_affinity"].values()) == {None}


def test_topo_with_cpu_affinity_unchanged() -> None:
    doc = parse_output(npu_smi_sample("047")).document
    assert doc["kind"] == "topo" and doc["cpu_affinity"]["NPU2"] == "96-119"


def test_ascend_950_table_with_its_own_npu_id_column() -> None:
    info = parse(constructed("C05")).result
    assert isinstance(info, NpuInfo) and info.layout == "npu-id"
    assert [c.npu_id for c in info.chips] == [0, 1, 2, 3]
    assert [c.npu_util_percent for c in info.chips] == [99, 100, 0, 0]
    assert {c.aicore_percent for c in info.chips} == {None}  # not printed: not the same figure
    assert [(c.hbm_used_mb, c.hbm_total_mb) for c in info.chips] == [
        (97122, 131072), (10769, 131072), (6620, 131072), (6618, 131072)]
    assert {(c.memory_used_mb, c.memory_total_mb) for c in info.chips} == {(0, 0)}
    assert [c.health for c in info.chips] == ["OK", "Alarm", "OK", "OK"]
    assert (info.chips[0].name, info.chips[3].bus_id) == ("Ascend950PR", None)
    assert [(p.npu_id, p.pid, p.memory_mb) for p in info.processes] == [(0, 2210963, 90112)]
    assert info.processes_known and info.warnings == ()


def test_error_output_keeps_every_other_line() -> None:
    reading = parse_output(constructed("C06"))
    error = reading.parsed
    assert isinstance(error, NpuSmiError) and (error.code, error.kind) == (-8005,
                                                                          "dcmi_init_failed")
    doc = reading.document
    assert doc["error"] == "dcmi module initialize failed. ret is -8005"
    assert [w.split(":", 1)[0] for w in doc["warnings"]] == ["line 5", "line 6", "line 7"]
    assert doc["warnings"][2].endswith("/dev/davinci_manager")
    assert doc["noise"] == ["[root@node-3 ~]# npu-smi info",
                            "DrvMngGetConsoleLogLevel failed. (g_conLogLevel=3)",
                            "[root@node-3 ~]# ls -l /dev/davinci*"]


def test_every_input_line_is_accounted_for_in_an_error_output() -> None:
    doc = parse_output(constructed("C06")).document
    lines = [ln for ln in constructed("C06").splitlines() if ln.strip()]
    assert len(doc["error"].splitlines()) + len(doc["warnings"]) + len(doc["noise"]) == len(
        lines)


PROMPTS = [
    "root@aa6890a14c34:/# npu-smi info",
    "[root@localhost ~]# npu-smi info",
    "(base) ops@gpu-07:~$ npu-smi info -m",
    "$ npu-smi info watch -i 0 -d 2 -s pt",
    "# npu-smi info -m",
    "ops@host:~/logs$ sudo npu-smi info -t temp -i 3",
    "[root@node-3 ~]# ls -l /dev/davinci*",
]
OUTPUTS = {"info": npu_smi_sample("014"), "temp": constructed("C01"),
           "watch": npu_smi_sample("041"), "error": npu_smi_sample("031"),
           "topo": constructed("C04")}


@pytest.mark.parametrize("prompt", PROMPTS)
@pytest.mark.parametrize("kind", sorted(OUTPUTS))
def test_a_shell_prompt_is_noise_in_every_kind_of_output(prompt: str, kind: str) -> None:
    text = f"{prompt}\n{OUTPUTS[kind]}{prompt}\n"
    doc = parse_output(text).document
    assert doc["noise"] == [prompt, prompt]
    assert not any(prompt in w for w in doc.get("warnings", [])), doc.get("warnings")


def test_prompts_of_constructed_info_are_noise_and_the_table_reads_clean() -> None:
    doc = parse_output(constructed("C07")).document
    assert doc["noise"] == ["[root@localhost ~]# npu-smi info",
                            "(base) ops@gpu-07:~$ npu-smi info -m"]
    assert doc["warnings"] == [] and len(doc["chips"]) == 1


def test_warning_line_numbers_count_the_noise_lines() -> None:
    doc = parse_output(npu_smi_sample("043")).document
    assert doc["noise"] == ["$ npu-smi info watch -i 0 -d 2 -s pt"]
    assert doc["warnings"][0].startswith("line 12: not a row of this table: NpuID(Idx)")


def test_a_table_line_is_never_taken_for_a_prompt() -> None:
    for number in ("004", "014", "039", "065"):
        assert "noise" not in parse_output(npu_smi_sample(number)).document


@pytest.mark.parametrize(("number", "kind"), [("C01", "kv"), ("C02", "kv"), ("C03", "topo"),
                                              ("C04", "topo"), ("C05", "info"), ("C06", "error"),
                                              ("C07", "info")])
def test_registry_kind_of_each_constructed_sample(number: str, kind: str) -> None:
    assert detect_kind(constructed(number)) == kind


def test_temperatures_of_temp_memory_and_common_outputs() -> None:
    from probes.npu_smi import ChipTemperatures, temperatures

    def read(text: str) -> tuple[ChipTemperatures, ...]:
        out = parse(text).result
        assert isinstance(out, KvOutput)
        return temperatures(out)

    assert read(constructed("C01")) == (ChipTemperatures(0, 47.0, None),)  # LM75s are the MCU's
    assert read(npu_smi_sample("062")) == (ChipTemperatures(None, None, 63.0),)
    assert read(npu_smi_sample("010")) == (ChipTemperatures(0, 46.0, None),)
    assert read(npu_smi_sample("012")) == ()  # -t usages of this driver prints no temperature
