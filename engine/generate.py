"""The engine facade: load, prefill-then-decode loop, streaming text, cancel and stats."""

from __future__ import annotations

import threading
import time
from collections.abc import Generator, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from engine import cpu_kernel
from engine.cache import KV_LAYOUT
from engine.errors import EngineError, ModelFormatError, OutOfMemoryPlan
from engine.options import FP8_MODES, KV_CACHE_MODES
from engine.runner import (
    ModelRunner,
    check_cache_plan,
    check_model_plan,
    parse_dtype,
    pick_device,
)
from engine.sampling import SamplingParams, make_generator, next_token
from engine.tokenizer_load import load_tokenizer

Events = Generator["GenerationEvent", None, None]


@dataclass(frozen=True)
class GenerationConfig:
    max_new_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    repetition_penalty: float = 1.0
    stop_token_ids: tuple[int, ...] = ()
    seed: int | None = None

    def sampling(self) -> SamplingParams:
        params = SamplingParams(self.temperature, self.top_p, self.top_k,
                                self.repetition_penalty)
        params.validate()
        if self.max_new_tokens < 0:
            raise EngineError(f"max_new_tokens must be >= 0, got {self.max_new_tokens}")
        return params


@dataclass(frozen=True)
class GenerationEvent:
    """One generated token; `text` holds only the newly completed characters."""

    token_id: int
    text: str
    index: int
    finish_reason: str | None = None  # "stop" | "length" on the last event


@dataclass(frozen=True)
class EngineStats:
    device: str
    dtype: str
    fp8_mode: str
    max_seq_len: int
    kv_cache_bytes: int
    kv_cache_dtype: str
    kv_layout: str
    kv_alignment_bytes: int
    kv_tokens_used: int
    weight_bytes: int
    fused_ops: tuple[str, ...]
    ttft_s: float | None = None
    prefill_tokens: int = 0
    prefill_tokens_per_s: float | None = None
    decode_tokens: int = 0
    decode_tokens_per_s: float | None = None
    finish_reason: str | None = None  # "stop" | "length" | "cancelled"
    architecture: str = ""
    kv_layers: int = 0  # full-attention layers holding KV
    state_layers: int = 0  # linear-attention layers holding conv + recurrent state
    state_bytes: int = 0  # part of kv_cache_bytes: the linear-attention states
    ignored_tensors: tuple[str, ...] = ()  # checkpoint parts not loaded (vision tower, MTP)
    # resident FP8 on the CPU: "compiled kernel", or "torch path: <why no kernel>"
    fp8_decode: str = ""
    # CPU: the layers whose decode step runs in the compiled kernel, "N of M layers (K whole)"
    kernel_layers: str = ""

    @property
    def kv_occupancy(self) -> float:
        return self.kv_tokens_used / self.max_seq_len if self.max_seq_len else 0.0


@dataclass
class _RunTimes:
    ttft_s: float | None = None
    prefill_tokens: int = 0
    prefill_s: float = 0.0
    decode_tokens: int = 0
    decode_s: float = 0.0
    finish_reason: str | None = None


class TextStream:
    """Incremental detokenisation: emit text only once its characters are complete.

    Decodes a small window (the last emitted tokens as context plus the new ones) and holds
    back text that ends in U+FFFD (a multi-byte character split across tokens)."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.ids: list[int] = []
        self.prefix = 0
        self.read = 0

    def _decode(self, ids: list[int]) -> str:
        return str(self.tokenizer.decode(ids, skip_special_tokens=True))

    def push(self, token_id: int) -> str:
        self.ids.append(token_id)
        return self._emit(final=False)

    def finish(self) -> str:
        """Whatever is still held back (possibly an incomplete character, as decode shows it)."""
        return self._emit(final=True)

    def _emit(self, final: bool) -> str:
        if self.tokenizer is None or self.read == len(self.ids):
            return ""
        prefix_text = self._decode(self.ids[self.prefix:self.read])
        new_text = self._decode(self.ids[self.prefix:])
        if not final and (len(new_text) <= len(prefix_text) or new_text.endswith("\ufffd")):
            return ""
        self.prefix, self.read = self.read, len(self.ids)
        return new_text[len(prefix_text):]


def generation_eos_ids(generation_config: Mapping[str, Any]) -> tuple[int, ...]:
    """eos ids from generation_config.json (what transformers' generate stops on)."""
    value = generation_config.get("eos_token_id")
    values = value if isinstance(value, list) else [value]
    return tuple(int(v) for v in values if isinstance(v, int) and not isinstance(v, bool))


class Engine:
    """A model in this process: `Engine.load(path)`, then `generate`, `chat`, `logits`."""

    def __init__(self, config: Any, tokenizer: Any, runner: ModelRunner, fp8_mode: str,
                 eos_token_ids: Iterable[int], ignored_tensors: tuple[str, ...] = ()) -> None:
        self.config = config
        self.ignored_tensors = ignored_tensors
        self.tokenizer = tokenizer
        self.runner = runner
        self.fp8_mode = fp8_mode
        self.eos_token_ids = tuple(dict.fromkeys(eos_token_ids))
        self._cancel = threading.Event()
        self._busy = threading.Lock()
        self._times = _RunTimes()

    @classmethod
    def load(cls, path: str | Path, device: str = "auto", dtype: str | torch.dtype = "bfloat16",
             max_seq_len: int = 4096, fp8: str = "dequantize", kv_cache: str = "auto",
             require_tokenizer: bool = True) -> Engine:
        """Read the model once, plan its memory, then load. Every problem a user can fix is
        an EngineError naming the file or field."""
        if fp8 not in FP8_MODES:
            raise EngineError(f"fp8={fp8!r}: use one of {', '.join(FP8_MODES)}")
        if kv_cache not in KV_CACHE_MODES:
            raise EngineError(f"kv_cache={kv_cache!r}: use one of {', '.join(KV_CACHE_MODES)}")
        if max_seq_len < 1:
            raise EngineError(f"max_seq_len must be >= 1, got {max_seq_len}")
        try:
            return cls._load(Path(path), device, dtype, max_seq_len, fp8, kv_cache == "int8",
                             require_tokenizer)
        except MemoryError:
            raise OutOfMemoryPlan(f"{path}: ran out of memory while loading; use a smaller "
                                  "max_seq_len, fp8='resident' or a larger device") from None
        except RecursionError:
            raise ModelFormatError(f"{path}: a model file is nested too deeply to read; "
                                   "re-download it") from None
        except OSError as exc:
            raise ModelFormatError(f"{exc.filename or path}: {exc.strerror or exc}; check the "
                                   "file and its permissions") from None

    @classmethod
    def _load(cls, path: Path, device: str, dtype: str | torch.dtype, max_seq_len: int,
              fp8: str, int8_kv: bool, require_tokenizer: bool) -> Engine:
        from engine.config import from_facts
        from engine.gguf import load_gguf
        from engine.weights import load_model_dir, locate, read_model

        model_path, kind = locate(path)
        torch_device, torch_dtype = pick_device(device), parse_dtype(dtype)
        if kind == "gguf":
            tokenizer = load_tokenizer(model_path, (), require_tokenizer)
            config, weights = load_gguf(model_path, device=torch_device, dtype=torch_dtype)
            ignored: dict[str, int] = {}
            eos: tuple[int, ...] = config.eos_token_ids
        else:
            model = read_model(model_path)  # config.json and every header, read once
            config = from_facts(model.config)
            check_model_plan(config, max_seq_len, torch_dtype, fp8, int8_kv, torch_device,
                             weights_only=True)
            check_cache_plan(config, max_seq_len, torch_dtype, int8_kv, torch_device)
            check_model_plan(config, max_seq_len, torch_dtype, fp8, int8_kv, torch_device)
            with ThreadPoolExecutor(1, thread_name_prefix="engine-tokenizer") as pool:
                # The tokenizer loads beside the weights' compiled passes (load_model_dir).
                started: list[Future[Any]] = []

                def start_tokenizer() -> None:
                    started.append(pool.submit(load_tokenizer, model_path,
                                               model.tokenizer_files, require_tokenizer))

                weights, ignored = load_model_dir(model, config, device=torch_device,
                                                  dtype=torch_dtype, fp8=fp8,
                                                  beside=start_tokenizer)
                tokenizer = started[0].result()  # load_model_dir calls `beside` once
            eos = (*config.eos_token_ids, *generation_eos_ids(model.generation_config))
        runner = ModelRunner(config, weights, torch_device, torch_dtype, max_seq_len,
                             int8_kv=int8_kv)
        from engine.weights import ignored_note

        return cls(config, tokenizer, runner, fp8, eos, ignored_note(ignored))

    # --- public calls ----------------------------------------------------------------------

    def logits(self, ids: Sequence[int] | torch.Tensor) -> torch.Tensor:
        """float32 [len(ids), vocab] on the CPU: one prefill over ids with a fresh cache."""
        prompt = self._prompt(ids)
        with self._exclusive():
            return self.runner.prefill(prompt, last_only=False).cpu()

    def generate(self, ids: Sequence[int] | torch.Tensor,
                 config: GenerationConfig | None = None) -> Events:
        """Stream tokens for the prompt ids; stops at a stop/eos token, the limit or cancel()."""
        config = config or GenerationConfig()
        params = config.sampling()
        prompt = self._prompt(ids)
        return self._run(prompt, config, params)

    def chat(self, messages: Sequence[Mapping[str, Any]],
             config: GenerationConfig | None = None,
             **template_kwargs: Any) -> Events:
        """Generate the assistant reply to OpenAI-style messages via the chat template.

        The template is the model's code: it runs as transformers runs it (Jinja's immutable
        sandbox) under probes.model.chat_template's budget of steps, output and time, so a template
        that loops or builds huge strings is one EngineError, not a hang; it renders in a
        child process whose memory and CPU time the kernel caps."""
        from probes.model.chat_template import render_limited as render
        from probes.textsafe import one_line

        template = getattr(self.tokenizer, "chat_template", None)
        if self.tokenizer is None or not isinstance(template, str) or not template:
            raise EngineError("this model has no tokenizer chat template; use generate(ids)")
        variables = {**_special_tokens(self.tokenizer), **template_kwargs,
                     "messages": [dict(m) for m in messages], "add_generation_prompt": True}
        rendered = render(template, variables)
        if rendered.text is None:
            raise EngineError(f"the model's chat template cannot be used "
                              f"({one_line(rendered.error)[:200]}); fix chat_template in "
                              "tokenizer_config.json or call generate(ids)")
        ids = self.tokenizer.encode(rendered.text, add_special_tokens=False)
        return self.generate(ids, config)

    def cancel(self) -> None:
        """Ask the running generation to stop before its next decode step (thread-safe)."""
        self._cancel.set()

    def _fp8_decode(self) -> str:
        if self.config.fp8 is None or self.fp8_mode != "resident" \
                or self.runner.device.type != "cpu":
            return ""

        if cpu_kernel.kernel() is not None:
            return "compiled kernel"
        return f"torch path: {cpu_kernel.why_not}"

    @property
    def stats(self) -> EngineStats:
        runner, times = self.runner, self._times
        return EngineStats(
            device=str(runner.device), dtype=str(runner.dtype).removeprefix("torch."),
            fp8_mode=self.fp8_mode if self.config.fp8 is not None else "none",
            fp8_decode=self._fp8_decode(),
            max_seq_len=runner.max_seq_len, kv_cache_bytes=runner.cache.nbytes,
            kv_cache_dtype=str(runner.cache.storage_dtype).removeprefix("torch."),
            kv_layout=_layout(runner), kv_alignment_bytes=runner.cache.base_alignment_bytes,
            kv_tokens_used=runner.cache.tokens_used, weight_bytes=runner.weight_bytes,
            fused_ops=tuple(runner.fused.active), ttft_s=times.ttft_s,
            prefill_tokens=times.prefill_tokens,
            prefill_tokens_per_s=_rate(times.prefill_tokens, times.prefill_s),
            decode_tokens=times.decode_tokens,
            decode_tokens_per_s=_rate(times.decode_tokens, times.decode_s),
            finish_reason=times.finish_reason, architecture=self.config.architecture,
            kv_layers=runner.cache.kv_layers, state_layers=runner.cache.linear_layers,
            state_bytes=runner.cache.state_bytes, ignored_tensors=self.ignored_tensors,
            kernel_layers=runner.model.kernel_layers)

    # --- the loop --------------------------------------------------------------------------

    def _run(self, prompt: list[int], config: GenerationConfig,
             params: SamplingParams) -> Events:
        with self._exclusive():
            self._cancel.clear()
            self._times = times = _RunTimes(prefill_tokens=len(prompt))
            if config.max_new_tokens == 0:
                times.finish_reason = "length"
                return
            stops = set(config.stop_token_ids) | set(self.eos_token_ids)
            generator = make_generator(config.seed, self.runner.device)
            seen = torch.tensor(prompt, dtype=torch.int64, device=self.runner.device)
            stream = TextStream(self.tokenizer)
            start = time.perf_counter()
            token = next_token(self.runner.prefill(prompt)[-1], seen, params, generator)
            times.prefill_s = times.ttft_s = time.perf_counter() - start
            for index in range(config.max_new_tokens):
                finish = self._finish_reason(token, index, config.max_new_tokens, stops)
                times.finish_reason = finish
                text = stream.finish() if token in stops else stream.push(token)
                if finish is not None and token not in stops:
                    text += stream.finish()
                yield GenerationEvent(token, text, index, finish)
                if finish is not None:
                    return
                if self._cancel.is_set():
                    times.finish_reason = "cancelled"
                    return
                step = time.perf_counter()
                seen = _append(seen, token, params)
                token = next_token(self.runner.decode(token), seen, params, generator)
                times.decode_s += time.perf_counter() - step
                times.decode_tokens += 1

    def _finish_reason(self, token: int, index: int, max_new_tokens: int,
                       stops: set[int]) -> str | None:
        if token in stops:
            return "stop"
        if index + 1 >= max_new_tokens or self.runner.positions_left <= 0:
            return "length"
        return None

    def _prompt(self, ids: Sequence[int] | torch.Tensor) -> list[int]:
        prompt = [int(i) for i in (ids.reshape(-1).tolist() if isinstance(ids, torch.Tensor)
                                   else ids)]
        if not prompt:
            raise EngineError("the prompt is empty; pass at least one token id")
        if len(prompt) > self.runner.max_seq_len:
            raise EngineError(f"the prompt has {len(prompt)} tokens but max_seq_len is "
                              f"{self.runner.max_seq_len}; shorten it or load with a larger "
                              "max_seq_len")
        vocab = self.config.vocab_size
        bad = [i for i in prompt if not 0 <= i < vocab]
        if bad:
            raise EngineError(f"token id {bad[0]} is outside the vocabulary (0..{vocab - 1})")
        return prompt

    def _exclusive(self) -> _Exclusive:
        return _Exclusive(self._busy)


class _Exclusive:
    """One call at a time: the engine owns a single KV cache."""

    def __init__(self, lock: threading.Lock) -> None:
        self.lock = lock

    def __enter__(self) -> None:
        if not self.lock.acquire(blocking=False):
            raise EngineError("the engine is busy with another generation; cancel() it first "
                              "or wait for it to finish")

    def __exit__(self, *exc: object) -> None:
        self.lock.release()


def _append(seen: torch.Tensor, token: int, params: SamplingParams) -> torch.Tensor:
    """Prompt + output ids for the repetition penalty (only kept when the penalty is on)."""
    if params.repetition_penalty == 1.0:
        return seen
    return torch.cat((seen, seen.new_tensor([token])))


def _special_tokens(tokenizer: Any) -> dict[str, str]:
    """bos_token, eos_token, ... as transformers hands them to chat templates."""
    found = getattr(tokenizer, "special_tokens_map", None) or {}
    return {key: value for key, value in found.items() if isinstance(value, str)}


def _layout(runner: ModelRunner) -> str:
    """"BSND", or for a hybrid where the KV lives and what the other layers keep."""
    cache = runner.cache
    if not cache.linear_layers:
        return KV_LAYOUT
    return (f"{KV_LAYOUT} on {cache.kv_layers} of {cache.kv_layers + cache.linear_layers} "
            f"layers + DeltaNet state on {cache.linear_layers}")


def _rate(count: int, seconds: float) -> float | None:
    return count / seconds if count and seconds > 0 else None

