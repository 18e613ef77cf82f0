"""Prefill and decode speed of the engine against transformers, side by side, on the CPU.

Rows (each in its own subprocess, so one model's memory and threads cannot slow the next):
  transformers  dense SmolLM2-135M GGUF (`gguf_file=`, dequantised, bfloat16): the baseline
  engine        the same dense GGUF
  engine        smollm2-moe-fp8, fp8="dequantize" (BF16 weights made once at load)
  engine        smollm2-moe-fp8, fp8="resident" (FP8 bytes kept, dequantised per use)
Greedy, the same chat prompt token ids for every row, up to 32 new tokens (eos may end a run
early; the decode column says how many steps were timed). One warm-up run, then the best of
RUNS. Prefill tok/s = prompt tokens / time to the first token; decode tok/s = steps after the
first token / their time. Ratios are against the transformers row of this same run, because
the machine is shared and noisy. Builds the demos if missing. Prints, never asserts.
Run: .venv/bin/python bench/bench_engine_speed.py  (about two minutes on 2 cores)
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
ASSETS = ROOT / "demo-assets"
MOE = ASSETS / "smollm2-moe-fp8"
DENSE_DIR = ASSETS / "smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
PROMPT = "Write a short story about a robot who learns to paint."
NEW_TOKENS = 32
RUNS = 2

CHILD_ENGINE = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from engine import Engine, GenerationConfig
path, fp8, ids = sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
new, runs = int(sys.argv[5]), int(sys.argv[6])
t0 = time.perf_counter()
eng = Engine.load(path, device="cpu", dtype="bfloat16", max_seq_len=512, fp8=fp8,
                  require_tokenizer=False)
load_s = time.perf_counter() - t0
config = GenerationConfig(max_new_tokens=new)
best = None
for run in range(runs + 1):
    out = [ev.token_id for ev in eng.generate(ids, config)]
    s = eng.stats
    row = {"prefill": s.prefill_tokens_per_s, "decode": s.decode_tokens_per_s,
           "steps": s.decode_tokens, "tokens": out}
    if run and (best is None or row["decode"] > best["decode"]):
        best = row
best["load_s"] = load_s
print(json.dumps(best))
"""

CHILD_TRANSFORMERS = r"""
import json, sys, time
import torch
import transformers as tf
directory, name, ids = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
new, runs = int(sys.argv[4]), int(sys.argv[5])
tf.logging.set_verbosity_error()
t0 = time.perf_counter()
model = tf.AutoModelForCausalLM.from_pretrained(directory, gguf_file=name,
                                                dtype=torch.bfloat16).eval()
load_s = time.perf_counter() - t0
prompt = torch.tensor([ids])
best = None
with torch.inference_mode():
    for run in range(runs + 1):
        # Prefill: one forward over the prompt; then a full greedy generate, whose time minus
        # that prefill is the decode time (same split as the engine's stats).
        t0 = time.perf_counter()
        model(prompt, use_cache=True)
        prefill_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        out = model.generate(prompt, do_sample=False, max_new_tokens=new,
                             pad_token_id=model.config.eos_token_id)[0, len(ids):].tolist()
        total_s = time.perf_counter() - t0
        steps = len(out) - 1
        row = {"prefill": len(ids) / prefill_s,
               "decode": steps / max(total_s - prefill_s, 1e-9), "steps": steps, "tokens": out}
        if run and (best is None or row["decode"] > best["decode"]):
            best = row
best["load_s"] = load_s
print(json.dumps(best))
"""


def ensure_demos() -> None:
    for out, kind in ((MOE, "smollm2-moe-fp8"), (DENSE_DIR, "smollm2")):
        if not (out / "demo.json").exists():
            print(f"building {out} ...", flush=True)
            subprocess.run([sys.executable, "-m", "demo_models", "build", "--out", str(out),
                            "--kind", kind], cwd=ROOT, check=True)


def prompt_ids() -> list[int]:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(MOE), local_files_only=True)
    ids: Any = tokenizer.apply_chat_template([{"role": "user", "content": PROMPT}],
                                             add_generation_prompt=True)
    ids = ids["input_ids"] if not isinstance(ids, list) else ids
    return [int(i) for i in ids]


def run_child(argv: list[str]) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", *argv], capture_output=True, text=True)
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr else "failed"}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    ensure_demos()
    ids = json.dumps(prompt_ids())
    common = [ids, str(NEW_TOKENS), str(RUNS)]
    rows = {
        "transformers dense GGUF": run_child([CHILD_TRANSFORMERS, str(DENSE_DIR), GGUF_NAME,
                                              *common]),
        "engine dense GGUF": run_child([CHILD_ENGINE, str(ROOT), str(DENSE_DIR / GGUF_NAME),
                                        "dequantize", *common]),
        "engine moe-fp8 dequantize": run_child([CHILD_ENGINE, str(ROOT), str(MOE), "dequantize",
                                                *common]),
        "engine moe-fp8 resident": run_child([CHILD_ENGINE, str(ROOT), str(MOE), "resident",
                                              *common]),
    }
    base = rows["transformers dense GGUF"]
    print(f"CPU, bfloat16, greedy, prompt {len(json.loads(ids))} tokens, up to {NEW_TOKENS} new, "
          f"best of {RUNS} after a warm-up")
    print(f"| {'who / model':<27} | prefill tok/s | x HF | decode tok/s | x HF | steps | "
          f"load s | same tokens as HF |")
    print(f"|{'-' * 29}|{'-' * 15}|{'-' * 6}|{'-' * 14}|{'-' * 6}|{'-' * 7}|{'-' * 8}|"
          f"{'-' * 19}|")
    for name, row in rows.items():
        if "error" in row:
            print(f"| {name:<27} | error: {row['error']}")
            continue
        ratio_p = ratio_d = same = "-"
        if "error" not in base:
            ratio_p = f"{float(row['prefill']) / float(base['prefill']):.2f}"
            ratio_d = f"{float(row['decode']) / float(base['decode']):.2f}"
            same = str(row["tokens"] == base["tokens"])
        print(f"| {name:<27} | {float(row['prefill']):13.1f} | {ratio_p:>4} | "
              f"{float(row['decode']):12.2f} | {ratio_d:>4} | {row['steps']!s:>5} | "
              f"{float(row['load_s']):6.1f} | {same:>17} |")


if __name__ == "__main__":
    main()
