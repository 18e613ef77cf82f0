"""Which environment values a bundle may carry: an allow-list (pure, no I/O).

A deny-list of secret-looking names cannot win (`MYSQL_PWD`, `SSHPASS`, `CUSTOM_CREDS` all slip
past one), so a bundle keeps the *value* of a variable only when the checks need it and it is
a documented, non-secret setting of the stack; every other variable keeps its name and loses
its value (`<withheld>`), and the bundle's summary lists those names. An allowed name that
still looks secret (`VLLM_API_KEY`, `ASCEND_OBS_AK`) is redacted, and every allowed value is
scanned for secrets like any other captured text.
"""

from __future__ import annotations

from checks.secret_names import is_secret_name
from probes.environment import VARIABLE_NAMES, VARIABLE_PREFIXES

WITHHELD = "<withheld>"

# Families, each documented by its project:
# - ASCEND_  CANN runtime and toolkit settings (hiascend.com "Environment Variables" reference,
#            e.g. CANNCommunityEdition/800alpha001/apiref/envref/envref_07_0002.html); also
#            ASCEND_CONSOLE_RECORDINGS, this project's place of recordings (docs/recording.md)
# - HCCL_    the collective communication library (hiascend envref, "HCCL" section)
# - ATB_, LCCL_  Ascend Transformer Boost tuning (hicann/ascend-transformer-boost,
#            scripts/set_env.sh)
# - MINDIE_, MIES_  MindIE (Ascend/MindIE-LLM, docs/zh/user_guide/user_manual/
#            environment_variable.md)
# - TORCH_NPU_, PYTORCH_NPU_  torch_npu (Ascend/pytorch, docs: environment variables)
# - VLLM_    vLLM and vllm-ascend: "All environment variables used by vLLM are prefixed with
#            VLLM_" (vllm-project/vllm docs/configuration/env_vars.md, vllm/envs.py;
#            vllm-project/vllm-ascend vllm_ascend/envs.py). VLLM_API_KEY is a secret name and
#            is redacted.
ALLOWED_PREFIXES: tuple[str, ...] = (*VARIABLE_PREFIXES, "VLLM_")
# Single names the checks read:
# - LD_LIBRARY_PATH, PYTHONPATH, TOOLCHAIN_HOME, BISHENG_INSTALL_PATH, TASK_QUEUE_ENABLE,
#   CPU_AFFINITY_CONF, SOC_VERSION: the Ascend environment (probes/environment.py, with the
#   sources named there)
# - PATH: where programs are found (POSIX "Environment Variables", XBD chapter 8)
# - HOME: the default CANN log directory $HOME/ascend/log (hiascend envref_07_0120) and the
#   non-root install prefix $HOME/Ascend
# - XDG_STATE_HOME: the console's default place of recordings (XDG Base Directory
#   Specification; docs/recording.md)
# - PYTHONHOME, PYTHONNOUSERSITE, PYTHONUSERBASE: what decides the inspected interpreter's
#   import path (Python docs, "Command line and environment")
ALLOWED_NAMES: frozenset[str] = VARIABLE_NAMES | {
    "PATH", "HOME", "XDG_STATE_HOME", "PYTHONHOME", "PYTHONNOUSERSITE", "PYTHONUSERBASE",
}


def value_allowed(name: str) -> bool:
    """May the value of `name` go into a bundle (after the text redaction)?"""
    return (name in ALLOWED_NAMES or name.startswith(ALLOWED_PREFIXES)) and not is_secret_name(
        name)
