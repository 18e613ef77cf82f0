"""Errors the engine raises for problems a user can fix.

Every message is one line that names the file or field at fault and says what to do, so the
console and the CLI can show it without a traceback.

    EngineError
     +-- ModelFormatError         a checkpoint or config that is missing, truncated or malformed
     +-- UnsupportedArchitecture  a well-formed model this engine cannot run (yet)
     +-- OutOfMemoryPlan          the planned weights / KV cache do not fit the device
"""

from __future__ import annotations


class EngineError(Exception):
    """Base of every error the engine reports to a user."""


class ModelFormatError(EngineError):
    """A checkpoint file or config.json is missing, truncated or malformed."""


class UnsupportedArchitecture(EngineError):
    """The model is well-formed but uses an architecture or feature the engine does not run."""


class OutOfMemoryPlan(EngineError):
    """The memory plan (weights + KV cache) does not fit the device."""
