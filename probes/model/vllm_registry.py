"""The model architectures an installed vLLM (and vLLM-Ascend) registers, read from their source
text with `ast`: nothing is imported or run.

vLLM keeps its registry as module-level dict literals in
`vllm/model_executor/models/registry.py` (vllm-project/vllm @ 0002bff0b6cb): one per task
(`_TEXT_GENERATION_MODELS`, `_EMBEDDING_MODELS`, `_CROSS_ENCODER_MODELS`, `_MULTIMODAL_MODELS`,
`_SPECULATIVE_DECODING_MODELS`, `_TRANSFORMERS_SUPPORTED_MODELS`, `_TRANSFORMERS_BACKEND_MODELS`)
keyed by the architecture name config.json carries, spread into `_VLLM_MODELS`; the engine
refuses any other name with "Model architectures [...] are not supported for now" unless its
Transformers backend takes it. `_PREVIOUSLY_SUPPORTED_MODELS` maps an architecture to the last
release that served it (the engine says so when refusing it): it is not a registration.

vLLM-Ascend adds its own at plugin load: `ModelRegistry.register_model("Arch", "module:Class")`
calls in `vllm_ascend/models/__init__.py` (vllm-project/vllm-ascend @ 000736f0d4e8), some of
them under an `if` on its environment; every such call counts, the doctor cannot tell which
branch the engine takes.

When no registered name matches, vLLM swaps the class-name suffix for another of its task
suffixes and takes a registered base (`_normalize_arch`, registry.py above, over
`_SUFFIX_TO_DEFAULTS` of vllm/config/model.py @ 18ec66292536): `Qwen3ForSequenceClassification`
is served by the registered `Qwen3ForCausalLM`. `served_as` does the same for every suffix,
whatever the runner, so it errs towards "served".
"""

from __future__ import annotations

import ast
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from probes.errors import HostError, ParseError, PathMissing

if TYPE_CHECKING:
    from probes.host import Host

MAX_REGISTRY_BYTES = 512 * 1024  # the vLLM 0.1x registry.py is about 50 KB
VLLM_REGISTRY = "vllm/model_executor/models/registry.py"
ASCEND_MODELS = "vllm_ascend/models/__init__.py"
PREVIOUSLY = "_PREVIOUSLY_SUPPORTED_MODELS"
SPREAD_INTO = "_VLLM_MODELS"
# vllm/config/model.py _SUFFIX_TO_DEFAULTS, in its order (the first that ends the name matches)
TASK_SUFFIXES = ("ForCausalLM", "ForConditionalGeneration", "ChatModel", "LMHeadModel",
                 "ForTextEncoding", "EmbeddingModel", "ForSequenceClassification",
                 "ForTokenClassification", "ForAudioClassification", "ForImageClassification",
                 "ForVideoClassification", "ClassificationModel", "ForRewardModeling",
                 "RewardModel", "Model")


@dataclass(frozen=True)
class VllmRegistry:
    """The architectures vLLM's registry.py registers, and those it served until a release."""

    architectures: frozenset[str]
    removed: Mapping[str, str] = field(default_factory=dict)  # architecture -> last release


def parse_vllm_registry(text: str, what: str = VLLM_REGISTRY) -> VllmRegistry:
    """The string keys of the module-level `*_MODELS` dict literals. When `_VLLM_MODELS`
    spreads named dicts, only those (and its own keys) count; a dict comprehension spread into
    another only repeats keys already there. Raises ParseError on text that is not Python or
    holds no such dict."""
    dicts = _module_dicts(_parse(text, what))
    removed = {k: v for k, v in _pairs(dicts.pop(PREVIOUSLY, None))}
    tables = {name: node for name, node in dicts.items() if name.endswith("_MODELS")}
    if not tables:
        raise ParseError(what, "no module-level *_MODELS dict: not a registry the doctor reads")
    spread = tables.get(SPREAD_INTO)
    names = _spread_names(spread) if spread is not None else []
    unknown = [n for n in names if n not in dicts]
    if unknown:  # tables kept elsewhere: what this file holds is not the whole registry
        raise ParseError(what, f"{SPREAD_INTO} spreads {', '.join(unknown)}, not a dict "
                         "literal of this file: not a registry the doctor reads")
    chosen = [dicts[n] for n in names] + [spread] if spread is not None and names \
        else list(tables.values())
    found = frozenset(key for node in chosen for key in _keys(node))
    if not found:
        raise ParseError(what, "its *_MODELS dicts register no architecture")
    return VllmRegistry(found, removed)


def parse_ascend_registrations(text: str, what: str = ASCEND_MODELS) -> frozenset[str]:
    """The first argument of every `....register_model("Arch", ...)` call whose argument is a
    string literal. Raises ParseError on text that is not Python."""
    found = set()
    for node in ast.walk(_parse(text, what)):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func, first = node.func, node.args[0]
        named = isinstance(func, ast.Attribute) and func.attr == "register_model"
        if named and isinstance(first, ast.Constant) and isinstance(first.value, str):
            found.add(first.value)
    return frozenset(found)


def served_as(architecture: str, registered: frozenset[str]) -> str | None:
    """The registered name vLLM serves `architecture` as: itself, or a base reached by swapping
    its task suffix (see the module doc); None when neither is registered."""
    if architecture in registered:
        return architecture
    suffix = next((s for s in TASK_SUFFIXES if architecture.endswith(s)), None)
    if suffix is None:
        return None
    for other in TASK_SUFFIXES:
        base = architecture.replace(suffix, other)
        if base in registered:
            return base
    return None


def _parse(text: str, what: str) -> ast.Module:
    try:
        return ast.parse(text, filename=what)
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", None)
        raise ParseError(what, f"not Python the doctor can parse ({exc.__class__.__name__})",
                         line) from None


def _module_dicts(module: ast.Module) -> dict[str, ast.Dict]:
    found: dict[str, ast.Dict] = {}
    for stmt in module.body:
        if isinstance(stmt, ast.Assign):
            targets, value = stmt.targets, stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            targets, value = [stmt.target], stmt.value
        else:
            continue
        if isinstance(value, ast.Dict):
            found.update({t.id: value for t in targets if isinstance(t, ast.Name)})
    return found


def _keys(node: ast.Dict) -> list[str]:
    return [k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]


def _pairs(node: ast.Dict | None) -> list[tuple[str, str]]:
    if node is None:
        return []
    return [(k.value, v.value) for k, v in zip(node.keys, node.values, strict=True)
            if isinstance(k, ast.Constant) and isinstance(k.value, str)
            and isinstance(v, ast.Constant) and isinstance(v.value, str)]


def _spread_names(node: ast.Dict) -> list[str]:
    """The names spread with `**NAME` into a dict literal (a spread has key None)."""
    return [v.id for k, v in zip(node.keys, node.values, strict=True)
            if k is None and isinstance(v, ast.Name)]


@dataclass(frozen=True)
class Registrations:
    """What the judged interpreter's engine registers, or why it could not be read."""

    vllm: VllmRegistry | None = None
    ascend: frozenset[str] = frozenset()
    problem: str = ""  # non-empty: not judged, and why


def read_registrations(host: Host, vllm_at: str, ascend_at: str | None) -> Registrations:
    """vLLM's registry.py under its distribution's location and vLLM-Ascend's registrations
    under its own (absent: none), each read up to MAX_REGISTRY_BYTES."""
    try:
        path = posixpath.join(vllm_at, VLLM_REGISTRY)
        vllm = parse_vllm_registry(_read(host, path), path)
        ascend: frozenset[str] = frozenset()
        if ascend_at:
            path = posixpath.join(ascend_at, ASCEND_MODELS)
            text = _read(host, path, missing_ok=True)
            ascend = parse_ascend_registrations(text, path) if text else frozenset()
    except (HostError, ParseError) as exc:
        return Registrations(problem=str(exc))
    return Registrations(vllm, ascend)


def _read(host: Host, path: str, missing_ok: bool = False) -> str:
    try:
        data = host.read_bytes(path, 0, MAX_REGISTRY_BYTES + 1)
    except PathMissing:
        if missing_ok:
            return ""
        raise
    if len(data) > MAX_REGISTRY_BYTES:
        raise ParseError(path, f"over {MAX_REGISTRY_BYTES // 1024} KiB, not read")
    return data.decode("utf-8", "replace")
