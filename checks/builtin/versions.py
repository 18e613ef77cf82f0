"""versions.parity: driver, firmware, CANN, NNAL, torch, torch_npu, vllm-ascend, MindIE agree.

Every pairing is judged against the tables of checks/data/compat.yaml (checks.builtin.compat),
each only when both of its sides were found; what was not found is said in the evidence.
What a vendor document declares is judged strictly (outside it: fail); what is only inferred
from installed files (the `compatible_version*` fields, whose meaning no vendor document
states) or only tested together, never declared, is a warning at most. Version-suffix rules
("last two digits") do not exist: torch_npu follows torch's numbering and drivers the HDK's.

The packages are those of the judged interpreter (facts.python: `--python`, or the target's):
one that cannot be inspected, or that holds no torch_npu, is a warning, never a pass.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from checks.builtin import facts
from checks.builtin.compat import (
    compat_data,
    listed,
    mindie_pairing,
    product_of,
    release_row,
    row_for,
    same,
    vllm_pairing,
    vllm_tested_cann,
)
from checks.builtin.facts import stack
from checks.builtin.versions_container import judge_container_driver
from checks.builtin.versions_driver import (
    judge_driver_cann,
    judge_driver_firmware,
    judge_loaded_driver,
)
from checks.builtin.versions_installed import nothing_installed, read_installed
from checks.builtin.versions_model import Installed, Judgement
from checks.builtin.versions_requires import judge_requirements
from checks.context import Context
from checks.model import Finding, Status
from probes.stack import toolkit_dir
from probes.versions import torch_base, try_parse_version

if TYPE_CHECKING:
    pass

__all__ = ["Judgement", "compat_data", "versions_parity"]


# The check's rules, by name -> the statuses they give; its playbook lists the same rules under
# "What the check does" (tests/checks/test_check_rules.py); each tags the findings it decides.
# "policy": the status policy versions.unknown_is sets (warn by default).
CHECK_RULES: dict[str, dict[str, str]] = {
    "versions.parity": {
        "nothing-installed": "skip",  # versions_installed.nothing_installed
        "version-file-unusable": "warn",  # versions_installed.read_installed
        "interpreter-not-judged": "warn",  # judge_interpreter
        "firmware-driver-fields": "warn",  # judge_driver_firmware (derived)
        "driver-hdk-table": "warn/fail",  # _driver_by_table, _by_minimum, _outside_declared
        "recommended-pair": "warn",  # _by_recommended_pair
        "innerversion-family": "warn",  # _driver_by_family (derived)
        "loaded-driver": "warn",  # judge_loaded_driver
        "container-driver-mount": "warn",  # versions_container.judge_container_driver
        # judge_driver_cann, judge_torch_npu_cann, judge_vllm_ascend, judge_mindie
        "not-in-the-data": "policy",
        "kernels-toolkit": "warn",  # judge_kernels
        "nnal-equals-cann": "fail",  # judge_nnal
        "torch-npu-build": "warn/fail",  # judge_torch
        "torch-npu-cann": "warn/fail",  # judge_torch_npu_cann, _judge_declared_range
        "vllm-ascend-row": "fail",  # judge_vllm_ascend
        "mindie-cann": "fail",  # judge_mindie
        "pip-check": "warn",  # versions_requires.judge_requirements
        # judge_toolchain (checks.builtin.toolchain, checks/data/toolchain.yaml)
        "nnal-required": "fail",
        "triton-ascend-required": "fail",
        "atb-abi": "fail",
        "bisheng-not-found": "warn",
        "soc-build": "fail",
    },
}
PYTHON_REMEDY = ("Run the doctor with --python set to the interpreter that serves the model "
                 "(e.g. the virtualenv of `vllm serve`).")


def _unknown_is(ctx: Context) -> Status:
    # policy versions.unknown_is: a version newer than the data is a warning by default
    value = str(ctx.policy.get("versions", "unknown_is"))
    return value if value in ("pass", "warn", "fail") else "warn"  # type: ignore[return-value]


# ----------------------------------------------------------------------------- the interpreter


def judge_interpreter(inst: Installed, j: Judgement) -> None:
    """The packages side is judged only when it was read and holds torch_npu."""
    if inst.python_error:
        j.add("warn", f"torch_npu not judged: the packages of {inst.interpreter} could not be "
              f"read ({inst.python_error})", PYTHON_REMEDY, rules=("interpreter-not-judged",))
    elif inst.packages["torch_npu"] is None:
        j.add("warn", f"no torch_npu in {inst.interpreter}: torch_npu and its CANN pairing "
              "not judged", PYTHON_REMEDY + " Or install torch_npu there.",
              rules=("interpreter-not-judged",))


def judge_kernels(ctx: Context, j: Judgement) -> None:
    """The operator kernels package (version.cfg `opp_kernel`) against the toolkit: both come
    from one CANN release in the installation guides (vllm-project/vllm-ascend
    docs/source/installation.md @ 01cf4574e483 installs toolkit, kernels/ops and NNAL of one
    version); a kernels package of another release is a warning."""
    cfg = stack(ctx).version_cfg.value
    if cfg is None:
        return
    toolkit, kernels = cfg.running.get("toolkit"), cfg.running.get("opp_kernel")
    if toolkit is None or kernels is None:
        return
    if same(toolkit.version, kernels.version):
        j.add("pass", f"operator kernels {kernels.version} are the toolkit's release")
        return
    j.add("warn", f"operator kernels package {kernels.version} is not the toolkit's release "
          f"{toolkit.version} (version.cfg)",
          f"Install the kernels (ops) package of CANN {toolkit.version} for this chip.",
          rules=("kernels-toolkit",))


def judge_nnal(inst: Installed, j: Judgement) -> None:
    """NNAL (ATB) must be the same release as CANN (vllm-ascend installation.md)."""
    if inst.cann is None or inst.nnal is None:
        return
    if same(inst.cann, inst.nnal):
        j.add("pass", f"NNAL/ATB {inst.nnal} is the CANN {inst.cann} release")
        return
    j.add("fail", f"NNAL/ATB {inst.nnal} is not the CANN {inst.cann} release "
          "(NNAL must equal CANN)",
          f"Install Ascend-cann-nnal {inst.cann} (the NNAL release of the installed CANN).",
          rules=("nnal-equals-cann",))


# ----------------------------------------------------------------------------- python side


def judge_torch(inst: Installed, j: Judgement) -> None:
    """torch_npu is built per torch release: base versions must be equal (Ascend/pytorch)."""
    torch, npu = inst.packages["torch"], inst.packages["torch_npu"]
    if torch is None or npu is None:
        if npu is not None:
            j.add("fail", f"torch_npu {npu} is installed without torch",
                  "pip install the torch release torch_npu was built for.",
                  rules=("torch-npu-build",))
        return
    if try_parse_version(torch) is None or try_parse_version(npu) is None:
        j.add("warn", f"cannot parse torch {torch} / torch_npu {npu}", "",
              rules=("torch-npu-build",))
        return
    if torch_base(torch) == torch_base(npu):
        j.add("pass", f"torch_npu {npu} is built for torch {torch}")
        return
    j.add("fail", f"torch_npu {npu} is built for torch {torch_base(npu)}, found torch {torch}",
          _torch_remedy(torch, npu, inst.cann), rules=("torch-npu-build",))


def _torch_remedy(torch: str, npu: str, cann: str | None) -> str:
    rows = compat_data().torch_npu_rows
    mine = row_for(rows, "torch_npu", npu)
    want_torch = mine["torch"] if mine else torch_base(npu)
    fits = [r for r in rows if torch_base(str(r["torch"])) == torch_base(torch)]
    best = next((r for r in fits if cann and same(str(r["cann"]), cann)), None) or (
        fits[0] if fits else None)
    other = (f", or install torch_npu {best['torch_npu']} (built for torch {best['torch']}, "
             f"CANN {best['cann']})" if best else "")
    return f"pip install torch=={want_torch} to match torch_npu {npu}{other}."


def _older_or_newer(cann: str, than: str) -> str:
    have, want = try_parse_version(cann), try_parse_version(than)
    if have is None or want is None:
        return "another release"
    return "older" if have < want else "newer"


def judge_torch_npu_cann(inst: Installed, j: Judgement, unknown: Status) -> None:
    """torch_npu <-> CANN: a vendor pairing passes (the torch_npu table's build CANN, a
    vllm-ascend release row, a MindIE release row); a CANN the Ascend Extension for PyTorch
    release declares compatible warns; outside a declared range fails; the rest is "not a
    tested pairing" (warn)."""
    npu, cann = inst.packages["torch_npu"], inst.cann
    if npu is None or cann is None:
        return
    data = compat_data()
    row = row_for(data.torch_npu_rows, "torch_npu", npu)
    if _paired(npu, cann, row, j):
        return
    tested = vllm_tested_cann(npu)
    if (row is None and not tested) or not listed(cann, data.known_cann):
        what = f"CANN {cann}" if row is not None or tested else f"torch_npu {npu}"
        j.add(unknown, f"{what} is not in the compatibility data; torch_npu {npu} with "
              f"CANN {cann} cannot be judged",
              "Check the torch_npu release notes (Ascend/pytorch COMPATIBILITY.en.md).",
              rules=("not-in-the-data",))
        return
    if row is not None and product_of(row) in data.extension_ranges:
        _judge_declared_range(npu, cann, row, j)
        return
    built = f"built with CANN {row['cann']} ({row['branch']})" if row else \
        f"tested by vllm-ascend with CANN {'/'.join(tested)}"
    j.add("warn", f"torch_npu {npu} with CANN {cann} is not a tested pairing (torch_npu {npu} "
          f"is {built})", f"Prefer CANN {row['cann'] if row else tested[0]} for torch_npu {npu}, "
          f"or the torch_npu release built for CANN {cann}.", rules=("torch-npu-cann",))


def _paired(npu: str, cann: str, row: Mapping[str, Any] | None, j: Judgement) -> bool:
    """A vendor pairing of this torch_npu and this CANN, said as a pass."""
    if row is not None and same(str(row["cann"]), cann):
        j.add("pass", f"torch_npu {npu} pairs with CANN {cann} (torch_npu row {row['branch']})")
        return True
    vrow = vllm_pairing(npu, cann)
    if vrow is not None:
        j.add("pass", f"torch_npu {npu} pairs with CANN {cann} "
              f"(vllm-ascend {vrow['vllm_ascend']} row)")
        return True
    mrow = mindie_pairing(product_of(row), cann) if row is not None else None
    if mrow is not None:
        j.add("pass", f"torch_npu {npu} (Ascend Extension for PyTorch {mrow['pytorch_extension']}"
              f") pairs with CANN {cann} (MindIE {mrow['mindie']} release row)")
        return True
    return False


def _judge_declared_range(npu: str, cann: str, row: Mapping[str, Any], j: Judgement) -> None:
    product = product_of(row)
    declared = compat_data().extension_ranges[product]
    if listed(cann, declared):
        j.add("warn", f"CANN {cann} is not the CANN {row['cann']} torch_npu {npu} was built "
              f"with ({row['branch']}), {_older_or_newer(cann, str(row['cann']))} but declared "
              f"compatible with Ascend Extension for PyTorch {product}",
              f"Prefer CANN {row['cann']} for torch_npu {npu}.", rules=("torch-npu-cann",))
        return
    j.add("fail", f"torch_npu {npu} (Ascend Extension for PyTorch {product}) is declared for "
          f"CANN {', '.join(declared)}, found CANN {cann}",
          f"Install CANN {row['cann']}, or the torch_npu release built for CANN {cann}.",
          rules=("torch-npu-cann",))


def judge_vllm_ascend(inst: Installed, j: Judgement, unknown: Status) -> None:
    """vllm-ascend: vllm, torch, torch_npu, CANN all from its row (compat.yaml vllm_ascend)."""
    va = inst.packages["vllm_ascend"]
    if va is None:
        return
    row, dev_build = release_row(compat_data().vllm_rows, "vllm_ascend", va)
    if dev_build:
        j.add("warn", dev_build, "Install a released vllm-ascend.", rules=("not-in-the-data",))
    if row is None:
        j.add(unknown, f"vllm-ascend {va} is not in the compatibility data",
              "Check the vllm-ascend release notes (versioning_policy.md).",
              rules=("not-in-the-data",))
        return
    name = f"vllm-ascend {row['vllm_ascend']} row"
    wants = {
        "vllm": (str(row["vllm"]).split("/"), inst.packages["vllm"], same),
        "torch": ([str(row["torch"])], inst.packages["torch"], _same_torch),
        "torch_npu": ([str(row["torch_npu"])], inst.packages["torch_npu"], same),
        "CANN": ([str(row["cann"])], inst.cann, same),
    }
    bad = []
    for what, (want, have, equal) in wants.items():
        if have is None and what == "CANN":
            continue  # no toolkit file found: said in the evidence
        if have is None or not any(equal(have, w) for w in want):
            bad.append(what)
            j.add("fail", f"{name} wants {what} {'/'.join(want)}, found {have or 'none'}",
                  f"Install {what} {want[0]} (the {name}).", rules=("vllm-ascend-row",))
    if not bad:
        j.add("pass", f"vllm {inst.packages['vllm']}, torch, torch_npu and CANN match the "
              f"{name}")


def _same_torch(have: str, want: str) -> bool:
    # CPU and CUDA wheels carry a local label (2.10.0+cpu): compare base versions
    return try_parse_version(have) is not None and torch_base(have) == torch_base(want)


def judge_mindie(inst: Installed, j: Judgement, unknown: Status) -> None:
    """MindIE's CANN from compat.yaml mindie_compat."""
    if inst.mindie is None:
        return
    row = row_for(compat_data().mindie_rows, "mindie", inst.mindie)
    if row is None:
        j.add(unknown, f"MindIE {inst.mindie} is not in the compatibility data",
              "Check the MindIE release notes for its CANN version.",
              rules=("not-in-the-data",))
        return
    if inst.cann is None:
        return
    if same(str(row["cann"]), inst.cann):
        j.add("pass", f"MindIE {inst.mindie} pairs with CANN {inst.cann}")
        return
    j.add("fail", f"MindIE {row['mindie']} row wants CANN {row['cann']}, found CANN {inst.cann}",
          f"Install CANN {row['cann']} (and its NNAL) for MindIE {row['mindie']}.",
          rules=("mindie-cann",))


def judge_toolchain(ctx: Context, inst: Installed, j: Judgement) -> None:
    """NNAL and Triton-Ascend where the engines need them, and the ATB variant against torch's
    C++ ABI (checks.builtin.toolchain)."""
    from checks.builtin.toolchain import Toolchain, judge

    s = stack(ctx)
    engines = tuple(name for name, there in (("vllm-ascend", inst.packages["vllm_ascend"]),
                                             ("mindie", s.mindie.value)) if there is not None)
    found = Toolchain(engines, s.nnal.state != "missing", s.nnal.state != "not_recorded",
                      facts.python(ctx), inst.cann,
                      toolkit_dir(s.toolkit.path) if s.toolkit.value and s.toolkit.path else None)
    said, evidence = judge(ctx, found)
    j.evidence.extend(evidence)
    for status, text, remedy, rule in said:
        j.add(status, text, remedy, rules=(rule,) if rule else ())


# ----------------------------------------------------------------------------- the check


def versions_parity(ctx: Context) -> Finding:
    nothing = nothing_installed(ctx)
    if nothing is not None:
        return nothing
    j = Judgement()
    inst = read_installed(ctx, j)
    unknown = _unknown_is(ctx)
    judge_interpreter(inst, j)
    judge_driver_firmware(inst, j)
    judge_driver_cann(inst, j, unknown)
    judge_loaded_driver(ctx, inst, j)
    judge_container_driver(ctx, inst, j)
    judge_kernels(ctx, j)
    judge_nnal(inst, j)
    judge_torch(inst, j)
    judge_torch_npu_cann(inst, j, unknown)
    judge_vllm_ascend(inst, j, unknown)
    judge_mindie(inst, j, unknown)
    judge_requirements(ctx.host, facts.python(ctx), j)
    judge_toolchain(ctx, inst, j)
    return j.finding("the installed Ascend stack agrees with itself and the pairing tables")
