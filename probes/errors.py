"""The exception tree of the probes package.

ProbeError
 +-- HostError              a question to a Host could not be answered
 |    +-- PathMissing       the path does not exist on the observed machine
 |    +-- PathUnreadable    it exists but cannot be read (permission, a directory, ...)
 |    +-- NotRecorded       a SnapshotHost was asked something the recording never saw
 +-- ParseError             a text is not the output the parser was given
"""

from __future__ import annotations


class ProbeError(Exception):
    """Base class of every error raised on purpose by probes."""


class HostError(ProbeError):
    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class PathMissing(HostError):
    def __init__(self, path: str) -> None:
        super().__init__(path, "no such file or directory")


class PathUnreadable(HostError):
    pass


class NotRecorded(HostError):
    def __init__(self, what: str) -> None:
        super().__init__(what, "not recorded")


class ParseError(ProbeError):
    """Raised by a parser when the text is not what it parses.

    `what` names the input (a command or a file), `line_no` is 1-based when known.
    """

    def __init__(self, what: str, reason: str, line_no: int | None = None) -> None:
        where = f"{what}, line {line_no}" if line_no is not None else what
        super().__init__(f"{where}: {reason}")
        self.what = what
        self.reason = reason
        self.line_no = line_no
