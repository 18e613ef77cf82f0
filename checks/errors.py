"""The doctor's own failures and its exit codes.

Exit codes (the contract with CI and scripts, docs/doctor-json.md):

    EXIT_OK     0  every check passed (skips allowed)
    EXIT_WARN   1  warnings only
    EXIT_FAIL   2  at least one failure (for `npu`: npu-smi answered with an error)
    EXIT_USAGE  3  the doctor itself could not run: bad arguments, unreadable input

Exceptions that end a run with EXIT_USAGE, one line on stderr, no traceback (`checks.cli`):

UsageError                    the doctor cannot run as asked; the message names what to fix
probes.errors.ProbeError      a question to the observed machine failed where no check asked it
                              (probes/errors.py has its tree)

Loaders raise their own errors, which the commands turn into a UsageError naming the option:
`checks.policy.PolicyError` (--policy), `checks.baseline.BaselineError` (--baseline).
"""

from __future__ import annotations

EXIT_OK, EXIT_WARN, EXIT_FAIL, EXIT_USAGE = 0, 1, 2, 3
EXIT_INTERRUPTED = 130  # Ctrl-C, as a shell reports a SIGINT


class UsageError(Exception):
    """The doctor cannot run: the message is one line naming what to fix."""
