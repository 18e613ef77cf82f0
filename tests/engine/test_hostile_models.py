"""Hostile and broken model directories: every one is refused with one line naming the file
or field (an EngineError from the engine, a CheckpointError from the doctor's reader) before
anything big is allocated, in bounded memory, and nothing hangs.

The worst inputs run in fresh interpreters whose peak RSS (VmHWM) is measured (the engine's
over a process that has already loaded one sound tiny model, so torch itself is not counted);
the subprocess timeout is the time limit (a hang fails it).
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import save_file

ROOT = Path(__file__).resolve().parents[2]
# The engine's growth over a process that has already loaded one tiny model (torch's own
# footprint differs between machines and wheels; what a hostile file may add does not)
ENGINE_GROWTH_MB = 80
READER_RSS_MB = 100
LIMIT_S = 240

TINY: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 16,
    "hidden_size": 8, "intermediate_size": 8, "num_hidden_layers": 2,
    "num_attention_heads": 1, "num_key_value_heads": 1, "rms_norm_eps": 1e-6,
    "rope_theta": 10000.0, "max_position_embeddings": 64, "tie_word_embeddings": True,
    "torch_dtype": "float32",
}


def tiny_tensors(layers: int = 2) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    tensors = {"model.embed_tokens.weight": torch.randn(16, 8, generator=gen),
               "model.norm.weight": torch.ones(8)}
    for i in range(layers):
        p = f"model.layers.{i}."
        for name, shape in (("self_attn.q_proj", (8, 8)), ("self_attn.k_proj", (8, 8)),
                            ("self_attn.v_proj", (8, 8)), ("self_attn.o_proj", (8, 8)),
                            ("mlp.gate_proj", (8, 8)), ("mlp.up_proj", (8, 8)),
                            ("mlp.down_proj", (8, 8))):
            tensors[p + name + ".weight"] = torch.randn(*shape, generator=gen)
        tensors[p + "input_layernorm.weight"] = torch.ones(8)
        tensors[p + "post_attention_layernorm.weight"] = torch.ones(8)
    return tensors


def tiny_dir(path: Path, config: dict[str, Any] | None = None) -> Path:
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps(config or TINY))
    save_file(tiny_tensors(), str(path / "model.safetensors"))
    return path


def with_header(shard: Path, header: bytes, length: int | None = None) -> None:
    shard.write_bytes(struct.pack("<Q", len(header) if length is None else length) + header
                      + b"\0" * 64)


def _dev_zero(d: Path) -> None:
    (d / "config.json").unlink()
    (d / "config.json").symlink_to("/dev/zero")


def _fifo(d: Path) -> None:
    (d / "config.json").unlink()
    os.mkfifo(d / "config.json")


def _config(**changes: Any) -> Callable[[Path], None]:
    def change(d: Path) -> None:
        (d / "config.json").write_text(json.dumps({**TINY, **changes}))
    return change


def _raw_config(text: str) -> Callable[[Path], None]:
    def change(d: Path) -> None:
        (d / "config.json").write_text(text)
    return change


def _shard(make: Callable[[Path], None]) -> Callable[[Path], None]:
    def change(d: Path) -> None:
        make(d / "model.safetensors")
    return change


def _overlap(shard: Path) -> None:
    header = {"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
              "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}}
    with_header(shard, json.dumps(header).encode())


def _digits_shape(digits: int) -> Callable[[Path], None]:
    def make(shard: Path) -> None:
        with_header(shard, b'{"a": {"dtype": "F32", "shape": [' + b"9" * digits
                    + b'], "data_offsets": [0, 16]}}')
    return make


def _shard_is_dev_zero(shard: Path) -> None:
    shard.unlink()
    shard.symlink_to("/dev/zero")


def _shard_is_a_directory(shard: Path) -> None:
    shard.unlink()
    shard.mkdir()


def _index_escape(d: Path) -> None:
    (d / "model.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {"model.norm.weight": "../../etc/passwd"}}))


# case -> (how to break a good directory, words the one-line error must contain)
CASES: dict[str, tuple[Callable[[Path], None], tuple[str, ...]]] = {
    "config-dev-zero": (_dev_zero, ("config.json", "character device", "not a regular file")),
    "config-fifo": (_fifo, ("config.json", "not a regular file")),
    "config-20mb": (_raw_config(" " * (20 * 2**20) + "{}"), ("config.json", "limit")),
    "config-deep": (_raw_config("[" * 100_000 + "]" * 100_000), ("config.json", "deeply")),
    "config-5000-digits": (_raw_config('{"hidden_size": ' + "9" * 5000 + "}"),
                           ("config.json",)),
    "experts-1e12": (_config(architectures=["MixtralForCausalLM"], model_type="mixtral",
                             num_local_experts=10**12, num_experts_per_tok=2),
                     ("config.json", "needs", "usable")),
    "layers-1e9": (_config(num_hidden_layers=10**9), ("config.json", "needs", "usable")),
    "layers-1e6": (_config(num_hidden_layers=10**6, max_position_embeddings=16),
                   ("lacks tensor model.layers.2.",)),
    "vocab-1e15": (_config(vocab_size=10**15), ("needs",)),
    "negative-layers": (_config(num_hidden_layers=-1), ("num_hidden_layers",)),
    "header-2-pow-40": (_shard(lambda s: with_header(s, b"{}", 2**40)),
                        ("model.safetensors", "header length")),
    "header-deep": (_shard(lambda s: with_header(s, b"{" + b'"a":{' * 50_000)),
                    ("model.safetensors",)),
    "header-overlap": (_shard(_overlap), ("model.safetensors", "same bytes")),
    "header-not-object": (_shard(lambda s: with_header(s, b"[1, 2]")),
                          ("model.safetensors", "'{'")),
    "shard-dev-zero": (_shard(_shard_is_dev_zero), ("model.safetensors", "not a regular file")),
    "shard-directory": (_shard(_shard_is_a_directory), ("model.safetensors", "not a regular")),
    "index-escape": (_index_escape, ("plain file name",)),
    "shape-5000-digits": (_shard(_digits_shape(5000)), ("model.safetensors",)),
    "shape-4000-digits": (_shard(_digits_shape(4000)), ("model.safetensors", "malformed shape")),
}


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile")
    for name, (breaks, _) in CASES.items():
        breaks(tiny_dir(root / name))
    tiny_dir(root / "_sound")
    return root


ENGINE_SCRIPT = """
import json, sys
def PEAK_RSS_MB():
    # VmHWM: this process's own peak (ru_maxrss would count the forked parent's pages)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
from engine import Engine, EngineError
Engine.load(sys.argv[1] + "/_sound", device="cpu", dtype="float32", max_seq_len=16,
            require_tokenizer=False)
out = {"baseline_mb": PEAK_RSS_MB()}
for case in sys.argv[2:]:
    try:
        Engine.load(sys.argv[1] + "/" + case, device="cpu", dtype="float32", max_seq_len=16,
                    require_tokenizer=False)
        out[case] = "loaded"
    except EngineError as exc:
        out[case] = type(exc).__name__ + ": " + str(exc)
out["rss_mb"] = PEAK_RSS_MB()
print(json.dumps(out))
"""

READER_SCRIPT = """
import json, sys
def PEAK_RSS_MB():
    # VmHWM: this process's own peak (ru_maxrss would count the forked parent's pages)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
from probes.model.reader import CheckpointError, read_model_dir
from probes.errors import HostError
from probes.live import LiveHost
from probes.model.memory import plan_memory
from probes.model.tensors import InventoryError
out = {}
for case in sys.argv[2:]:
    try:
        model = read_model_dir(LiveHost(root="/", env={}), sys.argv[1] + "/" + case)
        problems = model.problems() + [p.message for p in model.config.problems]
        plan = plan_memory(model.config, 4096)  # npu.hbm-fit's arithmetic on this config
        out[case] = "; ".join(problems) or f"plan {plan.total_bytes()}"
    except (CheckpointError, HostError, InventoryError) as exc:
        out[case] = type(exc).__name__ + ": " + str(exc)
out["rss_mb"] = PEAK_RSS_MB()
print(json.dumps(out))
"""


def run(script: str, cases: Path) -> dict[str, Any]:
    result = subprocess.run([sys.executable, "-c", script, str(cases), *CASES], cwd=ROOT,
                            capture_output=True, text=True, timeout=LIMIT_S,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stderr[-2000:]
    found: dict[str, Any] = json.loads(result.stdout.splitlines()[-1])
    return found


def test_the_engine_refuses_each_in_one_line_in_bounded_memory(cases: Path) -> None:
    found = run(ENGINE_SCRIPT, cases)
    for case, (_, words) in CASES.items():
        message = found[case]
        assert message != "loaded", case
        assert "\n" not in message and message.startswith(
            ("ModelFormatError", "OutOfMemoryPlan", "UnsupportedArchitecture")), (case, message)
        assert all(word in message for word in words), (case, message)
    assert found["rss_mb"] - found["baseline_mb"] < ENGINE_GROWTH_MB, found


PLANNED = ("experts-1e12", "layers-1e9", "layers-1e6", "vocab-1e15")


def test_the_doctors_reader_names_each_in_bounded_memory(cases: Path) -> None:
    """Broken files are named; well-formed but absurd configs are priced, not allocated."""
    found = run(READER_SCRIPT, cases)
    for case, (_, words) in CASES.items():
        assert "\n" not in found[case], case
        if case in PLANNED:
            assert found[case].startswith("plan "), (case, found[case])
            continue
        assert not found[case].startswith("plan "), case
        assert all(w in found[case] for w in words if w not in ("needs", "usable")), (
            case, found[case])
    assert int(found["experts-1e12"].split()[1]) > 10**15
    assert found["rss_mb"] < READER_RSS_MB, found["rss_mb"]


@pytest.mark.parametrize(("raised", "caught", "words"), [
    (PermissionError(13, "Permission denied", "/m/model.safetensors"), "ModelFormatError",
     ("/m/model.safetensors", "Permission denied", "permissions")),
    (MemoryError(), "OutOfMemoryPlan", ("ran out of memory",)),
    (RecursionError(), "ModelFormatError", ("nested too deeply",)),
])
def test_os_memory_and_recursion_errors_become_engine_errors(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, raised: BaseException, caught: str,
        words: tuple[str, ...]) -> None:
    """The last line of defence: what slips past the checks is still one EngineError line
    (as root, chmod cannot make a file unreadable, so the error is raised where reads are)."""
    import engine.weights
    from engine import Engine, EngineError

    def fail(path: Any) -> Any:
        raise raised

    monkeypatch.setattr(engine.weights, "read_model", fail)
    with pytest.raises(EngineError) as info:
        Engine.load(tiny_dir(tmp_path / "m"), device="cpu", require_tokenizer=False)
    assert type(info.value).__name__ == caught
    assert "\n" not in str(info.value) and all(w in str(info.value) for w in words)


@pytest.mark.parametrize("template", [
    "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    "{{ 'x' * 10**9 }}",
    "{{ raise_exception('no chat here') }}",
    "{{ (((10 ** 256) ** 256) ** 256) ** 256 }}",
    "{{ '%0999999999d' % 1 }}",
], ids=["loops", "huge-string", "raises", "one-c-level-power", "format-allocates"])
def test_a_hostile_chat_template_is_one_engine_error(tmp_path: Path, template: str) -> None:
    """The model's chat template runs under probes.model.chat_template's budget (steps, output,
    time): a template that loops or builds a gigabyte stops with one line."""
    from engine import Engine, EngineError
    from tests.engine.tiny_models import write_word_tokenizer

    directory = tiny_dir(tmp_path / "m")
    write_word_tokenizer(directory, vocab_size=16)
    tokenizer_config = directory / "tokenizer_config.json"
    document = json.loads(tokenizer_config.read_text())
    tokenizer_config.write_text(json.dumps({**document, "chat_template": template}))
    eng = Engine.load(directory, device="cpu", dtype="float32", max_seq_len=16)
    with pytest.raises(EngineError, match="chat template cannot be used") as info:
        eng.chat([{"role": "user", "content": "w3 w4"}])
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("special", ["/dev/zero", "fifo"])
def test_a_tokenizer_file_that_is_not_a_regular_file_is_refused(tmp_path: Path,
                                                                special: str) -> None:
    """tokenizers opens tokenizer.json itself: a link to /dev/zero or a FIFO is refused by
    type before it is handed over (it would read without end, or block)."""
    import os

    from engine import Engine, EngineError
    from tests.engine.tiny_models import write_word_tokenizer

    directory = tiny_dir(tmp_path / "m")
    write_word_tokenizer(directory, vocab_size=16)
    (directory / "tokenizer.json").unlink()
    if special == "fifo":
        os.mkfifo(directory / "tokenizer.json")
    else:
        (directory / "tokenizer.json").symlink_to(special)
    with pytest.raises(EngineError, match="not a regular file") as info:
        Engine.load(directory, device="cpu", dtype="float32", max_seq_len=16)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(("heads", "kv_heads"), [(2, 3), (4, 3)])
def test_heads_that_do_not_group_are_one_line_before_torch(tmp_path: Path, heads: int,
                                                           kv_heads: int) -> None:
    """ops and bench read the config through load_config; shapes that meet only in a torch
    RuntimeError are refused there, naming both fields."""
    from engine.config import load_config
    from engine.errors import EngineError
    from engine.tools.opscan import scan_path

    directory = tiny_dir(tmp_path / "m", {**TINY, "hidden_size": 12, "num_attention_heads": heads,
                                          "num_key_value_heads": kv_heads, "head_dim": 4})
    with pytest.raises(EngineError, match="num_key_value_heads") as info:
        load_config(directory)
    assert "\n" not in str(info.value)
    with pytest.raises(EngineError, match="num_key_value_heads"):
        scan_path(directory, "cpu", None, "bfloat16", "dequantize")
