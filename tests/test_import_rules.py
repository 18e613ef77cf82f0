"""The "never" arrows of DESIGN.md §1, read statically from every module of every package.

`tests/test_imports.py` proves what a fresh interpreter loads; this file reads the source with
`ast` (imports inside functions count; imports under `if TYPE_CHECKING:` count for circles and
the inner floors, not for the arrows between packages) and checks:

- probes import nothing of checks, engine, console; checks and engine nothing of console;
  engine nothing of checks; playbooks nothing of ours;
- the inner floors: nothing below the command-line edge imports it (checks.cli,
  checks.cli.commands, console.ui.cli are entry points), the console's headless layer imports
  nothing of its UI, the engine's runtime nothing of engine.tools;
- textual is imported only in console;
- torch and transformers are imported at module level only in engine (a check may import them
  inside the function that needs them);
- no modules import each other in a circle, type-only imports included.

`check_tree(root)` is the rule over any source tree, so the tests below plant violations in a
tree of their own and watch each one being reported.
"""

from __future__ import annotations

import ast
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("probes", "checks", "engine", "console", "playbooks", "demo_models")

# package -> the packages of ours it must never import (at any depth, in any function);
# demo_models is a tool that writes checkpoints with the engine's code: nothing imports it
# but the console (its list of kinds, torch-free)
NEVER: Mapping[str, frozenset[str]] = {
    "probes": frozenset({"checks", "engine", "console", "demo_models"}),
    "checks": frozenset({"console", "demo_models"}),
    "engine": frozenset({"checks", "console", "demo_models"}),
    "playbooks": frozenset(PACKAGES) - {"playbooks"},
    "demo_models": frozenset({"checks", "console"}),
}
# textual only in the console's UI: the rest of console (chat backends and sessions, telemetry
# sources, alert rules) is its headless layer, usable and testable without a screen
TEXTUAL_ONLY_IN = frozenset({"console.ui"})
TEXTUAL_RULE = "textual is imported only in console.ui (the console's headless layer has none)"
HEAVY = frozenset({"torch", "transformers"})  # at module level only in engine (and the builder)
HEAVY_AT_MODULE_LEVEL_IN = frozenset({"engine", "demo_models"})

# Inner floors: (rule, who is bound, what they must never import). Entry points (the CLI edge)
# sit above everything of theirs; the console's headless layer below its UI; the engine's
# runtime below the tools that study models.
ENTRY_POINTS = frozenset({"checks.cli", "checks.cli.commands", "console.ui.cli"})
FLOORS: tuple[tuple[str, frozenset[str], frozenset[str], frozenset[str]], ...] = (
    # rule, bound packages, their exceptions, forbidden packages
    ("nothing below the command-line edge imports it", frozenset(PACKAGES),
     ENTRY_POINTS, ENTRY_POINTS),
    ("the console's headless layer never imports its UI", frozenset({"console"}),
     frozenset({"console.ui"}), frozenset({"console.ui"})),
    ("the engine's runtime never imports engine.tools", frozenset({"engine"}),
     frozenset({"engine.tools"}), frozenset({"engine.tools"})),
)

# Circles known and owned by someone else, reported (as a warning) instead of failing; each
# key is the exact set of modules of one circle, so a new circle still fails. Delete an entry
# when its circle is gone (the test then says so). Empty now: the console's split left none.
ALLOWED_CIRCLES: Mapping[frozenset[str], str] = {}


@dataclass(frozen=True)
class Import:
    source: str  # the importing module, dotted
    target: str  # a module of ours (dotted) or the top-level name of a third-party package
    line: int
    in_function: bool
    type_only: bool = False  # under `if TYPE_CHECKING:`


@dataclass(frozen=True)
class Violation:
    rule: str
    where: str  # module:line, or the circle as a -> b -> a

    def __str__(self) -> str:
        return f"{self.where}: {self.rule}"


def find_modules(root: Path, packages: tuple[str, ...] = PACKAGES) -> dict[str, Path]:
    """Dotted module name -> source file, for every .py under each package directory."""
    found: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_nodes(tree: ast.AST, in_function: bool = False, type_only: bool = False
                  ) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool, bool]]:
    """Every import statement with whether it runs inside a function and whether only a type
    checker reads it (under `if TYPE_CHECKING:`)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, in_function, type_only
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                yield from _import_nodes(ast.Module(body=[child], type_ignores=[]), in_function,
                                         True)
            for child in node.orelse:
                yield from _import_nodes(ast.Module(body=[child], type_ignores=[]), in_function,
                                         type_only)
        else:
            nested = in_function or isinstance(
                node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            yield from _import_nodes(node, nested, type_only)


def _resolve(name: str, modules: Mapping[str, Path]) -> str:
    """The longest module of ours that `name` names, else its top-level package name."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in modules:
            return candidate
    return parts[0]


def _package_of(module: str, modules: Mapping[str, Path]) -> str:
    return module if modules[module].name == "__init__.py" else module.rpartition(".")[0]


def imports_of(module: str, modules: Mapping[str, Path]) -> list[Import]:
    tree = ast.parse(modules[module].read_text(encoding="utf-8"), str(modules[module]))
    found: list[Import] = []
    for node, in_function, type_only in _import_nodes(tree):
        if isinstance(node, ast.Import):
            targets = [_resolve(alias.name, modules) for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                package = _package_of(module, modules).split(".")
                anchor = package[: len(package) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # `from pkg import mod` imports the module pkg.mod when there is one
            targets = [_resolve(f"{base}.{alias.name}", modules) for alias in node.names]
        found += [Import(module, t, node.lineno, in_function, type_only)
                  for t in dict.fromkeys(targets)]
    return found


def _top(name: str) -> str:
    return name.split(".", 1)[0]


def _inside(module: str, packages: frozenset[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def arrow_violations(imports: list[Import]) -> list[Violation]:
    out: list[Violation] = []
    for imp in imports:
        if imp.type_only:
            continue
        here, there = _top(imp.source), _top(imp.target)
        where = f"{imp.source}:{imp.line}"
        if there in NEVER.get(here, frozenset()):
            out.append(Violation(f"{here} must never import {there} ({imp.target})", where))
        if there == "textual" and not _inside(imp.source, TEXTUAL_ONLY_IN):
            out.append(Violation(TEXTUAL_RULE, where))
        if there in HEAVY and not imp.in_function and here not in HEAVY_AT_MODULE_LEVEL_IN:
            out.append(Violation(f"{there} at module level outside engine (import it inside "
                                 "the function that needs it)", where))
    return out


def floor_violations(imports: list[Import]) -> list[Violation]:
    out: list[Violation] = []
    for rule, bound, exempt, forbidden in FLOORS:
        for imp in imports:
            if (_inside(imp.source, bound) and not _inside(imp.source, exempt)
                    and _inside(imp.target, forbidden)):
                out.append(Violation(f"{rule} ({imp.target})", f"{imp.source}:{imp.line}"))
    return out


def _strongly_connected(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """Tarjan's components, iteratively (no recursion limit on deep chains)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    components.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return components


def _one_cycle(component: list[str], graph: Mapping[str, set[str]]) -> list[str]:
    """A shortest circle through the component's first module, for the message."""
    start, members = component[0], set(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for child in sorted(graph[node] & members):
                if child == start:
                    return [*paths[node], start]
                if child not in paths:
                    paths[child] = [*paths[node], child]
                    following.append(child)
        frontier = following
    return component


def import_graph(imports: list[Import], modules: Mapping[str, Path]) -> dict[str, set[str]]:
    """Module -> the modules of ours it imports (a module importing itself is no circle)."""
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for imp in imports:
        if imp.target in modules and imp.target != imp.source:
            graph[imp.source].add(imp.target)
    return graph


def circles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The import circles: one sorted list of modules per strongly connected set."""
    return [c for c in _strongly_connected(graph) if len(c) > 1]


@dataclass(frozen=True)
class Report:
    violations: list[Violation]
    allowed: list[str]  # allowed circles found, with why
    stale: list[str]  # allowed circles no longer found: delete their entries


def check_tree(root: Path, packages: tuple[str, ...] = PACKAGES,
               allowed: Mapping[frozenset[str], str] = ALLOWED_CIRCLES) -> Report:
    modules = find_modules(root, packages)
    imports = [imp for module in modules for imp in imports_of(module, modules)]
    violations = arrow_violations(imports) + floor_violations(imports)
    graph = import_graph(imports, modules)
    seen: set[frozenset[str]] = set()
    allowed_found: list[str] = []
    for component in circles(graph):
        key = frozenset(component)
        shown = " -> ".join(_one_cycle(component, graph))
        if key in allowed:
            seen.add(key)
            allowed_found.append(f"{shown} (allowed: {allowed[key]})")
        else:
            members = "" if len(component) <= 3 else f" (circle of {', '.join(component)})"
            violations.append(Violation("modules import each other in a circle" + members,
                                        shown))
    stale = [f"{', '.join(sorted(k))}: {why}" for k, why in allowed.items() if k not in seen]
    return Report(violations, allowed_found, stale)


# -- in-function imports that buy nothing ------------------------------------------------------

# Importing inside a function buys start-up time only when the module is not loaded anyway: an
# in-function import of a module the importing module's own top-level imports already load (or
# of a module every interpreter has loaded) is noise. Names a lazy package resolves on first use
# (probes.npu_smi's parsers) and imports guarded by `try`/`except ImportError` do buy something.
PRELOADED = frozenset({"os", "re", "json", "sys", "time", "dataclasses", "collections",
                       "itertools", "functools", "pathlib", "typing", "math", "enum",
                       "contextlib", "threading", "struct", "io", "string", "textwrap",
                       "posixpath", "stat", "errno", "types", "abc", "operator", "copy",
                       "weakref", "zlib", "importlib"})
LAZY_PACKAGES = frozenset({"probes.npu_smi"})


def _guarded_lines(tree: ast.AST) -> set[int]:
    """Lines of imports inside a `try` that handles an import failure."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(
                handler.type is None or "Error" in ast.unparse(handler.type)
                or "Exception" in ast.unparse(handler.type) for handler in node.handlers):
            lines |= {n.lineno for stmt in node.body for n in ast.walk(stmt)
                      if isinstance(n, ast.Import | ast.ImportFrom)}
    return lines


def idle_imports(root: Path, packages: tuple[str, ...] = PACKAGES) -> list[str]:
    modules = find_modules(root, packages)
    imports = {m: imports_of(m, modules) for m in modules}
    top = {m: {i.target for i in found if not i.in_function and not i.type_only}
           for m, found in imports.items()}

    def loaded_with(module: str) -> set[str]:
        seen: set[str] = set()
        stack = [module]
        while stack:
            for child in top.get(stack.pop(), ()):
                if child not in seen:
                    seen.add(child)
                    stack.append(child)
        return seen

    idle = []
    for module, found in imports.items():
        inner = [i for i in found if i.in_function and not i.type_only
                 and i.target not in LAZY_PACKAGES]
        if not inner:
            continue
        loaded = loaded_with(module)
        guarded = _guarded_lines(ast.parse(modules[module].read_text(encoding="utf-8")))
        idle += [f"{module}:{i.line} {i.target}" for i in inner
                 if (i.target in loaded or i.target in PRELOADED) and i.line not in guarded]
    return idle


# -- the project --------------------------------------------------------------------------------


def test_every_package_is_covered() -> None:
    """A new top-level package must be placed in the rules, not slip past them."""
    on_disk = {p.parent.name for p in ROOT.glob("*/__init__.py")} - {"tests"}
    assert on_disk == set(PACKAGES)


def test_no_in_function_import_buys_nothing() -> None:
    assert idle_imports(ROOT) == [], "import these at the top of their modules"


def test_an_idle_in_function_import_is_reported(tmp_path: Path) -> None:
    _plant(tmp_path, {**CLEAN, "checks/a.py": "from checks import errors\n"
                                               "def f():\n    from checks.errors import X\n"
                                               "    import json\n"
                                               "def g():\n    try:\n        import json\n"
                                               "    except ImportError:\n        pass\n"})
    assert idle_imports(tmp_path) == ["checks.a:3 checks.errors", "checks.a:4 json"]


def test_the_never_arrows_and_circles_hold() -> None:
    report = check_tree(ROOT)
    for line in report.allowed:
        warnings.warn(f"allowed import circle: {line}", stacklevel=1)
    assert [str(v) for v in report.violations] == []
    assert report.stale == [], "these circles are gone: delete their ALLOWED_CIRCLES entries"


# -- the rule fails when it should: a planted tree ------------------------------------------------


def _plant(root: Path, files: Mapping[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


CLEAN = {
    "probes/__init__.py": "",
    "probes/host.py": "import os\n",
    "checks/__init__.py": "",
    "checks/errors.py": "",
    "checks/cli/__init__.py": "from checks.errors import X\nfrom probes import host\n",
    "checks/tok.py": "def f():\n    import transformers\n",
    "engine/__init__.py": "import torch\nfrom probes.host import Host\n",
    "console/__init__.py": "",
    "console/app.py": "from checks import errors\nimport engine\n",
    "console/ui/__init__.py": "",
    "console/ui/app.py": "import textual\nfrom console import app\n",
    "playbooks/__init__.py": "import yaml\n",
}


def test_a_clean_planted_tree_passes(tmp_path: Path) -> None:
    _plant(tmp_path, CLEAN)
    report = check_tree(tmp_path, allowed={})
    assert report.violations == []


def _violations(tmp_path: Path, extra: Mapping[str, str]) -> list[str]:
    _plant(tmp_path, {**CLEAN, **extra})
    return [str(v) for v in check_tree(tmp_path, allowed={}).violations]


def test_a_probe_importing_console_is_reported(tmp_path: Path) -> None:
    found = _violations(tmp_path, {"probes/bad.py": "def f():\n    from console import app\n"})
    assert found == ["probes.bad:2: probes must never import console (console.app)"]


def test_each_never_arrow_is_reported(tmp_path: Path) -> None:
    found = _violations(tmp_path, {
        "probes/a.py": "import checks.errors\nimport engine\n",
        "checks/b.py": "from console.app import App\n",
        "engine/c.py": "from checks import errors\n",
        "playbooks/d.py": "import probes.host\n",
    })
    assert sorted(found) == sorted([
        "probes.a:1: probes must never import checks (checks.errors)",
        "probes.a:2: probes must never import engine (engine)",
        "checks.b:1: checks must never import console (console.app)",
        "engine.c:1: engine must never import checks (checks.errors)",
        "playbooks.d:1: playbooks must never import probes (probes.host)",
    ])


def test_textual_and_module_level_torch_are_reported(tmp_path: Path) -> None:
    found = _violations(tmp_path, {
        "checks/ui.py": "def f():\n    from textual.app import App\n",
        "console/chat.py": "from textual.message import Message\n",
        "probes/heavy.py": "try:\n    import torch\nexcept ImportError:\n    torch = None\n",
        "checks/heavy.py": "class A:\n    from transformers import AutoTokenizer\n",
    })
    assert sorted(found) == sorted([
        f"checks.ui:2: {TEXTUAL_RULE}",
        f"console.chat:1: {TEXTUAL_RULE}",
        "probes.heavy:2: torch at module level outside engine (import it inside the function "
        "that needs it)",
        "checks.heavy:2: transformers at module level outside engine (import it inside the "
        "function that needs it)",
    ])


def test_the_inner_floors_are_reported(tmp_path: Path) -> None:
    found = _violations(tmp_path, {
        "checks/core.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                          "    from checks.cli import Options\n",
        "console/headless.py": "def f():\n    from console.ui import app\n",
        "engine/runner.py": "from engine.tools import plan\n",
        "engine/tools/__init__.py": "",
        "engine/tools/plan.py": "import engine\n",
    })
    assert sorted(found) == sorted([
        "checks.core:3: nothing below the command-line edge imports it (checks.cli)",
        "console.headless:2: the console's headless layer never imports its UI "
        "(console.ui.app)",
        "engine.runner:1: the engine's runtime never imports engine.tools (engine.tools.plan)",
    ])


def test_a_type_only_circle_is_reported(tmp_path: Path) -> None:
    found = _violations(tmp_path, {
        "checks/a.py": "from checks import b\n",
        "checks/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                       "    from checks.a import A\n",
    })
    assert found == ["checks.a -> checks.b -> checks.a: modules import each other in a circle"]


def test_type_checking_imports_do_not_count_for_the_arrows(tmp_path: Path) -> None:
    found = _violations(tmp_path, {
        "probes/typed.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                           "    from checks.errors import X\nelse:\n    import console\n",
    })
    assert found == ["probes.typed:5: probes must never import console (console)"]


def test_a_two_module_circle_is_reported_even_inside_functions(tmp_path: Path) -> None:
    found = _violations(tmp_path, {
        "checks/run.py": "from checks.errors import X\ndef run():\n    from checks import cmds\n",
        "checks/cmds.py": "from checks.run import main\n",
    })
    assert found == ["checks.cmds -> checks.run -> checks.cmds: modules import each other in a "
                     "circle"]


def test_a_relative_circle_through_a_package_is_reported(tmp_path: Path) -> None:
    found = _violations(tmp_path, {
        "probes/sub/__init__.py": "from .a import A\n",
        "probes/sub/a.py": "from . import b\n",
        "probes/sub/b.py": "from probes.sub import a\n",
    })
    assert found == ["probes.sub.a -> probes.sub.b -> probes.sub.a: modules import each other "
                     "in a circle"]


def test_an_allowed_circle_is_reported_not_failed_and_a_stale_one_is_named(
        tmp_path: Path) -> None:
    _plant(tmp_path, {**CLEAN, "console/m.py": "from console import w\n",
                      "console/w.py": "def f():\n    from console.m import X\n"})
    allowed = {frozenset({"console.m", "console.w"}): "being split",
               frozenset({"console.x", "console.y"}): "fixed already"}
    report = check_tree(tmp_path, allowed=allowed)
    assert report.violations == []
    assert report.allowed == ["console.m -> console.w -> console.m (allowed: being split)"]
    assert report.stale == ["console.x, console.y: fixed already"]
