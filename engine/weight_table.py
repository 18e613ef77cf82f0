"""Canonical-name lookup of a model's weights, in the device's preferred layout."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from engine.cpu_decode import Stack, Transposed, prefer_layout, stack
from engine.errors import ModelFormatError
from engine.layers import Weight


class WeightTable:
    """Canonical-name lookup that names the missing tensor in its error."""

    def __init__(self, weights: Mapping[str, Any], device: torch.device,
                 dtype: torch.dtype) -> None:
        self.weights = weights
        self.device, self.dtype = device, dtype
        self.relayout_bytes = 0  # copies made for a faster layout (tied lm_head)

    def get(self, name: str) -> Any:
        if name not in self.weights:
            raise ModelFormatError(f"checkpoint has no tensor for {name!r} (canonical name)")
        return self.weights[name]

    def optional(self, name: str) -> Any:
        return self.weights.get(name)

    def linear(self, name: str, shared: bool = False) -> Weight:
        """A projection weight in the device's preferred layout."""
        weight = prefer_layout(self.get(name), self.device, self.dtype)
        if shared and isinstance(weight, Transposed):
            self.relayout_bytes += weight.nbytes
        return weight

    def stack(self, *weights: Weight) -> Stack | None:
        """Projections of one input (from `linear`) as one CPU kernel GEMV, where they can be."""
        return stack(weights) if self.device.type == "cpu" else None
