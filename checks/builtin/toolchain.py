"""versions.parity's toolchain questions: what a serving engine needs installed beside CANN
(NNAL/ATB, Triton-Ascend for the Gated DeltaNet models: checks/data/toolchain.yaml), and
whether the ATB variant the environment points at was built for torch's C++ ABI.

ATB ships twice, `atb/cxx_abi_0` and `atb/cxx_abi_1`; NNAL's set_env.sh picks the one matching
`torch.compiled_with_cxx11_abi()` and exports it as ATB_HOME_PATH
(https://gitcode.com/cann/ascend-transformer-boost/blob/master/scripts/set_env.sh). Nothing runs
inside the target, so torch's ABI is read from the `-D_GLIBCXX_USE_CXX11_ABI=N` its
TorchConfig.cmake carries (pytorch/pytorch cmake/TorchConfig.cmake.in @ 0511e1568fd8); where
the installed file names none, the ABI is unknown and nothing is judged.

Pure apart from the reads through ctx.host; the verdicts are tuples versions.parity folds into
its finding.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from checks import data
from checks.context import Context
from checks.model import Status
from probes.errors import HostError
from probes.host import normalise_dist_name

if TYPE_CHECKING:
    from probes.host import PythonEnvironment

# (status, text, remedy, rule)
Said = tuple[Status, str, str, str]
_ABI_DIR = re.compile(r"cxx_abi_([01])")
_TORCH_ABI = re.compile(r"_GLIBCXX_USE_CXX11_ABI=([01])")
TORCH_CONFIG = "torch/share/cmake/Torch/TorchConfig.cmake"
MAX_CMAKE_BYTES = 256 * 1024


@dataclass(frozen=True)
class ToolchainNeed:
    """One component an engine needs, for every model or for some model types."""

    id: str
    component: str  # nnal, triton-ascend
    engine: str  # vllm-ascend, mindie
    why: str
    sources: tuple[str, ...]
    model_types: tuple[str, ...] = ()


@dataclass(frozen=True)
class Toolchain:
    """What versions.parity knows that the toolchain questions need."""

    engines: tuple[str, ...]  # vllm-ascend, mindie: the engines found installed
    nnal_found: bool
    nnal_recorded: bool  # False: a recording that does not hold the NNAL files
    python: PythonEnvironment
    cann: str | None = None
    toolkit_dir: str | None = None  # the toolkit's version directory (above <arch>-linux)


def needs(engines: tuple[str, ...], model_types: tuple[str, ...]) -> list[ToolchainNeed]:
    """The rows that apply to these engines and this model (any, when it is not known)."""
    rows = data.load("toolchain", ToolchainNeed)
    return [row for row in rows if row.engine in engines
            and (not row.model_types or set(row.model_types) & set(model_types))]


def model_types(ctx: Context) -> tuple[str, ...] | None:
    """The judged model's model_type and its text_config's, or None when no model is known."""
    if ctx.model_dir is None:
        return None
    from probes.model.reader import CheckpointError, read_config

    try:
        config = read_config(ctx.host, str(ctx.model_dir))
    except (CheckpointError, HostError):
        return None
    return tuple(t for t in (config.model_type, config.text_model_type) if t)


def judge(ctx: Context, found: Toolchain) -> tuple[list[Said], list[str]]:
    """The verdicts and evidence lines of the toolchain questions."""
    said: list[Said] = []
    evidence: list[str] = []
    types = model_types(ctx)
    for row in needs(found.engines, types or ()):
        if row.component == "nnal":
            said += _nnal(row, found)
        elif row.component == "triton-ascend":
            said += _triton(row, found, types or ())
            said += _bisheng(ctx, found)
    if types is None and "vllm-ascend" in found.engines:
        version = found.python.version_of("triton-ascend")
        evidence.append(f"triton-ascend {version or 'not installed'} (needed for Qwen3-Next and "
                        "Qwen3.5/3.6; no model given, not judged)")
    abi_said, abi_evidence = judge_atb_abi(ctx, found.python)
    soc_said, soc_evidence = judge_built_soc(ctx, found.python)
    return said + abi_said + soc_said, evidence + abi_evidence + soc_evidence


def _nnal(row: ToolchainNeed, found: Toolchain) -> list[Said]:
    if found.nnal_found or not found.nnal_recorded:
        return []
    return [("fail", f"no NNAL/ATB installed beside {row.engine}: {row.why}",
             "Install Ascend-cann-nnal of the installed CANN release and source "
             "/usr/local/Ascend/nnal/atb/set_env.sh.", "nnal-required")]


def _triton(row: ToolchainNeed, found: Toolchain, types: tuple[str, ...]) -> list[Said]:
    if found.python.error:
        return []
    version = found.python.version_of("triton-ascend")
    kind = next(t for t in types if t in row.model_types)
    if version is not None:
        return [("pass", f"triton-ascend {version} installed for the {kind} model", "", "")]
    return [("fail", f"no triton-ascend in {found.python.interpreter} for a {kind} model: "
             f"{row.why}",
             "pip install triton-ascend at the version the vllm-ascend release's installation "
             "guide names.", "triton-ascend-required")]


BISHENG_TUTORIAL = ("vllm-project/vllm-ascend docs/source/tutorials/Qwen3-Next.md @ "
                    "16e9538ce7f7")


def _bisheng(ctx: Context, found: Toolchain) -> list[Said]:
    """Triton-Ascend compiles its kernels with the BiSheng compiler: part of the CANN toolkit
    from 8.5.0 (cann-bisheng-compiler, https://www.hiascend.com/document/detail/zh/
    canncommercial/850/releasenote), a separate `bisheng_toolkit` beside older toolkits that
    the vllm-ascend Qwen3-Next tutorial sources before serving."""
    from probes.versions import try_parse_version

    version = try_parse_version(found.cann)
    floor = try_parse_version("8.5.0")
    if version is None or floor is None or found.toolkit_dir is None:
        return []
    if version >= floor:
        return [("pass", f"BiSheng compiler: part of the CANN {found.cann} toolkit", "", "")]
    path = posixpath.join(found.toolkit_dir, "bisheng_toolkit")
    if _exists(ctx, path):
        return [("pass", f"BiSheng toolkit at {path}", "", "")]
    return [("warn", f"no BiSheng toolkit at {path}: Triton-Ascend compiles its kernels with it "
             f"before CANN 8.5.0 ({BISHENG_TUTORIAL})",
             f"Install the BiSheng toolkit of CANN {found.cann} and source its set_env.sh "
             "in the serving environment.", "bisheng-not-found")]


def _exists(ctx: Context, path: str) -> bool:

    try:
        return ctx.host.exists(path)
    except HostError:
        return False


def torch_abi(ctx: Context, python: PythonEnvironment) -> tuple[int | None, str]:
    """torch's C++ ABI (0 or 1) from its TorchConfig.cmake, and where it was read or why not."""

    location = python.locations.get(normalise_dist_name("torch"))
    if not location:
        return None, "torch's location in the interpreter is not known"
    path = posixpath.join(location, TORCH_CONFIG)

    try:
        text = ctx.host.read_bytes(path, 0, MAX_CMAKE_BYTES).decode("utf-8", "replace")
    except HostError as exc:
        return None, f"{path} not read ({str(exc)[:80]})"
    match = _TORCH_ABI.search(text)
    if match is None:
        return None, f"{path} names no _GLIBCXX_USE_CXX11_ABI"
    return int(match.group(1)), path


def judge_atb_abi(ctx: Context, python: PythonEnvironment) -> tuple[list[Said], list[str]]:
    """ATB_HOME_PATH's cxx_abi_N against torch's ABI; unknown on either side is evidence."""
    home = ctx.host.env.get("ATB_HOME_PATH", "")
    chosen = _ABI_DIR.search(home)
    if not home or chosen is None or python.error or python.version_of("torch") is None:
        return [], []
    atb = int(chosen.group(1))
    abi, where = torch_abi(ctx, python)
    if abi is None:
        return [], [f"ATB_HOME_PATH={home}: torch's C++ ABI not readable ({where}); the ATB "
                    "variant is not judged"]
    if abi == atb:
        return [("pass", f"ATB variant cxx_abi_{atb} matches torch's C++ ABI ({where})", "",
                 "")], []
    return [("fail", f"ATB_HOME_PATH={home} is the cxx_abi_{atb} build but torch was built "
             f"with _GLIBCXX_USE_CXX11_ABI={abi} ({where})",
             f"source /usr/local/Ascend/nnal/atb/set_env.sh --cxx_abi={abi} in the serving "
             "environment (or without the option, so it follows torch).", "atb-abi")], []


# vllm-ascend's setup.py writes the SOC_VERSION it was built for into vllm_ascend/_build_info.py
# (vllm-project/vllm-ascend setup.py @ 00305f4ade12, custom_build_info); the values per device
# are in its installation guide (ascend910b1 for Atlas A2, ascend910_9391 for A3, ascend310p1
# for 300I, ascend950* for 950: docs/source/installation.md @ 01cf4574e483)
_BUILT_SOC = re.compile(r"__soc_version__\s*=\s*['\"]([^'\"]+)['\"]")
# Earlier builds (the 0.13.0 / 0.13.0rc1 PyPI wheels) write the family itself instead:
# `__device_type__ = 'A2'` (vllm-project/vllm-ascend#11160, #6206: the PyPI wheel says A2).
_BUILT_DEVICE_TYPE = re.compile(r"__device_type__\s*=\s*['\"]([^'\"]+)['\"]")
_DEVICE_TYPES = ("A2", "A3", "310P")
_SOC_FAMILIES = (("ascend910b", "A2"), ("ascend910_93", "A3"), ("ascend310p", "310P"),
                 ("ascend950", "A5_950"))


def soc_family(soc: str) -> str | None:
    """The chip family a build SOC_VERSION (or an older build's device type) targets, or
    None when the data does not say."""
    if soc.strip().upper() in _DEVICE_TYPES:
        return soc.strip().upper()
    low = soc.strip().lower()
    return next((family for prefix, family in _SOC_FAMILIES if low.startswith(prefix)), None)


def built_soc(ctx: Context, python: PythonEnvironment) -> str | None:
    """The SOC_VERSION the installed vllm-ascend was built for, or None when not readable."""

    location = python.locations.get(normalise_dist_name("vllm-ascend"))
    if python.error or not location:
        return None
    try:
        text = ctx.host.read_bytes(posixpath.join(location, "vllm_ascend", "_build_info.py"),
                                   0, 64 * 1024).decode("utf-8", "replace")
    except HostError:
        return None
    match = _BUILT_SOC.search(text) or _BUILT_DEVICE_TYPE.search(text)
    return match.group(1) if match else None


def judge_built_soc(ctx: Context, python: PythonEnvironment) -> tuple[list[Said], list[str]]:
    """The chip family vllm-ascend was built for against the chips npu-smi shows."""
    from checks.builtin import facts
    from checks.builtin.fp8_gate import chip_family

    soc = built_soc(ctx, python)
    reading = facts.npu(ctx)
    info = None if reading.is_error else reading.info
    if soc is None or info is None or not info.chips:
        return [], []
    built = soc_family(soc)
    chips = {chip_family(c.name or "") for c in info.chips}
    if built is None or None in chips:
        return [], [f"vllm-ascend built for SOC_VERSION {soc}; chips "
                    f"{', '.join(sorted({c.name or '?' for c in info.chips}))}: the families "
                    "are not in our data, not judged"]
    if chips == {built}:
        return [("pass", f"vllm-ascend was built for {soc}, the {built} chips here", "", "")], []
    return [("fail", f"vllm-ascend was built for SOC_VERSION {soc} ({built}) but the chips "
             f"here are {', '.join(sorted(str(c) for c in chips))}",
             "Install the vllm-ascend build (or image) for these chips, or rebuild it with "
             "SOC_VERSION set for them.", "soc-build")], []
