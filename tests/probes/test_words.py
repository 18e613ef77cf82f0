"""The one home of a count's plural in messages (probes/words.py)."""

from __future__ import annotations

from probes.words import counted, verb


def test_a_count_takes_the_noun_it_calls_for() -> None:
    assert counted(1, "chip") == "1 chip"
    assert counted(0, "chip") == "0 chips"
    assert counted(8, "chip") == "8 chips"
    assert counted(2, "NPU") == "2 NPUs"
    assert counted(3, "child", "children") == "3 children"
    assert (verb(1, "reports", "report"), verb(8, "reports", "report")) == ("reports", "report")
