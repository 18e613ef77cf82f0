"""What checks share: the host, the target, the policy, the inputs, and facts read once.

Checks run concurrently; each fact is read at most once (a lock per fact) so that two
checks needing `npu-smi info` run it once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from checks.policy import Policy
from probes.host import Host
from probes.target.model import Target, shell_target

if TYPE_CHECKING:
    from checks.baseline.model import Baseline
    from probes.http import EndpointTarget

T = TypeVar("T")


@dataclass
class Context:
    """One run's inputs, and the facts its checks share (read once, under a lock each)."""

    host: Host
    policy: Policy
    model_dir: Path | None = None
    timeout_s: float = 10.0
    baseline: Baseline | None = None  # --baseline FILE, for the baseline.drift check
    endpoint: EndpointTarget | None = None  # --endpoint URL, for the endpoint.* checks
    target: Target = field(default_factory=shell_target)  # whose deployment is judged
    tensor_parallel: int | None = None  # --tp N: the chips of one tensor-parallel group
    requested: frozenset[str] = frozenset()  # the ids named in --only (checks that need "asked")
    _facts: dict[str, Any] = field(default_factory=dict, repr=False)
    _locks: dict[str, threading.Lock] = field(default_factory=dict, repr=False)
    _guard: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def know(self, name: str, value: Any) -> None:
        """A fact read before the run started (discovery's npu-smi reading)."""
        with self._guard:
            self._facts.setdefault(name, (True, value))

    def fact(self, name: str, read: Callable[[], T]) -> T:
        """The value of `read()`, computed once per run; exceptions are re-raised each time."""
        with self._guard:
            lock = self._locks.setdefault(name, threading.Lock())
        with lock:
            if name not in self._facts:
                try:
                    self._facts[name] = (True, read())
                except Exception as exc:
                    self._facts[name] = (False, exc)
            ok, value = self._facts[name]
        if not ok:
            raise value
        return value
