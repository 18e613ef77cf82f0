"""The tokenizer the serving engine will use, as it will use it: observed once per run for both
tokenizer checks, and judged here for tokenizer.dtype (tokenizer.token-ids:
checks.builtin.tokenizer_ids).

Both judge the tokenizer of --model, or the one the target's `vllm serve` command line names
(`--tokenizer`, `--tokenizer-mode`, `--chat-template`, `--trust-remote-code`,
`--generation-config`: checks.builtin.tokenizer_served). It is loaded once per run
(checks.builtin.tokenizer_load: `tokenizer.json` through the `tokenizers` library,
transformers only for a model without one), with the doctor's own libraries; when those differ
from the judged interpreter's the evidence and the summary say so. Nothing is imported at
module load: importing `checks` must load neither transformers nor tokenizers. The files are
read where the other checks read them: this machine's `/`, a --root tree, or a container
target's /proc/PID/root (the evidence says whose); a recording carries no loadable tokenizer,
so a replay skips.

tokenizer.dtype judges what the engine feeds the model and when it stops
(checks.builtin.tokenizer_serving: special tokens against config.json, the chat template's end
of turn against the ids the engine stops on, enable_thinking, the tokenizer mode); the ids
themselves are Python integers the engine turns into int64/int32 tensors, so their dtype is
not judged. tokenizer.token-ids judges the ids against the embedding and, with --endpoint, the
served ids. A chat template is rendered inside a step, size and time budget
(probes.model.chat_template).

Observation and judgement are split: `observe*` talks to the tokenizer, `judge_*` are pure
functions of what was observed, so every fault can be tested without a faulty tokenizer.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import posixpath
import select
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from checks.builtin.tokenizer_load import (
    Loaded,
    TokenizerFiles,
    TokenizerUnavailable,
    load_files,
    read_json,
    tokenizer_files,
)
from checks.context import Context
from checks.model import NO_MODEL, Finding, failed, passed, skipped, warned
from probes.errors import NotRecorded
from probes.forked import Forked, ForkedError, can_fork
from probes.host import Host
from probes.live import LiveHost
from probes.textsafe import one_line

if TYPE_CHECKING:
    from checks.builtin.tokenizer_served import Served, TemplateOverride
    from checks.builtin.tokenizer_serving import ServingObservation, Thinking
    from probes.model.chat_template import Rendered
    from probes.spawn import Started

PROBE_TEXT = "Hello world"  # encoded to see whether the vocabulary loaded at all
PROBE_MESSAGES = ({"role": "system", "content": "你是一个有用的助手。"},
                  {"role": "user", "content": "用一句话介绍昇腾 NPU。Hello world"})
PROBE_PLAIN = "<|im_start|>user\n你好，世界<|im_end|>\n<|im_start|>assistant\n"

# A tokenizer holding less than this share of the embedding rows did not load its
# vocabulary (a 26-token tokenizer from tokenizer_config.json alone) or is another model's.
SMALL_VOCAB_SHARE = 0.5
SPECIAL_ID_KEYS = ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id")

FORKED_FACT = "tokenizer-forked"  # the child process prefetch began, when it did
DTYPE_PLAYBOOK = "see playbook tokenizer.dtype"

# The check's rules, by name -> the statuses they give (its playbook lists the same rules under
# "What the check does"; tests/checks/test_check_rules.py). Both tokenizer checks share LOAD_RULES.
LOAD_RULES = {"tokenizer-not-loaded": "warn/skip", "vocabulary-too-small": "fail"}
CHECK_RULES: dict[str, dict[str, str]] = {
    "tokenizer.dtype": {
        **LOAD_RULES,
        "chat-template-unreadable": "fail/warn",
        "tokenizer-mode": "warn",
        "remote-code": "warn",
        "special-token-missing": "fail",
        "end-of-turn-not-eos": "fail",
        "thinking-ignored": "warn",
        "pad-token": "pass",
        "library-drift": "warn",
    },
}
FILES_REMEDY = ("copy the tokenizer files of the checkpoint (tokenizer.json, or vocab.json + "
                "merges.txt) from where it was downloaded")

# -- loading ------------------------------------------------------------------------------


def on_this_machine(host: object) -> bool:
    """The host reads this machine's own `/` (a RecordingHost around one counts too)."""
    while not isinstance(host, LiveHost) and hasattr(host, "inner"):
        host = host.inner
    return isinstance(host, LiveHost) and getattr(host, "root", "/") == "/"


@dataclass(frozen=True)
class Effective:
    """The tokenizer files the engine will use, and how the command line chose them."""

    files: TokenizerFiles
    served: Served
    template: TemplateOverride | None = None  # --chat-template, when given


def effective_of(ctx: Context) -> Effective:
    """The served tokenizer's files and configs, read once per run (quick: no tokenizer is
    built). Raises TokenizerUnavailable."""
    if ctx.model_dir is None:
        raise TokenizerUnavailable(NO_MODEL)
    model_dir = Path(ctx.model_dir)
    return ctx.fact("tokenizer-files", lambda: _effective(ctx, model_dir))


def files_of(ctx: Context) -> TokenizerFiles:
    """effective_of's files. Raises TokenizerUnavailable."""
    return effective_of(ctx).files


def _effective(ctx: Context, model_dir: Path) -> Effective:
    from checks.builtin.tokenizer_served import chat_template_override, served

    how = served(ctx, model_dir)
    files = tokenizer_files(how.directory, ctx.host, model_dir)
    if how.generation_config == "vllm":
        files = replace(files, generation_config={})
    elif how.generation_config != "auto":
        files = replace(files, generation_config=_generation_config(ctx, how.generation_config))
    if how.template_flag is None:
        return Effective(files, how)
    override = chat_template_override(ctx, how.template_flag)
    if override.text is not None:
        files = replace(files, chat_template=override.text, template_source=override.source,
                        replaced_template=files.chat_template)
    return Effective(files, how, override)


def _generation_config(ctx: Context, folder: str) -> Mapping[str, Any]:
    """generation_config.json of a --generation-config folder (relative: from the server's
    working directory)."""
    from probes.model.reader import GENERATION_CONFIG_FILE

    proc = ctx.target.process
    if not folder.startswith("/") and proc is not None and proc.cwd:
        folder = posixpath.join(proc.cwd, folder)
    return read_json(ctx.host, Path(folder) / GENERATION_CONFIG_FILE)


@dataclass(frozen=True)
class Observed:
    """What both checks learn from the served tokenizer, observed once per run (plain data:
    it may come from the child process `prefetch` forked)."""

    library: str  # the library that loaded it, with its version
    files: TokenizerFiles
    vocabulary: str  # vocabulary_problem over PROBE_TEXT
    ids: IdObservation
    serving: ServingObservation
    plain_ids: tuple[int, ...] = ()  # PROBE_PLAIN encoded: what --endpoint's ids are held to


def observe(files: TokenizerFiles, host: Host) -> Observed:
    """Load the tokenizer those files make and put every probe to it. Raises
    TokenizerUnavailable."""
    from checks.builtin import tokenizer_early

    # the renderings need only the files: their child (a fresh interpreter importing jinja2)
    # runs while this process builds the tokenizer, which holds the GIL; so the build waits
    # until the child has been started
    rendering = _Rendering(files, tokenizer_early.take())
    rendering.wait_started()
    loaded = load_files(files, host)
    return _observed(loaded, rendering.result())


def _observed(loaded: Loaded, renders: Renders) -> Observed:
    from checks.builtin.tokenizer_serving import observe_serving

    vocab_size = config_vocab_size(loaded.files.model_config)
    vocabulary = vocabulary_problem(loaded, vocab_size, len(loaded.encode(PROBE_TEXT)))
    return Observed(loaded.library, loaded.files, vocabulary,
                    observe_ids(loaded, renders.probe),
                    observe_serving(loaded, renders.turn, renders.thinking, renders.replaced),
                    tuple(loaded.encode(PROBE_PLAIN)))


class _Rendering:
    """render_all on a thread of its own (a plain thread: concurrent.futures and the logging
    it imports would be loaded before the fork, on the run's critical path)."""

    def __init__(self, files: TokenizerFiles, started: Started | None = None) -> None:
        self._started = threading.Event()
        self._renders: Renders | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(files, started),
                                        name="chat template", daemon=True)
        self._thread.start()

    def _run(self, files: TokenizerFiles, started: Started | None) -> None:
        try:
            self._renders = render_all(files, self._started.set, started)
        except BaseException as exc:  # handed to the caller in result()
            self._error = exc
        finally:
            self._started.set()

    def wait_started(self) -> None:
        """Return once the renderer's child runs (or rendering ended without one)."""
        self._started.wait()

    def result(self) -> Renders:
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._renders is not None
        return self._renders


def prefetch(ctx: Context) -> None:
    """Begin the observation in a child process on another core before the checks' threads
    start (building a tokenizer holds the GIL for tens of milliseconds); once per run. Files
    are read here, through the run's host, so a bundle being recorded still records them."""
    try:
        files = files_of(ctx)
    except TokenizerUnavailable:
        return
    if files.present and can_fork():
        ctx.fact(FORKED_FACT, lambda: _fork(files, ctx.host))


def _fork(files: TokenizerFiles, host: Host) -> Forked[Observed]:
    """The observation forked; the chat template is rendered by this process's renderer
    child (this process started it, so this process waits for it: a thread here finishes it
    and relays the renderings to the forked child through a pipe)."""
    from checks.builtin import tokenizer_early

    parent = os.getpid()
    read_fd, write_fd = os.pipe()
    ours = (write_fd, *tokenizer_early.waiting_fds())

    def compute() -> Observed:
        if os.getpid() == parent:  # not forked after all: made in-process when asked for
            return observe(files, host)
        return _observe_forked(files, host, read_fd, ours)

    forked = Forked(compute).start()
    os.close(read_fd)
    if not forked.forked:
        os.close(write_fd)
        return forked
    relay = threading.Thread(target=_relay, args=(files, tokenizer_early.take(), write_fd),
                             name="chat template", daemon=True)
    relay.start()
    return forked


def _relay(files: TokenizerFiles, started: Started | None, write_fd: int) -> None:
    """render_all, its renderings (or its exception) pickled down `write_fd`."""
    try:
        try:
            reply = pickle.dumps((True, render_all(files, started=started)))
        except Exception as exc:  # raised in the forked child, as observe would raise it
            try:
                reply = pickle.dumps((False, exc))
            except Exception:
                reply = pickle.dumps((False, TokenizerUnavailable(
                    f"the chat template was not rendered: {type(exc).__name__}: "
                    f"{one_line(str(exc))}", status="warn")))
        with os.fdopen(write_fd, "wb", closefd=False) as pipe:
            pipe.write(reply)
    except OSError:  # the forked child is gone (its timeout): nobody reads the renderings
        pass
    finally:
        os.close(write_fd)


# How long the forked child waits for the renderings: past the renderer's own limits (its
# wall time grows with the renderings, at most a few dozen seconds), and the run ends the
# child at the check timeout before this anyway.
RELAY_WAIT_S = 120.0


def _observe_forked(files: TokenizerFiles, host: Host, read_fd: int,
                    parents: tuple[int, ...]) -> Observed:
    """In the forked child: build the tokenizer while the parent renders, then take the
    renderings from the pipe."""
    for fd in parents:  # the parent's ends: its renderer's pipes, the relay's write end
        with contextlib.suppress(OSError):
            os.close(fd)
    loaded = load_files(files, host)
    ok, value = _read_relay(read_fd, time.monotonic() + RELAY_WAIT_S)
    if not ok:
        raise value
    return _observed(loaded, value)


def _read_relay(read_fd: int, deadline_s: float) -> tuple[bool, Any]:
    chunks: list[bytes] = []
    while True:
        left_s = deadline_s - time.monotonic()
        if left_s <= 0 or not select.select([read_fd], [], [], left_s)[0]:
            raise TokenizerUnavailable("the chat template's renderings did not arrive in time",
                                       status="warn")
        chunk = os.read(read_fd, 256 * 1024)
        if not chunk:
            break
        chunks.append(chunk)
    try:
        reply = pickle.loads(b"".join(chunks))
    except Exception:
        raise TokenizerUnavailable("the chat template's renderer ended without renderings",
                                   status="warn") from None
    return reply if isinstance(reply, tuple) else (False, TokenizerUnavailable(
        "the chat template's renderer ended without renderings", status="warn"))


def observed(ctx: Context) -> Observed:
    """The --model tokenizer's observation, once per run: from the child `prefetch` began,
    else made here. Raises TokenizerUnavailable."""
    files = files_of(ctx)
    forked: Forked[Observed] | None = ctx.fact(FORKED_FACT, lambda: None)
    if forked is None:
        return ctx.fact("tokenizer-observed", lambda: observe(files, ctx.host))
    timeout_s = float(ctx.policy.get("runner", "check_timeout_s"))
    return ctx.fact("tokenizer-observed", lambda: _from_child(forked, timeout_s))


def _from_child(forked: Forked[Observed], timeout_s: float) -> Observed:
    try:
        return forked.result(timeout_s)
    except ForkedError as exc:
        raise TokenizerUnavailable(f"the tokenizer was not loaded: {exc}",
                                   status="warn") from None


def unavailable(exc: TokenizerUnavailable) -> Finding:
    rules = ("tokenizer-not-loaded",)
    if exc.status == "warn":
        return warned(exc.reason, "ship the tokenizer files (tokenizer.json, "
                      "tokenizer_config.json) with the checkpoint",
                      exc.detail, rules=rules)
    return skipped(exc.reason, rules=rules)


@dataclass(frozen=True)
class LibraryNote:
    """Which library loaded the tokenizer, and whether the judged interpreter has another."""

    evidence: str
    differs: str = ""  # said in the summary when non-empty


def library_note(ctx: Context, library: str) -> LibraryNote:
    """`library`: the one that loaded the tokenizer, with its version."""
    from checks.builtin import facts  # not before prefetch's fork: the child never uses it

    used_name, _, used_version = library.partition(" ")
    shown = f"loaded with the doctor's {library}"
    try:
        judged = facts.python(ctx)
    except NotRecorded:
        return LibraryNote(f"{shown}; the judged interpreter's packages were not recorded")
    if judged.error:
        return LibraryNote(f"{shown}; the judged interpreter's packages were not read "
                           f"({judged.error})")
    theirs = judged.version_of(used_name)
    if theirs == used_version:
        return LibraryNote(f"{shown}, as {judged.interpreter} has")
    has = f"{used_name} {theirs}" if theirs else f"no {used_name}"
    differs = f"loaded with {library}; {judged.interpreter} has {has}"
    return LibraryNote(f"{shown}; the judged interpreter {judged.interpreter} has {has}",
                       differs)


def with_note(finding: Finding, note: LibraryNote) -> Finding:
    if not note.differs:
        return finding
    return replace(finding, summary=f"{finding.summary} ({note.differs})")


def vocabulary_problem(loaded: Loaded, vocab_size: int | None, probe_ids: int) -> str:
    """Why the loaded vocabulary is not the model's, naming missing files; "" when it is."""
    missing = loaded.files.missing_vocabulary()
    because = f": {missing}" if missing else " (the tokenizer of another model?)"
    if probe_ids == 0:
        return f"the tokenizer turns the probe text into no ids{because}"
    size = loaded.size()
    if vocab_size is not None and size < vocab_size * SMALL_VOCAB_SHARE:
        return f"the tokenizer holds {size} ids, far fewer than vocab_size {vocab_size}{because}"
    return ""


# -- tokenizer.dtype ------------------------------------------------------------------------

Judged = tuple[str, str, str]  # (status, rule, one line): tokenizer_serving.Problem

REMEDIES = {
    "vocabulary-too-small": FILES_REMEDY,
    "chat-template-unreadable": "give --chat-template a file the server can open (a path in "
                                "its own filesystem, from its working directory)",
    "tokenizer-mode": "drop --tokenizer-mode (auto) unless the model's card asks for one",
    "remote-code": "add --trust-remote-code if you trust the model's code, or use a model "
                   "whose tokenizer transformers has built in",
    "special-token-missing": "ship the tokenizer that belongs to the checkpoint; make "
                             "config.json, generation_config.json and tokenizer_config.json "
                             "name tokens of its vocabulary",
    "end-of-turn-not-eos": "list the template's end-of-turn id in generation_config.json "
                           "eos_token_id (as the model's own release does), or pass it in "
                           "each request's stop_token_ids",
    "thinking-ignored": "serve the model's own chat template (drop --chat-template), or one "
                        "that reads enable_thinking",
    "library-drift": "install the transformers/tokenizers the baseline was validated with, "
                     "or re-validate and record a new baseline",
}


def judge_dtype(served: Served, template: TemplateOverride | None, seen: Observed,
                drift: Sequence[str] = ()) -> Finding:
    """The served tokenizer's rules (checks.builtin.tokenizer_serving); `drift`: tokenizer
    libraries that differ from the baseline's."""
    from checks.builtin import tokenizer_serving as rules

    files = seen.files
    problems: list[Judged] = [("warn", "library-drift", why) for why in drift]
    lines: list[str] = []
    if seen.vocabulary:  # without the vocabulary the other rules say nothing
        problems.insert(0, ("fail", "vocabulary-too-small", seen.vocabulary))
    else:
        problems += _template_problems(template)
        problems += rules.judge_mode(served, files.present)
        remote, remote_line = rules.judge_remote_code(served, files.config)
        problems += remote + rules.judge_specials(seen.serving, seen.ids.tokenizer_size)
        stop, stop_line = rules.judge_stop(seen.serving, files, served)
        thinking, thinking_line = rules.judge_thinking(
            seen.serving, files.template_source or "the chat template")
        problems += stop + thinking
        lines = [line for line in (stop_line, thinking_line, remote_line) if line]
    return _verdict(problems, lines, rules.pad_note(seen.serving), seen)


def _template_problems(template: TemplateOverride | None) -> list[Judged]:
    if template is None:
        return []
    if template.problem:
        return [("fail", "chat-template-unreadable", template.problem)]
    if template.unknown:
        return [("warn", "chat-template-unreadable", template.unknown)]
    return []


def _verdict(problems: Sequence[Judged], lines: Sequence[str], pad: str,
             seen: Observed) -> Finding:
    rules = tuple(dict.fromkeys(rule for _, rule, _ in problems))
    remedy = "; ".join(dict.fromkeys(REMEDIES[rule] for rule in rules)) + f"; {DTYPE_PLAYBOOK}"
    fails = [line for status, _, line in problems if status == "fail"]
    warns = [line for status, _, line in problems if status == "warn"]
    evidence = [*lines, *([pad] if pad else [])]
    if fails:
        return failed("; ".join(fails), remedy, *evidence, *warns, rules=rules)
    if warns:
        return warned("; ".join(warns), remedy, *evidence, rules=rules)
    end = seen.serving.end_of_turn
    stops = f"a turn ends with {end[0]}, a token the engine stops on" if end else \
        "no end-of-turn token to judge"
    return passed(f"special tokens are in the vocabulary; {stops}", *evidence,
                  rules=("pad-token",) if pad else ())


def _judged_lines(ctx: Context, effective: Effective) -> list[str]:
    """Which tokenizer and template were judged, and whose files."""
    from checks.builtin.tokenizer_served import whose_files

    served, files = effective.served, effective.files
    mode = f", mode {served.mode} ({served.mode_source})" if served.command_line else ""
    return [f"tokenizer judged: {served.directory} ({served.directory_source}){mode}; "
            f"{whose_files(ctx)}",
            f"chat template judged: {files.template_source or 'none'}", *served.notes]


def tokenizer_dtype(ctx: Context) -> Finding:
    from checks.builtin import facts

    try:
        effective = effective_of(ctx)
        seen_all = observed(ctx)
    except TokenizerUnavailable as exc:
        return unavailable(exc)
    note = library_note(ctx, seen_all.library)
    finding = judge_dtype(effective.served, effective.template, seen_all, library_drift(ctx))
    return with_note(replace(finding, evidence=(*finding.evidence,
                                                 *_judged_lines(ctx, effective),
                                                 note.evidence, *facts.files_seen(ctx))), note)


def library_drift(ctx: Context) -> list[str]:
    """transformers/tokenizers of the deployment's interpreter against the --baseline's."""
    if ctx.baseline is None:
        return []
    from checks.builtin import facts

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


# -- the token ids, observed (judged in checks.builtin.tokenizer_ids) -------------------


@dataclass(frozen=True)
class IdObservation:
    """The id range of a tokenizer against the model's embedding."""

    tokenizer_size: int  # regular + added tokens
    max_added_id: int | None  # the largest added/special token id
    vocab_size: int | None  # config.json (or text_config) embedding rows
    probe_ids: tuple[int, ...]  # a chat prompt with CJK text and the chat markers
    probe_path: str  # "chat template" or "plain encode"
    marker_ids: tuple[tuple[str, int | None], ...] = ()  # <|im_start|>, <|im_end|>
    config_ids: tuple[tuple[str, int], ...] = ()  # "generation_config.json eos_token_id", id
    known_ids: frozenset[int] = frozenset()  # ids the tokenizer itself names as special/added
    declared_vocab: tuple[tuple[str, int], ...] = ()  # vocab_size keys of tokenizer files
    vocabulary: str = ""  # why the vocabulary is not the model's; "" when it is
    template_note: str = ""  # how the chat template went
    template_stopped: bool = False  # the template ran out of budget

    @property
    def largest_id(self) -> int:
        return max([self.tokenizer_size - 1, self.max_added_id or 0, *self.probe_ids])



def config_vocab_size(config: Mapping[str, Any]) -> int | None:
    for source in (config, config.get("text_config") or {}):
        value = source.get("vocab_size") if isinstance(source, Mapping) else None
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def _config_ids(loaded: Loaded) -> list[tuple[str, int]]:
    """Special ids of config.json and generation_config.json (text_config included)."""
    from probes.model.config import special_token_ids
    from probes.model.reader import CONFIG_FILE, GENERATION_CONFIG_FILE

    return special_token_ids([(CONFIG_FILE, loaded.files.model_config),
                              (GENERATION_CONFIG_FILE, loaded.files.generation_config)],
                             SPECIAL_ID_KEYS)


@dataclass(frozen=True)
class Probe:
    """The probe's ids and how they were made."""

    ids: tuple[int, ...]
    path: str  # "chat template" or "plain encode"
    note: str = ""
    stopped: bool = False


@dataclass(frozen=True)
class Renders:
    """The chat template's renderings the checks use (None: no template)."""

    probe: Rendered | None = None  # PROBE_MESSAGES with the generation prompt
    turn: Rendered | None = None  # a finished assistant turn
    thinking: Thinking | None = None  # the generation prompt, enable_thinking true and false
    replaced: Thinking | None = None  # the same for the template --chat-template replaced


def render_all(files: TokenizerFiles, on_start: Callable[[], None] | None = None,
               started: Started | None = None) -> Renders:
    """Every rendering of the chat template, in one budgeted child per template; `on_start`
    is called once the first child runs (not at all without a template). `started`: a
    renderer child started early (chat_template.start_renderer), used for the first
    template, or ended when there is none."""
    if not files.chat_template:
        if started is not None:
            started.discard()
        return Renders()
    from checks.builtin.tokenizer_serving import thinking_of, variable_sets
    from probes.model.chat_template import render_many_limited

    probe: dict[str, Any] = {"messages": [dict(m) for m in PROBE_MESSAGES],
                             "add_generation_prompt": True, **files.special_tokens()}
    try:
        wanted = variable_sets(files, probe)
    except BaseException:
        if started is not None:
            started.discard()
        raise
    probe_r, turn, on, off = render_many_limited(files.chat_template, wanted,
                                                 on_start=on_start, started=started)
    replaced = None
    if files.replaced_template:
        own_on, own_off = render_many_limited(files.replaced_template, wanted[2:])
        replaced = thinking_of(files.replaced_template, own_on, own_off)
    return Renders(probe_r, turn, thinking_of(files.chat_template, on, off), replaced)


def probe_ids(loaded: Loaded, rendered: Rendered | None) -> Probe:
    """The rendered chat template encoded (render_all's probe); else a plain encode."""
    if rendered is None:
        return Probe(tuple(loaded.encode(PROBE_PLAIN)), "plain encode")
    source = loaded.files.template_source
    if rendered.text is None:
        return Probe(tuple(loaded.encode(PROBE_PLAIN)), "plain encode",
                     f"chat template ({source}) not used: {one_line(rendered.error)}",
                     rendered.stopped)
    return Probe(tuple(loaded.encode(rendered.text)), "chat template",
                 f"chat template ({source}) rendered in {rendered.steps} steps")


def observe_ids(loaded: Loaded, rendered: Rendered | None) -> IdObservation:
    known = loaded.added_ids()
    probe = probe_ids(loaded, rendered)
    markers = tuple((tok, tid) for tok in ("<|im_start|>", "<|im_end|>")
                    for tid in [loaded.token_id(tok)] if tid is not None)
    declared_vocab = loaded.files.config.get("vocab_size")
    declared = ([("tokenizer_config.json vocab_size", declared_vocab)]
                if isinstance(declared_vocab, int) else [])
    vocab_size = config_vocab_size(loaded.files.model_config)
    return IdObservation(
        tokenizer_size=loaded.size(), max_added_id=max(known, default=None),
        vocab_size=vocab_size, probe_ids=probe.ids, probe_path=probe.path, marker_ids=markers,
        config_ids=tuple(_config_ids(loaded)), known_ids=known,
        declared_vocab=tuple(declared),
        vocabulary=vocabulary_problem(loaded, vocab_size, len(probe.ids)),
        template_note=probe.note, template_stopped=probe.stopped)
