"""cann.environment on fake machines built from the corpus version files."""

from __future__ import annotations

from checks.builtin.environment import cann_environment
from checks.context import Context
from checks.model import Finding
from checks.policy import load_policy
from checks.registry import all_checks, select
from checks.runner import run_checks
from probes.live import LiveHost
from tests.conftest import CORPUS_DIR, FakeRoot

CORPUS = CORPUS_DIR / "npu-smi"
ASCEND = "/usr/local/Ascend"
TOOLKIT_ROOT = f"{ASCEND}/ascend-toolkit"
LATEST = f"{TOOLKIT_ROOT}/latest"
DRIVER_LIB64 = f"{ASCEND}/driver/lib64"


def corpus(name: str) -> str:
    return next(CORPUS.glob(f"{name}-*")).read_text()


def install_toolkit(root: FakeRoot) -> None:
    """CANN 8.3.RC2 in the legacy layout (latest -> 8.3.RC2) with driver 23.0.7."""
    real = f"{TOOLKIT_ROOT}/8.3.RC2"
    root.file(f"{real}/aarch64-linux/ascend_toolkit_install.info", corpus("021"))
    for sub in ("runtime", "compiler", "opp"):
        root.dir(f"{real}/{sub}")
    root.file(f"{real}/lib64/libascendcl.so", b"\x7fELF")
    root.link(LATEST, "8.3.RC2")
    root.file(f"{TOOLKIT_ROOT}/set_env.sh", "export ASCEND_HOME_PATH=...\n")
    root.file(f"{ASCEND}/driver/version.info", corpus("033"))
    root.dir(f"{DRIVER_LIB64}/common")


def sourced_env(**extra: str) -> dict[str, str]:
    """What `source set_env.sh` plus the driver's library paths leave in the environment."""
    env = {
        "PATH": "/usr/bin:/bin",
        "ASCEND_HOME_PATH": LATEST,
        "ASCEND_TOOLKIT_HOME": LATEST,
        "ASCEND_OPP_PATH": f"{LATEST}/opp",
        "LD_LIBRARY_PATH": f"{DRIVER_LIB64}:{DRIVER_LIB64}/common:{LATEST}/lib64",
    }
    env.update(extra)
    return {k: v for k, v in env.items() if v != "UNSET"}


def run(root: FakeRoot, env: dict[str, str]) -> Finding:
    host = LiveHost(root=str(root.path), env=env, python=None)
    return cann_environment(Context(host, load_policy()))


def test_healthy_environment_passes(fake_root: FakeRoot) -> None:
    install_toolkit(fake_root)
    found = run(fake_root, sourced_env(ASCEND_RT_VISIBLE_DEVICES="0,1"))
    assert found.status == "pass", found
    assert found.rules == ()
    text = "\n".join(found.evidence)
    assert f"libascendcl.so resolves in {LATEST}/lib64" in text
    assert "driver libraries on LD_LIBRARY_PATH" in text


def test_set_env_not_sourced_fails(fake_root: FakeRoot) -> None:
    install_toolkit(fake_root)
    found = run(fake_root, {"PATH": "/usr/bin:/bin"})
    assert found.status == "fail"
    assert found.summary.startswith("set_env.sh not sourced")
    # no LD_LIBRARY_PATH either: the warnings' rules follow the failure's
    assert found.rules == ("set-env-not-sourced", "driver-libs-not-on-path",
                           "libascendcl-not-found")
    assert f"source {TOOLKIT_ROOT}/set_env.sh" in found.remedy


def test_set_env_remedy_names_the_cann_85_layout(fake_root: FakeRoot) -> None:
    fake_root.file(f"{ASCEND}/cann-8.5.0/aarch64-linux/ascend_toolkit_install.info",
                   corpus("019"))
    fake_root.file(f"{ASCEND}/cann-8.5.0/set_env.sh", "")
    found = run(fake_root, {"PATH": "/usr/bin:/bin"})
    assert found.status == "fail"
    assert f"source {ASCEND}/cann-8.5.0/set_env.sh" in found.remedy


def test_visible_devices_with_a_space_fails(fake_root: FakeRoot) -> None:
    install_toolkit(fake_root)
    found = run(fake_root, sourced_env(ASCEND_RT_VISIBLE_DEVICES="1, 2"))
    assert found.status == "fail"
    assert "ASCEND_RT_VISIBLE_DEVICES='1, 2'" in found.summary
    assert "invalid character ' '" in found.summary
    assert found.rules == ("visible-devices",)


def test_missing_home_path_fails(fake_root: FakeRoot) -> None:
    install_toolkit(fake_root)
    found = run(fake_root, sourced_env(ASCEND_HOME_PATH=f"{TOOLKIT_ROOT}/9.9.9"))
    assert found.status == "fail"
    assert f"ASCEND_HOME_PATH={TOOLKIT_ROOT}/9.9.9 does not exist" in found.summary
    assert found.rules == ("toolkit-path-missing",)


def test_missing_compiler_dir_fails(fake_root: FakeRoot) -> None:
    install_toolkit(fake_root)
    (fake_root.path / TOOLKIT_ROOT.lstrip("/") / "8.3.RC2" / "compiler").rmdir()
    found = run(fake_root, sourced_env())
    assert found.status == "fail"
    assert "has no compiler/" in found.summary
    assert found.rules == ("home-incomplete",)


def test_unset_opp_path_fails(fake_root: FakeRoot) -> None:
    install_toolkit(fake_root)
    found = run(fake_root, sourced_env(ASCEND_OPP_PATH="UNSET"))
    assert found.status == "fail"
    assert "ASCEND_OPP_PATH is not set" in found.summary
    assert found.rules == ("opp-path",)


def test_unset_opp_path_without_ascend_home_path_warns(fake_root: FakeRoot) -> None:
    """torch_npu's cann_package_check raises only with ASCEND_HOME_PATH set; else it warns."""
    install_toolkit(fake_root)
    found = run(fake_root, sourced_env(ASCEND_OPP_PATH="UNSET", ASCEND_HOME_PATH="UNSET"))
    opp = [v for v in found.evidence if "ASCEND_OPP_PATH" in v] + [found.summary]
    assert "opp-path" in found.rules
    assert any("torch_npu only warns" in line for line in opp), found


def test_driver_lib64_absent_warns(fake_root: FakeRoot) -> None:
    install_toolkit(fake_root)
    found = run(fake_root, sourced_env(LD_LIBRARY_PATH=f"{LATEST}/lib64"))
    assert found.status == "warn"
    assert f"{DRIVER_LIB64} is not on LD_LIBRARY_PATH" in found.summary
    assert found.rules == ("driver-libs-not-on-path",)
    # current toolkits' set_env.sh does add the driver directories; older ones need them
    assert found.remedy.startswith(f"Source {TOOLKIT_ROOT}/set_env.sh")
    assert "older toolkits need" in found.remedy and f"{DRIVER_LIB64}/common" in found.remedy
    assert "does not" not in found.remedy


def test_libascendcl_unresolvable_warns(fake_root: FakeRoot) -> None:
    install_toolkit(fake_root)
    found = run(fake_root, sourced_env(LD_LIBRARY_PATH=DRIVER_LIB64))
    assert found.status == "warn"
    assert "libascendcl.so is not in any LD_LIBRARY_PATH directory" in found.summary
    assert found.rules == ("libascendcl-not-found",)


def test_variables_without_toolkit_warn(fake_root: FakeRoot) -> None:
    found = run(fake_root, {"PATH": "/usr/bin", "ASCEND_GLOBAL_LOG_LEVEL": "3"})
    assert found.status == "warn"
    assert "no CANN toolkit was found" in found.summary
    assert found.rules == ("toolkit-not-found", "libascendcl-not-found")


def test_nothing_installed_skips(fake_root: FakeRoot) -> None:
    found = run(fake_root, {"PATH": "/usr/bin:/bin"})
    assert found.status == "skip"
    assert found.summary == "no CANN toolkit on this machine"
    assert found.rules == ("no-toolkit",)


def test_runs_through_the_registry(fake_root: FakeRoot) -> None:
    install_toolkit(fake_root)
    host = LiveHost(root=str(fake_root.path), env=sourced_env(), python=None)
    checks = select(all_checks(), ["cann.environment"], [])
    (result,) = run_checks(checks, Context(host, load_policy())).results
    assert result.status == "pass", result
    assert result.rules == ()
