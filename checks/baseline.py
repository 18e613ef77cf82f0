"""Baselines: what a validated machine looked like, and how this one differs from it.

`ascend-doctor baseline record` writes a YAML file (`ascend-baseline/1`) with the versions of
the NPU stack and of the Python packages that serve the model, the ASCEND_* family of the
environment (secret-looking values redacted), the NPU inventory and, with --model, a
tokenizer fingerprint. `ascend-doctor --baseline FILE` observes the same items now and the
`baseline.drift` check lists every difference as `name: baseline -> now`.

Observation goes through the Context's shared facts (one `npu-smi info`, one package listing
per run); comparison is a pure function of two Baselines. Items that cannot be observed now
(a recording that lacks them) are "unknown", never a difference and never a match.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from checks import inputs
from checks.command_options import BaselineRecordOptions
from checks.context import Context
from checks.errors import UsageError
from checks.secret_names import REDACTED, is_secret_name
from probes.environment import VARIABLE_PREFIXES
from probes.errors import NotRecorded
from probes.host import Host, normalise_dist_name
from probes.stack import Found, StackVersions
from probes.target.model import Target, TargetUnreadable, shell_target

SCHEMA = "ascend-baseline/1"
SCHEMA_NAME, SCHEMA_MAJOR = "ascend-baseline", "1"
STACK_ITEMS = ("driver", "firmware", "cann", "nnal", "mindie")
PACKAGES = ("torch", "torch-npu", "transformers", "tokenizers", "vllm", "vllm-ascend")
# Chinese, an emoji-free mix of scripts, digits and a chat marker: a tokenizer swap or a
# different added-token table changes these ids.
PROBE_TEXT = "<|im_start|>user\n你好，昇腾 NPU！Hello, world 12345<|im_end|>\n"
SPECIAL_IDS = ("bos_token_id", "eos_token_id", "pad_token_id", "unk_token_id")
ABSENT = "absent"
UNAVAILABLE = "unavailable"

Category = Literal["version", "environment", "inventory", "tokenizer"]
CATEGORIES: tuple[Category, ...] = ("version", "environment", "inventory", "tokenizer")


class BaselineError(Exception):
    """A baseline file cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class NpuInventory:
    count: int
    chips: tuple[str, ...]  # chip names as npu-smi prints them, e.g. 910B4
    hbm_total_mb: tuple[int | None, ...]


@dataclass(frozen=True)
class TokenizerFingerprint:
    vocab_size: int
    special_ids: Mapping[str, int | None]
    probe_text: str
    ids: tuple[int, ...]
    ids_dtype: str
    mask_dtype: str | None


@dataclass(frozen=True)
class Baseline:
    recorded_at: str
    host: str
    versions: Mapping[str, str] = field(default_factory=dict)  # item -> version (present only)
    environment: Mapping[str, str] = field(default_factory=dict)
    npu: NpuInventory | None = None  # None: npu-smi gave no inventory
    tokenizer: TokenizerFingerprint | None = None
    # what could not be observed (only on the "now" side): flattened names or their prefixes
    unknown: Mapping[str, str] = field(default_factory=dict)  # name -> why


@dataclass(frozen=True)
class Drift:
    name: str
    category: Category
    baseline: str
    now: str

    def line(self) -> str:
        return f"{self.name}: {self.baseline} -> {self.now}"


# -- observing --------------------------------------------------------------------------------


def _stack_version(name: str, stack: StackVersions) -> Found[Any]:
    found: dict[str, Found[Any]] = {"driver": stack.driver, "firmware": stack.firmware,
                                    "cann": stack.toolkit, "nnal": stack.nnal,
                                    "mindie": stack.mindie}
    return found[name]


def stack_versions(stack: StackVersions) -> tuple[dict[str, str], dict[str, str]]:
    """(item -> version, item -> why unknown) from the Ascend version files."""
    found: dict[str, str | None] = {
        "driver": stack.driver.value.driver_version if stack.driver.value else None,
        "firmware": stack.firmware.value.version if stack.firmware.value else None,
        "cann": (stack.toolkit.value.version if stack.toolkit.value else None)
        or (stack.version_cfg.value.running_version if stack.version_cfg.value else None),
        "nnal": (stack.nnal.value.version or stack.nnal.value.full_version)
        if stack.nnal.value else None,
        "mindie": stack.mindie.value.version if stack.mindie.value else None,
    }
    versions = {k: v for k, v in found.items() if v}
    unknown = {f"versions.{k}": "not recorded" for k in STACK_ITEMS
               if k not in versions and _stack_version(k, stack).state == "not_recorded"}
    return versions, unknown


def ascend_variables(env: Mapping[str, str]) -> dict[str, str]:
    """The ASCEND_* family (and HCCL_, ATB_, ... from probes.environment), secrets redacted."""
    return {name: (REDACTED if is_secret_name(name) and value else value)
            for name, value in sorted(env.items()) if name.startswith(VARIABLE_PREFIXES)}


def npu_inventory(document: Mapping[str, Any]) -> NpuInventory:
    chips = [c for c in document.get("chips", []) if isinstance(c, dict)]
    return NpuInventory(
        count=len(chips),
        chips=tuple(str(c.get("name") or "?") for c in chips),
        hbm_total_mb=tuple(c.get("hbm_total_mb") for c in chips),
    )


def observe(ctx: Context, model_dir: Path | None = None) -> Baseline:
    """This machine (or recording) now, through the run's shared facts."""
    from checks.builtin import facts
    from checks.builtin.versions import stack

    unknown: dict[str, str] = {}
    versions, stack_unknown = stack_versions(stack(ctx))
    unknown.update(stack_unknown)
    python = facts.python(ctx)
    if python.error:
        unknown.update({f"versions.{p}": python.error for p in PACKAGES if p not in versions})
    for name in PACKAGES:
        version = python.version_of(name)
        if version and name not in versions:
            versions[name] = version
    try:
        environment = ascend_variables(ctx.host.env)
    except TargetUnreadable as exc:
        environment = {}
        unknown["environment"] = str(exc)  # the target's environment could not be read
    except NotRecorded:
        environment = {}
        unknown["environment"] = "the environment was not recorded"
    reading = facts.npu(ctx)
    npu = None
    if reading.kind == "info":
        npu = npu_inventory(reading.document)
    elif reading.command is not None and reading.command.outcome == "not_recorded":
        unknown["npu"] = "`npu-smi info` was not recorded"
    tokenizer = None
    if model_dir is not None:
        tokenizer = _tokenizer_now(ctx, model_dir, unknown)
    return Baseline(recorded_at=_now_iso(), host=ctx.host.description, versions=versions,
                    environment=environment, npu=npu, tokenizer=tokenizer, unknown=unknown)


def _tokenizer_now(ctx: Context, model_dir: Path, unknown: dict[str, str]
                   ) -> TokenizerFingerprint | None:
    local = local_model_path(ctx.host, model_dir)
    if local is None:
        unknown["tokenizer"] = "the tokenizer needs the model directory on this machine"
        return None
    try:
        return ctx.fact("baseline.tokenizer", lambda: tokenizer_fingerprint(local))
    except BaselineError as exc:
        unknown["tokenizer"] = str(exc)
        return None


def local_model_path(host: Host, model_dir: Path) -> Path | None:
    """Where this process can open the observed machine's model directory, if it can."""
    from probes.live import LiveHost

    inner: object = host
    while not isinstance(inner, LiveHost) and hasattr(inner, "inner"):
        inner = inner.inner
    if not isinstance(inner, LiveHost):
        return None  # a recording carries no loadable tokenizer
    try:
        return Path(inner.host_path(str(model_dir)))
    except Exception:  # the path cannot be resolved under the root: not loadable
        return None


def tokenizer_fingerprint(model_dir: Path) -> TokenizerFingerprint:
    """Vocabulary size, special ids and what PROBE_TEXT encodes to. Raises BaselineError."""
    try:
        from transformers import AutoTokenizer  # heavy: imported only when asked
    except ImportError as exc:
        raise BaselineError(f"transformers is not installed ({exc})") from None
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
        batch = tokenizer([PROBE_TEXT], return_tensors="np")
    except Exception as exc:
        raise BaselineError(f"{model_dir}: cannot load a tokenizer "
                            f"({type(exc).__name__}: {exc})") from None
    ids = batch["input_ids"]
    mask = batch.get("attention_mask")
    specials = {k: getattr(tokenizer, k, None) for k in SPECIAL_IDS}
    return TokenizerFingerprint(
        vocab_size=len(tokenizer),
        special_ids={k: v if isinstance(v, int) else None for k, v in specials.items()},
        probe_text=PROBE_TEXT,
        ids=tuple(int(i) for i in ids[0]),
        ids_dtype=str(ids.dtype),
        mask_dtype=str(mask.dtype) if mask is not None else None,
    )


def _now_iso() -> str:
    from probes.recording import utc_now_iso

    return utc_now_iso()


# -- comparing --------------------------------------------------------------------------------


def _counted(values: tuple[Any, ...]) -> str:
    """`910B4 x8`, or `910B4 x7, 910B3 x1`: order-free, short enough for one line."""
    counts = Counter("?" if v is None else str(v) for v in values)
    return ", ".join(f"{v} x{n}" for v, n in sorted(counts.items())) or "none"


def flatten(baseline: Baseline) -> dict[str, str]:
    """Every compared item as `name -> value`; absent items are left out."""
    out = {f"versions.{k}": v for k, v in baseline.versions.items()}
    out |= {f"environment.{k}": v for k, v in baseline.environment.items()}
    if baseline.npu is None:
        out["npu.count"] = UNAVAILABLE
    else:
        out["npu.count"] = str(baseline.npu.count)
        out["npu.chips"] = _counted(baseline.npu.chips)
        out["npu.hbm_total_mb"] = _counted(baseline.npu.hbm_total_mb)
    tok = baseline.tokenizer
    if tok is not None:
        out["tokenizer.vocab_size"] = str(tok.vocab_size)
        out |= {f"tokenizer.{k}": str(v) for k, v in tok.special_ids.items()}
        out["tokenizer.probe_ids"] = " ".join(str(i) for i in tok.ids)
        out["tokenizer.ids_dtype"] = tok.ids_dtype
        out["tokenizer.mask_dtype"] = str(tok.mask_dtype)
    return out


def category_of(name: str) -> Category:
    heads: dict[str, Category] = {"versions": "version", "environment": "environment",
                                  "npu": "inventory", "tokenizer": "tokenizer"}
    return heads[name.split(".", 1)[0]]


def _unknown_reason(name: str, unknown: Mapping[str, str]) -> str | None:
    for prefix, why in unknown.items():
        if name == prefix or name.startswith(prefix + "."):
            return why
    return None


def compare(base: Baseline, now: Baseline) -> tuple[list[Drift], dict[str, str]]:
    """(differences, name -> why it could not be compared). Pure."""
    before, after = flatten(base), flatten(now)
    if base.tokenizer is None:  # not fingerprinted then: nothing to compare now
        after = {k: v for k, v in after.items() if not k.startswith("tokenizer.")}
    elif now.tokenizer is None and "tokenizer" not in now.unknown:
        now = Baseline(now.recorded_at, now.host, unknown={
            **now.unknown, "tokenizer": "no --model given: the tokenizer was not compared"})
    drifts: list[Drift] = []
    skipped: dict[str, str] = {}
    for name in sorted(before.keys() | after.keys()):
        why = _unknown_reason(name, now.unknown)
        if why is not None:
            skipped[name] = why
            continue
        old, new = before.get(name, ABSENT), after.get(name, ABSENT)
        if old != new:
            drifts.append(Drift(name, category_of(name), old, new))
    return drifts, skipped


# -- the file ---------------------------------------------------------------------------------


def to_data(baseline: Baseline) -> dict[str, Any]:
    data: dict[str, Any] = {
        "schema": SCHEMA,
        "recorded_at": baseline.recorded_at,
        "host": baseline.host,
        "versions": dict(baseline.versions),
        "environment": dict(baseline.environment),
        "npu": None if baseline.npu is None else {
            "count": baseline.npu.count,
            "chips": list(baseline.npu.chips),
            "hbm_total_mb": list(baseline.npu.hbm_total_mb),
        },
    }
    tok = baseline.tokenizer
    if tok is not None:
        data["tokenizer"] = {
            "vocab_size": tok.vocab_size,
            "special_ids": dict(tok.special_ids),
            "probe_text": tok.probe_text,
            "ids": list(tok.ids),
            "ids_dtype": tok.ids_dtype,
            "mask_dtype": tok.mask_dtype,
        }
    return data


HEADER = ("# ascend-doctor baseline of a validated machine (ascend-baseline/1).\n"
          "# Compare a machine with it: ascend-doctor --baseline THIS_FILE\n")


def to_yaml(baseline: Baseline) -> str:
    return HEADER + yaml.safe_dump(to_data(baseline), sort_keys=False, allow_unicode=True)


def load_baseline(path: Path) -> Baseline:
    from checks.user_yaml import UserYamlError, load_user_yaml

    try:
        raw = load_user_yaml(path)
    except OSError as exc:
        raise BaselineError(f"--baseline {path}: cannot read ({exc.strerror or exc})") from None
    except UserYamlError as exc:
        raise BaselineError(f"--baseline {path}: {exc}") from None
    try:
        return from_data(raw)
    except KeyError as exc:
        raise BaselineError(f"--baseline {path}: the key {exc} is missing; record a new one "
                            "with `ascend-doctor baseline record`") from None
    except (TypeError, ValueError, OverflowError) as exc:
        raise BaselineError(f"--baseline {path}: {exc}; record a new one with "
                            "`ascend-doctor baseline record`") from None


def _mapping(raw: Any, what: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise TypeError(f"'{what}' must be a mapping")
    return raw


def _strings(raw: Any, what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in _mapping(raw, what).items():
        if not isinstance(value, str):
            shown = str(value) if isinstance(value, (int, float, bool)) else "..."
            raise TypeError(f"'{what}.{str(key)[:60]}' must be a string (quote it: "
                            f"'{shown[:40]}')")
        out[str(key)] = value
    return out


def _count(raw: Any, what: str) -> int:
    """A non-negative integer of plausible size (a vocabulary, a chip count)."""
    if not isinstance(raw, int) or isinstance(raw, bool) or not 0 <= raw < 2**40:
        raise TypeError(f"'{what}' must be a whole number from 0 to 2**40")
    return raw


def from_data(raw: Any) -> Baseline:
    data = _mapping(raw, "the file")
    schema = str(data.get("schema", ""))
    name, _, version = schema.partition("/")
    if name != SCHEMA_NAME or version.split(".", 1)[0] != SCHEMA_MAJOR:
        raise ValueError(f"schema {schema!r} is not {SCHEMA}")
    versions = {normalise_dist_name(k) if k not in STACK_ITEMS else k: v
                for k, v in _strings(data.get("versions", {}), "versions").items()}
    return Baseline(
        recorded_at=str(data.get("recorded_at", "")),
        host=str(data.get("host", "")),
        versions=versions,
        environment=_strings(data.get("environment", {}), "environment"),
        npu=_npu_from(data.get("npu")),
        tokenizer=_tokenizer_from(data.get("tokenizer")),
    )


def _npu_from(raw: Any) -> NpuInventory | None:
    if raw is None:
        return None
    npu = _mapping(raw, "npu")
    chips = npu.get("chips", [])
    hbm = npu.get("hbm_total_mb", [])
    if not isinstance(chips, list) or not isinstance(hbm, list):
        raise TypeError("'npu.chips' and 'npu.hbm_total_mb' must be lists")
    if any(v is not None and (not isinstance(v, int) or isinstance(v, bool)) for v in hbm):
        raise TypeError("'npu.hbm_total_mb' must hold integers (MB) or null")
    count = _count(npu.get("count", len(chips)), "npu.count")
    return NpuInventory(count, tuple(str(c) for c in chips), tuple(hbm))


def _tokenizer_from(raw: Any) -> TokenizerFingerprint | None:
    if raw is None:
        return None
    tok = _mapping(raw, "tokenizer")
    ids = tok["ids"]
    if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
        raise TypeError("'tokenizer.ids' must be a list of integers")
    specials = _mapping(tok.get("special_ids", {}), "tokenizer.special_ids")
    return TokenizerFingerprint(
        vocab_size=_count(tok["vocab_size"], "tokenizer.vocab_size"),
        special_ids={str(k): v if isinstance(v, int) else None for k, v in specials.items()},
        probe_text=str(tok.get("probe_text", PROBE_TEXT)),
        ids=tuple(ids),
        ids_dtype=str(tok["ids_dtype"]),
        mask_dtype=None if tok.get("mask_dtype") is None else str(tok["mask_dtype"]),
    )


# -- `baseline record` ---------------------------------------------------------------------------


def record_baseline(host: Host, options: BaselineRecordOptions,
                    target: Target | None = None) -> Baseline:
    """This machine now (the target's environment), as a baseline to write. Raises UsageError
    naming --model when the tokenizer cannot be fingerprinted."""
    model = inputs.model_dir(options.model, options.host, host)
    ctx = Context(host, inputs.policy(None), model, timeout_s=options.host.timeout_s,
                  target=target or shell_target())
    if model is not None and local_model_path(host, model) is None:
        raise UsageError(f"--model {options.model}: the tokenizer fingerprint needs the model "
                         "directory on this machine, not in a recording")
    now = observe(ctx, model)
    if "tokenizer" in now.unknown:
        raise UsageError(f"--model {options.model}: {now.unknown['tokenizer']}")
    return now
