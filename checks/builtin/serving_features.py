"""The features a vLLM command line, its JSON flags and its environment turn on, by the names
serving.support's rows and serving.flags' `feature.NAME` facts use. Pure.

Names (a row or rule may name any of them):
- `quantization:<method>`, `quantization:ascend:<msModelSlim type>`: the quantization method.
- `data-parallel`, `pipeline-parallel`, `expert-parallel`, `ray`, `pd-disaggregation`.
- `tp:<N>`: the tensor-parallel size the command line states (--tensor-parallel-size / -tp).
- `speculative`, `speculative:<method>`, `mtp`: speculative decoding.
- `reasoning-parser:<name>`, `pooling`, `lora`, `prefix-caching`.
- `dtype:<dtype>` from an explicit --dtype other than auto (`half` read as float16, `float`
  as float32). A known-issue row may name `!FEATURE` for a feature that must be off.
- `graph` (ACL graph: neither --enforce-eager nor cudagraph_mode NONE), `graph:<mode>` for
  --compilation-config's cudagraph_mode in lower case (`graph:piecewise`, `graph:full`,
  `graph:full_decode_only`, `graph:full_and_piecewise`), `graph:full_cuda_graph`,
  `graph:torchair`, `ascend-scheduler`, `speculative-graph` (the speculative drafter in graph
  mode: graphs on and no `enforce_eager` true in --speculative-config).
- `kv-cache:<dtype>` for a --kv-cache-dtype other than auto, and `kv-cache:fp8` for every FP8
  spelling of it (fp8, fp8_e4m3, fp8_e5m2, ...).
- `context-parallel` with `context-parallel:prefill` / `context-parallel:decode` (PCP / DCP).
- `flashcomm1`, `flashcomm2`: vLLM-Ascend's FlashComm (sequence parallelism) switches.
- `eplb`: expert-parallel load balancing (vLLM's or vLLM-Ascend's).
- `kv-connector:<name>` for each connector of --kv-transfer-config, and `kv-pool` for
  vLLM-Ascend's KV cache pool (AscendStoreConnector).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probes.target.argv import JsonFlag, has_switch, value_of
from probes.target.jsonpath import at_path

# vllm-project/vllm vllm/config/compilation.py @ ee525ce4fc8c (CUDAGraphMode)
CUDAGRAPH_MODES = ("none", "piecewise", "full", "full_decode_only", "full_and_piecewise")
POOLING_TASKS = ("embed", "embedding", "score", "reward", "classify")
KV_POOL_CONNECTORS = ("AscendStoreConnector",)


def command_features(args: tuple[str, ...], flags: Mapping[str, JsonFlag],
                     env: Mapping[str, str]) -> list[str]:
    """The features read from a vLLM command line (non-empty `args`) and its environment."""
    found: list[str] = []
    if has_switch(args, "--enable-expert-parallel"):
        found.append("expert-parallel")
    found += speculative(args, flags)
    parser = value_of(args, "--reasoning-parser")
    if parser:  # shown, not judged: reasoning parsers are vLLM's own
        found.append(f"reasoning-parser:{parser}")
    if value_of(args, "--kv-transfer-config") is not None:
        found.append("pd-disaggregation")
    if value_of(args, "--distributed-executor-backend") == "ray":
        found.append("ray")
    found += switches(args)
    found += model_dtype(args)
    found += graph(args, flags)
    found += drafter_graph(found, flags)
    found += kv_cache(args)
    found += context_parallel(args, flags, env)
    found += flashcomm(flags, env)
    found += eplb(args, flags, env)
    found += kv_connectors(flags)
    return found


def switches(args: tuple[str, ...]) -> list[str]:
    """Pooling, LoRA and prefix caching as vLLM spells their flags (vllm-project/vllm
    vllm/engine/arg_utils.py @ 001999d2f360 for --task, --enable-lora and
    --enable-prefix-caching; --runner pooling from v0.10.1:
    https://docs.vllm.ai/en/v0.10.1.1/models/pooling_models.html,
    https://docs.vllm.ai/en/v0.8.3/_sources/models/pooling_models.md). Prefix caching is
    read only when switched on: its default depends on the vLLM release and the runner."""
    found = []
    runner = (value_of(args, "--runner") or "").lower()
    task = (value_of(args, "--task") or "").lower()
    if runner == "pooling" or task in POOLING_TASKS:
        found.append("pooling")
    if has_switch(args, "--enable-lora"):
        found.append("lora")
    if has_switch(args, "--enable-prefix-caching"):
        found.append("prefix-caching")
    return found


# vLLM's --dtype: "half" is FP16, "float" is FP32, auto takes the checkpoint's dtype
# (https://docs.vllm.ai/en/latest/configuration/engine_args.html, --dtype)
DTYPE_ALIASES = {"half": "float16", "float": "float32"}


def model_dtype(args: tuple[str, ...]) -> list[str]:
    """`dtype:<dtype>` for an explicit --dtype; none for auto (the checkpoint's dtype)."""
    dtype = (value_of(args, "--dtype") or "auto").strip().lower()
    return [] if dtype == "auto" else [f"dtype:{DTYPE_ALIASES.get(dtype, dtype)}"]


def speculative(args: tuple[str, ...], flags: Mapping[str, JsonFlag]) -> list[str]:
    """`speculative:<method>` from --speculative-config's `method` (`mtp` kept as its own
    name); plain `speculative` from the older --speculative-model/--num-speculative-tokens
    (vllm-project/vllm vllm/engine/arg_utils.py @ 001999d2f360)."""
    method = at_path(json_value(flags, "--speculative-config"), "method")
    if isinstance(method, str) and method.strip():
        name = method.strip().lower()
        return ["speculative", f"speculative:{name}"] + (["mtp"] if "mtp" in name else [])
    if value_of(args, "--speculative-model", "--num-speculative-tokens") is not None:
        return ["speculative"]
    return []


def graph(args: tuple[str, ...], flags: Mapping[str, JsonFlag]) -> list[str]:
    """The graph modes: ACL graph unless --enforce-eager or cudagraph_mode NONE, the
    compilation config's cudagraph_mode (vllm-project/vllm vllm/config/compilation.py @
    ee525ce4fc8c: NONE, PIECEWISE, FULL, FULL_DECODE_ONLY, FULL_AND_PIECEWISE; --enforce-eager
    captures no graph whatever the mode says), and vllm-ascend's torchair graph and Ascend
    scheduler from --additional-config (`torchair_graph_config.enabled`,
    `ascend_scheduler_config.enabled`:
    https://docs.vllm.ai/projects/ascend/en/v0.9.1/user_guide/configuration/additional_config.html)."""
    compilation = json_value(flags, "--compilation-config")
    mode = at_path(compilation, "cudagraph_mode")
    mode = mode.strip().lower() if isinstance(mode, str) else ""
    found = []
    if not has_switch(args, "--enforce-eager") and mode != "none":
        found.append("graph")
        if mode in CUDAGRAPH_MODES:
            found.append(f"graph:{mode}")
    if at_path(compilation, "full_cuda_graph") is True:
        found.append("graph:full_cuda_graph")
    extra = json_value(flags, "--additional-config")
    if at_path(extra, "torchair_graph_config.enabled") is True:
        found.append("graph:torchair")
    if at_path(extra, "ascend_scheduler_config.enabled") is True:
        found.append("ascend-scheduler")
    return found


def drafter_graph(found: list[str], flags: Mapping[str, JsonFlag]) -> list[str]:
    """`speculative-graph` where the speculative drafter runs in graph mode: the model is
    served with graphs and --speculative-config does not set `enforce_eager` true (the
    drafter-only eager switch the vllm-project/vllm-ascend#10005 thread uses as its
    workaround)."""
    if "speculative" not in found or "graph" not in found:
        return []
    if at_path(json_value(flags, "--speculative-config"), "enforce_eager") is True:
        return []
    return ["speculative-graph"]


def kv_cache(args: tuple[str, ...]) -> list[str]:
    """`kv-cache:<dtype>` from --kv-cache-dtype (vllm-project/vllm vllm/engine/arg_utils.py @
    99d7eb5d6a51; `auto`, the default, follows the model's dtype and is no feature)."""
    dtype = (value_of(args, "--kv-cache-dtype") or "").strip().lower()
    if not dtype or dtype == "auto":
        return []
    found = [f"kv-cache:{dtype}"]
    if dtype.startswith("fp8") and dtype != "fp8":
        found.append("kv-cache:fp8")
    return found


def context_parallel(args: tuple[str, ...], flags: Mapping[str, JsonFlag],
                     env: Mapping[str, str]) -> list[str]:
    """Prefill / decode context parallel: vLLM's --prefill-context-parallel-size (-pcp) and
    --decode-context-parallel-size (-dcp) above 1 (vllm-project/vllm vllm/engine/arg_utils.py
    @ 99d7eb5d6a51 for -dcp; https://docs.vllm.ai/en/latest/cli/serve.html for -pcp), and
    vLLM-Ascend's own switch, VLLM_ASCEND_ENABLE_CONTEXT_PARALLEL or --additional-config
    `enable_context_parallel`
    (https://docs.vllm.ai/projects/ascend/en/v0.23.0rc1/user_guide/configuration/additional_config.html,
    migration table)."""
    found = []
    for kind, names in (("prefill", ("--prefill-context-parallel-size", "-pcp")),
                        ("decode", ("--decode-context-parallel-size", "-dcp"))):
        if _above_one(args, names):
            found.append(f"context-parallel:{kind}")
    switched = _env_on(env, "VLLM_ASCEND_ENABLE_CONTEXT_PARALLEL") or \
        at_path(json_value(flags, "--additional-config"), "enable_context_parallel") is True
    return ["context-parallel", *found] if found or switched else []


def flashcomm(flags: Mapping[str, JsonFlag], env: Mapping[str, str]) -> list[str]:
    """FlashComm1 from VLLM_ASCEND_ENABLE_FLASHCOMM1 (vllm_ascend/envs.py reads it as
    bool(int(...))) or --additional-config `enable_flashcomm1`; FlashComm2 from a
    VLLM_ASCEND_FLASHCOMM2_PARALLEL_SIZE or `enable_flashcomm2_parallel_size` above 0
    (https://docs.vllm.ai/projects/ascend/en/v0.23.0rc1/user_guide/configuration/additional_config.html,
    migration table)."""
    extra = json_value(flags, "--additional-config")
    found = []
    if _env_on(env, "VLLM_ASCEND_ENABLE_FLASHCOMM1") or \
            at_path(extra, "enable_flashcomm1") is True:
        found.append("flashcomm1")
    size = _int(env.get("VLLM_ASCEND_FLASHCOMM2_PARALLEL_SIZE"))
    written = at_path(extra, "enable_flashcomm2_parallel_size")
    if (size or 0) > 0 or (isinstance(written, int) and written > 0):
        found.append("flashcomm2")
    return found


def eplb(args: tuple[str, ...], flags: Mapping[str, JsonFlag],
         env: Mapping[str, str]) -> list[str]:
    """Expert-parallel load balancing: vLLM's --enable-eplb (vllm-project/vllm
    vllm/engine/arg_utils.py @ 99d7eb5d6a51), or vLLM-Ascend's dynamic EPLB (DYNAMIC_EPLB=true,
    vllm-project/vllm-ascend vllm_ascend/envs.py @ 0037b713029c; `dynamic_eplb`) and static
    EPLB (`expert_map_path`), read at the top of --additional-config or under its
    `eplb_config`
    (https://docs.vllm.ai/projects/ascend/en/latest/user_guide/feature_guide/expert_parallelism_load_balancer.html)."""
    extra = json_value(flags, "--additional-config")
    configured = any(at_path(extra, f"{prefix}dynamic_eplb") is True or
                     at_path(extra, f"{prefix}expert_map_path") is not None
                     for prefix in ("", "eplb_config."))
    dynamic = env.get("DYNAMIC_EPLB", "").strip().lower() == "true"
    return ["eplb"] if has_switch(args, "--enable-eplb") or configured or dynamic else []


def kv_connectors(flags: Mapping[str, JsonFlag]) -> list[str]:
    """`kv-connector:<name>` for --kv-transfer-config's `kv_connector` and, for a
    MultiConnector, each of `kv_connector_extra_config.connectors`; `kv-pool` when one is
    vLLM-Ascend's KV cache pool connector
    (https://docs.vllm.ai/projects/ascend/en/latest/user_guide/feature_guide/kv_cache_pool_ascend_store.html)."""
    config = json_value(flags, "--kv-transfer-config")
    inner = at_path(config, "kv_connector_extra_config.connectors")
    parts = [config] + (list(inner) if isinstance(inner, list) else [])
    written = [p.get("kv_connector") for p in parts if isinstance(p, Mapping)]
    names = list(dict.fromkeys(n.strip() for n in written if isinstance(n, str) and n.strip()))
    found = [f"kv-connector:{n}" for n in names]
    return found + (["kv-pool"] if any(n in KV_POOL_CONNECTORS for n in names) else [])


def json_value(flags: Mapping[str, JsonFlag], name: str) -> Mapping[str, Any] | None:
    """The JSON object of a flag, or None."""
    found = flags.get(name)
    return found.value if found is not None else None


def _above_one(args: tuple[str, ...], names: tuple[str, ...]) -> bool:
    return (_int(value_of(args, *names)) or 0) > 1


def _env_on(env: Mapping[str, str], name: str) -> bool:
    """A variable vLLM-Ascend reads as bool(int(value)): on for any non-zero whole number."""
    return bool(_int(env.get(name)))


def _int(text: str | None) -> int | None:
    try:
        return int(text.strip()) if text is not None else None
    except ValueError:
        return None
