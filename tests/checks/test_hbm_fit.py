from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import CORPUS_DIR

from checks.builtin.hbm_chips import chips_used
from checks.builtin.hbm_fit import hbm_fit
from checks.builtin.hbm_inputs import mb
from checks.builtin.hbm_plan import (
    MB,
    Plan,
    attention_layers,
    judge,
    kv_not_modelled,
    kv_size,
    rounded_tokens,
    weight_share_bytes,
)
from checks.context import Context
from checks.model import Finding
from checks.policy import load_policy
from probes.errors import NotRecorded
from probes.host import CommandResult
from probes.inventory import NpuReading, parse_output, unavailable
from probes.live import LiveHost
from probes.model.reader import parse_config
from probes.target.model import ServingArgs, Target
from probes.target.parts import NpuUse, ProcessInfo, Sourced
from tests.fp8_fixtures import bf16_model_tensors, fp8_model_tensors, model_config, write_model
from tests.model_shapes import write_sharded_header_only

A2_8X32 = "014-info-25.0.rc1.1-910B4-8cards-noproc.txt"  # 2654 / 32768 MB used per chip
A2_8X64 = "048-info-24.1.rc1.b030-910B3-8cards-proc-section-cut-by-source.txt"
A2_SERVING = "039-info-23.0.rc3-driver-23.0.rc2.3-910-xxx-python-procs-doc.txt"  # 30.7 GB held
A3_4X64 = "065-info-25.2.0-A3-Ascend910-4chips-mixed-proc-peerfixture.txt"
A5_4X128 = "constructed/C05-info-25.7.rc1-Ascend950PR-4cards-NPU-ID-column.txt"
A2_FREE_MB = 32768 - 2654
MODELS = Path(__file__).resolve().parents[1] / "data" / "models"
CODER = MODELS / "Qwen3-Coder-30B-A3B-Instruct"  # the real index: 16 shards, 61,064,245,248 B
CODER_BYTES = 61_064_245_248


def reading(name: str) -> NpuReading:
    return parse_output((CORPUS_DIR / "npu-smi" / name).read_text())


def ctx_for(model: Path | None, npu: NpuReading | None, tmp_path: Path, policy: str = "",
            env: dict[str, str] | None = None, **extra: Any) -> Context:
    policy_file = None
    if policy:
        policy_file = tmp_path / "policy.yaml"
        policy_file.write_text(policy)
    ctx = Context(LiveHost(root="/", env=env or {}), load_policy(policy_file), model_dir=model,
                  **extra)
    if npu is not None:  # prime the shared npu fact instead of running npu-smi
        ctx.fact("npu", lambda: npu)
    return ctx


def text_of(finding: Finding) -> str:
    return finding.summary + "\n" + "\n".join(finding.evidence) + "\n" + finding.remedy


def bf16_model(tmp_path: Path, **config: Any) -> Path:
    return write_model(tmp_path / "bf16", bf16_model_tensors(),
                       {**model_config(fp8=False), **config})


def config_of(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((MODELS / name / "config.json").read_text())
    return loaded


def coder(tmp_path: Path, drop: int = 0) -> Path:
    """Header-only shards laid out by the real Qwen3-Coder-30B-A3B index; `drop` shards gone."""
    index = json.loads((CODER / "model.safetensors.index.json").read_text())
    directory = tmp_path / "coder"
    write_sharded_header_only(directory, config_of("Qwen3-Coder-30B-A3B-Instruct"),
                              weight_map=index["weight_map"])
    for shard in sorted(set(index["weight_map"].values()))[:drop]:
        (directory / shard).unlink()
    return directory


def vllm(model: Path, *, tp: int | None = None, max_len: int | None = None,
         util: float | None = None, npus: tuple[NpuUse, ...] = (), dp: int | None = None,
         switches: tuple[str, ...] = ()) -> Target:
    """A vLLM target as probes.target reads one: its settings with their sources, and its
    command line with the boolean `switches` (--enable-expert-parallel, --enforce-eager)."""
    def flag(value: Any, spelling: str) -> Any:
        return None if value is None else Sourced(value, f"`{spelling} {value}` on the "
                                                         "command line")
    serving = ServingArgs(
        server="vllm", model=Sourced(str(model), f"`vllm serve {model}` on the command line"),
        model_dir=Sourced(str(model), f"`vllm serve {model}` on the command line"),
        tensor_parallel_size=flag(tp, "--tensor-parallel-size"),
        data_parallel_size=flag(dp, "--data-parallel-size"),
        max_model_len=flag(max_len, "--max-model-len"),
        gpu_memory_utilization=flag(util, "--gpu-memory-utilization"))
    process = ProcessInfo(4242, ("vllm", "serve", str(model), *switches))
    return Target("process", "process 4242 (vllm serve)", "--pid 4242", "/proc/4242/environ",
                  process=process, serving=serving, npus=npus, npus_known=True)


# -- pure arithmetic ----------------------------------------------------------------------


def test_kv_bytes_per_token_qwen3_30b() -> None:
    config = parse_config({"num_hidden_layers": 48, "num_attention_heads": 32,
                           "num_key_value_heads": 4, "head_dim": 128,
                           "torch_dtype": "bfloat16"})
    size = kv_size(config)
    assert (size.full_attention_layers, size.kv_heads, size.head_dim, size.value_bytes) \
        == (48, 4, 128, 2)
    assert size.kv_bytes_per_token == 96 * 1024  # 48 x 2 x 4 x 128 x 2 bytes
    assert kv_size(config, tp=2).kv_bytes_per_token == 48 * 1024
    assert kv_size(config, tp=8).kv_bytes_per_token == 24 * 1024  # 4 KV heads: one per chip


def test_hybrid_counts_only_full_attention_layers() -> None:
    types = ["linear_attention"] * 3 + ["full_attention"]
    qwen35 = parse_config({"model_type": "qwen3_5_moe",
                           "text_config": {"num_hidden_layers": 40, "layer_types": types * 10,
                                           "num_key_value_heads": 2, "head_dim": 256,
                                           "num_attention_heads": 16}})
    layers, why = attention_layers(qwen35)
    assert layers == 10 and "hybrid" in why and "layer_types" in why
    qwen_next = parse_config({"model_type": "qwen3_next", "num_hidden_layers": 48,
                              "full_attention_interval": 4})
    layers, why = attention_layers(qwen_next)
    assert layers == 12 and "full_attention_interval 4" in why
    assert kv_size(qwen35).kv_bytes_per_token == 10 * 2 * 2 * 256 * 2


def test_kv_shape_needs_the_config_fields() -> None:
    assert kv_size(parse_config({"num_hidden_layers": 4})).note
    derived = kv_size(parse_config({"num_hidden_layers": 2, "hidden_size": 256,
                                    "num_attention_heads": 4}))
    assert not derived.note and (derived.full_attention_layers, derived.kv_heads,
                                 derived.head_dim, derived.value_bytes) == (2, 4, 64, 2)


def test_kv_is_allocated_in_whole_blocks() -> None:
    assert rounded_tokens(1000, 128) == 1024 and rounded_tokens(1024, 128) == 1024
    plan = Plan(free_bytes=1000 * MB, weight_bytes=0, reserve_bytes=0, kv_bytes_per_token=1,
                max_seq_len=1000, batch_size=2, block_tokens=128)
    assert plan.kv_tokens == 1024 and plan.kv_bytes == 2048
    assert plan.largest_context % 128 == 0


def test_plan_largest_context_and_judge() -> None:
    plan = Plan(free_bytes=1000 * MB, weight_bytes=400 * MB, reserve_bytes=100 * MB,
                kv_bytes_per_token=MB // 4, max_seq_len=1000, batch_size=2)
    assert plan.kv_room_bytes == 500 * MB
    assert plan.kv_bytes == 500 * MB and plan.headroom_bytes == 0
    assert plan.largest_context == 1000
    assert judge(plan, warn_free_mb=0) == "pass"
    assert judge(plan, warn_free_mb=1) == "warn"
    longer = Plan(1000 * MB, 400 * MB, 100 * MB, MB // 4, 1001, 2)
    assert judge(longer, 0) == "fail" and longer.largest_context == 1000
    too_big = Plan(1000 * MB, 950 * MB, 100 * MB, MB, 1, 1)
    assert judge(too_big, 0) == "fail" and too_big.largest_context == 0
    with_state = Plan(1000 * MB, 400 * MB, 100 * MB, MB // 4, 1000, 2, state_bytes=100 * MB)
    assert with_state.kv_room_bytes == 400 * MB and judge(with_state, 0) == "fail"


def test_weight_share_and_chip_selection() -> None:
    assert weight_share_bytes(10, 3) == 4
    chips = reading(A3_4X64).info.chips  # type: ignore[union-attr]
    assert chips_used(chips, None) == list(chips)
    assert [c.hbm_used_mb for c in chips_used(chips, (1, 3, 9))] == [2876, 10568]


def test_mla_kv_is_modelled_and_unknown_attentions_are_not() -> None:
    deepseek = parse_config(config_of("DeepSeek-V3"))
    assert kv_not_modelled(deepseek) == ""
    # one latent of kv_lora_rank 512 + qk_rope_head_dim 64 on each of 61 layers, BF16
    assert kv_size(deepseek).kv_bytes_per_token == 61 * (512 + 64) * 2
    assert kv_not_modelled(parse_config(config_of("Qwen3.5-35B-A3B"))) == ""
    gpt2 = parse_config({"model_type": "gpt2", "num_hidden_layers": 2, "hidden_size": 64,
                         "num_attention_heads": 2})
    assert "KV not estimated for gpt2: not an attention" in kv_not_modelled(gpt2)


# -- the check: fits, fails, warns --------------------------------------------------------


def test_fits_passes_with_sources_in_the_summary(tmp_path: Path) -> None:
    finding = hbm_fit(ctx_for(bf16_model(tmp_path), reading(A2_8X32), tmp_path))
    assert finding.status == "pass", finding
    text = text_of(finding)
    assert finding.summary.startswith("fits: ")
    assert "1 x 910B4 at tensor parallel 1 (policy)" in finding.summary
    assert "32,768 tokens (policy) x batch 1" in finding.summary
    assert "weights from safetensors headers" in finding.summary
    assert "per chip 0.31 MB weights + 32 MB KV + 4,096 MB reserve of 30,115 MB" in finding.summary
    assert "largest 26,643,072 tokens" in finding.summary
    assert "the 1 of 8 visible chips with the most free HBM" in text
    assert "30,115 MB free now (2,653 / 32,768 MB used, 2,653 MB of it held by no process)" \
        in text  # NPU 7 of corpus 014
    assert "weights as stored" in text and "BF16" in text
    assert "2 attention layers x 2 x 1 KV heads x 128 head_dim x 2 bytes" in text
    assert "blocks of 128 (policy hbm_fit.kv_block_tokens)" in text


def test_weights_and_reserve_too_big_fail(tmp_path: Path) -> None:
    ctx = ctx_for(bf16_model(tmp_path), reading(A2_8X32), tmp_path,
                  "hbm_fit:\n  runtime_reserve_mb: 40000\n")
    finding = hbm_fit(ctx)
    assert finding.status == "fail", finding
    assert "weights + reserve do not fit" in finding.summary
    assert "more chips" in finding.remedy and finding.rules == ("weights-do-not-fit",)


def test_context_too_long_fails_with_largest_context(tmp_path: Path) -> None:
    # 48 layers x 2 x 8 KV heads x 128 x 2 bytes = 192 KiB/token on one chip
    model = bf16_model(tmp_path, num_hidden_layers=48, num_key_value_heads=8)
    ctx = ctx_for(model, reading(A2_8X32), tmp_path, "hbm_fit:\n  max_seq_len: 2000000\n")
    finding = hbm_fit(ctx)
    assert finding.status == "fail", finding
    weights = sum(t.nbytes for t in _tensor_infos(model))
    room = (A2_FREE_MB - 4096) * MB - weights
    largest = room // (192 * 1024)
    largest -= largest % 128
    assert f"largest context that fits is {largest:,} tokens" in finding.summary
    assert finding.rules == ("context-does-not-fit",)
    assert f"--max-model-len {largest:,}" in finding.remedy


def _tensor_infos(model: Path) -> list[Any]:
    from probes.model.reader import read_model_dir

    return list(read_model_dir(LiveHost(root="/", env={}), str(model)).tensors.values())


def test_little_headroom_warns(tmp_path: Path) -> None:
    ctx = ctx_for(bf16_model(tmp_path), reading(A2_8X32), tmp_path,
                  f"hbm_fit:\n  runtime_reserve_mb: {A2_FREE_MB - 1000}\n")
    finding = hbm_fit(ctx)
    assert finding.status == "warn", finding
    assert "little headroom" in finding.summary and "hbm_free_warn_mb" in finding.summary
    assert finding.rules == ("little-headroom",)


# -- missing shards never count as 0 bytes ------------------------------------------------


def test_index_only_directory_judges_the_index_total(tmp_path: Path) -> None:
    directory = tmp_path / "index-only"
    directory.mkdir()
    for name in ("config.json", "model.safetensors.index.json"):
        shutil.copy(CODER / name, directory / name)
    finding = hbm_fit(ctx_for(directory, reading(A2_8X32), tmp_path))
    # before: "fits ... 0.00 MB weights"
    assert finding.status == "fail", finding
    assert "weights + reserve do not fit" in finding.summary
    assert "(the index's total_size)" in finding.summary
    assert f"weights as stored: {mb(CODER_BYTES)}" in text_of(finding)
    assert "16 of 16 shards missing or unreadable" in text_of(finding)


def test_missing_shards_of_a_235b_fp8_checkpoint_are_not_an_undercount(tmp_path: Path) -> None:
    """Header-only shards of Qwen3-235B-A22B-FP8 over 49 files, 10 of them missing, on
    8 x 64 GB A2 at tensor parallel 8: the shards that are there would "fit"."""
    directory = tmp_path / "235b"
    index = write_sharded_header_only(directory, config_of("Qwen3-235B-A22B-Instruct-2507-FP8"),
                                      shards=49)
    for shard in sorted(set(index["weight_map"].values()))[5:15]:
        (directory / shard).unlink()
    finding = hbm_fit(ctx_for(directory, reading(A2_8X64), tmp_path, tensor_parallel=8))
    # before: "fits", the 39 shards there counted as the whole checkpoint
    assert finding.status == "warn", finding
    assert finding.summary.startswith("little headroom: per chip 56,054 MB weights")
    assert "-> 564 MB left" in finding.summary
    assert "8 x 910B3 at tensor parallel 8 (--tp)" in finding.summary
    assert "weights from the index's total_size" in finding.summary
    text = text_of(finding)
    assert f"weights as stored: {mb(index['metadata']['total_size'])}" in text
    assert "10 of 49 shards missing or unreadable" in text
    assert "judged at its BF16 size" in text


def test_missing_shards_without_a_total_fall_back_to_the_estimate(tmp_path: Path) -> None:
    directory = coder(tmp_path, drop=4)
    index_path = directory / "model.safetensors.index.json"
    index = json.loads(index_path.read_text())
    del index["metadata"]
    index_path.write_text(json.dumps(index))
    finding = hbm_fit(ctx_for(directory, reading(A2_8X32), tmp_path, tensor_parallel=8))
    assert finding.status == "warn", finding  # it fits, but only by an estimate
    assert finding.summary.startswith("fits by an estimate: ")
    assert "estimated from config.json" in finding.summary and finding.rules == ("estimate-only",)
    assert "no usable total_size" in text_of(finding)


def test_config_alone_is_estimated_and_said_so(tmp_path: Path) -> None:
    directory = tmp_path / "config-only"
    directory.mkdir()
    shutil.copy(MODELS / "Qwen3.5-35B-A3B" / "config.json", directory / "config.json")
    one_card = hbm_fit(ctx_for(directory, reading(A2_8X32), tmp_path))
    assert one_card.status == "fail", one_card  # ~67 GB of BF16 on a 32 GB card
    assert "(estimated from config.json)" in one_card.summary
    assert "B parameters of the language model" in text_of(one_card)
    big = hbm_fit(ctx_for(directory, reading(A5_4X128), tmp_path))
    assert big.status == "warn", big  # an estimate never passes
    assert big.summary.startswith("fits by an estimate")


# -- tensor parallelism, context and memory share from the target ------------------------


def test_tp_defaults_to_one_not_every_visible_chip(tmp_path: Path) -> None:
    finding = hbm_fit(ctx_for(coder(tmp_path), reading(A2_8X32), tmp_path))
    # before: a 61 GB model "fits" on 8 x 32 GB by assuming tensor parallel 8
    assert finding.status == "fail", finding
    assert "1 x 910B4 at tensor parallel 1 (policy)" in finding.summary
    policy = hbm_fit(ctx_for(coder(tmp_path), reading(A2_8X32), tmp_path,
                             "hbm_fit:\n  tensor_parallel_size: 4\n"))
    assert policy.status == "pass", policy
    assert "4 x 910B4 at tensor parallel 4 (policy)" in policy.summary


def test_tp_and_context_from_the_target_command_line(tmp_path: Path) -> None:
    model = coder(tmp_path)
    ctx = ctx_for(model, reading(A2_8X32), tmp_path, target=vllm(model, tp=4, max_len=8192))
    finding = hbm_fit(ctx)
    assert finding.status == "pass", finding
    assert "4 x 910B4 at tensor parallel 4 (command line)" in finding.summary
    assert "8,192 tokens (command line)" in finding.summary
    text = text_of(finding)
    assert "`--tensor-parallel-size 4` on the command line" in text
    assert "`--max-model-len 8192` on the command line" in text
    long = ctx_for(model, reading(A2_8X32), tmp_path, target=vllm(model, tp=4, max_len=10**6))
    assert hbm_fit(long).status == "fail"


def test_tp_given_by_the_user_overrides_the_command_line(tmp_path: Path) -> None:
    model = coder(tmp_path)
    ctx = ctx_for(model, reading(A2_8X32), tmp_path, target=vllm(model, tp=4),
                  tensor_parallel=8)
    finding = hbm_fit(ctx)
    assert "8 x 910B4 at tensor parallel 8 (--tp)" in finding.summary
    assert "the target serves with tensor parallel 4" in text_of(finding)


def test_gpu_memory_utilization_caps_the_budget(tmp_path: Path) -> None:
    model = coder(tmp_path)
    fits = hbm_fit(ctx_for(model, reading(A2_8X32), tmp_path, target=vllm(model, tp=4)))
    assert fits.status == "pass", fits
    capped = hbm_fit(ctx_for(model, reading(A2_8X32), tmp_path,
                             target=vllm(model, tp=4, util=0.5)))
    assert capped.status == "fail", capped
    assert "0.5 of the 30,114 MB the runtime sees (`--gpu-memory-utilization 0.5` on the " \
        "command line" in text_of(capped)


def test_mindie_world_size_max_seq_len_and_npu_mem_size(tmp_path: Path) -> None:
    model = coder(tmp_path)
    where = "/usr/local/Ascend/mindie/latest/mindie-service/conf/config.json: "
    serving = ServingArgs(
        server="mindie", model_dir=Sourced(str(model), where + "modelWeightPath"),
        world_size=Sourced(4, where + "BackendConfig.ModelDeployConfig.ModelConfig[0].worldSize"),
        max_model_len=Sourced(4096, where + "BackendConfig.ModelDeployConfig.maxSeqLen"),
        npu_mem_size_gb=Sourced(1, where + "npuMemSize"))
    target = Target("process", "process 7 (mindieservice_daemon)", "--pid 7", "/proc/7/environ",
                    serving=serving)
    finding = hbm_fit(ctx_for(model, reading(A2_8X32), tmp_path, target=target))
    assert finding.status == "pass", finding
    assert "tensor parallel 4 (MindIE config)" in finding.summary
    assert "4,096 tokens (MindIE config)" in finding.summary
    assert "KV capped at 1,024 MB per chip" in text_of(finding)
    huge = ServingArgs(server="mindie", model_dir=serving.model_dir,
                       world_size=serving.world_size, max_model_len=serving.max_model_len,
                       npu_mem_size_gb=Sourced(30, "npuMemSize"))
    no_room = hbm_fit(ctx_for(model, reading(A2_8X32), tmp_path,
                              target=Target("process", "p", "c", "e", serving=huge)))
    assert no_room.status == "fail" and no_room.rules == ("kv-pool-does-not-fit",)
    assert "the KV cache MindIE is told to allocate does not fit" in no_room.summary
    capped = ServingArgs(server="mindie", model_dir=serving.model_dir,
                         world_size=serving.world_size, max_model_len=Sourced(10**5, "maxSeqLen"),
                         npu_mem_size_gb=serving.npu_mem_size_gb)
    too_long = hbm_fit(ctx_for(model, reading(A2_8X32), tmp_path,
                               target=Target("process", "p", "c", "e", serving=capped)))
    assert too_long.status == "fail" and "does not fit" in too_long.summary


def test_a_healthy_running_server_is_judged_against_total_hbm(tmp_path: Path) -> None:
    """npu-smi while the target serves: 30,710 of 32,768 MB used on every chip, by it."""
    model = coder(tmp_path)
    info = reading(A2_SERVING).info
    assert info is not None
    own = tuple(NpuUse(p.npu_id, p.chip_id, p.pid, p.memory_mb) for p in info.processes)
    ctx = ctx_for(model, reading(A2_SERVING), tmp_path,
                  target=vllm(model, tp=8, max_len=32768, npus=own))
    finding = hbm_fit(ctx)
    assert finding.status == "pass", finding  # before: fail, "2,058 MB free"
    assert "8 x xxx (held by the target: judged against what was free before it started) at " \
        "tensor parallel 8 (command line)" in finding.summary
    text = text_of(finding)
    assert "the 8 chips the target holds" in text
    assert "32,768 MB total less 0 MB no process holds and 0 MB other processes hold" in text
    assert "0.9 of the 32,768 MB the runtime sees (--gpu-memory-utilization unset: vllm's " \
        "default 0.9" in text


def test_hybrid_state_is_in_the_verdict(tmp_path: Path) -> None:
    directory = tmp_path / "qwen35"
    directory.mkdir()
    shutil.copy(MODELS / "Qwen3.5-35B-A3B" / "config.json", directory / "config.json")
    finding = hbm_fit(ctx_for(directory, reading(A5_4X128), tmp_path,
                              "hbm_fit:\n  batch_size: 64\n"))
    per_chip = next(e for e in finding.evidence if e.startswith("per chip: "))
    assert " state + " in per_chip
    state = next(e for e in finding.evidence if e.startswith("linear-attention state: "))
    assert "30 Gated DeltaNet layers" in state and "batch 64" in state


def tiny_weights() -> dict[str, Any]:
    return {"model.embed_tokens.weight": (bf16_model_tensors()["model.layers.0."
                                          "input_layernorm.weight"][0], "BF16")}


def test_mla_is_judged_by_its_latent(tmp_path: Path) -> None:
    """DeepSeek-V3 (its real config) caches one latent of kv_lora_rank + qk_rope_head_dim values
    per token and layer, the same on every chip of the tensor-parallel group."""
    model = write_model(tmp_path / "ds", tiny_weights(), config_of("DeepSeek-V3"), shards=1)
    policy = "hbm_fit:\n  tensor_parallel_size: 4\n  batch_size: 2\n"
    finding = hbm_fit(ctx_for(model, reading(A5_4X128), tmp_path, policy))
    assert finding.status == "pass", finding
    assert finding.rules != ("kv-not-estimated",)
    assert "MLA latent: kv_lora_rank + qk_rope_head_dim per token and layer, not split across " \
        "chips" in finding.summary and "MLAAttentionSpec" in finding.summary
    per_token = 61 * (512 + 64) * 2  # 70,272 bytes: 61 layers, BF16, no K/V pair, no TP split
    kv_line = next(e for e in finding.evidence if e.startswith("KV cache: "))
    assert "61 layers x one MLA latent of 576 values" in kv_line
    assert f"= {per_token:,} bytes/token, {per_token:,} per chip" in kv_line
    kv_bytes = per_token * 32768 * 2  # the policy's 32,768 tokens (whole blocks) x batch 2
    assert f"-> {mb(kv_bytes)} KV per chip" in text_of(finding)
    assert f"+ {mb(kv_bytes)} KV + " in finding.summary


def test_mla_context_that_does_not_fit_names_the_latent(tmp_path: Path) -> None:
    model = write_model(tmp_path / "ds", tiny_weights(), config_of("DeepSeek-V3"), shards=1)
    policy = "hbm_fit:\n  max_seq_len: 163840\n  batch_size: 64\n"  # 737 GB of latents
    finding = hbm_fit(ctx_for(model, reading(A5_4X128), tmp_path, policy))
    assert finding.status == "fail" and finding.rules == ("context-does-not-fit",), finding
    assert "MLA latent: kv_lora_rank + qk_rope_head_dim" in finding.summary


@pytest.mark.parametrize(("name", "config", "why"), [
    ("no-shape", {**model_config(fp8=False), "num_attention_heads": None, "head_dim": None,
                  "num_key_value_heads": None}, "does not give the KV cache shape"),
    ("mla-no-rope", {**config_of("DeepSeek-V3"), "qk_rope_head_dim": "64"},
     "kv_lora_rank and qk_rope_head_dim are not both whole numbers")])
def test_a_config_without_the_kv_shape_says_kv_not_estimated(
        tmp_path: Path, name: str, config: dict[str, Any], why: str) -> None:
    config = {k: v for k, v in config.items() if v is not None}
    model = write_model(tmp_path / name, tiny_weights(), config, shards=1)
    finding = hbm_fit(ctx_for(model, reading(A5_4X128), tmp_path))
    assert finding.status == "warn" and finding.rules == ("kv-not-estimated",), finding
    assert "KV not estimated: config.json" in finding.summary and why in finding.summary
    assert not any(e.startswith("KV cache: ") for e in finding.evidence)


# -- FP8 ----------------------------------------------------------------------------------


def test_fp8_on_a2_judged_at_bf16_size_with_the_true_reason(tmp_path: Path) -> None:
    model = write_model(tmp_path / "fp8", fp8_model_tensors())
    finding = hbm_fit(ctx_for(model, reading(A2_8X32), tmp_path))
    assert finding.status == "pass", finding
    text = text_of(finding)
    assert "cannot be served as FP8 on 910B4 (A2)" in text
    assert "vllm-ascend refuses an FP8 checkpoint there" in text
    assert "MindIE converts it to BF16 offline" in text
    assert "dequantise to BF16 at load" not in text and "at load" not in text
    failing = hbm_fit(ctx_for(model, reading(A2_8X32), tmp_path,
                              "hbm_fit:\n  runtime_reserve_mb: 40000\n"))
    assert failing.status == "fail"
    assert "keep the FP8 weights resident" in failing.remedy


def test_fp8_on_950_is_judged_as_stored(tmp_path: Path) -> None:
    model = write_model(tmp_path / "fp8", fp8_model_tensors())
    finding = hbm_fit(ctx_for(model, reading(A5_4X128), tmp_path))
    text = text_of(finding)
    assert "FP8 weights served as FP8" in text and "judged at its BF16 size" not in text


# -- no NPU, odd NPUs ---------------------------------------------------------------------


def test_no_model_skips(tmp_path: Path) -> None:
    finding = hbm_fit(ctx_for(None, reading(A2_8X32), tmp_path))
    assert finding.status == "skip" and finding.summary == "no --model given"
    assert finding.rules == ("no-model",)


def test_unreadable_models_skip(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("not json")
    broken = hbm_fit(ctx_for(tmp_path, reading(A2_8X32), tmp_path))
    assert broken.status == "skip" and broken.rules == ("model-unreadable",)

    class Unrecorded(LiveHost):
        def kind(self, path: str):  # type: ignore[no-untyped-def]
            raise NotRecorded(path)

    ctx = Context(Unrecorded(root="/", env={}), load_policy(None), model_dir=tmp_path)
    assert hbm_fit(ctx).rules == ("not-recorded",)


def test_missing_shards_of_an_unknown_architecture_cannot_be_judged(tmp_path: Path) -> None:
    index = {"weight_map": {"model.embed_tokens.weight": "model-00001-of-00002.safetensors",
                            "lm_head.weight": "model-00002-of-00002.safetensors"}}
    directory = tmp_path / "ds"
    directory.mkdir()
    (directory / "config.json").write_text(json.dumps(config_of("DeepSeek-V3")))
    (directory / "model.safetensors.index.json").write_text(json.dumps(index))
    finding = hbm_fit(ctx_for(directory, reading(A2_8X32), tmp_path))
    assert finding.status == "skip" and finding.rules == ("weights-unknown",)
    assert finding.summary.startswith("cannot judge: 2 of 2 shards missing or unreadable")


def test_no_npu_skips_with_the_reason(tmp_path: Path) -> None:
    missing = unavailable(CommandResult(("npu-smi", "info"), "not_found"), "no NPU driver tools")
    finding = hbm_fit(ctx_for(bf16_model(tmp_path), missing, tmp_path))
    assert finding.status == "skip" and "not found" in finding.summary
    assert finding.rules == ("no-npu",)
    busy = hbm_fit(ctx_for(bf16_model(tmp_path), reading("057-error-8020-device-used.txt"),
                           tmp_path))
    assert busy.status == "skip" and "-8020" in busy.summary


def test_no_npu_still_says_what_the_model_needs(tmp_path: Path) -> None:
    missing = unavailable(CommandResult(("npu-smi", "info"), "not_found"), "no NPU driver tools")
    model = bf16_model(tmp_path)
    policy = "hbm_fit:\n  max_seq_len: 1000\n  batch_size: 2\n  runtime_reserve_mb: 10\n"
    finding = hbm_fit(ctx_for(model, missing, tmp_path, policy))
    need = next(e for e in finding.evidence if e.startswith("needed per chip at tensor "))
    weights = sum(t.nbytes for t in _tensor_infos(model))
    size = kv_size(parse_config(json.loads((model / "config.json").read_text())))
    assert not size.note
    kv = size.kv_bytes_per_token * 1024 * 2  # 1000 tokens in blocks of 128: 1024
    assert f"{mb(weights)} weights (" in need and f"{mb(10 * MB)} reserve + {mb(kv)} KV" in need
    assert f"= {mb(weights + 10 * MB + kv)}" in need


def test_310p_is_judged_from_memory_usage(tmp_path: Path) -> None:
    """A 300I Duo (310P3) prints no HBM column; its Memory-Usage is the chip's memory."""
    finding = hbm_fit(ctx_for(bf16_model(tmp_path), reading(
        "049-info-25.2.0-300IDuo-310P3-2chips-same-busid-PARTIAL.txt"), tmp_path))
    assert finding.status == "pass", finding
    assert "1 x 310P3" in finding.summary
    assert f"{44280 - 1529:,} MB free now (1,529 / 44,280 MB Memory-Usage" in text_of(finding)


def test_visible_devices_leaving_no_chip_skip(tmp_path: Path) -> None:
    finding = hbm_fit(ctx_for(bf16_model(tmp_path), reading(A2_8X32), tmp_path,
                              env={"ASCEND_RT_VISIBLE_DEVICES": ""}))
    assert finding.status == "skip" and "no chip" in finding.summary
    assert finding.rules == ("no-chip-visible",)


def test_visible_devices_and_too_few_chips(tmp_path: Path) -> None:
    model = bf16_model(tmp_path)
    busy = hbm_fit(ctx_for(model, reading(A3_4X64), tmp_path,
                           env={"ASCEND_RT_VISIBLE_DEVICES": "3"}))
    assert f"{65536 - 10568:,} MB free now" in text_of(busy)
    short = hbm_fit(ctx_for(model, reading(A3_4X64), tmp_path, tensor_parallel=4,
                            env={"ASCEND_RT_VISIBLE_DEVICES": "0,1"}))
    assert short.status == "fail" and short.rules == ("too-few-chips",)
    assert "needs 4 chips; 2 visible" in short.summary


def test_registered() -> None:
    from checks.registry import all_checks

    found = {c.id: c for c in all_checks()}
    assert found["npu.hbm-fit"].category == "npu"
    assert found["npu.hbm-fit"].title == "Will the model fit in HBM"


# -- through the command line -------------------------------------------------------------


def _doctor(root: Any, env: dict[str, str], capsys: pytest.CaptureFixture[str],
            *extra: str) -> tuple[int, Any]:
    from machines import fixture_policy

    from checks.cli import main

    argv = ["--root", str(root.path), "--python", "/usr/bin/python3", "--json",
            "--policy", str(fixture_policy(root)), "--only", "npu.hbm-fit", *extra]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("checks.cli.os.environ", env)
        code = main(argv)
    return code, json.loads(capsys.readouterr().out)["results"][0]


def test_tp_option_on_the_command_line(fake_root: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from machines import A2, build_a2

    env = dict(build_a2(fake_root, A2()).env)
    index = json.loads((CODER / "model.safetensors.index.json").read_text())
    write_sharded_header_only(fake_root.path / "models" / "coder",
                              config_of("Qwen3-Coder-30B-A3B-Instruct"),
                              weight_map=index["weight_map"])
    code, one = _doctor(fake_root, env, capsys, "--model", "/models/coder")
    assert code == 2 and one["status"] == "fail"
    assert "tensor parallel 1 (policy)" in one["summary"]
    code, four = _doctor(fake_root, env, capsys, "--model", "/models/coder", "--tp", "4")
    assert code == 0 and four["status"] == "pass", four
    assert "4 x 910B4 at tensor parallel 4 (--tp)" in four["summary"]


@pytest.mark.parametrize("value", ["0", "-2", "two", "5000"])
def test_a_bad_tp_is_a_usage_error(fake_root: Any, capsys: pytest.CaptureFixture[str],
                                   value: str) -> None:
    from checks.cli import main

    with pytest.raises(SystemExit) as stop:
        main(["--root", str(fake_root.path), f"--tp={value}"])
    assert stop.value.code == 3
    err = capsys.readouterr().err
    assert "--tp" in err and "Traceback" not in err


# -- the engines' own plan: context, memory share, room outside the pool, DP and EP ----------


def test_without_max_model_len_vllm_sizes_for_the_models_maximum(tmp_path: Path) -> None:
    """vllm-project/vllm#19407: without --max-model-len vLLM takes max_position_embeddings
    (262,144 for the 2507/Coder checkpoints) and needs room for one request that long."""
    model = coder(tmp_path)
    unset = hbm_fit(ctx_for(model, reading(A2_8X32), tmp_path, target=vllm(model, tp=4,
                                                                               util=0.8)))
    assert unset.status == "fail" and unset.rules == ("context-does-not-fit",), unset
    assert "262,144 tokens (the model's maximum)" in unset.summary
    assert "max_position_embeddings 262,144 in config.json" in text_of(unset)
    assert "vllm-project/vllm#19407" in text_of(unset)
    twin = hbm_fit(ctx_for(model, reading(A2_8X32), tmp_path,
                           target=vllm(model, tp=4, util=0.8, max_len=32768)))
    assert twin.status == "pass", twin
    assert "32,768 tokens (command line)" in twin.summary


def test_the_policy_context_stays_for_a_target_that_is_not_vllm(tmp_path: Path) -> None:
    finding = hbm_fit(ctx_for(coder(tmp_path), reading(A2_8X32), tmp_path, tensor_parallel=4))
    assert "32,768 tokens (policy)" in finding.summary
    assert "no engine share applied" in text_of(finding)


def test_vllm_default_share_is_applied_and_said(tmp_path: Path) -> None:
    model = coder(tmp_path)
    finding = hbm_fit(ctx_for(model, reading(A2_8X32), tmp_path,
                              target=vllm(model, tp=4, max_len=32768)))
    assert finding.status == "pass", finding
    assert f"of {mb(int(30114 * MB * 0.9))} -> " in finding.summary
    assert "--gpu-memory-utilization unset: vllm's default 0.9 (vllm-project/vllm " \
        "vllm/config/cache.py @ c1d8642" in text_of(finding)


def test_mindie_default_fraction_and_its_environment(tmp_path: Path) -> None:
    model = coder(tmp_path)
    serving = ServingArgs(server="mindie", model_dir=Sourced(str(model), "modelWeightPath"),
                          world_size=Sourced(4, "worldSize"), max_model_len=Sourced(4096, "max"))
    target = Target("process", "process 7 (mindieservice_daemon)", "--pid 7", "/proc/7/environ",
                    serving=serving)
    unset = hbm_fit(ctx_for(model, reading(A2_8X32), tmp_path, target=target))
    assert "NPU_MEMORY_FRACTION unset: mindie's default 0.8" in text_of(unset)
    assert f"of {mb(int(30114 * MB * 0.8))} -> " in unset.summary
    given = hbm_fit(ctx_for(model, reading(A2_8X32), tmp_path, target=target,
                            env={"NPU_MEMORY_FRACTION": "0.5"}))
    assert given.status == "fail", given  # 14.6 GB weights + reserve in 15 GB
    assert "0.5 of the 30,114 MB the runtime sees (NPU_MEMORY_FRACTION=0.5 in the " \
        "environment)" in text_of(given)


def test_little_room_outside_the_pool_in_graph_mode_warns(tmp_path: Path) -> None:
    """vllm-project/vllm#19186, vllm-project/vllm-ascend#5020: a share close to 1 leaves graph
    capture and HCCL buffers no room, and the capture runs out of memory."""
    model = coder(tmp_path)
    high = hbm_fit(ctx_for(model, reading(A2_8X32), tmp_path,
                           target=vllm(model, tp=4, max_len=32768, util=0.99)))
    assert high.status == "warn" and high.rules == ("little-room-outside-pool",), high
    assert "little room outside the engine's pool: 301 MB" in high.summary
    assert "--enforce-eager" in high.remedy
    assert "graph capture on (no --enforce-eager)" in text_of(high)
    eager = hbm_fit(ctx_for(model, reading(A2_8X32), tmp_path, target=vllm(
        model, tp=4, max_len=32768, util=0.99, switches=("--enforce-eager",))))
    assert eager.status == "pass", eager
    assert "eager (`--enforce-eager` on the command line)" in text_of(eager)
    default = hbm_fit(ctx_for(model, reading(A2_8X32), tmp_path,
                              target=vllm(model, tp=4, max_len=32768)))
    assert default.status == "pass", default


def test_a_running_server_and_the_same_settings_not_running_agree(tmp_path: Path) -> None:
    """Measured for both: the held chips give what was free before the target started, the
    free chips what is free now; the same settings get the same pool."""
    model = coder(tmp_path)
    info = reading(A2_SERVING).info
    assert info is not None
    own = tuple(NpuUse(p.npu_id, p.chip_id, p.pid, p.memory_mb) for p in info.processes)
    running = hbm_fit(ctx_for(model, reading(A2_SERVING), tmp_path,
                              target=vllm(model, tp=8, max_len=32768, npus=own)))
    idle = hbm_fit(ctx_for(model, reading(A2_8X32), tmp_path,
                           target=vllm(model, tp=8, max_len=32768)))
    assert running.status == idle.status == "pass", (running, idle)
    assert "of 29,491 MB" in running.summary  # 0.9 x 32,768: nothing idle there
    assert f"of {mb(int(30114 * MB * 0.9))}" in idle.summary  # 0.9 x (32,768 - 2,654 idle)


def test_data_parallel_needs_chips_for_every_replica(tmp_path: Path) -> None:
    model = coder(tmp_path)
    finding = hbm_fit(ctx_for(model, reading(A2_8X32), tmp_path,
                              target=vllm(model, tp=4, dp=4, max_len=32768)))
    assert finding.status == "fail" and finding.rules == ("too-few-chips",), finding
    assert "tensor parallel 4 x pipeline parallel 1 x data parallel 4 needs 16 chips" \
        in finding.summary


def test_expert_parallel_splits_the_experts_over_tp_times_dp(tmp_path: Path) -> None:
    """--enable-expert-parallel: EP size = TP x DP (vLLM's expert parallel deployment docs);
    the routed experts of Qwen3-Coder-30B-A3B are most of its bytes."""
    model = coder(tmp_path)
    without = hbm_fit(ctx_for(model, reading(A2_8X32), tmp_path,
                              target=vllm(model, tp=2, dp=4, max_len=32768)))
    assert without.status == "fail" and without.rules == ("weights-do-not-fit",), without
    with_ep = hbm_fit(ctx_for(model, reading(A2_8X32), tmp_path, target=vllm(
        model, tp=2, dp=4, max_len=32768, switches=("--enable-expert-parallel",))))
    assert with_ep.status == "pass", with_ep
    assert "x data parallel 4, experts split over 8 chips (expert parallel)" in with_ep.summary
    text = text_of(with_ep)
    assert "routed experts (" in text and "split over TP x DP = 8 chips" in text


def test_no_memory_figures_at_all_skip(tmp_path: Path) -> None:
    text = (CORPUS_DIR / "npu-smi" / "049-info-25.2.0-300IDuo-310P3-2chips-same-busid-"
            "PARTIAL.txt").read_text()
    blank = text.replace("1529 / 44280", "NA          ").replace("1412 / 43693", "NA          ")
    finding = hbm_fit(ctx_for(bf16_model(tmp_path), parse_output(blank), tmp_path))
    assert finding.status == "skip", finding
    assert finding.rules == ("no-hbm-figures",)


# -- host RAM, by the rules vLLM applies -------------------------------------------------------


def with_host_memory(ctx: Context, total_gib: int, available_gib: int) -> Context:
    from probes.host_memory import HostMemory

    ctx.fact("host_memory", lambda: HostMemory(total_gib * 2**30, available_gib * 2**30))
    return ctx


@pytest.mark.parametrize(("swap", "status"), [("24", "fail"), ("8", "warn"), ("4", "pass")])
def test_swap_space_beyond_vllms_share_of_host_ram(tmp_path: Path, swap: str,
                                                    status: str) -> None:
    """Ksuriuri/index-tts-vllm#99, vllm-project/vllm#787: "Too large swap space": vLLM refuses
    swap space x TP above 70% of host memory and warns above 40%."""
    model = coder(tmp_path)
    target = vllm(model, tp=4, max_len=32768, switches=("--swap-space", swap))
    finding = hbm_fit(with_host_memory(ctx_for(model, reading(A2_8X32), tmp_path,
                                               target=target), 64, 60))
    assert finding.status == status, finding
    if status != "pass":
        assert finding.rules == ("host-ram-swap",)
        assert f"swap space {swap} GiB x tensor parallel 4" in finding.summary
    assert "host RAM: 64.0 GiB total, 60.0 GiB available (/proc/meminfo)" in text_of(finding)


def test_cpu_offload_needs_the_host_ram_and_frees_hbm(tmp_path: Path) -> None:
    model = coder(tmp_path)
    target = vllm(model, tp=4, max_len=32768, switches=("--cpu-offload-gb", "10"))
    short = hbm_fit(with_host_memory(ctx_for(model, reading(A2_8X32), tmp_path,
                                             target=target), 64, 30))
    assert short.status == "fail" and short.rules == ("host-ram-offload",), short
    assert "CPU offload 10 GiB x tensor parallel 4 = 40.0 GiB" in short.summary
    roomy = hbm_fit(with_host_memory(ctx_for(model, reading(A2_8X32), tmp_path,
                                             target=target), 256, 200))
    assert roomy.status == "pass", roomy
    assert f"per chip {mb(CODER_BYTES / 4 - 10 * 2**30)} weights" in roomy.summary


def test_loading_ram_is_said_to_be_not_in_our_data(tmp_path: Path) -> None:
    model = coder(tmp_path)
    finding = hbm_fit(with_host_memory(ctx_for(model, reading(A2_8X32), tmp_path,
                                               target=vllm(model, tp=4, max_len=32768)),
                                       64, 60))
    assert finding.status == "pass", finding
    assert "host RAM for loading the checkpoint itself: not in our data" in text_of(finding)


def test_data_parallel_local_counts_the_replicas_on_this_node(tmp_path: Path) -> None:
    """--data-parallel-size 4 over two nodes, 2 of them here: 8 chips here, not 16."""
    model = coder(tmp_path)
    finding = hbm_fit(ctx_for(model, reading(A2_8X32), tmp_path, target=vllm(
        model, tp=4, dp=4, max_len=32768, switches=("--data-parallel-size-local", "2"))))
    assert finding.status == "pass", finding
    assert "2 of them on this node" in text_of(finding)


def test_max_model_len_auto_is_not_sized_for_the_models_maximum(tmp_path: Path) -> None:
    """`--max-model-len auto` leaves the context to vLLM: the model's 262,144 is not assumed."""
    model = coder(tmp_path)
    finding = hbm_fit(ctx_for(model, reading(A2_8X32), tmp_path, target=vllm(
        model, tp=4, util=0.8, switches=("--max-model-len", "auto"))))
    assert finding.status == "pass", finding
    assert "32,768 tokens (policy)" in finding.summary
    assert "`--max-model-len auto` on the command line: vLLM picks the context" \
        in text_of(finding)
