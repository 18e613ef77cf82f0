"""tokenizer.dtype's rules: what the serving engine will feed the model and when it stops.

Observed once (in the child checks.builtin.tokenizer forks, so plain data), judged by pure
functions. Sources a reader can open:
- Stopping: vLLM stops on the tokenizer's eos id and on every `eos_token_id` of the generation
  config (vllm-project/vllm vllm/sampling_params.py `update_from_generation_config`, added by
  vllm-project/vllm#4182 after vllm-project/vllm#4180, Llama 3 answers that never ended on
  `<|eot_id|>`); without generation_config.json it reads config.json's (vllm-project/vllm#5954);
  `--generation-config vllm` reads neither (https://docs.vllm.ai/en/latest/cli/serve.html).
  A template whose end-of-turn token is none of those gives answers that run to max_tokens.
- Thinking: Qwen3's hybrid templates take `enable_thinking` (default true; false renders an
  empty think block), and vLLM hands requests' `chat_template_kwargs` to the template
  (https://huggingface.co/Qwen/Qwen3-30B-A3B, "Switching Between Thinking and Non-Thinking
  Mode"; QwenLM/Qwen3 docs/source/deployment/vllm.md).
- Padding: batched generation with transformers needs a pad token and left padding for
  decoder-only models (https://huggingface.co/docs/transformers/llm_tutorial, "Wrong padding
  side"; the same page sets pad_token = eos_token). vLLM does not pad prompts, so this is said,
  never judged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from probes.textsafe import cut, one_line

if TYPE_CHECKING:
    from checks.builtin.tokenizer_load import Loaded, TokenizerFiles
    from checks.builtin.tokenizer_served import Served
    from probes.model.chat_template import Rendered

TURN_MARK = "PONG-7c1d"  # the assistant's words in the probe conversation, found after render
TURN_MESSAGES = ({"role": "user", "content": "ping"}, {"role": "assistant", "content": TURN_MARK})
SPECIAL_KEYS = ("bos_token", "eos_token", "pad_token")
CONFIG_ID_KEYS = ("bos_token_id", "eos_token_id")
THINKING_FLAG = "enable_thinking"
SLOW_FILES = (("vocab.json", "merges.txt"), ("tokenizer.model",), ("vocab.txt",))
MISTRAL_FILES = ("tekken.json",)  # or tokenizer.model.v*: mistral_common's formats
SHOWN_CHARS = 60

Problem = tuple[str, str, str]  # (status, rule, one line)


@dataclass(frozen=True)
class Thinking:
    """How a chat template renders the generation prompt with enable_thinking true and false."""

    reads: bool  # the template's text names enable_thinking
    on: str | None  # rendered with enable_thinking=True (None: did not render)
    off: str | None
    error: str = ""

    @property
    def honoured(self) -> bool | None:
        """True: the renders differ; None: not both rendered."""
        return None if self.on is None or self.off is None else self.on != self.off


@dataclass(frozen=True)
class ServingObservation:
    """What the engine will feed the model and stop on, as the tokenizer files say."""

    specials: tuple[tuple[str, str, int | None], ...]  # (key, token, its id or None)
    padding_side: str | None
    config_ids: tuple[tuple[str, int, str | None], ...]  # (where, id, the token at it)
    end_of_turn: tuple[str, int] | None  # the template's end-of-turn token
    end_note: str  # how it was found, or why not
    thinking: Thinking | None  # None: no chat template
    replaced: Thinking | None = None  # the model's own template, when --chat-template replaced it

    def special_id(self, key: str) -> int | None:
        return next((tid for k, _, tid in self.specials if k == key), None)


# -- rendering and observing (in the child) ------------------------------------------------


def variable_sets(files: TokenizerFiles, probe: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The renderings one template needs: the token-ids probe, a finished turn, and the
    generation prompt with thinking on and off."""
    specials = files.special_tokens()
    prompt = dict(probe)
    return [prompt,
            {"messages": [dict(m) for m in TURN_MESSAGES], "add_generation_prompt": False,
             **specials},
            {**prompt, THINKING_FLAG: True}, {**prompt, THINKING_FLAG: False}]


def thinking_of(template: str, on: Rendered, off: Rendered) -> Thinking:
    error = on.error or off.error
    return Thinking(THINKING_FLAG in template, on.text, off.text, one_line(error))


def observe_serving(loaded: Loaded, turn: Rendered | None, thinking: Thinking | None,
                    replaced: Thinking | None) -> ServingObservation:
    files = loaded.files
    specials = tuple((key, token, loaded.token_id(token))
                     for key, token in files.special_tokens().items() if key in SPECIAL_KEYS)
    side = files.config.get("padding_side")
    end, note = end_of_turn(loaded, turn)
    return ServingObservation(specials, side if isinstance(side, str) else None,
                              tuple(_config_ids(loaded)), end, note, thinking, replaced)


def _config_ids(loaded: Loaded) -> list[tuple[str, int, str | None]]:
    from probes.model.config import special_token_ids

    files = loaded.files
    found = special_token_ids([("config.json", files.model_config),
                               ("generation_config.json", files.generation_config)],
                              CONFIG_ID_KEYS)
    return [(where, tid, loaded.id_to_token(tid) if tid >= 0 else None) for where, tid in found]


def end_of_turn(loaded: Loaded, turn: Rendered | None) -> tuple[tuple[str, int] | None, str]:
    """The first added token after the assistant's words in a rendered turn."""
    if turn is None:
        return None, "no chat template: no end-of-turn token to judge"
    if turn.text is None:
        return None, f"the chat template did not render a finished turn: {one_line(turn.error)}"
    at = turn.text.rfind(TURN_MARK)
    if at < 0:
        return None, "the chat template dropped the assistant's words: end of turn not found"
    added = loaded.added_ids()
    for tid in loaded.encode(turn.text[at + len(TURN_MARK):]):
        if tid in added:
            name = loaded.id_to_token(tid) or str(tid)
            return (name, tid), f"end of an assistant turn in the template: {name} = {tid}"
    return None, "the chat template ends an assistant turn with no special token"


# -- judging (pure) --------------------------------------------------------------------------


def stop_ids(seen: ServingObservation, files: TokenizerFiles,
             served: Served) -> list[tuple[int, str]]:
    """(id, why) of every token the engine stops on without a request's own stop list."""
    found: list[tuple[int, str]] = []
    eos = seen.special_id("eos_token")
    if eos is not None:
        found.append((eos, "tokenizer eos_token"))
    if served.generation_config == "vllm":
        return found
    name = "generation_config.json" if files.generation_config else "config.json"
    for where, tid, _ in seen.config_ids:
        if where == f"{name} eos_token_id" and tid not in {s for s, _ in found}:
            found.append((tid, where))
    return found


def judge_stop(seen: ServingObservation, files: TokenizerFiles,
               served: Served) -> tuple[list[Problem], str]:
    """(problems, evidence line) for the end-of-turn token against the stop ids."""
    stops = stop_ids(seen, files, served)
    line = "the engine stops on " + (", ".join(f"{tid} ({why})" for tid, why in stops)
                                     or "no token")
    if seen.end_of_turn is None:
        return [], f"{line}; {seen.end_note}"
    token, tid = seen.end_of_turn
    if tid in {s for s, _ in stops}:
        return [], f"{line}; {seen.end_note}"
    how = ("`--generation-config vllm` reads no generation_config.json"
           if served.generation_config == "vllm" else
           f"add {tid} to generation_config.json eos_token_id")
    return [("fail", "end-of-turn-not-eos",
             f"the chat template ends a turn with {token} ({tid}), which is not a token the "
             f"engine stops on: answers run on to max_tokens ({how})")], f"{line}; {seen.end_note}"


def judge_specials(seen: ServingObservation, size: int) -> list[Problem]:
    """Special tokens of the tokenizer files and ids of the configs the vocabulary lacks."""
    problems: list[Problem] = []
    for key, token, tid in seen.specials:
        if tid is None:
            problems.append(("fail", "special-token-missing",
                             f"tokenizer_config.json {key} {cut(token, 40)!r} is not in the "
                             "tokenizer's vocabulary"))
    for where, tid, name in seen.config_ids:
        if name is None:
            problems.append(("fail", "special-token-missing",
                             f"{where} = {tid} names no token of the tokenizer ({size} ids)"))
    return problems


def _shown(text: str) -> str:
    return repr(cut(text, SHOWN_CHARS)) if text else "nothing"


def difference(on: str, off: str) -> str:
    """What enable_thinking=false changes in the rendered prompt, briefly."""
    start = 0
    while start < min(len(on), len(off)) and on[start] == off[start]:
        start += 1
    end = 0
    while end < min(len(on), len(off)) - start and on[-1 - end] == off[-1 - end]:
        end += 1
    return (f"enable_thinking=false renders {_shown(off[start:len(off) - end])} where true "
            f"renders {_shown(on[start:len(on) - end])}")


def judge_thinking(seen: ServingObservation, template_source: str) -> tuple[list[Problem], str]:
    """(problems, evidence line) for enable_thinking."""
    thinking, own = seen.thinking, seen.replaced
    if thinking is None:
        return [], "no chat template: enable_thinking not judged"
    if thinking.honoured is None:
        return [], f"enable_thinking not judged: the template did not render ({thinking.error})"
    tail = _shown(thinking.on[-SHOWN_CHARS:]) if thinking.on else "nothing"
    if thinking.honoured:
        shown = difference(thinking.on or "", thinking.off or "")
        return [], f"the chat template honours enable_thinking: {shown}"
    if thinking.reads:
        return [("warn", "thinking-ignored",
                 f"the chat template ({template_source}) reads enable_thinking but renders the "
                 f"same prompt with it true and false (ending {tail})")], ""
    if own is not None and own.honoured:
        return [("warn", "thinking-ignored",
                 f"{template_source} ignores enable_thinking, which the model's own template "
                 "honours: requests' chat_template_kwargs cannot turn thinking off "
                 f"(both render a prompt ending {tail})")], ""
    return [], ("the chat template does not read enable_thinking (right for a model that is "
                "not hybrid-thinking, such as Qwen3 Instruct-2507)")


def judge_mode(served: Served, present: Sequence[str]) -> list[Problem]:
    """The tokenizer mode against the files it needs."""
    from checks.builtin.tokenizer_served import KNOWN_MODES

    mode = served.mode
    if mode not in KNOWN_MODES:
        return [("warn", "tokenizer-mode",
                 f"{served.mode_source}: a mode not in our data (a plugin's?); the tokenizer "
                 "judged is the one transformers would load")]
    if mode == "slow" and not any(all(n in present for n in group) for group in SLOW_FILES):
        return [("warn", "tokenizer-mode",
                 f"{served.mode_source} asks transformers for the Python tokenizer, which reads "
                 "vocab.json + merges.txt, tokenizer.model or vocab.txt; "
                 f"{served.directory} has {', '.join(present) or 'none'}: the server may not "
                 "start, or may tokenize otherwise than judged here")]
    if mode == "mistral" and not any(n in MISTRAL_FILES or n.startswith("tokenizer.model.v")
                                     for n in present):
        return [("warn", "tokenizer-mode",
                 f"{served.mode_source} loads mistral_common's tokenizer (tekken.json or "
                 f"tokenizer.model.v*), which {served.directory} does not have")]
    return []


def judge_remote_code(served: Served, config: Mapping[str, Any]) -> tuple[list[Problem], str]:
    """A tokenizer class in the model's own code (tokenizer_config.json auto_map)."""
    auto_map = config.get("auto_map")
    names = auto_map.get("AutoTokenizer") if isinstance(auto_map, Mapping) else None
    if not names:
        return [], ""
    shown = cut(str(names), 80)
    if not served.command_line:
        return [], (f"tokenizer_config.json auto_map names the model's own tokenizer code "
                    f"({shown}): the server needs --trust-remote-code to run it")
    if served.trust_remote_code:
        return [], (f"--trust-remote-code: the server runs the model's own tokenizer code "
                    f"({shown}); the doctor never runs it")
    return [("warn", "remote-code",
             f"tokenizer_config.json auto_map names the model's own tokenizer code ({shown}) "
             "and the command line has no --trust-remote-code: transformers will not run it, "
             "so the server fails to load the tokenizer or loads another class")], ""


def pad_note(seen: ServingObservation) -> str:
    """A line on the pad token and padding side; "" when there is nothing to say."""
    pad = next((token for key, token, _ in seen.specials if key == "pad_token"), None)
    notes = []
    if pad is None:
        notes.append("no pad_token")
    if seen.padding_side not in (None, "left"):
        notes.append(f"padding_side {seen.padding_side!r}")
    if not notes:
        return ""
    return (f"tokenizer_config.json: {' and '.join(notes)}: batched generation with "
            "transformers needs a pad token and left padding (transformers' LLM tutorial); "
            "vLLM does not pad prompts, so serving is not affected")
