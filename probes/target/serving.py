"""What a server's command line says it serves: which model, how many chips, how long a
context (probes.target.cmdline says which server it is). MindIE keeps these in its
config.json, read through the target's files.

Sources a reader can open:
- vLLM: `vllm/engine/arg_utils.py` (EngineArgs.add_cli_args: `--tensor-parallel-size/-tp`,
  `--pipeline-parallel-size/-pp`, `--data-parallel-size/-dp`, `--max-model-len`,
  `--gpu-memory-utilization`), `vllm/entrypoints/cli/serve.py` (the model as the positional
  argument of `vllm serve`, over `--model`), FlexibleArgumentParser (`--max_model_len` is
  `--max-model-len`; human-readable `--max-model-len 32k`), https://docs.vllm.ai/en/latest/cli/serve.html
- MindIE: config.json at $MIES_CONFIG_JSON_PATH, else $MINDIE_LLM_HOME_PATH/conf/config.json,
  else /usr/local/Ascend/mindie/latest/mindie-service/conf/config.json (MindIE-LLM
  docs/zh/user_guide/user_manual/environment_variable.md); `BackendConfig.ModelDeployConfig`
  `.maxSeqLen` and `.ModelConfig[0]` `.modelWeightPath`, `.worldSize`, `.npuMemSize` (GB of KV
  cache per NPU): https://www.hiascend.com/document/detail/zh/mindie/100/mindiellm/llmdev/mindie_llm0004.html
  and mindie_service0083.html.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from probes import json_limits
from probes.errors import HostError
from probes.host import Host
from probes.numbers import Field, NumberError, parse_float, parse_int
from probes.target.cmdline import base_name, program_args, server_kind
from probes.target.jsonpath import at_path
from probes.target.model import ServingArgs
from probes.target.parts import Sourced
from probes.textsafe import cut

MINDIE_DEFAULT_HOME = "/usr/local/Ascend/mindie/latest/mindie-service"
MAX_CONFIG_BYTES = 1024 * 1024
_SUFFIXED = re.compile(r"([0-9]{1,18})(?:\.([0-9]{1,6}))?(k|K|Ki)", re.ASCII)


# -- flags ---------------------------------------------------------------------------------------


def _spelling(arg: str) -> str:
    """`--max_model_len` is `--max-model-len` to vLLM's parser; the value part is kept."""
    if not arg.startswith("--"):
        return arg
    name, sep, value = arg.partition("=")
    return name.replace("_", "-") + sep + value


def flag(args: Sequence[str], names: Sequence[str]) -> tuple[str, str] | None:
    """(value, as written) of the last `--name value` / `--name=value` among `names`;
    the last one wins, as argparse lets it."""
    found: tuple[str, str] | None = None
    for index, raw in enumerate(args):
        arg = _spelling(raw)
        for name in names:
            if arg == name and index + 1 < len(args):
                found = (args[index + 1], f"{raw} {args[index + 1]}")
            elif arg.startswith(name + "="):
                found = (arg[len(name) + 1:], raw)
    return found


def human_int(text: str, field: Field) -> int:
    """An integer as vLLM's parser reads it in every release that has suffixes: plain digits,
    `k` (x1000, decimals allowed), `K` and `Ki` (x1024). M/G/T changed meaning between
    releases (binary, then decimal), so they are not read. Raises NumberError."""
    match = _SUFFIXED.fullmatch(text.strip())
    if not match:
        return parse_int(text.strip(), field)
    whole, part, suffix = match.groups()
    if suffix != "k" and part is not None:
        raise NumberError(f"{field.name}: {text!r}: no decimals with {suffix}")
    scale = 1000 if suffix == "k" else 1024
    value = parse_int(whole, Field(field.name, 0, field.high)) * scale
    if part:  # as int(float(number) * 1000): the fraction's whole units, the rest dropped
        value += int(part) * scale // 10 ** len(part)
    field.check(value, f"{text} ({value})")
    return value


# Bounds of what the doctor reads (not vLLM's own limits): a count of chips past the largest
# pod the doctor judges, a context past a billion tokens, are reported unread. The fraction's
# range is vLLM's: CacheConfig.gpu_memory_utilization is `Field(gt=0, le=1)`
# (vllm-project/vllm vllm/config/cache.py).
MAX_PARALLEL = 4096
MAX_CONTEXT_TOKENS = 10**9


def _int_flag(args: Sequence[str], names: Sequence[str], notes: list[str],
              high: int = MAX_PARALLEL) -> Sourced[int] | None:
    found = flag(args, names)
    if found is None:
        return None
    try:
        value = human_int(found[0], Field(f"`{cut(found[1], 60)}` on the command line", 1,
                                          high))
    except NumberError as exc:
        notes.append(f"{exc}: not read")
        return None
    return Sourced(value, f"`{found[1]}` on the command line")


def _float_flag(args: Sequence[str], names: Sequence[str],
                notes: list[str]) -> Sourced[float] | None:
    found = flag(args, names)
    if found is None:
        return None
    try:
        value = parse_float(found[0].strip(), Field(f"`{cut(found[1], 60)}` on the command line",
                                                    0, 1, low_open=True))
    except NumberError as exc:
        notes.append(f"{exc}: not read")
        return None
    return Sourced(value, f"`{found[1]}` on the command line")


def _max_model_len(args: Sequence[str], notes: list[str]) -> Sourced[int] | None:
    given = flag(args, ["--max-model-len"])
    if given is not None and given[0].strip() in ("auto", "-1"):
        notes.append(f"`{given[1]}`: the context length is left to vLLM (the model's own)")
        return None
    return _int_flag(args, ["--max-model-len"], notes, MAX_CONTEXT_TOKENS)


def vllm_args(cmdline: Sequence[str]) -> ServingArgs:
    """The settings of a `vllm serve` / `python -m vllm.entrypoints...` command line."""
    program, args = program_args(cmdline)
    notes: list[str] = []
    model: Sourced[str] | None = None
    if base_name(program) == "vllm" and len(args) > 1 and not args[1].startswith("-"):
        model = Sourced(args[1], f"`vllm serve {args[1]}` on the command line")
    elif (given := flag(args, ["--model"])) is not None:
        model = Sourced(given[0], f"`{given[1]}` on the command line")
    else:
        notes.append("no model on the command line (the positional argument of `vllm serve` "
                     "or --model)")
    if (config := flag(args, ["--config"])) is not None:
        notes.append(f"`{config[1]}`: settings in that file are not read")
    return ServingArgs(
        server="vllm", model=model,
        tensor_parallel_size=_int_flag(args, ["--tensor-parallel-size", "-tp"], notes),
        pipeline_parallel_size=_int_flag(args, ["--pipeline-parallel-size", "-pp"], notes),
        data_parallel_size=_int_flag(args, ["--data-parallel-size", "-dp"], notes),
        max_model_len=_max_model_len(args, notes),
        gpu_memory_utilization=_float_flag(args, ["--gpu-memory-utilization"], notes),
        notes=tuple(notes))


# -- MindIE ----------------------------------------------------------------------------------------


def mindie_config_path(env: Mapping[str, str], cwd: str | None) -> str:
    given = env.get("MIES_CONFIG_JSON_PATH")
    if given:
        return given if given.startswith("/") or not cwd else posixpath.join(cwd, given)
    home = env.get("MINDIE_LLM_HOME_PATH") or MINDIE_DEFAULT_HOME
    return posixpath.join(home, "conf", "config.json")


def mindie_args(host: Host, env: Mapping[str, str], cwd: str | None) -> ServingArgs:
    """The settings in MindIE's config.json, read through the target's files."""
    path = mindie_config_path(env, cwd)
    doc, why = read_mindie_config(host, path)
    if doc is None:
        return ServingArgs(server="mindie", notes=(why,), config_problem=why)
    return replace(_mindie_settings(doc, path), config_doc=doc)


def read_mindie_config(host: Host, path: str) -> tuple[dict[str, Any] | None, str]:
    """MindIE's config.json as a JSON object, bounded; else None and why (one line). A
    replay reads it again from the recording: a bundle's target.json keeps only settings."""
    try:
        if host.file_size(path) > MAX_CONFIG_BYTES:
            return None, f"{path}: over {MAX_CONFIG_BYTES} bytes, not read"
        doc = json_limits.loads(host.read_bytes(path, 0, MAX_CONFIG_BYTES + 1), path,
                                MAX_CONFIG_BYTES)
    except HostError as exc:
        return None, f"MindIE config not read: {exc}"
    except ValueError as exc:
        return None, str(exc)
    if not isinstance(doc, dict):
        return None, f"{path}: not a JSON object"
    return doc, ""


def _mindie_settings(doc: Any, path: str) -> ServingArgs:
    deploy = at_path(doc, "BackendConfig.ModelDeployConfig")
    models = deploy.get("ModelConfig") if isinstance(deploy, dict) else None
    first = models[0] if isinstance(models, list) and models else None
    notes = []
    if isinstance(models, list) and len(models) > 1:
        notes.append(f"{path}: {len(models)} ModelConfig entries; the first is read")
    where = "BackendConfig.ModelDeployConfig"

    def setting(obj: Any, key: str, label: str, low: int, high: int) -> Sourced[int] | None:
        value = obj.get(key) if isinstance(obj, dict) else None
        if not isinstance(value, int) or isinstance(value, bool):
            return None
        try:
            Field(f"{path}: {label}", low, high).check(value, _short_int(value))
        except NumberError as exc:
            notes.append(f"{exc}: not read")
            return None
        return Sourced(value, f"{path}: {label}")

    weight = first.get("modelWeightPath") if isinstance(first, dict) else None
    return ServingArgs(
        server="mindie",
        model=Sourced(weight, f"{path}: {where}.ModelConfig[0].modelWeightPath")
        if isinstance(weight, str) and weight else None,
        world_size=setting(first, "worldSize", f"{where}.ModelConfig[0].worldSize", 1,
                           MAX_PARALLEL),
        max_model_len=setting(deploy, "maxSeqLen", f"{where}.maxSeqLen", 1,
                              MAX_CONTEXT_TOKENS),
        # -1: MindIE sizes the KV cache itself, its default since 1.0.RC3 (MindIE release
        # notes releasenote_0003, hiascend.com/document/detail/zh/mindie/10RC3/releasenote/)
        npu_mem_size_gb=setting(first, "npuMemSize", f"{where}.ModelConfig[0].npuMemSize",
                                -1, 1 << 20),
        config_file=path, notes=tuple(notes))


def _short_int(value: int) -> str:
    text = str(value)
    return text if len(text) <= 24 else f"a {len(text)}-digit number"


# -- the model directory -----------------------------------------------------------------------

_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")


def hub_cache_dirs(env: Mapping[str, str]) -> list[str]:
    """Where huggingface_hub keeps downloads for this environment: $HF_HUB_CACHE, else
    $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub
    (huggingface_hub docs, "Manage the cache" and environment variables)."""
    if env.get("HF_HUB_CACHE"):
        return [env["HF_HUB_CACHE"]]
    if env.get("HF_HOME"):
        return [posixpath.join(env["HF_HOME"], "hub")]
    if env.get("XDG_CACHE_HOME"):
        return [posixpath.join(env["XDG_CACHE_HOME"], "huggingface", "hub")]
    home = env.get("HOME")
    return [posixpath.join(home, ".cache", "huggingface", "hub")] if home else []


def _is_dir(host: Host, path: str) -> bool:
    try:
        return host.kind(path) == "dir"
    except HostError:
        return False


def _hub_snapshot(host: Host, model: str, env: Mapping[str, str]) -> str | None:
    """The snapshot directory of a hub id in the cache: models--ORG--NAME/snapshots/<the
    commit refs/main names>."""
    for cache in hub_cache_dirs(env):
        repo = posixpath.join(cache, "models--" + model.replace("/", "--"))
        try:
            commit = host.read_text(posixpath.join(repo, "refs", "main")).strip()
        except HostError:
            continue
        snapshot = posixpath.join(repo, "snapshots", commit)
        if commit and "/" not in commit and _is_dir(host, snapshot):
            return snapshot
    return None


def model_dir(host: Host, model: Sourced[str], env: Mapping[str, str],
              cwd: str | None) -> tuple[Sourced[str] | None, str]:
    """The directory the server loads `model` from, on the target's machine, or why none:
    a path (relative ones from its working directory), else a hub id in its cache."""
    value = model.value
    path = value if value.startswith("/") else (
        posixpath.normpath(posixpath.join(cwd, value)) if cwd else None)
    if path is not None and _is_dir(host, path):
        shown = model.source if path == value else f"{model.source}, from {cwd}"
        return Sourced(path, shown), ""
    if _HUB_ID.match(value):
        snapshot = _hub_snapshot(host, value, env)
        if snapshot is not None:
            return Sourced(snapshot, f"{model.source}, in its Hugging Face cache"), ""
        return None, (f"model {value}: not a directory, and not in the Hugging Face cache of "
                      "its environment")
    return None, f"model {value}: not a directory on the target's machine"


# -- any command line ------------------------------------------------------------------------------


def serving_args(cmdline: Sequence[str], host: Host, env: Mapping[str, str],
                 cwd: str | None) -> ServingArgs:
    """What the target's command line (and, for MindIE, its config) says it serves, with the
    model directory resolved on its machine."""
    kind = server_kind(cmdline)
    if kind == "vllm":
        args = vllm_args(cmdline)
    elif kind == "mindie":
        args = mindie_args(host, env, cwd)
    else:
        return ServingArgs(server=kind)
    if args.model is None:
        return args
    found, why = model_dir(host, args.model, env, cwd)
    return replace(args, model_dir=found, notes=(*args.notes, why) if why else args.notes)
