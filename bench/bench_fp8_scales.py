"""Time checkpoint.fp8-scales against loading every shard with safetensors, side by side.

Writes a ~1.5 GB block-FP8 checkpoint (4 shards of F8_E4M3 weights + BF16 weight_scale_inv)
into a temporary directory, then measures in one run:
  (a) the fp8-scales check: headers + scale tensors only, bytes counted through a Host wrapper;
  (b) `safetensors.torch.load_file` of every shard (what a naive checker would do).
Both read from the page cache (the files were just written), so the ratio is CPU and copy
cost, not disk speed; a cold disk only widens the gap. Targets from the issue: (a) reads
under 2 % of the checkpoint bytes and is at least 20x faster. Prints, never asserts.
Run: .venv/bin/python bench/bench_fp8_scales.py  (about a minute on 2 cores)
"""

from __future__ import annotations

import json
import shutil
import struct
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from checks.builtin.fp8_scales import fp8_scales  # noqa: E402  (the path is set just above)
from checks.context import Context  # noqa: E402
from checks.policy import load_policy  # noqa: E402
from probes.host import CommandResult, DiskUsage, PathKind, PythonEnvironment  # noqa: E402
from probes.live import LiveHost  # noqa: E402

SHARDS = 4
TENSORS_PER_SHARD = 12
OUT, IN = 4096, 8192  # 32 MiB of FP8 per weight; 48 weights = 1.5 GiB
BLOCK = 128
CHUNK = np.random.default_rng(0).integers(0, 0x7F, size=16 << 20, dtype=np.uint8).tobytes()


class CountingHost:
    """A Host that forwards to another and counts the file bytes it hands back."""

    def __init__(self, inner: LiveHost) -> None:
        self.inner = inner
        self.bytes_read = 0
        self.reads = 0

    @property
    def description(self) -> str:
        return f"counting {self.inner.description}"

    @property
    def env(self) -> Mapping[str, str]:
        return self.inner.env

    def run(self, argv: Sequence[str], timeout_s: float = 10.0) -> CommandResult:
        return self.inner.run(argv, timeout_s)

    def read_text(self, path: str) -> str:
        text = self.inner.read_text(path)
        self.bytes_read += len(text.encode())
        self.reads += 1
        return text

    def read_bytes(self, path: str, offset: int = 0, length: int | None = None) -> bytes:
        data = self.inner.read_bytes(path, offset, length)
        self.bytes_read += len(data)
        self.reads += 1
        return data

    def list_dir(self, path: str) -> list[str]:
        return self.inner.list_dir(path)

    def exists(self, path: str) -> bool:
        return self.inner.exists(path)

    def kind(self, path: str) -> PathKind:
        return self.inner.kind(path)

    def file_size(self, path: str) -> int:
        return self.inner.file_size(path)

    def disk_usage(self, path: str) -> DiskUsage:
        return self.inner.disk_usage(path)

    def realpath(self, path: str) -> str:
        return self.inner.realpath(path)

    def python_packages(self) -> PythonEnvironment:
        return self.inner.python_packages()


def bf16_bits(values: np.ndarray) -> bytes:
    return (values.astype(np.float32).view(np.uint32) >> 16).astype("<u2").tobytes()


def write_shard(path: Path, shard: int, rng: np.random.Generator) -> dict[str, str]:
    """One shard written by hand (header, then data streamed from a random chunk)."""
    grid = (OUT // BLOCK, IN // BLOCK)
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    blobs: list[tuple[str, int | bytes]] = []  # name -> FP8 byte count or the scale bytes
    offset = 0
    for i in range(TENSORS_PER_SHARD):
        name = f"model.layers.{shard * TENSORS_PER_SHARD + i}.mlp.down_proj"
        scales = bf16_bits(rng.uniform(1e-4, 5e-4, size=grid))
        for tensor, dtype, shape, size in ((f"{name}.weight", "F8_E4M3", [OUT, IN], OUT * IN),
                                           (f"{name}.weight_scale_inv", "BF16", list(grid),
                                            len(scales))):
            header[tensor] = {"dtype": dtype, "shape": shape,
                              "data_offsets": [offset, offset + size]}
            blobs.append((tensor, size if dtype == "F8_E4M3" else scales))
            offset += size
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with path.open("wb") as fh:
        fh.write(struct.pack("<Q", len(text)) + text)
        for _, blob in blobs:
            if isinstance(blob, bytes):
                fh.write(blob)
                continue
            for start in range(0, blob, len(CHUNK)):
                fh.write(CHUNK[: min(len(CHUNK), blob - start)])
    return {name: path.name for name, _ in blobs}


def write_checkpoint(directory: Path) -> int:
    rng = np.random.default_rng(1)
    weight_map: dict[str, str] = {}
    for shard in range(SHARDS):
        name = f"model-{shard + 1:05d}-of-{SHARDS:05d}.safetensors"
        weight_map.update(write_shard(directory / name, shard, rng))
    config = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
              "torch_dtype": "bfloat16",
              "quantization_config": {"quant_method": "fp8", "fmt": "e4m3",
                                      "activation_scheme": "dynamic",
                                      "weight_block_size": [BLOCK, BLOCK]}}
    (directory / "config.json").write_text(json.dumps(config))
    (directory / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    return sum(p.stat().st_size for p in directory.glob("*.safetensors"))


def time_ours(directory: Path) -> tuple[float, int, int, str]:
    host = CountingHost(LiveHost(root="/", env={}))
    ctx = Context(host, load_policy(), model_dir=directory)
    start = time.perf_counter()
    finding = fp8_scales(ctx)
    return time.perf_counter() - start, host.bytes_read, host.reads, finding.status


def time_full_load(directory: Path, materialise: bool) -> float:
    """load_file of every shard; with `materialise`, copy each tensor out of the mapping.

    safetensors maps the file and hands out tensors backed by the mapping, so load_file
    alone reads almost nothing; a checker that then looks at the tensors pays for the bytes.
    """
    from safetensors.torch import load_file  # the bench may use torch; probes/checks may not

    start = time.perf_counter()
    for shard in sorted(directory.glob("*.safetensors")):
        tensors = load_file(str(shard))
        if materialise:
            for tensor in tensors.values():
                tensor.clone()
        del tensors
    return time.perf_counter() - start


def main() -> None:
    directory = Path(tempfile.mkdtemp(prefix="bench-fp8-"))
    try:
        start = time.perf_counter()
        total = write_checkpoint(directory)
        print(f"wrote {total / 1e9:.2f} GB in {SHARDS} shards "
              f"({time.perf_counter() - start:.1f} s)")
        ours_s, read, reads, status = min(time_ours(directory) for _ in range(3))
        lazy_s = time_full_load(directory, materialise=False)
        full_s = time_full_load(directory, materialise=True)
        print(f"(a) checkpoint.fp8-scales: {ours_s * 1e3:9.1f} ms, {read} bytes in {reads} "
              f"reads = {read / total * 100:.4f} % of the checkpoint (target < 2 %), "
              f"status {status}")
        print(f"(b) safetensors.torch.load_file x{SHARDS} + copy every tensor: "
              f"{full_s * 1e3:9.1f} ms, {total} bytes = 100 %")
        print(f"    (load_file alone, tensors left on the mmap and never touched: "
              f"{lazy_s * 1e3:.1f} ms)")
        print(f"speed ratio (b)/(a): {full_s / ours_s:.0f}x (target >= 20x)")
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
