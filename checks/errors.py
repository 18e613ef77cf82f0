"""The project's own failures and its exit codes: one enum and one UsageError for every entry
point (`ascend-doctor` and its sub-commands, `ascend-console`).

Exit codes (the contract with CI and scripts, docs/doctor-json.md):

    ExitCode.OK          0  every check passed (skips allowed)
    ExitCode.WARN        1  warnings only (triage: something was recognised)
    ExitCode.FAIL        2  at least one failure (for `npu`: npu-smi answered with an error)
    ExitCode.USAGE       3  it could not run: bad arguments, unreadable input
    ExitCode.INTERRUPTED 130 Ctrl-C, as a shell reports a SIGINT

Exceptions that end a run with EXIT_USAGE, one line on stderr, no traceback (`checks.cli`):

UsageError                    the doctor cannot run as asked; the message names what to fix
probes.errors.ProbeError      a question to the observed machine failed where no check asked it
                              (probes/errors.py has its tree)

Loaders raise their own errors, which the commands turn into a UsageError naming the option:
`checks.policy.PolicyError` (--policy), `checks.baseline.BaselineError` (--baseline).
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    WARN = 1
    FAIL = 2
    USAGE = 3
    INTERRUPTED = 130


# the module-level spellings the commands use
EXIT_OK, EXIT_WARN, EXIT_FAIL = ExitCode.OK, ExitCode.WARN, ExitCode.FAIL
EXIT_USAGE, EXIT_INTERRUPTED = ExitCode.USAGE, ExitCode.INTERRUPTED


class UsageError(Exception):
    """It cannot run as asked: the message is one line naming what to fix."""


def exit_code_for(error: BaseException) -> ExitCode:
    """The exit code an entry point ends with when `error` ends it."""
    if isinstance(error, KeyboardInterrupt):
        return ExitCode.INTERRUPTED
    if isinstance(error, BrokenPipeError):
        return ExitCode.OK  # the reader went away (`| head`): not a failure of ours
    return ExitCode.USAGE
