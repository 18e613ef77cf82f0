"""tokenizer.dtype and tokenizer.token-ids: what the model's tokenizer really produces.

Both load the tokenizer under --model with this interpreter's transformers (imported inside
the functions: importing `checks` must load neither torch nor transformers), offline
(`local_files_only=True`), once per run. The model directory must be on this machine: a
recording or a --root tree does not carry a loadable tokenizer, so those runs skip.

Observation and judgement are split: `observe_*` talks to the tokenizer, `judge_*` are pure
functions of what was observed, so every fault can be tested without a faulty tokenizer.
"""

from __future__ import annotations

import importlib.util
import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from checks.builtin import facts
from checks.context import Context
from checks.model import NO_MODEL, Finding, failed, passed, skipped, warned
from probes.errors import NotRecorded
from probes.live import LiveHost

# A short and a longer prompt, so the short one is padded and the mask shows its polarity.
PROBE_BATCH = ("Hello world", "你好，世界！ A longer second prompt, so the first one is padded.")
PROBE_MESSAGES = ({"role": "system", "content": "你是一个有用的助手。"},
                  {"role": "user", "content": "用一句话介绍昇腾 NPU。Hello world"})
PROBE_PLAIN = "<|im_start|>user\n你好，世界<|im_end|>\n<|im_start|>assistant\n"

IDS_OK = ("int64", "int32")
IDS_NARROW = ("int8", "int16", "uint8", "uint16")
UINT16_LIMIT = 65536
# Embedding rows beyond the tokenizer are padding (Qwen3: 267, Qwen3.5/3.6: 243); a far
# larger gap suggests another model's tokenizer (a Qwen3 tokenizer on Qwen3.5 leaves 96,651).
PADDING_ROWS_WARN = 4096
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model",
                   "qwen.tiktoken")
SPECIAL_ID_KEYS = ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id")

MASK_NOTE = (
    "HF attention_mask: 1 = attend, 0 = padding. Ascend fused attention takes the opposite: "
    "torch_npu.npu_fused_infer_attention_score / npu_prompt_flash_attention / "
    "npu_incre_flash_attention `atten_mask` is bool/int8/uint8 with 1 = masked out, "
    "0 = computed (TORCH_NPU_OPS.md §1 FIA `atten_mask`, §2 IFA/PFA); ATB SelfAttention "
    "takes float16 additive masks [0, -inf] (FACTCHECK.md E4). Convert at the boundary "
    "(fused = 1 - mask as bool/int8; ATB additive = 0 where mask is 1, -inf where 0); "
    "never pass the HF mask through")
# The two checks run side by side on one tokenizer object, and `padding=True` flips the
# backend's padding state for the call: one observation at a time.
_IN_USE = threading.Lock()
DTYPE_PLAYBOOK = "see playbook tokenizer.dtype"
IDS_PLAYBOOK = "see playbook tokenizer.token-ids"


# -- loading ------------------------------------------------------------------------------


class TokenizerUnavailable(Exception):
    """Why no tokenizer could be examined; the checks turn it into a skip or a warn."""

    def __init__(self, reason: str, status: str = "skip") -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status


def on_this_machine(host: object) -> bool:
    """The host reads this machine's own `/` (a RecordingHost around one counts too)."""
    while not isinstance(host, LiveHost) and hasattr(host, "inner"):
        host = host.inner
    return isinstance(host, LiveHost) and getattr(host, "root", "/") == "/"


def _load(model_dir: Path) -> Any:
    # transformers 5 builds an empty 1-token tokenizer from config.json alone; refuse first
    if not any((model_dir / name).is_file() for name in TOKENIZER_FILES):
        raise TokenizerUnavailable(
            f"no tokenizer files in {model_dir} (looked for {', '.join(TOKENIZER_FILES)})",
            status="warn")
    try:
        from transformers import AutoTokenizer
    except ImportError as exc:
        raise TokenizerUnavailable(f"transformers is not installed ({exc})") from exc
    try:
        return AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    except Exception as exc:
        raise TokenizerUnavailable(
            f"cannot load a tokenizer from {model_dir}: {type(exc).__name__}: {exc}",
            status="warn") from exc


def load_tokenizer(ctx: Context) -> Any:
    """The --model tokenizer, loaded once per run. Raises TokenizerUnavailable."""
    if ctx.model_dir is None:
        raise TokenizerUnavailable(NO_MODEL)
    if not on_this_machine(ctx.host):
        raise TokenizerUnavailable("tokenizer checks need the model directory on this machine")
    model_dir = ctx.model_dir
    return ctx.fact("tokenizer", lambda: _load(model_dir))


def _unavailable(exc: TokenizerUnavailable) -> Finding:
    if exc.status == "warn":
        return warned(exc.reason, "ship the tokenizer files (tokenizer.json, "
                      "tokenizer_config.json) with the checkpoint", str(exc.__cause__ or ""))
    return skipped(exc.reason)


def library_versions() -> str:
    from importlib import metadata

    found = []
    for name in ("transformers", "tokenizers"):
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            found.append(f"{name} not installed")
    return "loaded with this interpreter's " + ", ".join(found)


# -- tokenizer.dtype ------------------------------------------------------------------------


@dataclass(frozen=True)
class TensorObservation:
    """What the tokenizer returned for PROBE_BATCH with one `return_tensors`."""

    framework: str  # "np" or "pt"
    ids_dtype: str  # "int64", without "torch."
    mask_dtype: str | None  # None: no attention_mask returned
    mask_values: tuple[float, ...] = ()  # distinct values
    real_tokens_value: float | None = None  # the mask over real tokens of the padded row
    padding_value: float | None = None  # the mask over its padding (None: nothing padded)


def _dtype_name(dtype: object) -> str:
    return str(dtype).removeprefix("torch.")


def _observe(tokenizer: Any, framework: str) -> TensorObservation:
    batch = tokenizer(list(PROBE_BATCH), padding=True, return_tensors=framework)
    ids = batch["input_ids"]
    mask = batch.get("attention_mask")
    if mask is None:
        return TensorObservation(framework, _dtype_name(ids.dtype), None)
    import numpy as np  # only when a tokenizer is judged: the doctor starts without numpy

    values = np.asarray(mask.tolist())
    real_len = len(tokenizer(PROBE_BATCH[0])["input_ids"])
    row = values[0]
    left = getattr(tokenizer, "padding_side", "right") == "left"
    real = row[len(row) - real_len:] if left else row[:real_len]
    pad = row[:len(row) - real_len] if left else row[real_len:]
    return TensorObservation(
        framework, _dtype_name(ids.dtype), _dtype_name(mask.dtype),
        tuple(float(v) for v in np.unique(values)),
        float(real[0]) if len(set(real.tolist())) == 1 else None,
        (float(pad[0]) if len(set(pad.tolist())) == 1 else None) if len(pad) else None)


def torch_available() -> bool:
    return importlib.util.find_spec("torch") is not None


def observe_dtypes(tokenizer: Any) -> list[TensorObservation]:
    observed = [_observe(tokenizer, "np")]
    if torch_available():
        observed.append(_observe(tokenizer, "pt"))
    return observed


def _is_integer(dtype: str) -> bool:
    return dtype.startswith(("int", "uint"))


def _mask_problem(seen: TensorObservation) -> str:
    """Why this mask is wrong, or "" when it is integer 0/1 with 1 = attend."""
    if seen.mask_dtype is None:
        return ""
    if not _is_integer(seen.mask_dtype):
        return f"attention_mask is {seen.mask_dtype}, not an integer 0/1 tensor"
    if not set(seen.mask_values) <= {0.0, 1.0}:
        return f"attention_mask holds {_values(seen.mask_values)}, not only 0 and 1"
    if seen.real_tokens_value == 0.0 or seen.padding_value == 1.0:
        return "attention_mask is inverted: real tokens 0, padding 1 (HF expects 1 = attend)"
    return ""


def _ids_problem(seen: TensorObservation) -> tuple[str, str]:
    """(severity, why) for the input_ids dtype; ("", "") when int64/int32."""
    if seen.ids_dtype in IDS_OK:
        return "", ""
    if seen.ids_dtype in IDS_NARROW or not _is_integer(seen.ids_dtype):
        return "fail", (f"input_ids are {seen.ids_dtype}: Qwen ids go past 151,000 (16 bits "
                        "hold 65,535; float16 is exact to 2048, bfloat16 to 256)")
    return "warn", f"input_ids are {seen.ids_dtype}, not int64/int32"


def _values(values: Sequence[float | None]) -> str:
    shown = [f"{v:g}" for v in sorted(v for v in values if v is not None)]
    return "/".join(shown) if shown else "n/a"


def describe(seen: TensorObservation) -> str:
    mask = "no attention_mask" if seen.mask_dtype is None else (
        f"attention_mask {seen.mask_dtype} values {_values(seen.mask_values)}, "
        f"real tokens {_values([seen.real_tokens_value])}, "
        f"padding {_values([seen.padding_value])}")
    return f"return_tensors={seen.framework!r}: input_ids {seen.ids_dtype}, {mask}"


def judge_dtype(observed: Sequence[TensorObservation], versions: str = "",
                drift: Sequence[str] = ()) -> Finding:
    """`drift`: tokenizer libraries that differ from the baseline's, each a warning."""
    evidence = [describe(seen) for seen in observed]
    if not any(seen.framework == "pt" for seen in observed):
        evidence.append("torch is not importable here: only return_tensors='np' was probed")
    evidence += [MASK_NOTE, versions] if versions else [MASK_NOTE]
    problems = [(sev, f"{seen.framework}: {why}") for seen in observed
                for sev, why in [_ids_problem(seen)] if sev]
    problems += [("fail", f"{seen.framework}: {why}") for seen in observed
                 for why in [_mask_problem(seen)] if why]
    problems += [("warn", why) for why in drift]
    remedy = ("keep input_ids int64 (int32 at most) and the attention_mask integer 0/1 "
              f"with 1 = attend; fix the tokenizer wrapper; {DTYPE_PLAYBOOK}")
    if drift:
        remedy += ("; install the transformers/tokenizers the baseline was validated with, "
                   "or re-validate and record a new baseline")
    fails = [why for sev, why in problems if sev == "fail"]
    if fails:
        return failed("; ".join(fails), remedy, *evidence)
    if problems:
        return warned("; ".join(why for _, why in problems), remedy, *evidence)
    if all(seen.mask_dtype is None for seen in observed):
        return warned("the tokenizer returns no attention_mask; ids are "
                      f"{observed[0].ids_dtype}", "build the mask in the serving engine; "
                      + DTYPE_PLAYBOOK, *evidence)
    first = observed[0]
    return passed(f"input_ids {first.ids_dtype}, attention_mask {first.mask_dtype} 0/1 with "
                  "1 = attend (Ascend fused ops need it inverted: 1 = masked)", *evidence)


def tokenizer_dtype(ctx: Context) -> Finding:
    try:
        tokenizer = load_tokenizer(ctx)
    except TokenizerUnavailable as exc:
        return _unavailable(exc)
    with _IN_USE:
        observed = observe_dtypes(tokenizer)
    return judge_dtype(observed, library_versions(), library_drift(ctx))


def library_drift(ctx: Context) -> list[str]:
    """transformers/tokenizers of the deployment's interpreter against the --baseline's."""
    if ctx.baseline is None:
        return []
    try:
        now = facts.python(ctx)
    except NotRecorded:
        return []
    if now.error:
        return []
    drift = []
    for name in ("transformers", "tokenizers"):
        was, is_now = ctx.baseline.versions.get(name), now.version_of(name)
        if was is not None and was != is_now:
            drift.append(f"{name} {is_now or 'is absent'} here, {was} in the baseline "
                         "(a different tokenizer library can return other ids and dtypes)")
    return drift


# -- tokenizer.token-ids --------------------------------------------------------------------


@dataclass(frozen=True)
class IdObservation:
    """The id range of a tokenizer against the model's embedding."""

    tokenizer_size: int  # len(tokenizer): regular + added tokens
    max_added_id: int | None  # the largest added/special token id
    vocab_size: int | None  # config.json (or text_config) embedding rows
    probe_ids: tuple[int, ...]  # a chat prompt with CJK text and the chat markers
    probe_path: str  # "chat template" or "plain encode"
    marker_ids: tuple[tuple[str, int | None], ...] = ()  # <|im_start|>, <|im_end|>
    config_ids: tuple[tuple[str, int], ...] = ()  # "generation_config.json eos_token_id", id
    known_ids: frozenset[int] = frozenset()  # ids the tokenizer itself names as special/added
    declared_vocab: tuple[tuple[str, int], ...] = ()  # vocab_size keys of tokenizer files

    @property
    def largest_id(self) -> int:
        return max([self.tokenizer_size - 1, self.max_added_id or 0, *self.probe_ids])


def round_trip(ids: Sequence[int], dtype: str) -> list[tuple[int, int]]:
    """(id, what came back) for every id a numpy `dtype` array changes."""
    import numpy as np

    back = np.asarray(ids, dtype=np.int64).astype(dtype).astype(np.int64).tolist()
    return [(a, b) for a, b in zip(ids, back, strict=True) if a != b]


def _config_problems(seen: IdObservation, vocab: int) -> tuple[list[str], list[str]]:
    """(fails, warns) from special ids in config.json/generation_config.json."""
    fails, warns = [], []
    for where, token_id in seen.config_ids:
        if token_id >= vocab:
            fails.append(f"{where} = {token_id} is >= vocab_size {vocab}")
        elif seen.known_ids and token_id not in seen.known_ids:
            warns.append(f"{where} = {token_id} is not a special token of the tokenizer "
                         "(remapped or clamped?)")
    for where, declared in seen.declared_vocab:
        if declared < seen.tokenizer_size:
            fails.append(f"{where} = {declared} is smaller than the tokenizer "
                         f"({seen.tokenizer_size} ids)")
    return fails, warns


def _id_evidence(seen: IdObservation) -> list[str]:
    narrowed = round_trip(seen.probe_ids, "uint16")
    example = ", ".join(f"{a} -> {b}" for a, b in narrowed[:3])
    lines = [
        f"tokenizer size {seen.tokenizer_size} (ids 0..{seen.tokenizer_size - 1}), "
        f"largest added/special id {seen.max_added_id}, config vocab_size {seen.vocab_size}",
        f"probe ({seen.probe_path}, CJK + chat markers): {len(seen.probe_ids)} ids, "
        f"max {max(seen.probe_ids, default=0)}",
        ", ".join(f"{tok} = {tid}" for tok, tid in seen.marker_ids) or "no chat markers",
        f"round trip through int64: {len(round_trip(seen.probe_ids, 'int64'))} changed; "
        f"int32: {len(round_trip(seen.probe_ids, 'int32'))} changed",
        f"uint16 would corrupt {len(narrowed)} of {len(seen.probe_ids)} probe ids"
        + (f" ({example}): never store ids in 16 bits or clamp ids > 65535"
           if narrowed else ""),
    ]
    lines += [f"{where} = {tid}" for where, tid in seen.config_ids]
    return lines


def judge_token_ids(seen: IdObservation) -> Finding:
    evidence = _id_evidence(seen)
    remedy = ("ship the tokenizer that belongs to the checkpoint, keep ids int64/int32 end "
              f"to end, never clamp or remap ids; {IDS_PLAYBOOK}")
    fails = [f"{dtype} changes {len(bad)} probe ids" for dtype in ("int64", "int32")
             for bad in [round_trip(seen.probe_ids, dtype)] if bad]
    if seen.vocab_size is None:
        fails_c, warns = _config_problems(seen, 1 << 62)
        if fails or fails_c:
            return failed("; ".join(fails + fails_c), remedy, *evidence)
        return warned("config.json has no vocab_size: cannot compare the tokenizer's "
                      f"largest id {seen.largest_id} with the embedding",
                      "run with the model directory that holds config.json; " + IDS_PLAYBOOK,
                      *evidence, *warns)
    if seen.largest_id >= seen.vocab_size:
        fails.insert(0, f"the tokenizer produces id {seen.largest_id} but the embedding has "
                        f"{seen.vocab_size} rows (vocab_size): ids >= {seen.vocab_size} "
                        "index past it")
    fails_c, warns = _config_problems(seen, seen.vocab_size)
    fails += fails_c
    if fails:
        return failed("; ".join(fails), remedy, *evidence)
    spare = seen.vocab_size - seen.tokenizer_size
    if spare > PADDING_ROWS_WARN:
        warns.insert(0, f"the embedding has {spare} rows beyond the tokenizer's "
                        f"{seen.tokenizer_size} ids: the tokenizer of another model?")
    if warns:
        return warned("; ".join(warns), remedy, *evidence)
    return passed(f"largest id {seen.largest_id} < vocab_size {seen.vocab_size}; ids above "
                  "65535 survive int64/int32", *evidence)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return document if isinstance(document, dict) else {}


def config_vocab_size(config: Mapping[str, Any]) -> int | None:
    for source in (config, config.get("text_config") or {}):
        value = source.get("vocab_size") if isinstance(source, Mapping) else None
        if isinstance(value, int):
            return value
    return None


def _config_ids(model_dir: Path) -> list[tuple[str, int]]:
    found = []
    for name in ("config.json", "generation_config.json"):
        document = _read_json(model_dir / name)
        for source in (document, document.get("text_config") or {}):
            if not isinstance(source, Mapping):
                continue
            for key in SPECIAL_ID_KEYS:
                value = source.get(key)
                values = value if isinstance(value, list) else [value]
                found += [(f"{name} {key}", v) for v in values if isinstance(v, int)]
    return found


def _probe_ids(tokenizer: Any) -> tuple[list[int], str]:
    if getattr(tokenizer, "chat_template", None):
        try:
            out = tokenizer.apply_chat_template(list(PROBE_MESSAGES), tokenize=True,
                                                add_generation_prompt=True)
            ids = out["input_ids"] if isinstance(out, Mapping) else out
            return [int(i) for i in ids], "chat template"
        except Exception:  # a template needing arguments we do not pass: encode plainly
            pass
    return [int(i) for i in tokenizer.encode(PROBE_PLAIN, add_special_tokens=False)], \
        "plain encode"


def observe_ids(tokenizer: Any, model_dir: Path) -> IdObservation:
    added = {int(i) for i in getattr(tokenizer, "added_tokens_decoder", {})}
    special = {int(i) for i in getattr(tokenizer, "all_special_ids", []) if i is not None}
    known = added | special
    ids, path = _probe_ids(tokenizer)
    markers = tuple((tok, tokenizer.convert_tokens_to_ids(tok))
                    for tok in ("<|im_start|>", "<|im_end|>") if tok in tokenizer.get_vocab())
    declared_vocab = _read_json(model_dir / "tokenizer_config.json").get("vocab_size")
    declared = ([("tokenizer_config.json vocab_size", declared_vocab)]
                if isinstance(declared_vocab, int) else [])
    return IdObservation(
        tokenizer_size=len(tokenizer), max_added_id=max(known, default=None),
        vocab_size=config_vocab_size(_read_json(model_dir / "config.json")),
        probe_ids=tuple(ids), probe_path=path, marker_ids=markers,
        config_ids=tuple(_config_ids(model_dir)), known_ids=frozenset(known),
        declared_vocab=tuple(declared))


def tokenizer_token_ids(ctx: Context) -> Finding:
    try:
        tokenizer = load_tokenizer(ctx)
    except TokenizerUnavailable as exc:
        return _unavailable(exc)
    assert ctx.model_dir is not None
    with _IN_USE:
        observed = observe_ids(tokenizer, Path(ctx.model_dir))
    return judge_token_ids(observed)
