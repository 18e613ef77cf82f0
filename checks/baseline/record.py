"""Observing a baseline now: through the Context's shared facts (one `npu-smi info`, one
package listing per run), for `baseline record` and the baseline.drift check. Items that cannot
be observed (a recording that lacks them) are "unknown", never a difference and never a match.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from checks import inputs
from checks.baseline.model import (
    PACKAGES,
    PROBE_TEXT,
    SPECIAL_IDS,
    STACK_ITEMS,
    Baseline,
    BaselineError,
    NpuInventory,
    TokenizerFingerprint,
)
from checks.command_options import BaselineRecordOptions
from checks.context import Context
from checks.errors import UsageError
from checks.secret_names import REDACTED, is_secret_name
from probes.environment import VARIABLE_PREFIXES
from probes.errors import NotRecorded
from probes.host import Host
from probes.stack import Found, StackVersions
from probes.target.model import Target, TargetUnreadable, shell_target

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
    from checks.builtin.facts import stack

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
    from probes.recording.recorder import utc_now_iso

    return utc_now_iso()


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
