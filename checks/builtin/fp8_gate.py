"""Can the chips of this machine serve an FP8 checkpoint as FP8?

Only a chip family whose row in `fp8_support` (checks/data/compat.yaml) says
`fp8_e4m3_compute: true` computes FP8 — Ascend 950 alone: the quantised-matmul API lists FP8
inputs for 950PR/950DT only (hicann/ops-nn matmul/quant_batch_matmul_v4/docs/
aclnnQuantMatmulV5.md @ e5c3fa9327ea). A chip name the doctor cannot place in a family is
unknown, never assumed either way.

What the serving stacks do with FP8 on the others: vllm-ascend refuses it (its plain FP8 config
raises NotImplementedError, vllm-project/vllm-ascend vllm_ascend/quantization/fp8_config.py @
182b75ea84ff; FP8 detection restricted to A5, vllm-project/vllm-ascend#12826), MindIE converts
the weights to BF16 offline before serving (Ascend/MindIE-LLM
examples/atb_models/examples/models/deepseek-v3/README.md @ 8b4871ad31f5).

This is about deployability only: a complete FP8 checkpoint on an A2 is a sound checkpoint that
cannot be served as FP8 there, not a broken one.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from checks import datafiles
from checks.builtin import facts
from checks.context import Context

GateStatus = Literal["fp8", "no-fp8", "unknown"]

# family key (as checks/data/compat.yaml soc_families names it) -> how a person says it
FAMILY_NAMES: Mapping[str, str] = {
    "A2": "A2", "A3": "A3", "A5_950": "Ascend 950", "A1_910": "first-generation 910",
    "310P": "310P", "310B": "310B", "310": "310",
}
ALTERNATIVES = ("serve the model's BF16 release or an msModelSlim W8A8 checkpoint (vllm-ascend "
                "--quantization ascend), or convert this one to BF16 offline as MindIE does "
                "(twice the weight memory, see npu.hbm-fit); FP8 is served as FP8 only on "
                "Ascend 950")
REMEDY = "keep this checkpoint, it is not broken: on this chip " + ALTERNATIVES


def chip_family(name: str) -> str | None:
    """The family of a chip name as npu-smi prints it, or None when the doctor cannot tell.

    npu-smi prints the A2 modules as 910B1..910B4-1, A3 dies as `Ascend910`, the 950 as
    `Ascend950PR`/`950DT`, the first-generation 910 as 910A/910ProB/910PremiumA, and the
    inference cards as 310/310P3/310B4 (the soc_families names in checks/data/compat.yaml,
    from Ascend/pytorch torch_npu/csrc/core/npu/NpuVariables.h @ 9e73e708ab93)."""
    bare = name.strip().removeprefix("Ascend").strip()
    if "950" in bare:
        return "A5_950"
    if bare.startswith("910B"):
        return "A2"
    if bare == "910" or bare.startswith("910_93"):
        return "A3"
    if bare.startswith(("910A", "910Pro", "910Premium")):
        return "A1_910"
    for prefix in ("310P", "310B"):
        if bare.startswith(prefix):
            return prefix
    return "310" if bare == "310" else None


@functools.lru_cache(maxsize=1)
def fp8_table() -> Mapping[str, bool]:
    """family -> whether it computes FP8 E4M3 (compat.yaml `fp8_support`)."""
    rows = datafiles.load("data/compat.yaml")["fp8_support"]
    return {key: bool(row["fp8_e4m3_compute"]) for key, row in rows.items()
            if isinstance(row, dict) and "fp8_e4m3_compute" in row}


@dataclass(frozen=True)
class Fp8Gate:
    """Whether the chips here serve FP8 as FP8, and one line saying why."""

    status: GateStatus
    reason: str
    chips: str = ""  # "8 x 910B4 (A2)"; "" without an NPU reading


def _label(name: str, family: str | None) -> str:
    return f"{name} ({FAMILY_NAMES.get(family or '', 'unknown family')})"


def judge_names(names: Iterable[str], server: str = "") -> Fp8Gate:
    """The gate for these chip names (pure: the tests feed it names)."""
    counted: dict[str, int] = {}
    for name in names:
        counted[name or "unknown"] = counted.get(name or "unknown", 0) + 1
    if not counted:
        return Fp8Gate("unknown", "npu-smi printed no chip names: cannot tell whether these "
                       "chips compute FP8 (only Ascend 950 does)")
    families = {name: chip_family(name) for name in counted}
    chips = ", ".join(f"{n} x {_label(name, families[name])}" for name, n in counted.items())
    table = fp8_table()
    blocked = [name for name, fam in families.items()
               if fam is not None and fam in table and not table[fam]]
    unknown = [name for name, fam in families.items() if fam is None or fam not in table]
    if blocked:
        where = "/".join(_label(name, families[name]) for name in blocked)
        return Fp8Gate("no-fp8", f"cannot be served as FP8 on {where}: no FP8 compute there "
                       f"(only Ascend 950 has it); {stacks(server)}", chips)
    if unknown:
        return Fp8Gate("unknown", f"chip name {', '.join(repr(n) for n in unknown)} is not one "
                       "the doctor knows: cannot tell whether it computes FP8 (only Ascend 950 "
                       "does)", chips)
    return Fp8Gate("fp8", "FP8 compute on Ascend 950", chips)


def stacks(server: str = "") -> str:
    """What the serving stacks do with an FP8 checkpoint on a chip without FP8."""
    vllm = "vllm-ascend refuses an FP8 checkpoint there"
    mindie = "MindIE converts it to BF16 offline before serving"
    if server == "vllm":
        return f"{vllm} (the target runs vLLM); {mindie}"
    if server == "mindie":
        return f"{mindie} (the target runs MindIE); {vllm}"
    return f"{vllm}; {mindie}"


def chip_names(ctx: Context) -> list[str] | None:
    """The chip names npu-smi shows, or None when there is no NPU reading."""
    reading = facts.npu(ctx)
    if reading.is_error or reading.kind != "info":
        return None
    return [str(chip.get("name") or "") for chip in reading.document.get("chips", [])]


def fp8_gate(ctx: Context, names: Iterable[str] | None = None) -> Fp8Gate:
    """The gate for `names` (the chips a deployment uses), else every chip npu-smi shows."""
    found = list(names) if names is not None else chip_names(ctx)
    if found is None:
        return Fp8Gate("unknown", "no NPU reading here: cannot tell whether the chips compute "
                       "FP8 (only Ascend 950 does)")
    return judge_names(found, ctx.target.serving.server)
