"""Tiny random hybrid models built with transformers' own classes, saved for the engine.

- `qwen3_next`: Qwen3NextForCausalLM.save_pretrained (fused in_proj_qkvz / in_proj_ba).
- `qwen3_5_moe_text`: Qwen3_5MoeForCausalLM.save_pretrained (flat config, weights under
  `model.`, one tensor per expert).
- `qwen3_5_moe`: the same text model rewritten as the official BF16 Qwen3.5/3.6 checkpoints
  store it: the vision-language config with `text_config`, weights under
  `model.language_model.`, experts fused as `mlp.experts.gate_up_proj` [E, 2I, H] and
  `mlp.experts.down_proj` [E, H, I], plus vision-tower and MTP tensors the engine must skip.
  transformers' text model is the reference for all three.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

VOCAB_SIZE = 300
HYBRIDS = ("qwen3_next", "qwen3_5_moe_text", "qwen3_5_moe")

COMMON: dict[str, Any] = {
    "vocab_size": VOCAB_SIZE, "hidden_size": 64, "num_hidden_layers": 4,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
    "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 16,
    "linear_value_head_dim": 16, "linear_conv_kernel_dim": 4, "num_experts": 4,
    "num_experts_per_tok": 2, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 48,
    "bos_token_id": 0, "eos_token_id": 1, "pad_token_id": 0, "initializer_range": 0.1,
    "max_position_embeddings": 512,
}


def build(kind: str, seed: int = 0) -> Any:
    """A float32 transformers text model with random weights (norms away from identity)."""
    import transformers as tf

    torch.manual_seed(seed)
    if kind == "qwen3_next":
        model = tf.Qwen3NextForCausalLM(tf.Qwen3NextConfig(**COMMON, intermediate_size=80))
    else:
        model = tf.Qwen3_5MoeForCausalLM(tf.Qwen3_5MoeTextConfig(**COMMON))
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" in name:
                param.add_(0.1 * torch.randn_like(param))
    return model.eval()


def _fused_layout(state: dict[str, torch.Tensor], experts: int) -> dict[str, torch.Tensor]:
    """Per-expert tensors -> the fused 3-D layout, everything under model.language_model."""
    out: dict[str, torch.Tensor] = {}
    for name, tensor in state.items():
        if ".mlp.experts." in name:
            continue
        out[name.replace("model.", "model.language_model.", 1)
            if name.startswith("model.") else name] = tensor.contiguous()
    layers = {int(n.split(".")[2]) for n in state if n.startswith("model.layers.")}
    for layer in sorted(layers):
        p = f"model.layers.{layer}.mlp.experts."
        gate_up = [torch.cat([state[f"{p}{e}.gate_proj.weight"], state[f"{p}{e}.up_proj.weight"]])
                   for e in range(experts)]
        q = f"model.language_model.layers.{layer}.mlp.experts."
        out[q + "gate_up_proj"] = torch.stack(gate_up).contiguous()
        out[q + "down_proj"] = torch.stack(
            [state[f"{p}{e}.down_proj.weight"] for e in range(experts)]).contiguous()
    out["model.visual.patch_embed.proj.weight"] = torch.randn(8, 3, 2, 4, 4)
    out["model.visual.merger.linear_fc2.weight"] = torch.randn(64, 32)
    out["mtp.fc.weight"] = torch.randn(64, 128)
    out["mtp.norm.weight"] = torch.zeros(64)
    return out


def save(kind: str, directory: Path, seed: int = 0) -> Any:
    """Save `kind` into `directory` (safetensors, no tokenizer); return the reference model."""
    from safetensors.torch import load_file, save_file

    model = build(kind, seed)
    if kind != "qwen3_5_moe":
        model.save_pretrained(str(directory))
        return model
    plain = directory / "plain"
    model.save_pretrained(str(plain))
    text_config = json.loads((plain / "config.json").read_text())
    text_config.pop("architectures", None)
    config = {"architectures": ["Qwen3_5MoeForConditionalGeneration"],
              "model_type": "qwen3_5_moe", "text_config": text_config,
              "tie_word_embeddings": False, "vision_config": {"depth": 1}}
    (directory / "config.json").write_text(json.dumps(config))
    tensors = _fused_layout(load_file(str(plain / "model.safetensors")), COMMON["num_experts"])
    save_file(tensors, str(directory / "model.safetensors"), metadata={"format": "pt"})
    for file in plain.iterdir():
        file.unlink()
    plain.rmdir()
    return model
