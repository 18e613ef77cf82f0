"""The console's headless layer (everything outside `console.ui`) imports no textual and no
torch, so chat sessions, telemetry sources and alert rules run and test without a screen."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def headless_modules() -> list[str]:
    found = ["console"]
    for info in pkgutil.walk_packages([str(ROOT / "console")], prefix="console."):
        if not (info.name == "console.ui" or info.name.startswith("console.ui.")):
            found.append(info.name)
    return found


def test_the_headless_layer_imports_neither_textual_nor_torch() -> None:
    modules = headless_modules()
    assert {"console.chat.openai", "console.serving", "console.exporter", "console.alerts",
            "console.options", "console.recording", "console.sources"} <= set(modules)
    code = ("import importlib, json, sys\n"
            f"for name in {modules!r}:\n"
            "    importlib.import_module(name)\n"
            "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=120, check=True)
    loaded = set(json.loads(out.stdout))
    assert not loaded & {"textual", "torch"}
