"""The registry of checks: what each one is, declared here; its code, imported when it runs.

A check's module is imported only when the check runs, and a check whose declared input is
absent (`needs`: no --model, no --baseline) is skipped without importing it. A check whose
input is a fact of the machine (an NPU table, a serving engine, an Ascend stack) names a
`front`: a function in a light module that answers for it when the fact is absent, before the
check's module, its tables and its classes are imported. `list` and a run
on a bare machine stay quick however many checks exist (bench/bench_doctor.py).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from checks.model import Check, CheckFn, Finding, Need

if TYPE_CHECKING:
    from checks.context import Context


def resolve(target: str) -> CheckFn:
    """The function a `module:function` target names, importing its module."""
    module_name, _, function_name = target.partition(":")
    fn: CheckFn = getattr(importlib.import_module(module_name), function_name)
    return fn


class LazyPrefetch:
    """A check's prefetch function (Check.prefetch), imported when it is called."""

    __slots__ = ("target",)

    def __init__(self, target: str) -> None:
        self.target = target

    def __call__(self, ctx: Context) -> None:
        resolve(self.target)(ctx)


class LazyCheckFn:
    """A check function that imports its module on the first call; its front, when it has
    one, answers first (a Finding when the check's input is absent, else None)."""

    __slots__ = ("front", "target")

    def __init__(self, target: str, front: str = "") -> None:
        self.target = target
        self.front = front

    def __call__(self, ctx: Context) -> Finding:
        if self.front:
            early: Finding | None = resolve(self.front)(ctx)
            if early is not None:
                return early
        return resolve(self.target)(ctx)

    def __repr__(self) -> str:
        return f"LazyCheckFn({self.target!r})"


def _check(id: str, title: str, category: str, looks_at: str, target: str,
           needs: tuple[Need, ...] = (), prefetch: str = "", front: str = "") -> Check:
    fn = LazyCheckFn(f"checks.builtin.{target}", f"checks.builtin.{front}" if front else "")
    begin = LazyPrefetch(f"checks.builtin.{prefetch}") if prefetch else None
    return Check(id, title, category, looks_at, fn, needs=needs, prefetch=begin)


BUILTIN: tuple[Check, ...] = (
    _check("versions.parity", "Ascend software versions agree", "versions",
           "driver (CANN->HDK table), firmware, CANN, NNAL, torch/torch_npu, vllm-ascend and "
           "MindIE pairing tables, in the judged interpreter",
           "versions:versions_parity", front="versions_installed:nothing_installed"),
    _check("serving.support", "The engine release supports this model, chip and features",
           "versions", "the engine release (vllm_ascend package, MindIE version.info), the "
           "model type (config.json), the chip families (npu-smi) and the features on the "
           "command line against checks/data/support.yaml and known_issues.yaml",
           "serving_support:serving_support", front="serving:support_front"),
    _check("serving.flags", "Serving command line and environment", "environment",
           "vllm serve arguments (with --additional-config/--compilation-config JSON) and "
           "HCCL_*/VLLM_ASCEND_* environment against the rules of checks/data/flags.yaml, "
           "keyed by engine release, model type and chip family", "serving_flags:serving_flags",
           front="serving:flags_front"),
    _check("npu.health", "NPU chip health", "npu",
           "npu-smi health per chip, error codes from -t health, npu-smi errors",
           "npu:npu_health", front="npu_table:no_table"),
    _check("npu.temperature", "NPU temperature", "npu",
           "thermal alarm codes (-t health), HBM temperature (-t memory) against the HBM "
           "alarm, each chip against the median of the others; power shown where printed, "
           "not judged",
           "npu:npu_temperature", front="npu_table:no_table"),
    _check("npu.hbm-fit", "Will the model fit in HBM", "npu",
           "weights (safetensors headers, the index's total_size, or estimated from "
           "config.json) + KV cache and linear-attention state (the target's context or the "
           "policy) + reserve per chip of one tensor-parallel group (the target's -tp, --tp or "
           "the policy)", "hbm_fit:hbm_fit", needs=("model",)),
    _check("cann.environment", "CANN toolkit environment", "environment",
           "ASCEND_HOME_PATH/OPP_PATH, set_env.sh, driver lib64 and libascendcl.so on "
           "LD_LIBRARY_PATH, ASCEND_RT_VISIBLE_DEVICES", "environment:cann_environment"),
    _check("logging.level", "CANN log level and log directory", "logging",
           "ASCEND_GLOBAL_LOG_LEVEL (0 DEBUG .. 4 NULL), ASCEND_HOST_LOG_FILE_NUM, "
           "ASCEND_SLOG_PRINT_TO_STDOUT, log "
           "directory size and free space", "logging:logging_level"),
    _check("pcie.contention", "PCIe links of the NPUs", "pcie",
           "link speed/width vs the lower of the device and upstream port capability, "
           "non-NPU devices sharing an uplink, AER counters; the target's CPUs against its "
           "NPUs' NUMA nodes",
           "pcie:pcie_contention", front="pci_functions:no_ascend_function"),
    _check("devices.nodes", "NPU device nodes", "devices",
           "/dev/davinci<N> and the shared nodes the NPU family needs (davinci_manager, "
           "devmm_svm, hisi_hdc; family from PCI ids or npu-smi chip names)",
           "devices:device_nodes", front="dev_nodes:not_an_npu_machine"),
    _check("checkpoint.fp8-scales", "FP8 weight scales", "checkpoint",
           "every FP8 weight's scale as its format keeps it (block weight_scale_inv grid, "
           "per-channel or per-tensor weight_scale, input_scale): present, shape, dtype, "
           "finite, range, outliers", "fp8_scales:fp8_scales", needs=("model",)),
    _check("checkpoint.format", "Checkpoint format and completeness", "checkpoint",
           "precision, architecture, every shard present and opening as the loader opens it, "
           "the tensors config.json needs; apart from that, FP8 against the chip family",
           "checkpoint:checkpoint_format", needs=("model",)),
    _check("tokenizer.dtype", "The tokenizer the engine will use, as it will use it",
           "tokenizer",
           "the tokenizer and chat template the target's vLLM flags pick (--tokenizer, "
           "--tokenizer-mode, --chat-template, --trust-remote-code): special tokens vs "
           "config.json, the end of a turn vs the ids the engine stops on, enable_thinking; "
           "transformers/tokenizers against --baseline",
           "tokenizer:tokenizer_dtype", needs=("model",), prefetch="tokenizer:prefetch"),
    _check("tokenizer.token-ids", "Token ids fit the model's embedding", "tokenizer",
           "the largest id the served tokenizer produces (chat template run inside a "
           "budget) vs config.json vocab_size; another model family's tokenizer; with "
           "--endpoint, the server's own ids of a prompt holding ids above 65535",
           "tokenizer_ids:tokenizer_token_ids", needs=("model",),
           prefetch="tokenizer:prefetch"),
    _check("endpoint.health", "Serving endpoint reachable and serving the model", "endpoint",
           "GET /v1/models on --endpoint: connection, TLS, auth, the --endpoint-model listed",
           "endpoint:endpoint_health", needs=("endpoint",)),
    _check("endpoint.smoke", "Serving endpoint streams a completion", "endpoint",
           "a short greedy streamed chat completion: text, well-formed SSE ending in [DONE], "
           "time to first token within the policy's budget", "endpoint:endpoint_smoke",
           needs=("endpoint",)),
    _check("endpoint.metrics", "Serving endpoint exports its metrics", "endpoint",
           "/metrics: the serving metrics the console reads (vLLM old and new names, MindIE), "
           "KV-cache use and waiting requests under the policy's limits",
           "endpoint:endpoint_metrics", needs=("endpoint",)),
    _check("engine.op-coverage", "The NPU has kernels for every operator the model runs",
           "engine", "aten operators of one prefill + decode of --model (traced on the meta "
           "device), each against the NPU's kernels: probed with torch_npu, else predicted "
           "from torch_npu's registry for the judged interpreter's torch_npu; runs only when "
           "named in --only (it loads torch)", "ops:op_coverage", needs=("model", "asked")),
    _check("baseline.drift", "Drift from the validated baseline", "baseline",
           "versions, ASCEND_* environment, NPU inventory and tokenizer against --baseline FILE",
           "baseline:baseline_drift", needs=("baseline",)),
)


def all_checks() -> tuple[Check, ...]:
    return tuple(sorted(BUILTIN, key=lambda c: (c.category, c.id)))


def select(checks: tuple[Check, ...], only: list[str], skip: list[str]) -> tuple[Check, ...]:
    """Filter by ids; an unknown id is an error naming it."""
    known = {c.id for c in checks}
    for name in [*only, *skip]:
        if name not in known:
            raise KeyError(name)
    return tuple(c for c in checks if (not only or c.id in only) and c.id not in skip)
