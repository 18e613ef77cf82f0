"""Load checkpoints (HF safetensors directories; llama GGUF files: engine.gguf) under
canonical names.

The model code only ever sees these canonical names (engine-internal, family-neutral):

    embed.weight, norm.weight, lm_head.weight (tied -> the embedding object)
    layers.{i}.attn_norm.weight / mlp_norm.weight       input_ / post_attention_layernorm
    layers.{i}.attn.{q,k,v,o}.weight (.bias)            self_attn.*_proj (full attention)
    layers.{i}.attn.{q,k}_norm.weight                   self_attn.*_norm
    layers.{i}.linear.{qkv,z,b,a | qkvz,ba}.weight      linear_attn.in_proj_* (Gated DeltaNet)
    layers.{i}.linear.{conv.weight,A_log,dt_bias,norm.weight,out.weight}
    layers.{i}.mlp.{gate,up,down}.weight                dense layers
    layers.{i}.moe.router.weight                        mlp.gate / block_sparse_moe.gate
    layers.{i}.moe.experts.{e}.{gate,up,down}.weight    per-expert tensors, Mixtral w1/w3/w2,
                                                        or sliced from fused 3-D experts
    layers.{i}.moe.shared.{gate,up,down}.weight, layers.{i}.moe.shared_gate.weight

Which tensors a config needs, with which shapes, is `probes.model.tensors`; the directory and
its headers are read (and validated) once by `probes.model.reader`. Before any tensor is read
every needed one is found in the headers with its shape and FP8 scale, so a wrong or hostile
checkpoint is one ModelFormatError naming the tensor, not a crash or a giant allocation.
Tensors the language model does not use (a vision tower, an MTP head) are counted and skipped.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeAlias, cast

import torch

from engine.config import ModelConfig, from_facts
from engine.cpu_kernel import LoadPass, copy_pass, dequantize_pass, kernel, run_load_passes
from engine.errors import EngineError, ModelFormatError, UnsupportedArchitecture
from engine.fp8 import Fp8Weight, dequantize_block, scale_grid
from engine.options import FP8_MODES
from engine.tensor_io import ShardReader
from probes.errors import HostError
from probes.model.reader import CheckpointError, ModelDir, TensorInfo, locate_model, read_model_dir
from probes.model.tensors import LayerKind, TensorSpec, expected_tensors, layer_tensors

Weight: TypeAlias = torch.Tensor | Fp8Weight

_LAYER_RENAMES = [(re.compile(pattern), template) for pattern, template in (
    (r"input_layernorm\.weight", "attn_norm.weight"),
    (r"post_attention_layernorm\.weight", "mlp_norm.weight"),
    (r"self_attn\.([qkvo])_proj\.(weight|bias)", r"attn.\1.\2"),
    (r"self_attn\.([qk])_norm\.weight", r"attn.\1_norm.weight"),
    (r"linear_attn\.in_proj_(qkvz|qkv|z|ba|b|a)\.weight", r"linear.\1.weight"),
    (r"linear_attn\.conv1d\.weight", "linear.conv.weight"),
    (r"linear_attn\.(A_log|dt_bias)", r"linear.\1"),
    (r"linear_attn\.norm\.weight", "linear.norm.weight"),
    (r"linear_attn\.out_proj\.weight", "linear.out.weight"),
    (r"mlp\.(gate|up|down)_proj\.weight", r"mlp.\1.weight"),
    (r"(?:mlp|block_sparse_moe)\.gate\.weight", "moe.router.weight"),
    (r"mlp\.experts\.(\d+|\{e\})\.(gate|up|down)_proj\.weight", r"moe.experts.\1.\2.weight"),
    (r"block_sparse_moe\.experts\.(\d+|\{e\})\.w1\.weight", r"moe.experts.\1.gate.weight"),
    (r"block_sparse_moe\.experts\.(\d+|\{e\})\.w3\.weight", r"moe.experts.\1.up.weight"),
    (r"block_sparse_moe\.experts\.(\d+|\{e\})\.w2\.weight", r"moe.experts.\1.down.weight"),
    (r"mlp\.shared_expert\.(gate|up|down)_proj\.weight", r"moe.shared.\1.weight"),
    (r"mlp\.shared_expert_gate\.weight", "moe.shared_gate.weight"),
)]
_FUSED_EXPERTS = re.compile(r"mlp\.experts\.(gate_up_proj|down_proj)")
_EXPERT = re.compile(r"experts\.(\d+)\.")


# --- names ---------------------------------------------------------------------------------


def _rename_layer_part(rest: str) -> str | None:
    for regex, template in _LAYER_RENAMES:
        if regex.fullmatch(rest):
            return regex.sub(template, rest)
    return None


def rename(name: str, prefix: str) -> str | None:
    """HF checkpoint name -> canonical name, by spelling only (None when unknown)."""
    if name == "lm_head.weight":
        return name
    if not name.startswith(prefix):
        return None
    rest = name[len(prefix):]
    if rest in ("embed_tokens.weight", "norm.weight"):
        return "embed.weight" if rest.startswith("embed") else "norm.weight"
    match = re.fullmatch(r"layers\.(\d+)\.(.+)", rest)
    if match is None:
        return None
    part = _rename_layer_part(match.group(2))
    return None if part is None else f"layers.{match.group(1)}.{part}"


def _layer_templates(config: ModelConfig, kind: LayerKind) -> frozenset[str]:
    assert config.facts is not None
    return frozenset(filter(None, (_rename_layer_part(spec.name)
                                   for spec in layer_tensors(config.facts, kind))))


def hf_to_canonical(name: str, config: ModelConfig,
                    templates: dict[LayerKind, frozenset[str]] | None = None) -> str | None:
    """HF checkpoint name -> canonical name; None for tensors this config does not use.
    `templates` caches the per-layer-kind names across calls."""
    canonical = rename(name, config.weight_prefix)
    if canonical is None or not canonical.startswith("layers."):
        if canonical == "lm_head.weight" and config.tie_word_embeddings:
            return None
        return canonical
    _, layer, part = canonical.split(".", 2)
    if int(layer) >= config.num_layers:
        return None
    expert = _EXPERT.search(part)
    if expert is not None and int(expert.group(1)) >= config.num_experts:
        return None
    template = _EXPERT.sub("experts.{e}.", part)
    assert config.facts is not None
    kind = LayerKind(config.layer_kind(int(layer)), config.is_moe_layer(int(layer)))
    cache = {} if templates is None else templates
    if kind not in cache:
        cache[kind] = _layer_templates(config, kind)
    return canonical if template in cache[kind] else None


# --- what to read -------------------------------------------------------------------------


@dataclass(frozen=True)
class Source:
    """Where one canonical tensor comes from: a header entry, or a slice of a fused one."""

    info: TensorInfo
    expert: int | None = None  # fused experts: which [E, ...] row
    rows: tuple[int, int] | None = None  # fused gate_up: the gate or the up half


@dataclass
class Plan:
    """Every tensor to load, found and checked in the headers before anything is read."""

    sources: dict[str, Source] = field(default_factory=dict)
    ignored: dict[str, int] = field(default_factory=dict)  # group -> tensors not loaded


def _fused_sources(model: ModelDir, config: ModelConfig, layer: int) -> dict[str, Source]:
    """Per-expert sources sliced out of `mlp.experts.gate_up_proj` [E, 2I, H] and
    `mlp.experts.down_proj` [E, H, I] (how Qwen3.5/3.6 BF16 checkpoints store experts)."""
    p = f"{config.weight_prefix}layers.{layer}.mlp.experts."
    gate_up, down = model.tensors.get(p + "gate_up_proj"), model.tensors.get(p + "down_proj")
    if gate_up is None or down is None:
        return {}
    experts, width = config.num_experts, config.moe_intermediate_size
    want = {gate_up.name: (experts, 2 * width, config.hidden_size),
            down.name: (experts, config.hidden_size, width)}
    for info in (gate_up, down):
        if info.shape != want[info.name]:
            raise ModelFormatError(f"{model.file(info.shard)}: tensor {info.name} has shape "
                                   f"{list(info.shape)} but config.json implies "
                                   f"{list(want[info.name])}; config.json does not match")
    sources = {}
    for e in range(experts):
        c = f"layers.{layer}.moe.experts.{e}."
        sources[c + "gate.weight"] = Source(gate_up, e, (0, width))
        sources[c + "up.weight"] = Source(gate_up, e, (width, 2 * width))
        sources[c + "down.weight"] = Source(down, e)
    return sources


def _expected(config: ModelConfig) -> Iterator[tuple[str, str, TensorSpec]]:
    """(HF name, canonical name, spec) for every tensor the config needs, lazily."""
    assert config.facts is not None
    for hf_name, spec in expected_tensors(config.facts):
        canonical = rename(hf_name, config.weight_prefix)
        if canonical is not None:
            yield hf_name, canonical, spec


def plan_load(model: ModelDir, config: ModelConfig) -> Plan:
    """Find every needed tensor with its expected shape, stopping at the first one missing
    (so a config claiming 10**12 experts costs as many steps as the headers have tensors)."""
    plan = Plan()
    _check_fp8_scales(model, config)
    fused: dict[int, dict[str, Source]] = {}
    for hf_name, canonical, spec in _expected(config):
        info = model.tensors.get(hf_name)
        if info is not None:
            _check_shape(model, info, canonical, spec.shape)
            plan.sources[canonical] = Source(info)
            continue
        layer = int(canonical.split(".")[1]) if canonical.startswith("layers.") else -1
        if ".moe.experts." in canonical and layer not in fused:
            fused[layer] = _fused_sources(model, config, layer)
        if canonical not in fused.get(layer, {}):
            raise ModelFormatError(
                f"{model.path}: checkpoint lacks tensor {hf_name} ({canonical}) that "
                "config.json needs; the download is incomplete or config.json belongs to "
                "another model")
        plan.sources[canonical] = fused[layer][canonical]
    used = {s.info.name for s in plan.sources.values()}
    for name in model.tensors:
        if name not in used and not name.endswith(("_scale_inv", "_scale", ".input_scale")):
            group = _group(name)
            plan.ignored[group] = plan.ignored.get(group, 0) + 1
    return plan


def _check_fp8_scales(model: ModelDir, config: ModelConfig) -> None:
    """Every FP8 tensor the config uses has its scale, of the right grid and dtype."""
    templates: dict[LayerKind, frozenset[str]] = {}
    for info in model.tensors.values():
        if not info.dtype.startswith("F8_") or hf_to_canonical(info.name, config,
                                                                templates) is None:
            continue
        if info.dtype != "F8_E4M3":
            raise UnsupportedArchitecture(f"{model.file(info.shard)}: tensor {info.name} is "
                                          f"{info.dtype}; only e4m3 FP8 checkpoints are "
                                          "supported")
        fp8_scale(model, config, info)


def _group(name: str) -> str:
    """The part of the checkpoint an unused tensor belongs to, for the stats."""
    if name.startswith("model.visual."):
        return "model.visual.* (vision tower)"
    if name.startswith("mtp."):
        return "mtp.* (multi-token prediction head)"
    return "other tensors"


def _check_shape(model: ModelDir, info: TensorInfo, canonical: str,
                 want: tuple[int, ...]) -> None:
    if info.shape != want:
        raise ModelFormatError(
            f"{model.file(info.shard)}: tensor {canonical!r} ({info.name}) has shape "
            f"{list(info.shape)} but config.json implies {list(want)}; config.json does not "
            "match these weights")


# --- FP8 -----------------------------------------------------------------------------------


def fp8_block(config: ModelConfig, weight: TensorInfo) -> tuple[int, int]:
    """The tile one scale covers: the config's block, the whole matrix (per tensor) or one
    row (per channel)."""
    rows, cols = weight.shape[-2], weight.shape[-1]
    assert config.fp8 is not None
    if config.fp8.scheme == "tensor":
        return rows, cols
    if config.fp8.scheme == "channel":
        return 1, cols
    return config.fp8.block_size


def fp8_scale(model: ModelDir, config: ModelConfig, weight: TensorInfo) -> TensorInfo:
    """The weight's scale entry, checked against its grid before anything is read."""
    suffix = config.fp8.scale_suffix if config.fp8 is not None else "weight_scale_inv"
    name = weight.name.removesuffix("weight") + suffix
    scale = model.tensors.get(name)
    where = model.file(weight.shard)
    if scale is None:
        raise ModelFormatError(f"{where}: FP8 tensor {weight.name} has no {name}; the checkpoint "
                               "is incomplete")
    if len(weight.shape) != 2:
        raise UnsupportedArchitecture(f"{where}: FP8 tensor {weight.name} is {len(weight.shape)}"
                                      "-D; only 2-D FP8 weights load (per-expert tensors)")
    block = fp8_block(config, weight)
    grid = scale_grid((weight.shape[0], weight.shape[1]), block)
    if scale.numel != grid[0] * grid[1] or scale.dtype not in ("BF16", "F16", "F32"):
        raise ModelFormatError(f"{model.file(scale.shard)}: {name} is {scale.dtype}"
                               f"{list(scale.shape)}, expected a BF16/F16/F32 {list(grid)} grid "
                               f"for weight {list(weight.shape)} in {list(block)} blocks")
    return scale


def _stays_fp8(hf_name: str, canonical: str, config: ModelConfig) -> bool:
    """Resident mode keeps linears FP8, except skip-listed modules and the embedding
    (a lookup table, not a matmul)."""
    if canonical == "embed.weight" or config.facts is None:
        return False
    return not config.facts.quant.skips(hf_name.removesuffix(".weight"))


# --- loading -------------------------------------------------------------------------------


def _place(tensor: torch.Tensor, device: torch.device | str, dtype: torch.dtype) -> torch.Tensor:
    """A copy on `device`; floating tensors in `dtype`, integer ones keep theirs."""
    target = dtype if tensor.is_floating_point() else tensor.dtype
    return tensor.to(device=device, dtype=target, copy=True)


@dataclass(frozen=True)
class _Pending:
    """A weight whose bytes a compiled load pass copies or dequantises; `done` makes the
    weight from the NaN codes the pass met."""

    load_pass: LoadPass
    done: Callable[[int], Weight]


def _cpu_kernel_passes(device: torch.device | str) -> bool:
    return torch.device(device).type == "cpu" and kernel() is not None


class _Loader:
    """Each tensor's weight, or on the CPU with the compiled kernel a `_Pending` for the
    tensors whose bytes one of its passes copies or dequantises."""

    def __init__(self, model: ModelDir, config: ModelConfig, device: torch.device | str,
                 dtype: torch.dtype, fp8: str) -> None:
        self.model, self.config = model, config
        self.device, self.dtype, self.fp8 = device, dtype, fp8
        self.passes = _cpu_kernel_passes(device)
        self.reader = ShardReader(model)
        self._fused: tuple[str, torch.Tensor] | None = None

    def load(self, canonical: str, source: Source) -> Weight | _Pending:
        info = source.info
        if source.expert is not None:
            return _place(self._expert_slice(source), self.device, self.dtype)
        if info.dtype != "F8_E4M3":
            return self._plain(self.reader.read(info))
        scale_info = fp8_scale(self.model, self.config, info)
        block = fp8_block(self.config, info)
        weight = self.reader.read(info)
        grid = scale_grid((info.shape[0], info.shape[1]), block)
        scale = self.reader.read(scale_info).reshape(grid).clone()
        if self.fp8 == "resident" and _stays_fp8(info.name, canonical, self.config):
            return self._resident(weight, scale, block)
        return self._dequantized(weight, scale, block)

    def _plain(self, tensor: torch.Tensor) -> Weight | _Pending:
        copy = copy_pass(tensor) if self.passes and tensor.is_floating_point() \
            and tensor.dtype == self.dtype else None
        if copy is None:
            return _place(tensor, self.device, self.dtype)
        return _Pending(copy, lambda _nans: copy.out)

    def _resident(self, weight: torch.Tensor, scale: torch.Tensor,
                  block: tuple[int, int]) -> Weight | _Pending:
        """The FP8 bytes copied out of the map; the kernel's copy counts NaN codes as it goes."""
        device = self.device
        copy = copy_pass(weight.view(torch.uint8)) if self.passes else None
        if copy is None:
            return Fp8Weight.from_tensors(weight.clone(), scale, block, device)
        return _Pending(copy, lambda nans: Fp8Weight.from_tensors(
            copy.out, scale, block, device, nan_free=nans == 0))

    def _dequantized(self, weight: torch.Tensor, scale: torch.Tensor,
                     block: tuple[int, int]) -> Weight | _Pending:
        torch_path = functools.partial(dequantize_block, weight.to(self.device),
                                       scale.to(self.device), block, self.dtype)
        one = dequantize_pass(weight, scale, block, self.dtype) if self.passes else None
        if one is None:
            return torch_path()
        # NaN codes: the torch path keeps them NaN (the kernel only counts them).
        return _Pending(one, lambda nans: one.out if nans == 0 else torch_path())

    def _expert_slice(self, source: Source) -> torch.Tensor:
        """One expert of a fused 3-D tensor (the tensor is read once per layer)."""
        if source.info.dtype not in ("BF16", "F16", "F32"):
            raise UnsupportedArchitecture(f"{self.model.file(source.info.shard)}: fused experts "
                                          f"{source.info.name} are {source.info.dtype}; only "
                                          "BF16/F16/F32 fused experts load")
        if self._fused is None or self._fused[0] != source.info.name:
            self._fused = (source.info.name, self.reader.read(source.info))
        tensor = self._fused[1][source.expert]
        return tensor if source.rows is None else tensor[source.rows[0]:source.rows[1]]


MAX_LOAD_PARTS = 8


def _load_all(model: ModelDir, config: ModelConfig, sources: list[tuple[str, Source]],
              device: torch.device | str, dtype: torch.dtype, fp8: str,
              beside: Callable[[], None] | None = None) -> dict[str, Weight]:
    """Every tensor copied out (and dequantised). On the CPU the bulk of the bytes go through
    the compiled kernel's passes at the end (one call for the copies, one for the
    dequantisations), cut across its workers and holding no GIL, and `beside` is called just
    before them: work it starts on another thread (the tokenizer, whose Rust parse holds the
    GIL for 0.13-0.2 s) runs during those passes instead of stalling the per-tensor Python
    before them (smollm2-moe-fp8 on a 2-core Xeon VM: a load with the tokenizer took 0.73 s,
    0.42 s without it, when each pass was its own call). Elsewhere `beside` is called first."""
    loader = _Loader(model, config, device, dtype, fp8)
    if beside is not None and not loader.passes:
        beside()
    loaded = {name: loader.load(name, source) for name, source in sources}
    pending = [(name, item) for name, item in loaded.items() if isinstance(item, _Pending)]
    if beside is not None and loader.passes:
        beside()
    if not pending:
        return cast(dict[str, Weight], loaded)
    parts = min(torch.get_num_threads(), MAX_LOAD_PARTS)
    # Copies first, leaving a core to the work beside: they are bound by page faults, and a
    # copy thread competing with the tokenizer's GIL-holding parse delays the Python after
    # them. Dequantisations are arithmetic: they take every core (all passes on one core:
    # 496 against 378 ms). smollm2-moe-fp8 on a 2-core Xeon VM, three process pairs: a
    # resident load 0.24-0.29 -> 0.19-0.20 s, a dequantising one 0.28-0.46 -> 0.26-0.29 s.
    copy_parts = max(1, parts - 1) if beside is not None else parts
    for copies, count in ((True, copy_parts), (False, parts)):
        group = [(name, item) for name, item in pending if item.load_pass.copies == copies]
        if group:
            nans = run_load_passes([item.load_pass for _, item in group], count)
            for (name, item), found in zip(group, nans, strict=True):
                loaded[name] = item.done(found)
    return cast(dict[str, Weight], loaded)


def load_model_dir(model: ModelDir, config: ModelConfig, *, device: torch.device | str = "cpu",
                   dtype: torch.dtype = torch.bfloat16, fp8: str = "dequantize",
                   beside: Callable[[], None] | None = None,
                   ) -> tuple[dict[str, Weight], dict[str, int]]:
    """(canonical name -> weight, unused tensor groups) of a read model directory; `beside`
    is called once, when other work overlaps the load best (`_load_all`)."""
    problems = model.problems()
    if problems:
        raise ModelFormatError(problems[0])
    plan = plan_load(model, config)
    weights = _load_all(model, config, list(plan.sources.items()), device, dtype, fp8,
                        beside)
    if config.tie_word_embeddings:
        weights["lm_head.weight"] = weights["embed.weight"]
    return weights, plan.ignored


def read_model(path: Path | str) -> ModelDir:
    """The model directory as probes.model.reader reads it; its errors as ModelFormatError."""
    from probes.live import local_files

    try:
        return read_model_dir(local_files(), str(Path(path).absolute()))
    except (CheckpointError, HostError) as exc:
        raise ModelFormatError(f"{exc}; point at a Hugging Face model directory "
                               "(config.json and safetensors shards)") from None


def locate(path: Path | str) -> tuple[Path, str]:
    """(absolute path, "directory" | "gguf"), or the ModelFormatError saying why not."""
    from probes.live import local_files

    absolute = Path(path).absolute()
    where = locate_model(local_files(), str(absolute))
    if where.problem is not None:
        raise ModelFormatError(where.problem)
    return absolute, where.kind


def load_checkpoint(
    path: Path | str,
    *,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.bfloat16,
    fp8: str = "dequantize",
) -> tuple[ModelConfig, dict[str, Weight]]:
    """Load a HF directory or a `.gguf` file -> (config, canonical name -> weight)."""
    if fp8 not in FP8_MODES:
        raise EngineError(f"fp8={fp8!r} is not a mode; use one of {', '.join(FP8_MODES)}")
    absolute, kind = locate(path)
    if kind == "gguf":
        from engine.gguf import load_gguf

        return load_gguf(absolute, device=device, dtype=dtype)
    model = read_model(absolute)
    config = from_facts(model.config)
    weights, _ = load_model_dir(model, config, device=device, dtype=dtype, fp8=fp8)
    return config, weights


def ignored_note(ignored: Mapping[str, int]) -> tuple[str, ...]:
    """Lines for the stats: which checkpoint tensors were not loaded, and why."""
    return tuple(f"{group}: {count} tensors not loaded" for group, count in
                 sorted(ignored.items()))
