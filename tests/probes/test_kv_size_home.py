"""One home for KV/state sizes: probes.model.memory.kv_state_size. Its callers, the doctor, the
console, the benches and the engine's tools multiply no KV heads by head_dim, price no MLA
latent and no linear-attention state of their own (an AST scan, shown to fail on a planted
helper). The engine's cache allocates tensors of those shapes; tests/engine/test_cache.py holds
its bytes equal to kv_state_size's."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HOME = "probes/model/memory.py"
MEMORY = "probes.model.memory"
# Where no KV arithmetic belongs at all, whether or not the module calls the function.
DOCTOR_SIDE = ("checks", "console", "bench", "engine/tools")
KV_HEADS = frozenset({"num_key_value_heads", "num_kv_heads", "kv_heads"})
HEAD_DIM = frozenset({"head_dim"})
MLA = frozenset({"kv_lora_rank", "qk_rope_head_dim"})
VALUE_HEADS = frozenset({"value_heads", "linear_num_value_heads"})
KEY_DIM = frozenset({"key_dim", "linear_key_head_dim"})
VALUE_DIM = frozenset({"value_dim", "linear_value_head_dim"})
CONV_DIM = frozenset({"conv_dim"})
KERNEL = frozenset({"kernel", "linear_conv_kernel_dim"})
PATTERNS = {  # each: the names one product must hold together to be a KV/state size
    "KV heads x head_dim": (KV_HEADS, HEAD_DIM),
    "recurrent state value_heads x key_dim x value_dim": (VALUE_HEADS, KEY_DIM, VALUE_DIM),
    "conv state conv_dim x kernel": (CONV_DIM, KERNEL),
}


def _names(node: ast.AST) -> set[str]:
    """Names a factor brings into a product: variables, attributes, string keys; nested
    products are chains of their own and are not looked into."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        return set()
    if isinstance(node, ast.Name):
        return {node.id}
    if isinstance(node, ast.Attribute):
        return {node.attr} | _names(node.value)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    found: set[str] = set()
    for child in ast.iter_child_nodes(node):
        found |= _names(child)
    return found


def _factors(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        return _factors(node.left) + _factors(node.right)
    return [node]


def _chains(tree: ast.AST) -> list[ast.BinOp]:
    """Every outermost product (a * b * c is one chain, not two)."""
    products = [n for n in ast.walk(tree)
                if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult)]
    inner = {id(side) for n in products for side in (n.left, n.right)}
    return [n for n in products if id(n) not in inner]


def kv_arithmetic(source: str) -> list[str]:
    """`line: what` for each product that sizes KV or state, and each read of an MLA latent's
    dimensions (kv_lora_rank, qk_rope_head_dim: only the home sizes that latent)."""
    tree = ast.parse(source)
    found = []
    for chain in _chains(tree):
        names = set().union(*(_names(f) for f in _factors(chain)))
        found += [f"{chain.lineno}: {what}" for what, terms in PATTERNS.items()
                  if all(names & term for term in terms)]
    found += [f"{node.lineno}: reads an MLA latent's dimensions" for node in ast.walk(tree)
              if (isinstance(node, ast.Constant) and node.value in MLA)
              or (isinstance(node, ast.Attribute) and node.attr in MLA)]
    return sorted(set(found), key=lambda line: int(line.split(":")[0]))


def _imports_memory(tree: ast.AST) -> bool:
    return any((isinstance(n, ast.ImportFrom) and n.module == MEMORY)
               or (isinstance(n, ast.Import) and any(a.name == MEMORY for a in n.names))
               for n in ast.walk(tree))


def scanned(root: Path) -> dict[str, str]:
    """Relative path -> source of every caller of probes.model.memory and every module of the
    doctor's side, the function's own home left out."""
    sources = {}
    tops = [d for d in root.iterdir() if d.is_dir() and not d.is_symlink()
            and not d.name.startswith(".") and d.name != "tests"]
    for path in sorted(p for top in tops for p in top.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel == HOME:
            continue
        source = path.read_text(encoding="utf-8")
        if rel.startswith(DOCTOR_SIDE) or _imports_memory(ast.parse(source)):
            sources[rel] = source
    return sources


def own_kv_helpers(root: Path) -> list[str]:
    return [f"{rel}:{line}" for rel, source in scanned(root).items()
            for line in kv_arithmetic(source)]


def test_callers_size_kv_and_state_only_through_kv_state_size() -> None:
    sources = scanned(ROOT)
    callers = {rel for rel, source in sources.items() if _imports_memory(ast.parse(source))}
    assert {"engine/runner.py", "engine/tools/bench_math.py", "engine/tools/microbench.py",
            "checks/builtin/hbm_plan.py"} <= callers
    for rel in sorted(callers):  # each caller is a module that really imports
        importlib.import_module(rel.removesuffix(".py").replace("/", "."))
    assert own_kv_helpers(ROOT) == []


def test_the_home_itself_is_what_the_scan_finds() -> None:
    """The scan recognises the arithmetic where it does live (the home's per-head product
    goes through local names, heads_per_chip x per_head; the planted helper below shows the
    KV pattern)."""
    found = kv_arithmetic((ROOT / HOME).read_text(encoding="utf-8"))
    assert any("MLA latent" in line for line in found)
    assert any("recurrent state" in line for line in found)
    assert any("conv state" in line for line in found)


def test_a_planted_kv_helper_is_found(tmp_path: Path) -> None:
    plant = {
        HOME: "def f(c):\n    return 2 * c.num_key_value_heads * c.head_dim\n",
        "checks/builtin/mine.py": "def kv(c, b):\n    per_layer = 2 * c.num_key_value_heads"
                                  " * c.head_dim * b\n    return per_layer\n",
        "engine/other.py": "from probes.model.memory import dtype_bytes\n\n\n"
                           "def mla(c):\n    return (c.raw['kv_lora_rank'] + 64) * 2\n",
        "engine/tools/state.py": "def s(d):\n    return d.value_heads * d.key_dim * d.value_dim"
                                 " * 4\n",
        "engine/cache_like.py": "def shape(c):\n    return c.kv_heads * c.head_dim\n",  # no caller
        "bench/flops.py": "def f(h, kd, vd, value_heads, key_dim, value_dim):\n"
                          "    return value_heads * (7 * key_dim * value_dim + 2 * value_dim)\n",
    }
    for rel, text in plant.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    assert own_kv_helpers(tmp_path) == [
        "checks/builtin/mine.py:2: KV heads x head_dim",
        "engine/other.py:5: reads an MLA latent's dimensions",
        "engine/tools/state.py:2: recurrent state value_heads x key_dim x value_dim"]
