"""Observe an Ascend machine: the Host abstraction, parsers and readers.

Nothing here judges or draws; it turns what a machine shows into frozen facts.
Neither torch nor textual is imported by this package.
"""

from probes.errors import (
    HostError,
    NotRecorded,
    ParseError,
    PathMissing,
    PathUnreadable,
    ProbeError,
)
from probes.host import CommandResult, Host, Outcome, PathKind, PythonEnvironment

__all__ = [
    "CommandResult",
    "Host",
    "HostError",
    "NotRecorded",
    "Outcome",
    "ParseError",
    "PathKind",
    "PathMissing",
    "PathUnreadable",
    "ProbeError",
    "PythonEnvironment",
]
