"""cann.environment: the CANN toolkit environment a process needs.

With ASCEND_HOME_PATH set, torch_npu raises at import when that directory is missing, when its
`runtime/` or `compiler/` is missing, or when ASCEND_OPP_PATH is unset or missing; with it
unset, torch_npu only warns (Ascend/pytorch torch_npu/utils/npu_intercept.py
`cann_package_check` @ 0d390eec02a9, run at import from
torch_npu/_init/registry/registry_manager.py): those are failures. Library-path gaps are
warnings: a process may still load the libraries another way (rpath, ld.so.conf).
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import TYPE_CHECKING

from checks.builtin import facts
from checks.builtin.facts import stack
from checks.context import Context
from checks.model import Finding, Status, skipped
from probes.errors import HostError, NotRecorded
from probes.host import Host
from probes.stack import TOOLKIT_ENV_VARS, StackVersions, toolkit_dir

if TYPE_CHECKING:
    from checks.builtin.versions_model import Judgement

LIBASCENDCL = "libascendcl.so"

# The check's rules, by name -> the statuses they give; its playbook lists the same rules under
# "What the check does" (tests/checks/test_check_rules.py); each tags the findings it decides.
CHECK_RULES: dict[str, dict[str, str]] = {
    "cann.environment": {
        "no-toolkit": "skip",  # cann_environment
        "set-env-not-sourced": "fail",  # judge_toolkit_vars
        "toolkit-not-found": "warn",  # judge_toolkit_vars
        "toolkit-path-missing": "fail",  # judge_toolkit_vars
        "home-incomplete": "fail",  # judge_home_layout
        "opp-path": "warn/fail",  # judge_opp
        "driver-libs-not-on-path": "warn",  # judge_driver_libs
        "libascendcl-not-found": "warn",  # judge_libascendcl
        "visible-devices": "fail",  # judge_visible_devices
        "ranks-disagree": "warn",  # judge_ranks
    },
}
# the variables this check judges; a process of the same server that differs on one is named
RANK_VARIABLES = ("ASCEND_", "LD_LIBRARY_PATH", "PYTHONPATH", "PYTHONHOME")


def _exists(host: Host, path: str) -> bool | None:
    """True/False, or None when a recording never saw the path."""
    try:
        return host.exists(path)
    except NotRecorded:
        return None
    except HostError:
        return False


def set_env_script(host: Host, s: StackVersions) -> str:
    """Where `set_env.sh` of the installed toolkit is: beside `ascend-toolkit/` or in the
    toolkit directory itself (`cann`, `cann-<ver>` of the CANN 8.5+ layout)."""
    default = "/usr/local/Ascend/ascend-toolkit/set_env.sh"
    if s.toolkit.path is None:
        return default
    tk = toolkit_dir(s.toolkit.path)
    candidates = [posixpath.join(posixpath.dirname(tk), "set_env.sh"),
                  posixpath.join(tk, "set_env.sh")]
    return next((c for c in candidates if _exists(host, c)), candidates[0])


def judge_toolkit_vars(ctx: Context, env: Mapping[str, str], j: Judgement) -> str | None:
    """ASCEND_HOME_PATH / ASCEND_TOOLKIT_HOME: set and existing. Returns the home in effect."""
    s = stack(ctx)
    set_vars = {name: env[name] for name in TOOLKIT_ENV_VARS if env.get(name)}
    if not set_vars:
        if s.toolkit.found:
            script = set_env_script(ctx.host, s)
            j.add("fail", f"set_env.sh not sourced: CANN is installed ({s.toolkit.path}) but "
                  "ASCEND_HOME_PATH and ASCEND_TOOLKIT_HOME are unset",
                  f"source {script} in the shell or container entrypoint that starts the "
                  "process.", rules=("set-env-not-sourced",))
        elif s.toolkit.state != "not_recorded":
            j.add("warn", "ASCEND_* variables are set but no CANN toolkit was found "
                  f"({s.toolkit.error})",
                  "Install the CANN toolkit, or set ASCEND_HOME_PATH to where it is.",
                  rules=("toolkit-not-found",))
        return None
    for name, value in set_vars.items():
        if _exists(ctx.host, value) is False:
            j.add("fail", f"{name}={value} does not exist on this machine",
                  f"Point {name} at the installed toolkit (source its set_env.sh).",
                  rules=("toolkit-path-missing",))
        else:
            j.add("pass", f"{name}={value} exists")
    return set_vars.get("ASCEND_HOME_PATH")


def judge_home_layout(ctx: Context, home: str, j: Judgement) -> None:
    """runtime/ and compiler/ under ASCEND_HOME_PATH (torch_npu raises without them)."""
    if _exists(ctx.host, home) is not True:
        return
    missing = [d for d in ("runtime", "compiler")
               if _exists(ctx.host, posixpath.join(home, d)) is False]
    if missing:
        j.add("fail", f"ASCEND_HOME_PATH={home} has no {' or '.join(missing)}/ "
              "(torch_npu raises at import)",
              "Reinstall the CANN toolkit, or point ASCEND_HOME_PATH at a complete one.",
              rules=("home-incomplete",))
    else:
        j.add("pass", f"{home} has runtime/ and compiler/")


def judge_opp(ctx: Context, env: Mapping[str, str], j: Judgement) -> None:
    """ASCEND_OPP_PATH set and existing: torch_npu raises at import without it when
    ASCEND_HOME_PATH is set, and only warns when it is not (cann_package_check)."""
    opp = env.get("ASCEND_OPP_PATH")
    remedy = "Source the toolkit's set_env.sh, which sets ASCEND_OPP_PATH=<toolkit>/opp."
    status: Status = "fail" if env.get("ASCEND_HOME_PATH") else "warn"
    effect = ("with ASCEND_HOME_PATH set, torch_npu raises at import" if status == "fail" else
              "ASCEND_HOME_PATH is unset, so torch_npu only warns at import")
    if not opp:
        j.add(status, f"ASCEND_OPP_PATH is not set ({effect})", remedy, rules=("opp-path",))
    elif _exists(ctx.host, opp) is False:
        j.add(status, f"ASCEND_OPP_PATH={opp} does not exist ({effect})", remedy,
              rules=("opp-path",))
    else:
        j.add("pass", f"ASCEND_OPP_PATH={opp} exists")


def judge_driver_libs(ctx: Context, ld_path: tuple[str, ...], j: Judgement) -> None:
    """`<driver root>/driver/lib64` on LD_LIBRARY_PATH (HIA envref_07_0002)."""
    s = stack(ctx)
    if s.driver.path is None:
        j.evidence.append("driver version.info not found: driver lib64 not looked for")
        return
    lib64 = posixpath.join(posixpath.dirname(s.driver.path), "lib64")
    on_path = [p for p in ld_path
               if posixpath.normpath(p) == lib64 or posixpath.normpath(p).startswith(lib64 + "/")]
    if on_path:
        j.add("pass", f"driver libraries on LD_LIBRARY_PATH: {', '.join(on_path)}")
        return
    script = set_env_script(ctx.host, s)
    j.add("warn", f"{lib64} is not on LD_LIBRARY_PATH",
          f"Source {script} in the shell or entrypoint that starts the process (current "
          "CANN toolkits add the driver's lib64, lib64/common and lib64/driver); older "
          f"toolkits need {lib64}, {lib64}/common and {lib64}/driver added to "
          "LD_LIBRARY_PATH by hand.", rules=("driver-libs-not-on-path",))


def judge_libascendcl(ctx: Context, env: Mapping[str, str], j: Judgement) -> None:
    from probes.libraries import read_ld_library_dirs  # only where a toolkit was found

    lookup = read_ld_library_dirs(ctx.host, env, (LIBASCENDCL,)).libraries[LIBASCENDCL]
    if lookup.found:
        j.add("pass", f"{LIBASCENDCL} resolves in {lookup.found_in}")
    elif lookup.found is None:
        j.evidence.append(f"{LIBASCENDCL}: not found where recorded; "
                          f"not recorded: {', '.join(lookup.unknown_in)}")
    else:
        j.add("warn", f"{LIBASCENDCL} is not in any LD_LIBRARY_PATH directory",
              "Source the toolkit's set_env.sh (it adds <toolkit>/lib64).",
              rules=("libascendcl-not-found",))


def judge_visible_devices(ctx: Context, j: Judgement) -> None:
    """ASCEND_RT_VISIBLE_DEVICES: the runtime silently stops at the first bad entry."""
    visible = facts.environment(ctx).visible_devices
    if visible.raw is None:
        return
    if visible.problems:
        j.add("fail", f"ASCEND_RT_VISIBLE_DEVICES={visible.raw!r}: "
              f"{'; '.join(visible.problems)}",
              "Write ascending logical ids separated by commas only, e.g. "
              "ASCEND_RT_VISIBLE_DEVICES=0,1,2,3.", rules=("visible-devices",))
    else:
        j.add("pass", f"ASCEND_RT_VISIBLE_DEVICES={visible.raw} -> devices {visible.ids}")


def cann_environment(ctx: Context) -> Finding:
    env = ctx.host.env
    s = stack(ctx)
    ascend_vars = sorted(n for n in env if n.startswith("ASCEND_"))
    if not s.toolkit.found and not ascend_vars:
        rules = ("no-toolkit",)
        if s.toolkit.state == "not_recorded":
            return skipped("the CANN toolkit files were not recorded", rules=rules)
        return skipped("no CANN toolkit on this machine", s.toolkit.error, rules=rules)
    from checks.builtin.versions_model import Judgement  # judged: a toolkit is there

    j = Judgement()
    j.evidence.append(f"toolkit: {s.toolkit.path or s.toolkit.error}")
    j.evidence.append(f"ASCEND_* set: {', '.join(ascend_vars) or 'none'}")
    home = judge_toolkit_vars(ctx, env, j)
    if home:
        judge_home_layout(ctx, home, j)
    if any(env.get(name) for name in TOOLKIT_ENV_VARS):
        judge_opp(ctx, env, j)  # without set_env.sh the failure above already covers it
    judge_driver_libs(ctx, facts.environment(ctx).ld_library_path, j)
    judge_libascendcl(ctx, env, j)
    judge_visible_devices(ctx, j)
    judge_ranks(ctx, j)
    return facts.about_target(ctx, j.finding("the CANN toolkit environment is complete"))


def judge_ranks(ctx: Context, j: Judgement) -> None:
    """A process of the same server (an EngineCore, a worker) whose own environment can be
    read and differs on a variable this check judges (probes.target.ranks)."""
    ranks = ctx.target.ranks
    for rank in ranks[1:]:
        names = [n for n in rank.differs if n.startswith(RANK_VARIABLES)]
        if names:
            j.add("warn", f"ranks disagree: process {rank.pid} ({rank.role}) differs from "
                  f"process {ranks[0].pid} on {', '.join(names)}",
                  "start every process of the server with the same CANN environment",
                  rules=("ranks-disagree",))
