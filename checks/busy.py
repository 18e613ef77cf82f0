"""Whether a machine was busy while something was timed: a bench on a box whose other work
holds the cores measures scheduler slices, not operator times, and must say so."""

from __future__ import annotations

import os


def load_1m() -> float | None:
    """The 1-minute load average (runnable and uninterruptible tasks), None where the OS has
    none (os.getloadavg)."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def busy_note(load: float | None, cores: int | None, threads: int | None) -> str:
    """A line saying why timings taken now are not operator times, or "" when nothing says so.

    `load` is read before the timed work starts, so it counts the others' work only."""
    if load is None or not cores:
        return ""
    if load > cores:
        return (f"this machine was busy: load average {load:.1f} over {cores} cores before the "
                "bench started; the times include what other processes took, not the "
                "operators' own")
    if threads is not None and threads >= cores and load >= 1.0:
        return (f"the bench ran {threads} threads on {cores} cores while other work ran (load "
                f"{load:.1f}): each time includes scheduler slices given to that work")
    return ""
