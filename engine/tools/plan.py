"""`python -m engine.tools.plan CONFIG.json --hbm-gb 64 --max-seq-len N`: the engine's memory plan
for a model from its config alone (no weights needed).

Prints the weights per FP8 mode, the KV cache (full-attention layers only) and the
linear-attention state per sequence, and whether it all fits one device of `--hbm-gb` GiB
(an Atlas A2 card: 64, npu-smi's 65536 MB) after the engine's headroom. The numbers are
probes.model.memory's, the same the doctor's npu.hbm-fit prints. Loads no torch.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from probes.errors import HostError
from probes.live import local_files
from probes.model.config import ConfigFacts, parse_config
from probes.model.memory import DTYPE_BYTES, GIB, plan_lines, plan_memory
from probes.model.reader import CheckpointError, read_json
from probes.model.tensors import InventoryError

USAGE_EXIT = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(USAGE_EXIT, f"{self.prog}: {message} (see {self.prog} --help)\n")


def make_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m engine.tools.plan", description=__doc__.split("\n")[0])
    parser.add_argument("config", type=Path, help="a config.json, or the model directory")
    parser.add_argument("--hbm-gb", type=float, default=64.0,
                        help="device memory in GiB (default 64: one Atlas A2 card)")
    parser.add_argument("--max-seq-len", type=int, default=4096, metavar="N",
                        help="tokens per sequence the cache is sized for (default 4096)")
    parser.add_argument("--batch", type=int, default=1, help="sequences (default 1)")
    parser.add_argument("--dtype", default="bfloat16", choices=sorted(DTYPE_BYTES),
                        help="compute dtype (default bfloat16)")
    parser.add_argument("--kv-cache", default="auto", choices=("auto", "int8"),
                        help="int8 keys/values with a float32 scale per token and head")
    return parser


def read_facts(path: Path) -> ConfigFacts:
    file = path / "config.json" if path.is_dir() else path
    document = read_json(local_files(), str(file.absolute()))
    if not isinstance(document, dict):
        raise CheckpointError(f"{file}: expected a JSON object")
    return parse_config(document, str(file))


def describe(config: ConfigFacts) -> str:
    layers = config.num_hidden_layers or 0
    full = config.full_attention_layers()
    kinds = f"{full} full-attention + {layers - full} linear-attention" if config.is_hybrid \
        else f"{layers} attention"
    experts = f", {config.num_experts} experts ({config.num_experts_per_tok} active)" \
        if config.num_experts else ""
    quant = f", {config.quant.scheme} FP8" if config.quant.is_fp8 else ""
    return f"{config.family or config.model_type or 'unknown'}: {kinds} layers{experts}{quant}"


def main(argv: Sequence[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    if args.max_seq_len < 1 or args.batch < 1 or not args.hbm_gb > 0:
        print("error: --max-seq-len, --batch and --hbm-gb must be positive", file=sys.stderr)
        return USAGE_EXIT
    try:
        config = read_facts(args.config)
        plan = plan_memory(config, args.max_seq_len, DTYPE_BYTES[args.dtype], args.batch,
                           args.kv_cache == "int8")
    except (CheckpointError, HostError, InventoryError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return USAGE_EXIT
    if config.problems:
        print(f"error: {config.source}: {config.problems[0].message}", file=sys.stderr)
        return USAGE_EXIT
    print(describe(config))
    for line in plan_lines(plan, int(args.hbm_gb * GIB)):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
