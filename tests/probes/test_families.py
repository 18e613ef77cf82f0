"""Each list of architectures, FP8 modes and tokenizer files exists once: every name the
packages use is the one table's (or the one formats module's) object, not a copy."""

from __future__ import annotations

import checks.builtin.checkpoint as checkpoint_check
import checks.builtin.hbm_plan as hbm_plan
import checks.builtin.tensor_coverage as tensor_coverage
import engine.options
import probes.model.config as model_config
import probes.model.memory as model_memory
import probes.model.reader
import probes.model.tensors as model_tensors
from probes.model import families, formats


def test_derived_family_lists_are_the_tables_objects() -> None:
    for name in ("FAMILIES", "FAMILY_BY_CLASS", "FAMILY_DEFAULTS", "HYBRID_FAMILIES",
                 "SHARED_EXPERT_FAMILIES"):
        assert getattr(model_config, name) is getattr(families, name), name
    assert model_tensors.FAMILIES is families.FAMILIES
    assert model_tensors.SHARED_EXPERT_FAMILIES is families.SHARED_EXPERT_FAMILIES
    assert tensor_coverage.FAMILIES is families.FAMILIES
    assert checkpoint_check.KNOWN_ARCHITECTURES is families.KNOWN_MODEL_TYPES
    assert hbm_plan.KV_MODEL_TYPES is families.KV_MODEL_TYPES
    assert not hasattr(hbm_plan, "KV_MODELLED")  # its own list of architectures is gone


def test_the_engine_runs_exactly_the_families_the_table_says() -> None:
    from engine.models import FAMILIES, SUPPORTED_ARCHITECTURES

    assert tuple(FAMILIES) == SUPPORTED_ARCHITECTURES == families.FAMILIES
    for name, family in FAMILIES.items():
        assert family.name == name


def test_every_row_is_consistent() -> None:
    names = [row.name for row in families.TABLE]
    assert len(names) == len(set(names))
    classes = [cls for row in families.TABLE for cls in row.classes]
    assert len(classes) == len(set(classes))
    for row in families.TABLE:
        assert row.kv_kind in (families.KV, families.KV_AND_LINEAR_STATE)
        assert (row.kv_kind == families.KV_AND_LINEAR_STATE) == row.hybrid, row.name
        assert not row.shared_expert or row.moe, row.name
        assert not row.engine_runs or row.classes, f"{row.name}: the engine runs it unnamed"


def test_a_config_is_recognised_through_the_table() -> None:
    config = model_config.parse_config({"architectures": ["Qwen3NextForCausalLM"],
                                        "model_type": "qwen3_next"})
    assert config.family == "qwen3_next"
    assert config.head_dim == families.BY_NAME["qwen3_next"].defaults["head_dim"]
    unknown = model_config.parse_config({"architectures": ["Qwen2ForCausalLM"],
                                         "model_type": "qwen2"})
    assert unknown.family == ""


def test_fp8_modes_and_tokenizer_files_exist_once() -> None:
    assert engine.options.FP8_MODES is formats.FP8_MODES
    assert model_memory.FP8_MODES is formats.FP8_MODES
    assert probes.model.reader.TOKENIZER_FILES is formats.TOKENIZER_FILES
