"""The target's JSON form: a round trip, and hostile target.json documents refused by name."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from probes.target.model import ServingArgs, Target, from_json, shell_target, to_json
from probes.target.parts import Candidate, NpuUse, ProcessInfo, Sourced

TARGET = Target(
    kind="process", label="process 4242 (vllm serve /models/m)", chosen="--pid 4242",
    environment="/proc/4242/environ; its files under /proc/4242/root",
    process=ProcessInfo(4242, ("python3", "/v/bin/vllm", "serve", "/models/m"), "vllm",
                        "/usr/bin/python3.11", "/srv", 1000, 1, 7, (0, 1, 2, 3), (0,),
                        "other", "/proc/4242/root", 99),
    serving=ServingArgs("vllm", Sourced("/models/m", "cmd"), Sourced("/models/m", "cmd"),
                        tensor_parallel_size=Sourced(2, "`-tp 2`"),
                        max_model_len=Sourced(8192, "`--max-model-len 8192`"),
                        gpu_memory_utilization=Sourced(0.9, "x"), notes=("n",)),
    npus=(NpuUse(0, 0, 4250, 30000),), npus_known=True,
    candidates=(Candidate(4242, "vllm serve /models/m", "a vLLM server", "vllm",
                          (NpuUse(0, 0, 4250, 30000),)),),
    problems=("p",))


@pytest.mark.parametrize("target", [TARGET, shell_target()])
def test_round_trip(target: Target) -> None:
    assert from_json(to_json(target)) == target


def _broken(path: list[Any], value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(to_json(TARGET))
    where = doc
    for key in path[:-1]:
        where = where[key]
    where[path[-1]] = value
    return doc


@pytest.mark.parametrize(("path", "value", "message"), [
    (["kind"], "container", "target.kind"),
    (["label"], 3, "label: not a string"),
    (["process"], [], "target.process: not a JSON object"),
    (["process", "pid"], "1", "pid: not an integer"),
    (["process", "pid"], True, "pid: not an integer"),
    (["process", "cpus_allowed"], [0, "1"], "cpus_allowed: not a list of integers"),
    (["process", "mount_namespace"], "host", "mount_namespace"),
    (["serving", "tensor_parallel_size"], {"value": "2", "source": "x"},
     "tensor_parallel_size.value: not a int"),
    (["serving", "model"], {"value": "/m"}, "source: not a string"),
    (["npus"], {}, "npus: not a list"),
    (["candidates"], [{"pid": 1}], "label: not a string"),
])
def test_hostile_documents_are_refused_naming_the_field(path: list[Any], value: Any,
                                                       message: str) -> None:
    with pytest.raises(ValueError, match=message):
        from_json(_broken(path, value))
