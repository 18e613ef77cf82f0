"""Baselines: what a validated machine looked like, and how this one differs from it.

`ascend-doctor baseline record` writes a YAML file (`ascend-baseline/1`) with the versions of
the NPU stack and of the Python packages that serve the model, the ASCEND_* family of the
environment (secret-looking values redacted), the NPU inventory and, with --model, a
tokenizer fingerprint. `ascend-doctor --baseline FILE` observes the same items now and the
`baseline.drift` check lists every difference as `name: baseline -> now`.

Observation goes through the Context's shared facts (one `npu-smi info`, one package listing
per run); comparison is a pure function of two Baselines. Items that cannot be observed now
(a recording that lacks them) are "unknown", never a difference and never a match.

The package: `model` (the data), `compare` (pure), `fileformat` (the YAML file) and `record`
(observing now, through checks.inputs: imported only by `baseline record` and the drift check).
"""

from __future__ import annotations

from checks.baseline.compare import category_of, compare, flatten
from checks.baseline.fileformat import from_data, load_baseline, to_data, to_yaml
from checks.baseline.model import (
    CATEGORIES,
    SCHEMA,
    Baseline,
    BaselineError,
    Category,
    Drift,
    NpuInventory,
    TokenizerFingerprint,
)

__all__ = ["CATEGORIES", "SCHEMA", "Baseline", "BaselineError", "Category", "Drift",
           "NpuInventory", "TokenizerFingerprint", "category_of", "compare", "flatten",
           "from_data", "load_baseline", "to_data", "to_yaml"]
