"""Trace the aten operators one prefill and one decode step of a model issue, on the meta device.

A dispatch mode watches the engine run (engine.tools.meta_model builds it without weights). The
engine runs under inference mode, where an operator reaches the mode before torch decomposes
it: a CompositeImplicit operator (`linear`, `scaled_dot_product_attention`, `to`) is recorded
as such and then decomposed with the mode still watching, so every operator it turns into is
recorded too, with the composite calls it came from (`Call.within`). A backend that registers
such an operator itself (torch_npu does for some) runs it whole; engine.tools.opcoverage decides,
per backend, which level reaches the device. Each record holds the operator, its input
dtypes and shapes, the engine functions on the Python stack and the decoder layer.

Meta tensors hold no values, so the few places where the engine reads values back (the experts a
token was routed to, tokens per expert) are answered with a plausible routing: tokens spread
evenly over the experts, in ascending order. That decides how many expert calls are traced, not
which operators exist.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from engine.tools.meta_model import LayerUse, MetaModel

ENGINE_DIR = str(Path(__file__).resolve().parent.parent)  # engine/, where the model code lives
_SELF_FILES = frozenset(str(Path(__file__).resolve().parent / name)
                        for name in ("optrace.py", "opcoverage.py", "meta_model.py", "opscan.py",
                                     "microbench.py", "bench_timing.py"))
# Frames that only route to the layer parts; leaving them out keeps the sites short.
_ROUTING = ("Decoder.prefill", "Decoder.decode", "Block.mix", "Block.feed_forward")
SITE_DEPTH = 3
PREFILL_TOKENS = 16


@dataclass(frozen=True)
class Call:
    """One operator call seen while tracing."""

    op: str  # "mm", "add.Tensor" (aten name.overload); a composite call: its aten name only
    composite: bool  # a torch call whose aten operator is CompositeImplicit (see module doc)
    dtypes: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    site: str  # engine functions, outermost first: "Attention.forward > apply_rotary"
    layer: int  # index into Trace.layers; -1 outside the decoder layers
    step: str  # prefill | decode
    within: tuple[int, ...] = ()  # indices of the composite calls this one came from


@dataclass
class Trace:
    calls: list[Call] = field(default_factory=list)
    layers: tuple[LayerUse, ...] = ()
    prefill_tokens: int = PREFILL_TOKENS
    dtype: str = ""
    fp8_mode: str = ""
    architecture: str = ""
    num_layers: int = 0

    def weight(self, call: Call) -> int:
        """How many calls of the whole model this traced call stands for."""
        return self.layers[call.layer].stands_for if call.layer >= 0 else 1


def aten_name(func: Any) -> str:
    """ "mm", "add.Tensor" for aten operators (the key op-plugin's registry uses too);
    "namespace::name.overload" for others."""
    schema = func._schema
    name = schema.name.removeprefix("aten::")
    return f"{name}.{schema.overload_name}" if schema.overload_name else name


def qualified(op: str) -> str:
    """The dispatcher's name of an operator key: "mm" -> "aten::mm"."""
    return op if "::" in op else f"aten::{op}"


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def describe_inputs(args: Sequence[Any], kwargs: dict[str, Any]
                    ) -> tuple[tuple[str, ...], tuple[tuple[int, ...], ...]]:
    """(dtypes, shapes) of the tensor arguments, in order."""
    tensors = [t for value in (*args, *kwargs.values())
               for t in (value if isinstance(value, (list, tuple)) else (value,))
               if isinstance(t, torch.Tensor)]
    return (tuple(dict.fromkeys(_dtype_name(t.dtype) for t in tensors)),
            tuple(tuple(int(d) for d in t.shape) for t in tensors))


class _Stack:
    """Where in the engine a call is made: its function chain and its decoder layer."""

    def __init__(self, layer_of: dict[int, int]) -> None:
        self.layer_of = layer_of  # id(Block) -> index into Trace.layers
        self.layer_hint = -1  # set while a pre-norm of a known layer runs

    def site(self) -> tuple[str, int]:
        names: list[str] = []
        layer = -1
        frame: FrameType | None = sys._getframe(2)
        while frame is not None:
            code = frame.f_code
            if code.co_filename.startswith(ENGINE_DIR) and code.co_filename not in _SELF_FILES:
                name = getattr(code, "co_qualname", code.co_name)
                if layer < 0 and name.startswith("Block."):
                    layer = self.layer_of.get(id(frame.f_locals.get("self")), -1)
                names.append(name)
            frame = frame.f_back
        layer = layer if layer >= 0 else self.layer_hint
        return short_site(names[::-1], inside_layer=layer >= 0), layer


def short_site(chain: list[str], inside_layer: bool) -> str:
    """The last SITE_DEPTH engine functions of a call chain (outermost first), without the
    frames that only route to a layer's parts."""
    dropped = (*_ROUTING, "Decoder.forward") if inside_layer else _ROUTING
    kept = [name for name in chain[:-1] if name not in dropped] + chain[-1:]
    return " > ".join(kept[-SITE_DEPTH:])


class _Routing:
    """Values for the reads the engine makes of meta tensors (see the module doc)."""

    def __init__(self) -> None:
        self.known: dict[int, torch.Tensor] = {}
        self._keep: list[torch.Tensor] = []

    def bincount(self, args: Sequence[Any], kwargs: dict[str, Any]) -> torch.Tensor:
        ids = args[0]
        bins = int(kwargs.get("minlength", args[2] if len(args) > 2 else 0) or 1)
        counts = spread(ids.numel(), bins)
        result = torch.empty(bins, dtype=torch.int64, device=ids.device)
        self.known[id(result)] = counts
        self._keep.append(result)
        return result

    def to_host(self, tensor: torch.Tensor, dtype: torch.dtype | None) -> torch.Tensor:
        values = self.known.get(id(tensor))
        if values is None:
            values = placeholder(tensor)
        return values.to(dtype or tensor.dtype)

    def scalar(self, tensor: torch.Tensor) -> bool | int | float:
        if tensor.dtype == torch.bool:
            return False
        return 0 if not tensor.is_floating_point() else 0.0


def spread(items: int, bins: int) -> torch.Tensor:
    """`items` spread evenly over the first min(items, bins) bins (int64 counts)."""
    counts = torch.zeros(bins, dtype=torch.int64)
    used = min(items, bins)
    if used:
        counts[:used] = items // used
        counts[:items % used] += 1
    return counts


def placeholder(tensor: torch.Tensor) -> torch.Tensor:
    """Host values for a meta tensor read back: 0, 1, 2, ... for integers (distinct, and
    valid indices into anything at least as long), zeros otherwise."""
    if tensor.dtype.is_floating_point or tensor.dtype == torch.bool:
        return torch.zeros(tuple(tensor.shape), dtype=tensor.dtype)
    return torch.arange(tensor.numel(), dtype=torch.int64).reshape(tuple(tensor.shape))


class _Recorder:
    def __init__(self, stack: _Stack) -> None:
        self.stack = stack
        self.calls: list[Call] = []
        self.open: list[int] = []  # composite calls being executed, outermost first
        self.step = ""

    def add(self, op: str, composite: bool, args: Sequence[Any], kwargs: dict[str, Any]) -> int:
        dtypes, shapes = describe_inputs(args, kwargs)
        site, layer = self.stack.site()
        self.calls.append(Call(op, composite, dtypes, shapes, site, layer, self.step,
                               tuple(self.open)))
        return len(self.calls) - 1


def has_kernel(op: str, key: str) -> bool:
    """Whether the dispatcher holds a kernel of `op` ("aten::mm") for `key` (False for a name
    it does not know)."""
    try:
        return bool(torch._C._dispatch_has_kernel_for_dispatch_key(op, key))
    except RuntimeError:
        return False


_IMPLICIT: dict[str, bool] = {}


def is_implicit(op: str) -> bool:
    """Whether aten `op` ("linear", "to.dtype_layout") is CompositeImplicit: torch runs it as
    other operators unless the backend registers a kernel for it."""
    if op not in _IMPLICIT:
        _IMPLICIT[op] = has_kernel(qualified(op), "CompositeImplicitAutograd")
    return _IMPLICIT[op]


class _DispatchMode(TorchDispatchMode):
    def __init__(self, recorder: _Recorder, routing: _Routing) -> None:
        super().__init__()
        self.recorder, self.routing = recorder, routing

    def __torch_dispatch__(self, func: Any, types: Any, args: Sequence[Any] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        kwargs = kwargs or {}
        name = aten_name(func)
        if is_implicit(name):
            return self._decompose(func, name, args, kwargs)
        self.recorder.add(name, False, args, kwargs)
        aten = torch.ops.aten
        if func is aten.bincount.default and args[0].is_meta:
            return self.routing.bincount(args, kwargs)
        if func is aten._local_scalar_dense.default and args[0].is_meta:
            return self.routing.scalar(args[0])
        if func.overloadpacket in (aten._to_copy, aten.to) and args[0].is_meta \
                and _target_device(args, kwargs) == "cpu":
            return self.routing.to_host(args[0], _target_dtype(args, kwargs))
        return func(*args, **kwargs)


    def _decompose(self, func: Any, name: str, args: Sequence[Any],
                   kwargs: dict[str, Any]) -> Any:
        """Record the composite call, then run torch's decomposition with this mode watching."""
        index = self.recorder.add(name, True, args, kwargs)
        self.recorder.open.append(index)
        try:
            with self:
                return func.decompose(*args, **kwargs)
        finally:
            self.recorder.open.pop()


def _target_device(args: Sequence[Any], kwargs: dict[str, Any]) -> str:
    found = [a for a in [*args[1:], kwargs.get("device")] if isinstance(a, (torch.device, str))]
    return torch.device(found[0]).type if found else ""


def _target_dtype(args: Sequence[Any], kwargs: dict[str, Any]) -> torch.dtype | None:
    found = [a for a in [*args[1:], kwargs.get("dtype")] if isinstance(a, torch.dtype)]
    return found[0] if found else None


@contextmanager
def _watching(recorder: _Recorder) -> Iterator[None]:
    with _DispatchMode(recorder, _Routing()):
        yield


def _attribute_norms(model: MetaModel, stack: _Stack) -> None:
    """The decoder applies each layer's pre-norms itself, outside the layer's frames: wrap its
    norm so those calls are counted for the layer whose weight they use."""
    norm = model.decoder.norm
    layer_of = {id(weight): i for i, block in enumerate(model.decoder.blocks)
                for weight in (block.attn_norm, block.mlp_norm)}

    def layer_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        stack.layer_hint = layer_of.get(id(weight), -1)
        try:
            return norm(x, weight, eps)
        finally:
            stack.layer_hint = -1

    model.decoder.norm = layer_norm


def trace(model: MetaModel, prefill_tokens: int = PREFILL_TOKENS) -> Trace:
    """Every operator of one prefill of `prefill_tokens` tokens and one decode step."""
    blocks = model.decoder.blocks
    stack = _Stack({id(block): i for i, block in enumerate(blocks)})
    recorder = _Recorder(stack)
    _attribute_norms(model, stack)
    device = model.cache.buffers[0].device
    prompt = torch.zeros(1, prefill_tokens, dtype=torch.int64, device=device)
    token = torch.zeros(1, 1, dtype=torch.int64, device=device)
    with torch.inference_mode(), _watching(recorder):
        recorder.step = "prefill"
        model.decoder.prefill(prompt, model.cache)
        recorder.step = "decode"
        model.decoder.decode(token, model.cache)
    return Trace(recorder.calls, model.layers, prefill_tokens, _dtype_name(model.dtype),
                 model.fp8_mode, model.config.architecture, model.config.num_layers)
