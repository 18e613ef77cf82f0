"""Build the offline demo assets (`make demo`).

demo-assets/a2-recorded: a recording (docs/snapshot-format.md) of the Atlas 800I A2 server
(8 x 910B4, driver 25.0.rc1.1) whose real `npu-smi info`, `npu-smi info -m` and `lspci`
outputs are corpus samples 014, 015 and 017. Only those outputs are recorded: every other
question asked of it answers "not recorded", never an invented value.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from probes.live import LiveHost  # noqa: E402
from probes.recording.recorder import RecordingHost  # noqa: E402

CORPUS = ROOT / "tests" / "corpus" / "npu-smi"
A2_OUTPUTS = {
    "info": "014-info-25.0.rc1.1-910B4-8cards-noproc.txt",
    "info -m": "015-info-m-25.0.rc1.1-910B4-Mcu-rows.txt",
}
A2_LSPCI = "017-lspci-grep-d802-910B4-8cards.txt"
HOSTNAME = "atlas-800i-a2 (corpus 014/015/017)"


def _fake_npu_smi(root: Path) -> None:
    """An npu-smi that prints the recorded outputs, so the recording is taken for real."""
    cases = "\n".join(f'  "{args}") cat "{CORPUS / name}" ;;' for args, name in A2_OUTPUTS.items())
    script = root / "usr" / "local" / "bin" / "npu-smi"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(f'#!/bin/sh\ncase "$*" in\n{cases}\n  *) echo "Usage: npu-smi info" >&2;'
                      " exit 1 ;;\nesac\n")
    script.chmod(0o755)
    lspci = root / "usr" / "bin" / "lspci"
    lspci.parent.mkdir(parents=True, exist_ok=True)
    lspci.write_text(f'#!/bin/sh\ncat "{CORPUS / A2_LSPCI}"\n')
    lspci.chmod(0o755)


def build_a2(out: Path) -> Path:
    with tempfile.TemporaryDirectory(prefix="ascend-demo-") as tmp:
        root = Path(tmp)
        _fake_npu_smi(root)
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/root"}
        host = RecordingHost(LiveHost(root=str(root), env=env), hostname=HOSTNAME)
        for args in A2_OUTPUTS:
            result = host.run(["npu-smi", *args.split()])
            if not result.ok:
                raise SystemExit(f"build_demo_assets: {result.describe()}")
        host.run(["lspci"])
        target = out / "a2-recorded"
        if target.exists():
            shutil.rmtree(target)
        return host.save(target)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=ROOT / "demo-assets")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"built {build_a2(args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
