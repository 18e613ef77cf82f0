"""What serving.support and serving.flags read of a deployment, once per run: the engine and
its release, the model's type, the chip families, the features the command line turns on, and
the command line's JSON settings.

The quantization method is the command line's `--quantization`, else the checkpoint's own:
config.json's `quantization_config.quant_method` (awq, gptq, fp8, compressed-tensors, ...) or
an msModelSlim quant_model_description.json (`ascend`, the method vllm-ascend loads it with:
vllm-project/vllm-ascend vllm_ascend/quantization/modelslim_config.py @ 02f6f8fef3ab; its
quantization guide docs/source/user_guide/feature_guide/quantization.md @ 1e6dd18a348b).

The engine release comes from the judged interpreter's `vllm_ascend` package (facts.python) or
MindIE's version.info (probes.stack, as versions.parity reads them); the model from config.json
through the one model reader (probes.model.reader.read_config); the chips from npu-smi (facts.npu)
placed in families by `fp8_gate.chip_family`; the features from the target's command line and
environment (checks.builtin.serving_features names each: quantization:<m>, expert-parallel,
data-parallel, pipeline-parallel, speculative:<method>, mtp, graph, graph:<cudagraph mode>,
graph:torchair, kv-cache:<dtype>, context-parallel, flashcomm1, flashcomm2, eplb,
kv-connector:<name>, kv-pool, pd-disaggregation, pooling, lora, prefix-caching, ...).

A flag rule reads them as facts (`Deployment.fact`): `feature.NAME` is "true" when the feature
is on and absent otherwise; `model.multimodal` says whether config.json describes a model with a
vision or audio tower, `model.moe` whether it routes to experts; `parallel.tensor_parallel_size`
(and data_/pipeline_) is the size the command line gives, else vLLM's default of 1;
`mindie.PATH` is a value of MindIE's config.json (probes.target.jsonpath.at_path).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from checks.builtin import facts
from checks.builtin.fp8_gate import chip_family, chip_names
from checks.builtin.serving_engine import Engine, engine
from checks.context import Context
from probes.errors import HostError, NotRecorded

if TYPE_CHECKING:
    from probes.target.argv import JsonFlag

JSON_FLAGS = ("--additional-config", "--compilation-config", "--speculative-config",
              "--kv-transfer-config")
FAMILY_WORDS = {"A2": "910B/A2", "A3": "A3", "310P": "310P", "A5_950": "950",
                "A1_910": "910 (first generation)", "310B": "310B", "310": "310"}
# `model.<name>` in flag rules
MODEL_FACTS = ("quantized", "quant_type", "num_attention_heads", "architecture", "multimodal",
               "max_position_embeddings", "moe")
# `parallel.<name>` in flag rules: the size the command line gives, else vLLM's default of 1
# (https://docs.vllm.ai/en/latest/cli/serve.html)
PARALLEL_FLAGS = {"tensor_parallel_size": ("--tensor-parallel-size", "-tp"),
                  "data_parallel_size": ("--data-parallel-size", "-dp"),
                  "pipeline_parallel_size": ("--pipeline-parallel-size", "-pp")}


@dataclass(frozen=True)
class ModelFacts:
    """The model's type as config.json says, whether it is quantized, or why unknown."""

    model_type: str | None = None
    architecture: str = ""
    quantized: bool | None = None
    source: str = ""
    problem: str = ""
    quant_method: str = ""  # the checkpoint's own method ("" when not quantized or unknown)
    quant_type: str = ""  # msModelSlim model_quant_type (W8A8, W8A8SC, ...)
    num_attention_heads: int | None = None
    multimodal: bool | None = None  # a vision/audio tower in config.json (see `is_multimodal`)
    max_position_embeddings: int | None = None  # the context length vLLM defaults to
    moe: bool | None = None  # routed experts in config.json (see `is_moe`)
    architectures: tuple[str, ...] = ()  # config.json's, all of them


@dataclass(frozen=True)
class Deployment:
    """One deployment as the serving checks see it."""

    engine: Engine
    model: ModelFacts
    chips: tuple[str, ...]  # chip families in use ("" for a name the doctor cannot place)
    chip_names: tuple[str, ...]
    chips_problem: str
    args: tuple[str, ...]  # the command line's arguments; () without a process
    env: Mapping[str, str]
    env_problem: str = ""
    json: Mapping[str, JsonFlag] = field(default_factory=dict)
    features: tuple[str, ...] = ()
    transformers: str = ""  # the judged interpreter's transformers version ("" when absent)
    # MindIE's config.json (the `mindie.PATH` facts), or why there is none to read
    mindie_config: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)
    mindie_problem: str = ""
    mindie_server: bool = False  # the target is a MindIE server: its config.json was looked for

    @property
    def chip_words(self) -> str:
        """`8 x 910B4 (910B/A2)`: the chips npu-smi shows, counted by name."""
        counted: dict[str, int] = {}
        for name in self.chip_names:
            counted[name] = counted.get(name, 0) + 1
        return ", ".join(f"{n} x {name} ({family_words(name)})" for name, n in counted.items())

    def fact(self, name: str) -> Any:
        """A named fact a flag rule looks at (serving_rows.Condition.fact); None when absent."""
        kind, _, rest = name.partition(".")
        if kind == "env":
            return self.env.get(rest)
        if kind == "feature":  # "true" when the deployment turns the feature on, else absent
            return "true" if rest in self.features else None
        if kind == "model" and rest in MODEL_FACTS:
            return getattr(self.model, rest)
        if kind == "mindie":  # a path into MindIE's config.json (probes.target.serving)
            from probes.target.jsonpath import at_path

            return at_path(self.mindie_config, rest)
        if not self.args:  # no command line: no flag, no JSON (and no argv reader imported)
            return None
        from probes.target.argv import has_switch, value_of
        from probes.target.jsonpath import at_path

        if kind == "parallel" and rest in PARALLEL_FLAGS:
            return value_of(self.args, *PARALLEL_FLAGS[rest]) or "1"
        if kind == "arg":  # a flag's value; "true" for a switch (no value follows it)
            names = rest.split("|")  # `arg.--tensor-parallel-size|-tp`: either spelling
            value = value_of(self.args, *names)
            if value is not None and not value.startswith("-"):
                return value
            return "true" if any(has_switch(self.args, n) for n in names) else None
        found = self.json.get("--" + kind.replace("_", "-"))
        return at_path(found.value if found else None, rest)


def family_words(chip_name: str) -> str:
    return FAMILY_WORDS.get(chip_family(chip_name) or "", "unknown family")


def deployment(ctx: Context) -> Deployment:
    return ctx.fact("serving.deployment", lambda: read_deployment(ctx))


def read_deployment(ctx: Context) -> Deployment:
    args = _args(ctx)
    env, env_problem = _env(ctx)
    flags = _json_flags(args)
    names, chips_problem = _chip_names(ctx)
    families = tuple(dict.fromkeys(chip_family(n) or "" for n in names))
    model = read_model(ctx, args)
    py = facts.python(ctx)
    transformers = "" if py.error else (py.version_of("transformers") or "")
    found = features(args, flags, ctx, model, env)
    mindie_config, mindie_problem = _mindie_config(ctx)
    return Deployment(engine(ctx), model, families, tuple(names), chips_problem, args,
                      env, env_problem, flags, found, transformers, mindie_config,
                      mindie_problem, ctx.target.serving.server == "mindie")


def _mindie_config(ctx: Context) -> tuple[Mapping[str, Any] | None, str]:
    """MindIE's config.json as the target probe parsed it (one read, at the edge), or why
    there is none: it is read from a MindIE server process's environment."""
    serving = ctx.target.serving
    if serving.server != "mindie":
        return None, ("the target is not a MindIE server process (mindieservice_daemon), whose "
                      "environment names its config.json; run with --pid")
    if serving.config_doc is not None:
        return serving.config_doc, ""
    if serving.config_problem or not serving.config_file:
        return None, serving.config_problem or "its config.json was not read in this run"
    from probes.target.serving import read_mindie_config

    return read_mindie_config(ctx.host, serving.config_file)  # a replay: target.json has none


def _args(ctx: Context) -> tuple[str, ...]:
    """The arguments of a vLLM server's command line; () for any other process (their flags
    mean other things) and without a process."""
    proc = ctx.target.process
    if proc is None or ctx.target.serving.server != "vllm":
        return ()
    from probes.target.argv import arguments

    return arguments(proc.cmdline)


def _json_flags(args: tuple[str, ...]) -> dict[str, JsonFlag]:
    if not args:
        return {}
    from probes.target.argv import json_flag

    return {name: found for name in JSON_FLAGS if (found := json_flag(args, name)) is not None}


def _env(ctx: Context) -> tuple[Mapping[str, str], str]:
    unknown = ctx.target.environment_unknown()
    if unknown is not None:
        return {}, str(unknown)
    try:
        return dict(ctx.host.env), ""
    except NotRecorded as exc:
        return {}, f"environment not recorded ({exc})"


def _chip_names(ctx: Context) -> tuple[list[str], str]:
    names = chip_names(ctx)
    if names is None:
        reading = facts.npu(ctx)
        return [], f"no NPU reading: {reading.error_text}" if reading.is_error else \
            "no NPU reading"
    if not names:
        return [], "npu-smi printed no chips"
    return names, ""


# -- the model ----------------------------------------------------------------------------------


def read_model(ctx: Context, args: tuple[str, ...]) -> ModelFacts:
    if ctx.model_dir is None:
        return ModelFacts(problem="no model: neither --model nor a model on the target's "
                          "command line")
    from probes.model.reader import CheckpointError, read_config

    path = str(ctx.model_dir)
    try:
        config = read_config(ctx.host, path)
    except NotRecorded as exc:
        return ModelFacts(problem=f"config.json not recorded ({exc.path})")
    except (CheckpointError, HostError) as exc:
        return ModelFacts(problem=f"config.json unreadable: {exc}")
    method = _config_quant_method(config.quantization)
    quant_type = _modelslim_type(ctx, path)
    if not method and quant_type:
        method = "ascend"
    quantized = bool(config.quantization) or bool(method) or quantization(args) is not None
    return ModelFacts(config.model_type or None, config.architecture, quantized,
                      f"{path}/config.json", quant_method=method, quant_type=quant_type,
                      num_attention_heads=config.num_attention_heads,
                      multimodal=is_multimodal(config.raw, config.architecture),
                      max_position_embeddings=config.max_position_embeddings,
                      moe=is_moe(config.raw, config.num_experts),
                      architectures=_names(config.raw.get("architectures")))


def _names(found: Any) -> tuple[str, ...]:
    return tuple(n for n in found if isinstance(n, str) and n) if isinstance(found, list) else ()


def served_architectures(d: Deployment) -> tuple[tuple[str, ...], str]:
    """The architectures vLLM looks up in its registry and where they come from: the
    `architectures` of `--hf-overrides` when the command line gives them (vLLM applies the
    overrides to config.json before the lookup; its supported-models page serves mGTE-TRM with
    `--hf-overrides '{"architectures": ["GteNewModel"]}'`,
    https://docs.vllm.ai/en/latest/models/supported_models.html), else config.json's."""
    if d.args:
        from probes.target.argv import json_flag

        found = json_flag(d.args, "--hf-overrides")
        names = _names((found.value or {}).get("architectures")) if found else ()
        if names:
            return names, "--hf-overrides"
    return d.model.architectures, "config.json"


def is_moe(raw: Mapping[str, Any], num_experts: int | None) -> bool:
    """Routed experts: the reader's num_experts (num_experts / num_local_experts, also under
    text_config) or DeepSeek's n_routed_experts, above one."""
    routed = raw.get("n_routed_experts")
    return (num_experts or 0) > 1 or (isinstance(routed, int) and routed > 1)


def is_multimodal(raw: Mapping[str, Any], architecture: str) -> bool:
    """A model with a vision or audio tower: config.json carries its `vision_config` /
    `audio_config`, or the architecture is a `...ForConditionalGeneration` class, the name
    Hugging Face Transformers gives a language model wrapped with such a tower (Qwen2-VL,
    Qwen3-VL, Qwen2-Audio, ...; also T5 and BART, encoder-decoder text models vLLM-Ascend does
    not serve)."""
    towers = any(isinstance(raw.get(key), Mapping) for key in ("vision_config", "audio_config"))
    return towers or architecture.endswith("ForConditionalGeneration")


def _config_quant_method(found: Mapping[str, Any] | None) -> str:
    method = (found or {}).get("quant_method")
    return method.strip().lower() if isinstance(method, str) else ""


def _modelslim_type(ctx: Context, path: str) -> str:
    """The description's model_quant_type; "" without one (or when it cannot be read:
    checkpoint.format reports that)."""
    from probes.model.quant import MODELSLIM_DESCRIPTION, parse_modelslim_description
    from probes.model.reader import CheckpointError, join, read_json

    try:
        document = read_json(ctx.host, join(path, MODELSLIM_DESCRIPTION))
    except (CheckpointError, HostError, NotRecorded):
        return ""
    return (parse_modelslim_description(document).model_quant_type or "").upper()


def quantization(args: tuple[str, ...]) -> str | None:
    """The --quantization method on the command line, or None."""
    if not args:
        return None
    from probes.target.argv import value_of

    return value_of(args, "--quantization", "-q")


# -- the features -------------------------------------------------------------------------------


def features(args: tuple[str, ...], flags: Mapping[str, JsonFlag], ctx: Context,
             model: ModelFacts, env: Mapping[str, str]) -> tuple[str, ...]:
    """The features the command line, its environment and the checkpoint turn on, by the names
    the support rows use (listed in checks.builtin.serving_features)."""
    found: list[str] = []
    method = quantization(args) or model.quant_method
    if method:
        found.append(f"quantization:{method}")
        if method == "ascend" and model.quant_type:  # rows may speak of one msModelSlim type
            found.append(f"quantization:ascend:{model.quant_type}")
    serving = ctx.target.serving
    if serving.data_parallel_size is not None and serving.data_parallel_size.value > 1:
        found.append("data-parallel")
    if serving.pipeline_parallel_size is not None and serving.pipeline_parallel_size.value > 1:
        found.append("pipeline-parallel")
    if args:  # the environment's switches are read with the vLLM command line they tune
        from checks.builtin.serving_features import command_features

        found += command_features(args, flags, env)
    if serving.tensor_parallel_size is not None:  # as stated: vLLM's default of 1 is no feature
        found.append(f"tp:{serving.tensor_parallel_size.value}")
    return tuple(dict.fromkeys(found))
