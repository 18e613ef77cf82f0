"""The recorded npu-smi outputs of tests/corpus/npu-smi (provenance in its README), read by the
number their file names start with."""

from __future__ import annotations

from pathlib import Path

NPU_SMI_CORPUS = Path(__file__).resolve().parent / "corpus" / "npu-smi"


def npu_smi_sample(number: str) -> str:
    """The text of the one corpus file named `<number>-*.txt` (two such files fail the test)."""
    (path,) = NPU_SMI_CORPUS.glob(f"{number}-*.txt")
    return path.read_text(encoding="utf-8")
