from __future__ import annotations

import json
import re
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from checks.builtin.checkpoint import checkpoint_format
from checks.builtin.fp8_gate import chip_family, fp8_table, judge_names
from checks.builtin.fp8_scales import derived_range, fp8_scales
from checks.context import Context
from checks.model import Finding
from checks.policy import load_policy
from probes.errors import NotRecorded
from probes.inventory import NpuReading
from probes.live import LiveHost
from probes.target.model import ServingArgs, Target
from tests.fp8_fixtures import (
    Tensors,
    bf16,
    bf16_model_tensors,
    encode_scales,
    fp8_model_tensors,
    model_config,
    write_model,
)
from tests.fp8_formats import FORMATS, tiny_config, tiny_tensors, write_tiny

Q0 = "model.layers.0.self_attn.q_proj"
O1 = "model.layers.1.self_attn.o_proj"
SHARD2 = "model-00002-of-00002.safetensors"


def ctx_for(model: Path | None, chips: list[str] | None = None, policy_text: str = "",
            tmp_path: Path | None = None, target: Target | None = None) -> Context:
    policy = None
    if policy_text and tmp_path is not None:
        policy = tmp_path / "policy.yaml"
        policy.write_text(policy_text)
    extra: dict[str, Any] = {} if target is None else {"target": target}
    ctx = Context(LiveHost(root="/", env={}), load_policy(policy), model_dir=model, **extra)
    if chips is not None:  # prime the shared npu fact instead of running npu-smi
        reading = NpuReading("info", {"chips": [{"name": n} for n in chips]})
        ctx.fact("npu", lambda: reading)
    return ctx


def text_of(finding: Finding) -> str:
    return finding.summary + "\n" + "\n".join(finding.evidence)


def with_scale(tensors: Tensors, name: str, edit: float, at: tuple[int, int] = (0, 0),
               dtype: str = "BF16") -> Tensors:
    """Decode the fixture's scales, plant one value and re-encode them."""
    scales = np.full((2, 3), 2e-4, dtype=np.float32) if "q_proj" in name else \
        np.full((3, 2), 2e-4, dtype=np.float32)
    scales[at] = edit
    tensors[name] = encode_scales(scales, dtype)
    return tensors


@pytest.fixture
def healthy(tmp_path: Path) -> Path:
    return write_model(tmp_path / "fp8", fp8_model_tensors())


def test_no_model_skips() -> None:
    ctx = ctx_for(None)
    assert fp8_scales(ctx).status == "skip" and "--model" in fp8_scales(ctx).summary
    assert fp8_scales(ctx).rules == ("no-model",)
    assert checkpoint_format(ctx).status == "skip"
    assert checkpoint_format(ctx).rules == ("no-model",)


def test_a_model_directory_not_in_the_recording_skips(tmp_path: Path) -> None:
    class Unrecorded(LiveHost):
        def kind(self, path: str):  # type: ignore[no-untyped-def]
            raise NotRecorded(path)

    ctx = Context(Unrecorded(root="/", env={}), load_policy(None), model_dir=tmp_path)
    for finding in (checkpoint_format(ctx), fp8_scales(ctx)):
        assert finding.status == "skip" and finding.rules == ("not-recorded",)
        assert "not recorded" in finding.summary


# -- fp8-scales: each format judged as it is meant ----------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_each_fp8_format_passes_both_checks(tmp_path: Path, fmt: str) -> None:
    """Before: compressed-tensors and per-tensor `fp8` failed ("has no ..._scale_inv")."""
    model = write_tiny(tmp_path / fmt, fmt)
    ctx = ctx_for(model, chips=["Ascend950PR"])
    scales = fp8_scales(ctx)
    assert scales.status == "pass", scales
    assert scales.summary.startswith("20 FP8 weights have sane") and scales.rules == ()
    fmt_finding = checkpoint_format(ctx)
    assert fmt_finding.status == "pass", fmt_finding
    assert "all 33 tensors config.json needs" in fmt_finding.summary


def test_formats_are_described(tmp_path: Path) -> None:
    expected = {"block": "block scales of 128x128 in X.weight_scale_inv",
                "channel": "per-channel scales in X.weight_scale (quantization_config: "
                           "compressed-tensors channel)",
                "tensor": "per-tensor scales in X.weight_scale, with input_scale",
                "autofp8": "per-tensor scales in X.weight_scale, with input_scale "
                           "(quantization_config: fp8 tensor)"}
    for fmt, words in expected.items():
        finding = fp8_scales(ctx_for(write_tiny(tmp_path / fmt, fmt)))
        assert words in text_of(finding), fmt


def _planted(fmt: str, name: str, value: float) -> Tensors:
    tensors = tiny_tensors(fmt)
    stored, dtype = tensors[name]
    values = stored.astype(np.float32) if dtype == "F32" else \
        (stored.astype(np.uint32) << 16).view(np.float32)
    values = values.copy()
    values.flat[0] = value
    tensors[name] = encode_scales(values, dtype)
    return tensors


@pytest.mark.parametrize("fmt", ["block", "channel", "tensor"])
@pytest.mark.parametrize(("value", "word", "status"), [
    (float("nan"), "NaN", "fail"), (float("inf"), "infinite", "fail"),
    (-1e-4, "negative", "fail"), (0.0, "zero", "warn")])
def test_bad_scale_values(tmp_path: Path, fmt: str, value: float, word: str,
                          status: str) -> None:
    """NaN/Inf/negative fail; zero warns (it fits an all-zero tile; before: fail)."""
    suffix = "weight_scale_inv" if fmt == "block" else "weight_scale"
    name = f"{O1}.{suffix}"
    model = write_tiny(tmp_path / "m", fmt, tensors=_planted(fmt, name, value))
    finding = fp8_scales(ctx_for(model))
    assert finding.status == status, finding
    assert f"{name}: 1 {word}" in finding.summary


def test_each_bad_value_names_its_rule(tmp_path: Path) -> None:
    name = f"{O1}.weight_scale_inv"

    def rules_for(value: float) -> tuple[str, ...]:
        tensors = _planted("block", name, value)
        return fp8_scales(ctx_for(write_tiny(tmp_path / repr(value), "block",
                                             tensors=tensors))).rules

    assert rules_for(float("nan")) == rules_for(float("inf")) == ("scale-not-finite",)
    assert rules_for(-1e-4) == ("scale-negative",)
    assert rules_for(0.0) == ("scale-zero",)


def test_channel_scale_of_the_wrong_shape_fails(tmp_path: Path) -> None:
    tensors = tiny_tensors("channel")
    tensors[f"{Q0}.weight_scale"] = encode_scales(np.full((256,), 2e-4), "F32")  # not [256, 1]
    finding = fp8_scales(ctx_for(write_tiny(tmp_path / "m", "channel", tensors=tensors)))
    assert finding.status == "fail"
    assert f"{Q0}.weight_scale: shape [256], expected [256, 1]" in finding.summary
    assert finding.rules == ("scale-shape",)


def test_static_activations_need_input_scales(tmp_path: Path) -> None:
    tensors = tiny_tensors("tensor")
    del tensors[f"{Q0}.input_scale"]
    finding = fp8_scales(ctx_for(write_tiny(tmp_path / "m", "tensor", tensors=tensors)))
    assert finding.status == "fail"
    assert f"{Q0}.weight: has no {Q0}.input_scale" in finding.summary
    assert finding.rules == ("scale-missing",)


def test_a_block_checkpoint_missing_its_grid_fails(tmp_path: Path) -> None:
    tensors = tiny_tensors("block")
    del tensors[f"{Q0}.weight_scale_inv"]
    finding = fp8_scales(ctx_for(write_tiny(tmp_path / "m", "block", tensors=tensors)))
    assert finding.status == "fail" and finding.rules == ("scale-missing",)
    assert f"{Q0}.weight: has no {Q0}.weight_scale_inv" in finding.summary


def test_layout_is_inferred_without_quantization_config(tmp_path: Path) -> None:
    config = tiny_config("channel")
    del config["quantization_config"]
    model = write_model(tmp_path / "m", tiny_tensors("channel"), config)
    finding = fp8_scales(ctx_for(model))
    assert finding.status == "pass", finding
    assert "inferred from the tensor names" in text_of(finding)


def test_fp32_and_fp16_block_scales_pass(tmp_path: Path) -> None:
    for dtype in ("F32", "F16"):
        model = write_model(tmp_path / dtype, fp8_model_tensors(scale_dtype=dtype))
        finding = fp8_scales(ctx_for(model))
        assert finding.status == "pass" and dtype in text_of(finding)


def test_bf16_model(tmp_path: Path) -> None:
    model = write_model(tmp_path / "bf16", bf16_model_tensors(), model_config(fp8=False))
    ctx = ctx_for(model)
    scales = fp8_scales(ctx)
    assert scales.status == "skip" and "not an FP8 checkpoint" in scales.summary
    assert scales.rules == ("not-fp8",)
    fmt = checkpoint_format(ctx)
    assert fmt.status == "pass", fmt
    assert "precision: BF16" in fmt.evidence and "shards: 2" in fmt.evidence


def test_wrong_block_shape_and_dtype_fail(tmp_path: Path) -> None:
    tensors = fp8_model_tensors()
    # a grid computed with floor division misses the ragged 64-column block
    tensors[f"{Q0}.weight_scale_inv"] = encode_scales(np.full((2, 2), 2e-4), "BF16")
    finding = fp8_scales(ctx_for(write_model(tmp_path / "shape", tensors)))
    assert finding.rules == ("scale-shape",)
    assert finding.status == "fail"
    assert f"{Q0}.weight_scale_inv: shape [2, 2], expected [2, 3]" in finding.summary
    tensors = fp8_model_tensors()
    tensors[f"{Q0}.weight_scale_inv"] = (np.ones((2, 3), dtype=np.int8), "I8")
    finding = fp8_scales(ctx_for(write_model(tmp_path / "dtype", tensors)))
    assert finding.status == "fail" and "dtype I8" in finding.summary
    assert finding.rules == ("scale-dtype",)


def test_outlier_scale_warns(tmp_path: Path) -> None:
    tensors = with_scale(fp8_model_tensors(), f"{Q0}.weight_scale_inv", 2e-4 * 5000)
    finding = fp8_scales(ctx_for(write_model(tmp_path / "m", tensors)))
    assert finding.status == "warn", finding
    assert f"{Q0}.weight_scale_inv: 1 outliers" in finding.summary
    assert finding.rules == ("scale-outlier",)


def test_policy_range_is_used(tmp_path: Path, healthy: Path) -> None:
    policy = "checkpoint:\n  fp8_scale_max: 1.0e-4\n"
    finding = fp8_scales(ctx_for(healthy, policy_text=policy, tmp_path=tmp_path))
    assert finding.status == "fail" and "outside [" in finding.summary
    assert finding.rules == ("scale-out-of-range",)
    assert any("policy checkpoint.fp8_scale_" in e for e in finding.evidence)


def test_derived_range_fp16_overflow(tmp_path: Path) -> None:
    low, high, _ = derived_range("float16")
    assert high == pytest.approx(65504 / 448) and low == pytest.approx(2.0**-15)
    e5m2_low, e5m2_high, _ = derived_range("bfloat16", "F8_E5M2")
    assert e5m2_high < derived_range("bfloat16")[1] and e5m2_low > 0
    config = model_config()
    config["torch_dtype"] = "float16"
    tensors = with_scale(fp8_model_tensors(), f"{O1}.weight_scale_inv", 200.0, dtype="F32")
    finding = fp8_scales(ctx_for(write_model(tmp_path / "m", tensors, config)))
    assert finding.status == "fail" and f"{O1}.weight_scale_inv: 1 outside" in finding.summary


def test_worst_tensors_are_listed_top_five(tmp_path: Path) -> None:
    tensors = fp8_model_tensors(layers=4)
    for i in range(4):
        for proj in ("q_proj", "o_proj"):
            with_scale(tensors, f"model.layers.{i}.self_attn.{proj}.weight_scale_inv",
                       float("nan"))
    finding = fp8_scales(ctx_for(write_model(tmp_path / "m", tensors, model_config())))
    assert finding.status == "fail"
    assert finding.summary.startswith("8 of 8 FP8 weights read")
    assert sum(": 1 NaN" in e for e in finding.evidence) == 5
    assert "... and 3 more tensors" in finding.evidence


def test_fp8_weight_listed_as_not_converted_warns(tmp_path: Path) -> None:
    config = model_config()
    config["quantization_config"]["modules_to_not_convert"].append(Q0)
    finding = fp8_scales(ctx_for(write_model(tmp_path / "m", fp8_model_tensors(), config)))
    assert finding.status == "warn" and "modules_to_not_convert" in finding.summary
    assert finding.rules == ("listed-not-converted",)


# -- missing shards are said, never counted as scale problems -----------------------------


def test_a_missing_shard_is_named_not_counted_as_a_scale_problem(healthy: Path) -> None:
    (healthy / SHARD2).unlink()
    scales = fp8_scales(ctx_for(healthy, chips=["Ascend950PR"]))
    # before: the missing shard was "1 of N FP8 weights with scale problems"
    assert scales.status == "warn", scales
    assert "scale problems" not in scales.summary
    assert scales.summary.startswith("2 FP8 weights have sane block scales; 1 of 2 shards "
                                     "missing or unreadable")
    assert SHARD2 in scales.summary and "were not checked" in scales.summary
    assert scales.rules == ("shards-not-checked",)


def test_scale_problems_and_missing_shards_are_said_apart(tmp_path: Path) -> None:
    tensors = with_scale(fp8_model_tensors(), f"{Q0}.weight_scale_inv", float("nan"))
    model = write_model(tmp_path / "m", tensors)
    (model / SHARD2).unlink()
    finding = fp8_scales(ctx_for(model))
    assert finding.status == "fail"
    assert finding.summary.startswith("1 of 2 FP8 weights read have scale problems (1 of 2 "
                                      "shards missing or unreadable: not checked); worst ")
    assert finding.rules == ("scale-not-finite", "shards-not-checked")


def test_no_shard_at_all_is_not_a_mislabelled_checkpoint(tmp_path: Path) -> None:
    model = write_tiny(tmp_path / "m", "block")
    for shard in model.glob("model-*.safetensors"):
        shard.unlink()
    finding = fp8_scales(ctx_for(model))
    # before: "quant_method is fp8 but no tensor is stored as F8_E4M3"
    assert finding.status == "skip"
    assert "F8_E4M3" not in finding.summary
    assert finding.summary == ("no FP8 weight could be read: 2 of 2 shards are missing or "
                               "unreadable (see checkpoint.format)")
    assert finding.rules == ("weights-not-here",)


def test_an_fp8_config_without_fp8_tensors_warns(tmp_path: Path) -> None:
    model = write_tiny(tmp_path / "m", None)
    (model / "config.json").write_text(json.dumps(tiny_config("block")))
    finding = fp8_scales(ctx_for(model))
    assert finding.status == "warn" and "no tensor is stored as 8-bit float" in finding.summary
    assert finding.rules == ("no-fp8-tensors",)


# -- checkpoint.format: integrity ----------------------------------------------------------


def test_format_missing_shard_says_what_is_missing(tmp_path: Path) -> None:
    model = write_tiny(tmp_path / "m", "block")
    (model / SHARD2).unlink()
    finding = checkpoint_format(ctx_for(model, chips=["Ascend950PR"]))
    assert finding.status == "fail"
    assert finding.summary.startswith("1 of 2 shards named by model.safetensors.index.json are "
                                      f"missing: {SHARD2}; holds ")
    assert re.search(r"holds \d+ of the 33 tensors config\.json needs \(\d+ in the shards that "
                     r"are missing or unreadable\)", finding.summary)
    assert "re-download" in finding.remedy
    assert finding.rules == ("shards-missing", "tensors-missing")


def test_format_fails_a_shard_holding_2_of_the_tensors_needed(tmp_path: Path) -> None:
    """Before: a single shard holding 2 of the 33 tensors passed ("1 shards complete")."""
    tensors = dict(list(tiny_tensors(None).items())[:2])
    model = write_model(tmp_path / "m", tensors, tiny_config(None), shards=1)
    finding = checkpoint_format(ctx_for(model))
    assert finding.status == "fail"
    assert finding.summary.startswith("holds 2 of the 33 tensors config.json needs (31 in no "
                                      "shard, e.g. ")
    assert finding.rules == ("tensors-missing",)


def test_format_counts_fused_experts(tmp_path: Path) -> None:
    """Qwen3.5/3.6 BF16 releases store a layer's experts as one gate_up_proj/down_proj."""
    tensors = tiny_tensors(None)
    for layer in (0, 1):
        prefix = f"model.layers.{layer}.mlp.experts."
        for name in [n for n in tensors if n.startswith(prefix)]:
            del tensors[name]
        tensors[prefix + "gate_up_proj"] = bf16(np.zeros((2, 256, 256)))
        tensors[prefix + "down_proj"] = bf16(np.zeros((2, 256, 128)))
    model = write_model(tmp_path / "m", tensors, tiny_config(None))
    finding = checkpoint_format(ctx_for(model))
    assert finding.status == "pass", finding
    assert "all 33 tensors config.json needs" in finding.summary


def test_format_fails_a_shard_the_loader_refuses(tmp_path: Path) -> None:
    model = write_tiny(tmp_path / "m", None, shards=1)
    shard = model / "model.safetensors"
    blob = shard.read_bytes()
    size = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8:8 + size])
    first, second = sorted((k for k in header if k != "__metadata__"),
                           key=lambda k: header[k]["data_offsets"][0])[:2]
    header[second]["data_offsets"] = list(header[first]["data_offsets"])  # overlap
    header[second]["shape"], header[second]["dtype"] = header[first]["shape"], \
        header[first]["dtype"]
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    shard.write_bytes(struct.pack("<Q", len(text)) + text + blob[8 + size:])
    from safetensors import safe_open

    with pytest.raises(Exception):  # noqa: B017  (the library's own refusal, any type)
        safe_open(str(shard), "np")
    finding = checkpoint_format(ctx_for(model))
    assert finding.status == "fail"
    assert "claim the same bytes" in finding.summary and "a loader refuses" in finding.summary
    assert finding.rules[0] == "shard-refused"


def test_format_truncated_shard_fails(healthy: Path) -> None:
    shard = healthy / SHARD2
    shard.write_bytes(shard.read_bytes()[:-100])
    ctx = ctx_for(healthy, chips=["Ascend950PR"])
    finding = checkpoint_format(ctx)
    assert finding.status == "fail"
    assert f"shard {SHARD2} is" in finding.summary and "truncated" in finding.summary
    assert finding.rules == ("shard-size",)
    scales = fp8_scales(ctx)  # the last tensor of the shard lost its tail
    assert scales.status in ("pass", "fail") and "error" not in scales.summary.lower()


def test_unreadable_scale_bytes_fail_fp8_scales(tmp_path: Path) -> None:
    tensors = fp8_model_tensors()
    model = write_model(tmp_path / "m", {f"{Q0}.weight": tensors[f"{Q0}.weight"],
                                         f"{Q0}.weight_scale_inv":
                                         tensors[f"{Q0}.weight_scale_inv"]}, shards=1)
    shard = model / "model.safetensors"
    blob = shard.read_bytes()
    header_end = 8 + int.from_bytes(blob[:8], "little")
    shard.write_bytes(blob[: header_end + 4])  # keeps 4 of the data bytes: no tensor is whole
    finding = fp8_scales(ctx_for(model))
    assert finding.status == "fail" and "truncated" in finding.summary
    assert finding.rules == ("scale-unreadable",)


def test_format_unknown_architecture_warns(tmp_path: Path) -> None:
    config = model_config(fp8=False, model_type="gpt_oss", architecture="GptOssForCausalLM")
    model = write_model(tmp_path / "m", bf16_model_tensors(), config)
    finding = checkpoint_format(ctx_for(model))
    assert finding.status == "warn" and "gpt_oss" in finding.summary
    assert "qwen3_5_moe" in finding.summary and finding.rules == ("unknown-architecture",)


def test_format_broken_config_fails(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("not json")
    ctx = ctx_for(tmp_path)
    finding = checkpoint_format(ctx)
    assert finding.status == "fail" and "config.json: not valid JSON" in finding.summary
    assert finding.rules == ("unreadable",)
    assert fp8_scales(ctx).status == "skip" and fp8_scales(ctx).rules == ("model-unreadable",)


# -- checkpoint.format: FP8 deployability, apart from integrity ----------------------------


@pytest.mark.parametrize(("chip", "family"), [
    ("910B4", "A2"), ("910B3", "A2"), ("Ascend910", "A3"), ("310P3", "310P"),
    ("910A", "first-generation 910"), ("910ProB", "first-generation 910"), ("310B4", "310B"),
    ("310", "310")])
def test_sound_fp8_on_a_chip_without_fp8_is_not_broken(tmp_path: Path, chip: str,
                                                       family: str) -> None:
    """Before: 310P, the first-generation 910 and unknown names passed; A2/A3 read like a
    broken checkpoint."""
    finding = checkpoint_format(ctx_for(write_tiny(tmp_path / "m", "block"), chips=[chip] * 2))
    assert finding.status == "fail"
    assert finding.summary.startswith("sound FP8 (block 128x128) checkpoint (2 shards complete, "
                                      "all 33 tensors config.json needs) that cannot be served "
                                      f"as FP8 on {chip} ({family})")
    assert "vllm-ascend refuses an FP8 checkpoint there" in finding.summary
    assert "MindIE converts it to BF16 offline" in finding.summary
    assert finding.remedy.startswith("keep this checkpoint, it is not broken")
    assert "re-download" not in finding.remedy and finding.rules == ("fp8-not-servable",)
    assert "msModelSlim W8A8" in finding.remedy and "--quantization ascend" in finding.remedy


@pytest.mark.parametrize(("chip", "rules"), [
    ("910B4", ("unreadable", "fp8-not-servable")),
    ("Ascend950PR", ("unreadable",)),
])
def test_an_fp8_config_is_gated_when_the_shards_cannot_be_read(
        tmp_path: Path, chip: str, rules: tuple[str, ...]) -> None:
    """config.json's quantization_config alone says FP8: the chip's verdict does not need the
    shards (an A2 refuses it, the 950 computes FP8)."""
    model = write_tiny(tmp_path / "m", "block")
    for shard in model.glob("*.safetensors*"):
        shard.unlink()
    finding = checkpoint_format(ctx_for(model, chips=[chip]))
    assert finding.status == "fail" and finding.rules == rules, finding
    assert finding.summary.startswith("cannot read the checkpoint")


@pytest.mark.parametrize("fmt", ["channel", "tensor"])
def test_compressed_tensors_fp8_is_gated_too(tmp_path: Path, fmt: str) -> None:
    finding = checkpoint_format(ctx_for(write_tiny(tmp_path / fmt, fmt), chips=["910B4"]))
    assert finding.status == "fail" and "cannot be served as FP8 on 910B4 (A2)" in \
        finding.summary


def test_the_target_server_is_named(tmp_path: Path) -> None:
    target = Target("process", "process 1 (vllm serve)", "--pid 1", "/proc/1/environ",
                    serving=ServingArgs(server="vllm"))
    finding = checkpoint_format(ctx_for(write_tiny(tmp_path / "m", "block"), chips=["910B4"],
                                        target=target))
    assert "vllm-ascend refuses an FP8 checkpoint there (the target runs vLLM)" in \
        finding.summary


def test_unknown_chip_names_warn(tmp_path: Path) -> None:
    finding = checkpoint_format(ctx_for(write_tiny(tmp_path / "m", "block"), chips=["xxx"]))
    assert finding.status == "warn" and finding.rules == ("fp8-unknown-chip",)
    assert "chip name 'xxx' is not one the doctor knows" in finding.summary


def test_fp8_on_950_passes_and_mixed_boxes_fail(tmp_path: Path) -> None:
    model = write_tiny(tmp_path / "m", "block")
    finding = checkpoint_format(ctx_for(model, chips=["Ascend950PR"]))
    assert finding.status == "pass", finding
    assert "precision: FP8 (block 128x128)" in finding.evidence
    assert "architecture: qwen3_moe (Qwen3MoeForCausalLM)" in finding.evidence
    size = next(e for e in finding.evidence if e.startswith("size of the shards read: "))
    assert re.fullmatch(r"size of the shards read: [0-9,]+ bytes \([0-9.]+ GiB\)", size), size
    mixed = checkpoint_format(ctx_for(model, chips=["Ascend950PR", "910B4"]))
    assert mixed.status == "fail" and "910B4 (A2)" in mixed.summary


def test_fp8_without_npu_warns(tmp_path: Path) -> None:
    finding = checkpoint_format(ctx_for(write_tiny(tmp_path / "m", "block")))  # no npu-smi
    assert finding.status == "warn"
    assert "no NPU reading here" in finding.summary and "only Ascend 950" in finding.summary
    assert finding.summary not in finding.evidence  # one problem: said once, not twice


def test_broken_fp8_on_a2_says_both_apart(tmp_path: Path) -> None:
    model = write_tiny(tmp_path / "m", "block")
    (model / SHARD2).unlink()
    finding = checkpoint_format(ctx_for(model, chips=["910B4"]))
    assert finding.status == "fail" and finding.summary.startswith("1 of 2 shards")
    assert "cannot be served as FP8 on 910B4" not in finding.summary  # integrity first
    assert any("cannot be served as FP8 on 910B4 (A2)" in e for e in finding.evidence)
    assert finding.remedy.startswith("re-download the shards named above")
    assert "once it is complete, it still cannot be served as FP8" in finding.remedy


# -- the gate's data ----------------------------------------------------------------------


def test_gate_is_driven_by_the_compat_table() -> None:
    table = fp8_table()
    assert table["A5_950"] is True
    assert {k for k, v in table.items() if not v} == {"A2", "A3", "A1_910", "310P", "310B", "310"}
    assert chip_family("Ascend950PR") == "A5_950" and chip_family("910B4-1") == "A2"
    assert chip_family("Ascend910") == "A3" and chip_family("Ascend910_9391") == "A3"
    assert chip_family("xxx") is None and chip_family("") is None
    assert judge_names(["Ascend950DT"]).status == "fp8"
    assert judge_names([]).status == "unknown"


# -- msModelSlim W8A8 / W4A8 checkpoints ------------------------------------------------------
# quant_model_description.json beside int8 shards, as vllm-ascend's `--quantization ascend`
# loader reads it (vllm-project/vllm-ascend vllm_ascend/quantization/modelslim_config.py)


def slim_tensors(layers: int = 2) -> Tensors:
    """W8A8_DYNAMIC linears (int8 weight, float32 per-channel scale and offset) beside float
    norms and embeddings, as msModelSlim writes them."""
    rng = np.random.default_rng(0)
    tensors: Tensors = {"model.embed_tokens.weight": bf16(rng.standard_normal((64, 128)))}
    for i in range(layers):
        prefix = f"model.layers.{i}.self_attn.q_proj"
        weight = rng.integers(-128, 127, size=(256, 128), dtype=np.int8)
        tensors[f"{prefix}.weight"] = (weight, "I8")
        tensors[f"{prefix}.weight_scale"] = (np.full((256, 1), 1e-3, np.float32), "F32")
        tensors[f"{prefix}.weight_offset"] = (np.zeros((256, 1), np.float32), "F32")
        tensors[f"model.layers.{i}.input_layernorm.weight"] = bf16(np.ones(128))
    return tensors


def slim_description(tensors: Tensors, kind: str = "W8A8_DYNAMIC") -> dict[str, str]:
    described = {"model_quant_type": kind, "version": "1.0.0"}
    for name, (_, dtype) in tensors.items():
        described[name] = kind if dtype in ("I8", "F32") else "FLOAT"
    return described


def slim_model(tmp_path: Path, description: dict[str, str] | None = None,
               tensors: Tensors | None = None, **config: Any) -> Path:
    tensors = tensors if tensors is not None else slim_tensors()
    directory = write_model(tmp_path / "w8a8", tensors, {**model_config(fp8=False), **config})
    if description is not None:
        (directory / "quant_model_description.json").write_text(json.dumps(description))
    return directory


def vllm_target(model: Path, *flags: str) -> Target:
    from probes.target.parts import ProcessInfo, Sourced

    serving = ServingArgs(server="vllm", model=Sourced(str(model), "cmdline"),
                          model_dir=Sourced(str(model), "cmdline"))
    return Target("process", "process 9 (vllm serve)", "--pid 9", "/proc/9/environ",
                  process=ProcessInfo(9, ("vllm", "serve", str(model), *flags)),
                  serving=serving)


def test_a_sound_msmodelslim_checkpoint_served_with_quantization_ascend_passes(
        tmp_path: Path) -> None:
    model = slim_model(tmp_path, slim_description(slim_tensors()))
    finding = checkpoint_format(ctx_for(model, target=vllm_target(
        model, "--quantization", "ascend")))
    assert finding.status == "pass", finding
    assert finding.summary.startswith("W8A8-int8")
    text = text_of(finding)
    assert "model_quant_type W8A8_DYNAMIC, 9 tensors described, 6 quantised" in text
    assert "`--quantization ascend` on the command line: the msModelSlim loader" in text


def test_quantization_ascend_without_a_description_fails(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#2290: an msModelSlim output served with --quantization ascend
    whose directory holds no quant_model_description.json (here: an older file name)."""
    model = slim_model(tmp_path)
    (model / "quant_model_description_w8a8.json").write_text(
        json.dumps(slim_description(slim_tensors())))
    finding = checkpoint_format(ctx_for(model, target=vllm_target(
        model, "--quantization", "ascend")))
    assert finding.status == "fail", finding
    assert finding.rules == ("modelslim-description-missing",)
    assert "quant_model_description_w8a8.json there" in finding.summary
    # the healthy twin: the same file under the name the loader reads
    (model / "quant_model_description.json").write_text(
        json.dumps(slim_description(slim_tensors())))
    assert checkpoint_format(ctx_for(model, target=vllm_target(
        model, "--quantization", "ascend"))).status == "pass"


def test_int8_weights_without_any_description_fail(tmp_path: Path) -> None:
    finding = checkpoint_format(ctx_for(slim_model(tmp_path)))
    assert finding.status == "fail" and finding.rules == ("modelslim-description-missing",)
    assert "2 int8 weights" in finding.summary


def test_a_description_of_other_tensors_fails(tmp_path: Path) -> None:
    """A description copied from another msModelSlim run: names and types disagree."""
    described = slim_description(slim_tensors(layers=3))  # one layer more than the shards
    described["model.layers.0.input_layernorm.weight"] = "W8A8_DYNAMIC"  # a float as int8
    described["model.layers.1.self_attn.q_proj.weight"] = "FLOAT"  # an int8 weight as float
    del described["model.layers.0.self_attn.q_proj.weight_scale"]  # never looked up: fine
    del described["model.embed_tokens.weight"]  # looked up: an embedding layer's weight
    model = slim_model(tmp_path, described)
    finding = checkpoint_format(ctx_for(model))
    assert finding.status == "fail" and finding.rules == ("modelslim-tensors-mismatch",)
    assert "weight_scale" not in finding.summary.split("described tensors")[0]
    for part in ("1 weights not described (model.embed_tokens.weight)",
                 "4 described tensors are in no shard",
                 "1 weights described as quantised are stored as floats",
                 "1 tensors described as FLOAT are stored as integers"):
        assert part in finding.summary, finding.summary


def test_a_conflicting_quantization_config_fails(tmp_path: Path) -> None:
    """vllm-project/vllm-ascend#719: msModelSlim's newer format carries the quantisation in
    the description, and a quantization_config with a quant_method takes precedence."""
    model = slim_model(tmp_path, slim_description(slim_tensors()),
                       quantization_config={"quant_method": "compressed-tensors"})
    finding = checkpoint_format(ctx_for(model))
    assert finding.status == "fail" and finding.rules == ("modelslim-conflicting-config",)
    assert "quant_method compressed-tensors" in finding.summary


def with_vllm_ascend(ctx: Context, site: Path, auto_detect: bool | None) -> Context:
    """The judged interpreter holds vllm-ascend at `site`; its quantization utils define the
    auto-detection (True), do not (False), or are not there (None)."""
    from probes.host import PythonEnvironment

    if auto_detect is not None:
        utils = site / "vllm_ascend" / "quantization" / "utils.py"
        utils.parent.mkdir(parents=True, exist_ok=True)
        utils.write_text("def maybe_auto_detect_quantization(vllm_config):\n    pass\n"
                         if auto_detect else "def get_quant_method(name):\n    pass\n")
    env = PythonEnvironment("/usr/bin/python3", "3.11", {"vllm-ascend": "0.11.0"},
                            locations={"vllm-ascend": str(site)})
    ctx.fact("python", lambda: env)
    return ctx


@pytest.mark.parametrize(("auto_detect", "status"), [(False, "fail"), (None, "warn"),
                                                     (True, "pass")])
def test_vllm_without_quantization_ascend(tmp_path: Path, auto_detect: bool | None,
                                          status: str) -> None:
    """Before vllm-project/vllm-ascend#7111 the description is read only under
    --quantization ascend; a vllm-ascend with maybe_auto_detect_quantization needs no flag."""
    model = slim_model(tmp_path, slim_description(slim_tensors()))
    ctx = with_vllm_ascend(ctx_for(model, target=vllm_target(model)), tmp_path / "site",
                           auto_detect)
    finding = checkpoint_format(ctx)
    assert finding.status == status, finding
    if status == "pass":
        assert "detects quant_model_description.json itself" in text_of(finding)
    else:
        assert finding.rules == ("modelslim-flag-missing",)
        assert "--quantization ascend" in finding.remedy


def without_shards(model: Path) -> Path:
    for shard in model.glob("*.safetensors*"):
        shard.unlink()
    return model


@pytest.mark.parametrize(("flags", "rules"), [
    ((), ("unreadable", "modelslim-flag-missing")),
    (("--quantization", "ascend"), ("unreadable",)),
])
def test_a_description_is_judged_when_the_shards_cannot_be_read(
        tmp_path: Path, flags: tuple[str, ...], rules: tuple[str, ...]) -> None:
    """No weights to read (not downloaded, or not mounted where the doctor runs): config.json,
    the msModelSlim description and the command line still tell a W8A8 checkpoint served
    without --quantization ascend."""
    model = without_shards(slim_model(tmp_path, slim_description(slim_tensors())))
    ctx = with_vllm_ascend(ctx_for(model, target=vllm_target(model, *flags)),
                           tmp_path / "site", False)
    finding = checkpoint_format(ctx)
    assert finding.status == "fail" and finding.rules == rules, finding
    assert finding.summary.startswith("cannot read the checkpoint")
    assert ("--quantization ascend" in finding.remedy) == (not flags)


def test_the_overall_type_alone_is_enough_to_ask_for_the_flag(tmp_path: Path) -> None:
    model = without_shards(slim_model(tmp_path, {"model_quant_type": "W8A8"}))
    ctx = with_vllm_ascend(ctx_for(model, target=vllm_target(model)), tmp_path / "site", None)
    finding = checkpoint_format(ctx)
    assert finding.rules == ("unreadable", "modelslim-flag-missing"), finding


def test_a_float_checkpoint_without_shards_is_only_unreadable(tmp_path: Path) -> None:
    model = without_shards(slim_model(tmp_path))
    finding = checkpoint_format(ctx_for(model, target=vllm_target(model)))
    assert finding.status == "fail" and finding.rules == ("unreadable",)


def test_another_quantization_method_fails(tmp_path: Path) -> None:
    model = slim_model(tmp_path, slim_description(slim_tensors()))
    other = checkpoint_format(ctx_for(model, target=vllm_target(model, "-q", "awq")))
    assert other.status == "fail" and "`-q awq` on the command line" in other.summary
    assert other.rules == ("modelslim-flag-missing",)


def test_a_quantization_config_without_quant_method_selects_ascend(tmp_path: Path) -> None:
    model = slim_model(tmp_path, slim_description(slim_tensors()),
                       quantization_config={"group_size": 0})
    finding = checkpoint_format(with_vllm_ascend(ctx_for(model, target=vllm_target(model)),
                                                 tmp_path / "site", False))
    assert finding.status == "pass", finding
    assert "which vllm-ascend takes as `ascend`" in text_of(finding)


def test_a_description_without_model_quant_type_warns(tmp_path: Path) -> None:
    described = slim_description(slim_tensors())
    del described["model_quant_type"]
    finding = checkpoint_format(ctx_for(slim_model(tmp_path, described)))
    assert finding.status == "warn" and finding.rules == ("modelslim-no-quant-type",)


def test_an_unreadable_description_fails(tmp_path: Path) -> None:
    model = slim_model(tmp_path)
    (model / "quant_model_description.json").write_text("{not json")
    finding = checkpoint_format(ctx_for(model))
    assert finding.status == "fail" and finding.rules == ("modelslim-description-unreadable",)
    assert "not valid JSON" in finding.summary


def test_a_float_checkpoint_is_not_judged_as_msmodelslim(tmp_path: Path) -> None:
    model = write_model(tmp_path / "bf16", bf16_model_tensors(), model_config(fp8=False))
    finding = checkpoint_format(ctx_for(model, target=vllm_target(model)))
    assert finding.status == "pass", finding
    assert not any("modelslim" in r for r in finding.rules)


@pytest.mark.parametrize(("shards", "said"), [(1, "1 shard complete"), (2, "2 shards complete")])
def test_the_shard_count_reads_as_english(tmp_path: Path, shards: int, said: str) -> None:
    passing = checkpoint_format(ctx_for(write_tiny(tmp_path / "m", "block", shards=shards),
                                        chips=["Ascend950PR"]))
    assert passing.status == "pass" and f"checkpoint, {said}, all 33 tensors" in passing.summary
    failing = checkpoint_format(ctx_for(tmp_path / "m", chips=["910B4"]))
    assert f"checkpoint ({said}, all 33 tensors" in failing.summary


class _CountingHost(LiveHost):
    """A live host that counts its reads: a batch (read_ranges) or one range (read_bytes)."""

    def __init__(self, batched: bool) -> None:
        super().__init__(root="/", env={})
        self.batches: list[int] = []
        self.singles = 0
        if not batched:  # a host with read_bytes only, as a recording is
            self.read_ranges = None  # type: ignore[assignment,method-assign]

    def read_ranges(self, path: str, ranges: Any) -> list[bytes]:
        self.batches.append(len(ranges))
        return super().read_ranges(path, ranges)

    def read_bytes(self, path: str, offset: int = 0, length: int | None = None) -> bytes:
        self.singles += 1
        return super().read_bytes(path, offset, length)


@pytest.mark.parametrize("cut", [0, 100])
def test_fp8_scales_reads_each_shard_once_and_judges_alike(healthy: Path, cut: int) -> None:
    if cut:  # the last tensor of the second shard loses its tail
        shard = healthy / SHARD2
        shard.write_bytes(shard.read_bytes()[:-cut])
    findings = []
    for batched in (True, False):
        host = _CountingHost(batched)
        ctx = Context(host, load_policy(None), model_dir=healthy)
        findings.append(fp8_scales(ctx))
        if batched:  # two shards: one batch each, no scale read alone
            assert len(host.batches) == 2 and sum(host.batches) > 2
            scale_reads = host.singles
        else:
            assert host.singles > scale_reads + 2  # one read per scale
    assert findings[0] == findings[1]
