"""Names of model-directory formats every package shares: FP8 weight modes, tokenizer files."""

from __future__ import annotations

# How FP8 weights are held: dequantised to the compute dtype at load, or kept as FP8 bytes
# and dequantised per use (A2/A3 have no FP8 compute, so both end in BF16/FP16 arithmetic)
FP8_MODES: tuple[str, ...] = ("dequantize", "resident")

# The files transformers' tokenizers load from a model directory
TOKENIZER_FILES: tuple[str, ...] = (
    "tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json", "merges.txt",
    "vocab.txt", "special_tokens_map.json", "added_tokens.json", "chat_template.jinja",
    "chat_template.json")
