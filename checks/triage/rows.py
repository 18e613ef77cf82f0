"""The rows triage reads from checks/data/: log signatures and error codes (typed, frozen)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Signature:
    """A pattern over log lines with what it means (checks/data/signatures.yaml).

    A line hits the signature when any of `patterns` (Python regular expressions, matched
    case-insensitively with `re.search`) matches it. `requires_any`, when given, must also match
    somewhere in the same input (combined evidence: EZ1001 with an opType name on a 310P is
    another finding than EZ1001 alone); `refines` lists the signatures this one is a more
    specific form of, which it outranks and absorbs when both hit (and, through it, what that
    one refines). `codes` are the error codes that name this failure on their own: a line with
    only the code makes this finding. `shared_codes` are codes other failures log too (EZ9999
    "Inner Error", EZ1001 "parameter validation failed"): they join this finding when one of
    its patterns hit, but alone they stay a finding of the code. `role` is "cause" for an
    error that starts a failure and "consequence" for what a cause sets off (a traceback tail,
    "EngineCore failed to start"): a consequence never ranks above a cause of the same input.
    """

    id: str
    title: str
    component: str
    patterns: tuple[str, ...]
    meaning: str
    causes: tuple[str, ...]
    first_steps: tuple[str, ...]
    fix: str
    playbook: str
    sources: tuple[str, ...]
    tell_apart: str = ""
    codes: tuple[str, ...] = ()
    shared_codes: tuple[str, ...] = ()
    requires_any: tuple[str, ...] = ()
    refines: tuple[str, ...] = ()
    role: str = "cause"
    weight: int = 50


@dataclass(frozen=True)
class ErrorCode:
    """One error code or code family as its owner documents it (checks/data/error_codes.yaml).

    `id` is the code (`507035`, `EZ1001`) or, for a family, its prefix with `kind: family`
    (`EZ`, the component letter of CANN's error-code scheme). `name` is the symbol the vendor's
    headers give it (`ACL_ERROR_RT_AICORE_EXCEPTION`), empty when there is none. `fix`, when
    given, is the first step its owner's documentation names (a family's applies to its codes).
    """

    id: str
    kind: str
    component: str
    meaning: str
    playbook: str
    sources: tuple[str, ...]
    name: str = ""
    fix: str = ""
