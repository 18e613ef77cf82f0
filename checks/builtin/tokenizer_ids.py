"""tokenizer.token-ids: the ids the served tokenizer produces, against the model's embedding
(config.json vocab_size), the special ids the configs name, another family's vocabulary and,
with --endpoint, the server's own ids of the same prompt.

The tokenizer is loaded and probed once per run by checks.builtin.tokenizer (shared with
tokenizer.dtype); here the observation is judged: `judge_token_ids` is a pure function of an
IdObservation, so every fault can be tested without a faulty tokenizer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from checks.builtin import facts
from checks.builtin.tokenizer import (
    FILES_REMEDY,
    LOAD_RULES,
    PROBE_PLAIN,
    IdObservation,
    Observed,
    library_note,
    observed,
    unavailable,
    with_note,
)
from checks.builtin.tokenizer_load import TokenizerUnavailable
from checks.context import Context
from checks.model import Finding, failed, passed, warned

# Embedding rows beyond the tokenizer are padding (Qwen3: 267, Qwen3.5/3.6: 243); a far
# larger gap suggests another model's tokenizer (a Qwen3 tokenizer on Qwen3.5 leaves 96,651).
PADDING_ROWS_WARN = 4096
IDS_PLAYBOOK = "see playbook tokenizer.token-ids"

# The check's rules, by name -> the statuses they give (its playbook lists the same rules under
# "What the check does"; tests/checks/test_check_rules.py).
CHECK_RULES: dict[str, dict[str, str]] = {
    "tokenizer.token-ids": {
        **LOAD_RULES,
        "id-past-embedding": "fail",
        "config-id-past-vocab": "fail",
        "declared-vocab-too-small": "fail",
        "config-id-not-special": "warn",
        "no-vocab-size": "warn",
        "spare-embedding-rows": "warn",
        "foreign-tokenizer": "fail",
        "template-unfinished": "warn",
        "served-ids-differ": "fail",
    },
}
Problem = tuple[str, str]  # (rule, one line)


_WIDTHS = {"int64": (64, True), "int32": (32, True), "int16": (16, True),
           "uint16": (16, False), "uint8": (8, False)}


def narrowed(value: int, dtype: str) -> int:
    """`value` stored in `dtype` and read back: the two's-complement truncation a C cast
    (numpy's astype, a torch .to()) makes of an integer that does not fit."""
    bits, signed = _WIDTHS[dtype]
    low = value % (1 << bits)
    return low - (1 << bits) if signed and low >= 1 << (bits - 1) else low


def round_trip(ids: Sequence[int], dtype: str) -> list[tuple[int, int]]:
    """(id, what came back) for every id a `dtype` store changes."""
    return [(a, b) for a in ids for b in [narrowed(a, dtype)] if a != b]


def _config_problems(seen: IdObservation, vocab: int) -> tuple[list[Problem], list[Problem]]:
    """(fails, warns) from special ids in config.json/generation_config.json."""
    fails: list[Problem] = []
    warns: list[Problem] = []
    for where, token_id in seen.config_ids:
        if token_id >= vocab:
            fails.append(("config-id-past-vocab",
                          f"{where} = {token_id} is >= vocab_size {vocab}"))
        elif seen.known_ids and token_id not in seen.known_ids:
            warns.append(("config-id-not-special",
                          f"{where} = {token_id} is not a special token of the tokenizer "
                          "(remapped or clamped?)"))
    for where, declared in seen.declared_vocab:
        if declared < seen.tokenizer_size:
            fails.append(("declared-vocab-too-small",
                          f"{where} = {declared} is smaller than the tokenizer "
                          f"({seen.tokenizer_size} ids)"))
    return fails, warns


def _lines(problems: Sequence[Problem]) -> str:
    return "; ".join(line for _, line in problems)


def _rules(problems: Sequence[Problem]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(rule for rule, _ in problems))


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
        f"int32: {len(round_trip(seen.probe_ids, 'int32'))} changed (ids below 2^31 always "
        "survive both)",
        f"uint16 would corrupt {len(narrowed)} of {len(seen.probe_ids)} probe ids"
        + (f" ({example}): never store ids in 16 bits or clamp ids > 65535"
           if narrowed else ""),
    ]
    lines += [seen.template_note] if seen.template_note else []
    lines += [f"{where} = {tid}" for where, tid in seen.config_ids]
    return lines


def judge_token_ids(seen: IdObservation) -> Finding:
    evidence = _id_evidence(seen)
    remedy = ("ship the tokenizer that belongs to the checkpoint, keep ids int64/int32 end "
              f"to end, never clamp or remap ids; {IDS_PLAYBOOK}")
    fails: list[Problem] = ([("vocabulary-too-small", seen.vocabulary)]
                            if seen.vocabulary else [])
    if seen.vocabulary:
        remedy = f"{FILES_REMEDY}; {IDS_PLAYBOOK}"
    template: list[Problem] = ([("template-unfinished",
                                 f"the chat template did not finish: {seen.template_note}")]
                               if seen.template_stopped else [])
    if seen.vocab_size is None:
        fails_c, warns = _config_problems(seen, 1 << 62)
        if fails or fails_c:
            return failed(_lines(fails + fails_c), remedy, *evidence,
                          rules=_rules(fails + fails_c))
        unknown: list[Problem] = [("no-vocab-size", "config.json has no vocab_size: cannot "
                                   f"compare the tokenizer's largest id {seen.largest_id} "
                                   "with the embedding"), *template]
        return warned(_lines(unknown),
                      "run with the model directory that holds config.json; " + IDS_PLAYBOOK,
                      *evidence, *(line for _, line in warns), rules=_rules(unknown))
    if seen.largest_id >= seen.vocab_size:
        fails.insert(0, ("id-past-embedding",
                         f"the tokenizer produces id {seen.largest_id} but the embedding has "
                         f"{seen.vocab_size} rows (vocab_size): ids >= {seen.vocab_size} "
                         "index past it"))
    fails_c, warns = _config_problems(seen, seen.vocab_size)
    fails += fails_c
    foreign = _foreign(seen)
    if foreign:
        fails.insert(0, foreign)
    if fails:
        return failed(_lines(fails), remedy, *evidence, rules=_rules(fails))
    spare = seen.vocab_size - seen.tokenizer_size
    if spare > PADDING_ROWS_WARN:
        warns.insert(0, ("spare-embedding-rows",
                         f"the embedding has {spare} rows beyond the tokenizer's "
                         f"{seen.tokenizer_size} ids: the tokenizer of another model?"))
    warns += template
    if warns:
        return warned(_lines(warns), remedy, *evidence, rules=_rules(warns))
    return passed(f"largest id {seen.largest_id} < vocab_size {seen.vocab_size}", *evidence)


def _foreign(seen: IdObservation) -> Problem | None:
    """Another family's tokenizer on this embedding (checks/data/tokenizer_families.yaml)."""
    from checks.builtin.tokenizer_families import families, mismatch

    found = mismatch(seen.tokenizer_size, seen.vocab_size, families())
    if found is None:
        return None
    theirs, model = found
    return ("foreign-tokenizer",
            f"a {theirs.family} tokenizer ({theirs.tokenizer_ids} ids) on a {model.family} "
            f"model (vocab_size {model.vocab_size}): the two vocabularies give other tokens "
            f"to the same ids, so the output is garbage ({'; '.join(model.sources)})")


def tokenizer_token_ids(ctx: Context) -> Finding:
    try:
        seen_all = observed(ctx)
    except TokenizerUnavailable as exc:
        return unavailable(exc)
    note = library_note(ctx, seen_all.library)
    finding = _served(ctx, seen_all, judge_token_ids(seen_all.ids))
    return with_note(replace(finding, evidence=(*finding.evidence, note.evidence,
                                                 *facts.files_seen(ctx))), note)


def _served(ctx: Context, seen: Observed, finding: Finding) -> Finding:
    """With --endpoint, the served ids of PROBE_PLAIN against the local ones."""
    if ctx.endpoint is None or not seen.plain_ids:
        return finding
    from checks.builtin.tokenizer_live import judge_round_trip, served_ids

    problem, line = judge_round_trip(seen.plain_ids, served_ids(ctx, PROBE_PLAIN))
    if not problem:
        return replace(finding, evidence=(*finding.evidence, line))
    if finding.status == "fail":
        return replace(finding, summary=f"{finding.summary}; {problem}",
                       evidence=(*finding.evidence, line),
                       rules=(*finding.rules, "served-ids-differ"))
    return failed(problem, "serve the checkpoint's own tokenizer (vllm serve --tokenizer) and "
                  f"keep ids int32/int64 end to end; {IDS_PLAYBOOK}", *finding.evidence, line,
                  rules=("served-ids-differ",))
