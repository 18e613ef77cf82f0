"""Error outputs, noise lines, `detect_kind` over the whole corpus, and `to_json` of errors."""

from __future__ import annotations

import pytest

from probes.npu_smi import NpuSmiError, detect_error, detect_kind, split_noise, to_json
from probes.npu_smi.registry import KINDS as REGISTRY
from tests.npu_smi_fixtures import npu_smi_sample

# FORMATS.md §4; no sample file holds it, so it is written from the description
ERROR_8005 = (
    "DrvMngGetConsoleLogLevel failed. (g_conLogLevel=3)\n"
    "dcmi module initialize failed. ret is -8005\n"
)


def test_8005_dcmi_init_failed_behind_noise() -> None:
    error = detect_error(ERROR_8005)
    assert error == NpuSmiError(code=-8005, kind="dcmi_init_failed",
                                message="dcmi module initialize failed. ret is -8005")
    assert to_json(error) == {"schema": "ascend-npu/1", "kind": "error",
                              "error": "dcmi module initialize failed. ret is -8005",
                              "code": -8005, "error_kind": "dcmi_init_failed", "warnings": []}
    assert detect_kind(ERROR_8005) == "error"


def test_057_8020_device_in_use_with_prompt_and_noise() -> None:
    error = detect_error(npu_smi_sample("057"))
    assert error is not None
    assert (error.code, error.kind) == (-8020, "device_in_use")
    assert error.message == (
        "dcmi model initialized failed, because the device is used. ret is -8020"
    )
    assert detect_kind(npu_smi_sample("057")) == "error"


def test_031_invalid_card_with_usage_line() -> None:
    error = detect_error(npu_smi_sample("031"))
    assert error is not None
    assert (error.code, error.kind) == (None, "invalid_card")
    assert error.message.splitlines() == [
        "Invalid card id.",
        "Error parameter of -i",
        "Usage: npu-smi info <watch|proc|-h|-m|-l|-t type> [Options...]",
    ]
    assert to_json(error)["error"].startswith("Invalid card id.\n")


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("There is no NPU card on this server.\n", "no_npu"),
        ("There is no NPU chip on this card.\n", "no_npu"),
        ("Error parameter of -i\n", "invalid_card"),
        ("open /dev/davinci_manager failed: Permission denied\n", "permission_denied"),
        ("bash: npu-smi: command not found\n", "command_not_found"),
        ("npu-smi: error while loading shared libraries: libdrvdsmi_host.so: cannot open shared"
         " object file: No such file or directory\n", "driver_library_missing"),
        ("This device dose not support querying xlink topo.\n", "unsupported"),
    ],
)
def test_other_error_kinds(text: str, kind: str) -> None:
    error = detect_error(text)
    assert error is not None
    assert error.kind == kind and error.code is None
    assert error.message == text.strip()


@pytest.mark.parametrize("number", ["001", "004", "014", "041", "007", "010", "058", "060"])
def test_no_error_in_normal_outputs(number: str) -> None:
    assert detect_error(npu_smi_sample(number)) is None


def test_058_noise_line_before_other_output() -> None:
    clean, noise = split_noise(npu_smi_sample("058"))
    assert noise == ("DrvMngGetConsoleLogLevel failed. (ret=4)",)
    assert clean.splitlines()[0] == "Collecting environment information..."
    assert clean.endswith("\n")
    assert detect_kind(npu_smi_sample("058")) == "unknown"  # a collect_env dump is none of ours


def test_060_driver_trailer_is_noise() -> None:
    clean, noise = split_noise(npu_smi_sample("060"))
    assert clean == ""
    assert len(noise) == 1 and noise[0].startswith("[WARNING]The driver package")


def test_split_noise_keeps_the_table_intact() -> None:
    text = ("DrvMngGetConsoleLogLevel failed. (g_conLogLevel=3)\n" + npu_smi_sample("014")
            + npu_smi_sample("060"))
    clean, noise = split_noise(text)
    assert clean == npu_smi_sample("014")
    assert len(noise) == 2


KINDS = {
    "info": ["001", "002", "003", "004", "014", "023", "025", "039", "048", "049", "050",
             "051", "052", "053", "055", "059", "064", "065", "067"],
    "mapping": ["005", "006", "007", "008", "009", "015", "026"],
    "watch": ["041", "042", "043"],
    "error": ["031", "057"],
    # the -t family: the matrix and proc-mem have their own parsers, the rest is key/value
    "topo": ["047"],
    "proc-mem": ["061"],
    "kv": ["010", "011", "012", "013", "027", "028", "029", "032", "037", "038", "062"],
    "unknown": ["017", "019", "033", "058", "060"],
}


@pytest.mark.parametrize(
    ("number", "kind"), [(n, kind) for kind, numbers in KINDS.items() for n in numbers]
)
def test_detect_kind_on_the_corpus(number: str, kind: str) -> None:
    assert detect_kind(npu_smi_sample(number)) == kind


def test_the_expected_kinds_are_the_registry_s_names() -> None:
    assert set(KINDS) <= {kind.name for kind in REGISTRY} | {"unknown"}


def test_detect_kind_hand_written() -> None:
    assert detect_kind("\tTotal Count : 1\n\n\tNPU ID : 0\n\tChip Count : 1\n") == "list"
    assert detect_kind("") == "unknown"
    assert detect_kind("   \n\n") == "unknown"


def test_to_json_rejects_other_objects() -> None:
    with pytest.raises(TypeError):
        to_json("not a result")  # type: ignore[arg-type]
