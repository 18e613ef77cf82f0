"""Operator coverage: does the device have a kernel for every operator the model runs?

A `Judge` answers per aten operator, either by asking the dispatcher of this torch (probed: a
kernel registered for the device's dispatch key -- CPU, CUDA, PrivateUse1 for torch_npu) or by
reading torch_npu's published registry for a torch line (predicted:
engine.tools.npu_registry). The trace (engine.tools.optrace) holds CompositeImplicit calls and
their decompositions; what reaches the device is the call itself where the backend registers
it, else its decomposition.

Verdicts per operator:
- native     the backend has a kernel for it;
- composite  torch's CompositeExplicitAutograd kernel runs it as other operators on the device;
- fallback   no kernel, but the backend registered a fallback for the operators it lacks and
             the operator has a CPU kernel: torch_npu's fallback copies the inputs to the
             host, runs the CPU kernel and copies the result back, warning once per operator;
- missing    no kernel and no fallback that can run it: the call fails.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import torch

from engine.tools.npu_registry import Answer, Registry, Version, version_text
from engine.tools.optrace import Call, Trace, has_kernel, qualified

Status = Literal["native", "composite", "fallback", "missing"]
WARN_STATUSES: tuple[Status, ...] = ("fallback", "missing")
SHAPES_SHOWN = 3
DISPATCH_KEYS = {"cpu": "CPU", "cuda": "CUDA", "npu": "PrivateUse1"}


@dataclass(frozen=True)
class Kernel:
    status: Status
    detail: str

    @property
    def warns(self) -> bool:
        return self.status in WARN_STATUSES


class Judge(Protocol):
    """Answers, for one device, which operators have kernels."""

    target: str  # "npu (PrivateUse1) with torch_npu 2.5.1, probed"
    predicted: bool

    def direct(self, op: str) -> bool:
        """The backend registers CompositeImplicit `op` itself (it then runs whole)."""
        ...

    def kernel(self, op: str) -> Kernel: ...


def composite_kernel(op: str) -> bool:
    """torch has a CompositeExplicitAutograd kernel: it runs as other operators anywhere."""
    return has_kernel(qualified(op), "CompositeExplicitAutograd")


def out_variant(op: str) -> str | None:
    """The out= variant a structured operator's generic (CompositeExplicitAutogradNonFunctional)
    kernel calls, when that is the only composite kernel it has ("silu" -> "silu.out")."""
    if not has_kernel(qualified(op), "CompositeExplicitAutogradNonFunctional"):
        return None
    name, _, overload = op.partition(".")
    for candidate in (f"{name}.{overload}_out" if overload else "", f"{name}.out"):
        if candidate and has_kernel(qualified(candidate), "CPU"):
            return candidate
    return None


def cpu_kernel(op: str) -> bool:
    """What a CPU fallback needs: a CPU kernel of the operator in this torch."""
    return has_kernel(qualified(op), "CPU")


class DispatcherJudge:
    """Probed: the dispatcher of this process (with torch_npu imported for PrivateUse1)."""

    predicted = False

    def __init__(self, key: str, target: str) -> None:
        self.key, self.target = key, target

    def direct(self, op: str) -> bool:
        return has_kernel(qualified(op), self.key)

    def kernel(self, op: str) -> Kernel:
        if has_kernel(qualified(op), self.key):
            return Kernel("native", f"{self.key} kernel registered")
        if composite_kernel(op):
            return Kernel("composite", "CompositeExplicitAutograd: runs as other operators")
        out = out_variant(op)
        if out is not None and has_kernel(qualified(out), self.key):
            return Kernel("composite", f"runs as {qualified(out)}, which has a kernel")
        fallback = torch._C._dispatch_has_backend_fallback(getattr(torch._C.DispatchKey,
                                                                   self.key))
        if fallback and cpu_kernel(op):
            return Kernel("fallback", f"no {self.key} kernel: the backend's fallback runs its "
                                      "CPU kernel")
        return Kernel("missing", f"no {self.key} kernel and no fallback that can run it: the "
                                 "call fails")


class RegistryJudge:
    """Predicted: torch_npu's registry for one torch line, plus this torch's composites."""

    predicted = True

    def __init__(self, registry: Registry, version: Version, target: str) -> None:
        self.registry, self.version, self.target = registry, version, target

    def _answer(self, op: str) -> Answer:
        # torch_npu's own operators live in the npu namespace; the registry lists them bare
        return self.registry.answer(op.removeprefix("npu::"), self.version)

    def direct(self, op: str) -> bool:
        return self._answer(op).has_kernel

    def kernel(self, op: str) -> Kernel:
        answer = self._answer(op)
        beyond = (f" (torch {version_text(self.version)} is newer than the registry's "
                  f"{version_text(self.registry.newest)})") if answer.beyond else ""
        if answer.has_kernel:
            return Kernel("native", "registry: " + ", ".join(answer.paths) + beyond)
        if composite_kernel(op):
            return Kernel("composite", "CompositeExplicitAutograd: runs as other operators")
        out = out_variant(op)
        if out is not None and self._answer(out).has_kernel:
            return Kernel("composite", f"runs as {qualified(out)}, which the registry lists")
        why = (f"registry lists it for {answer.listed_for} only, not torch "
               f"{version_text(self.version)}") if answer.listed else \
            "not in torch_npu's registries"
        if cpu_kernel(op):
            return Kernel("fallback", f"{why}: torch_npu's CPU fallback runs it")
        return Kernel("missing", f"{why}, and it has no CPU kernel to fall back to: the call "
                                 "fails")


def reaching(calls: Sequence[Call], judge: Judge) -> list[int]:
    """Indices of the calls that reach the device: a CompositeImplicit call the backend
    implements (and none of the calls it contains), else the operators it decomposes into."""
    direct: dict[str, bool] = {}

    def implemented(index: int) -> bool:
        op = calls[index].op
        if op not in direct:
            direct[op] = judge.direct(op)
        return direct[op]

    found = []
    for index, call in enumerate(calls):
        if any(implemented(outer) for outer in call.within):
            continue
        if not call.composite or implemented(index):
            found.append(index)
    return found


@dataclass(frozen=True)
class Site:
    where: str  # "SparseMoe._grouped > swiglu > linear"
    layers: str  # "deltanet+moe x30" ("" outside the decoder layers)
    count: int


@dataclass(frozen=True)
class OpRow:
    op: str
    prefill: int  # calls in one prefill, all layers counted
    decode: int  # calls in one decode step
    dtypes: tuple[str, ...]
    shapes: tuple[str, ...]  # distinct input shapes, the first SHAPES_SHOWN
    shape_count: int
    sites: tuple[Site, ...]  # most calls first
    kernel: Kernel
    whole: bool = False  # a CompositeImplicit operator the backend runs whole


def shape_text(shapes: tuple[tuple[int, ...], ...]) -> str:
    return " x ".join("[" + ",".join(str(d) for d in shape) + "]" for shape in shapes) or "-"


class _Group:
    def __init__(self) -> None:
        self.steps: Counter[str] = Counter()
        self.dtypes: dict[str, None] = {}
        self.shapes: dict[str, None] = {}
        self.sites: Counter[tuple[str, str]] = Counter()
        self.whole = False


def _layer_label(trace: Trace, call: Call) -> str:
    if call.layer < 0:
        return ""
    use = trace.layers[call.layer]
    return f"{use.label} x{use.stands_for}"


def rows(trace: Trace, judge: Judge) -> list[OpRow]:
    """One row per operator reaching the device; warnings first, then by calls."""
    groups: dict[str, _Group] = {}
    for index in reaching(trace.calls, judge):
        call = trace.calls[index]
        group = groups.setdefault(call.op, _Group())
        weight = trace.weight(call)
        group.steps[call.step] += weight
        group.dtypes.update(dict.fromkeys(call.dtypes))
        group.shapes[shape_text(call.shapes)] = None
        group.sites[(call.site, _layer_label(trace, call))] += weight
        group.whole = group.whole or call.composite
    out = [OpRow(op, g.steps["prefill"], g.steps["decode"], tuple(g.dtypes),
                 tuple(list(g.shapes)[:SHAPES_SHOWN]), len(g.shapes),
                 tuple(Site(where, layers, n) for (where, layers), n in g.sites.most_common()),
                 judge.kernel(op), g.whole)
           for op, g in groups.items()]
    return sorted(out, key=lambda r: (not r.kernel.warns, -(r.prefill + r.decode), r.op))
