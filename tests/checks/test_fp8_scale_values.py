"""checkpoint.fp8-scales judges scale values without numpy: the same counts, medians and
outliers as numpy gives (the numpy version below is the reference)."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from checks.builtin.fp8_scales import Limits, ScaleProblem, value_problems

ROOT = Path(__file__).resolve().parents[2]


def numpy_problems(name: str, values: list[float], limits: Limits) -> list[ScaleProblem]:
    flat = np.array(values, dtype=np.float64)
    counts = [("NaN", int(np.isnan(flat).sum()), "fail", "scale-not-finite"),
              ("infinite", int(np.isinf(flat).sum()), "fail", "scale-not-finite"),
              ("negative", int((flat < 0).sum()), "fail", "scale-negative"),
              ("zero (an all-zero tile?)", int((flat == 0).sum()), "warn", "scale-zero")]
    problems = [ScaleProblem(name, severity, n, f"{n} {kind}", rule)
                for kind, n, severity, rule in counts if n]
    good = flat[np.isfinite(flat) & (flat > 0)]
    out_of_range = int(((good < limits.low) | (good > limits.high)).sum())
    if out_of_range:
        problems.append(ScaleProblem(name, "fail", out_of_range, f"{out_of_range} outside "
                                     f"[{limits.low:.3g}, {limits.high:.3g}]",
                                     "scale-out-of-range"))
    if good.size > 1 and limits.outlier_ratio is not None:
        median, ratio = float(np.median(good)), limits.outlier_ratio
        outliers = int(((good > median * ratio) | (good < median / ratio)).sum())
        if outliers:
            problems.append(ScaleProblem(name, "warn", outliers, f"{outliers} outliers vs "
                                         f"median {median:.3g} (ratio {ratio:g})",
                                         "scale-outlier"))
    return problems


VALUES = st.lists(st.one_of(
    st.floats(min_value=1e-12, max_value=1e6),
    st.sampled_from([0.0, -0.0, -1.0, math.nan, math.inf, -math.inf, 1e-40, 3e38, 2.0**-20]),
), max_size=40)
LIMITS = st.builds(Limits, st.sampled_from([1e-9, 2.0**-24, 1e-3]),
                   st.sampled_from([1e4, 65504.0, 3e38]),
                   st.one_of(st.none(), st.sampled_from([0.5, 1.0, 10.0, 1000.0])))


@given(VALUES, LIMITS)
def test_the_verdicts_are_numpys(values: list[float], limits: Limits) -> None:
    assert value_problems("s", values, limits) == numpy_problems("s", values, limits)


def test_a_healthy_grid_has_no_problem() -> None:
    grid = [2.0**-8 * (1 + i % 7) for i in range(4096)]
    assert value_problems("s", grid, Limits(1e-9, 1e4, 100.0)) == []


def test_a_model_run_imports_no_numpy(tmp_path: Path) -> None:
    """The --model checks read scale grids and tokenizer.json without numpy, torch or
    transformers (issue #11: a --model run within 3x of a run without one)."""
    from tests.fp8_fixtures import fp8_model_tensors, model_config, write_model
    from tests.tokenizer_fixtures import write_qwen3_model_dir

    model = write_model(tmp_path / "m", fp8_model_tensors(), model_config())
    write_qwen3_model_dir(tmp_path / "tok")
    for item in (tmp_path / "tok").iterdir():
        if item.name.startswith("tokenizer"):
            (model / item.name).write_bytes(item.read_bytes())
    code = ("import io, contextlib, json, sys\n"
            "import checks.cli as cli\n"
            "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
            f"    cli.main(['--root', {str(tmp_path)!r}, '--model', '/m', '--json'])\n"
            "report = json.loads(out.getvalue())\n"
            "ran = {r['id']: r['status'] for r in report['results']}\n"
            "print(json.dumps([ran, [m for m in ('numpy', 'torch', 'transformers') "
            "if m in sys.modules]]))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=300, check=True)
    import json

    ran, heavy = json.loads(out.stdout.splitlines()[-1])
    assert ran["checkpoint.fp8-scales"] in ("pass", "warn", "fail"), ran
    assert heavy == []
