"""The house's shape, as tests: no import cycle between product modules, and imports
only in the permitted direction (agent → judge, wallet, chain; wallet → judge, chain;
judge and chain import nothing of nib's; judge.storage, the database seam every package
uses, imports nothing of nib's outside itself). Every import counts, lazy and
type-checking ones included: a function-level import is still a dependency, only
deferred, and a type-checking one is a dependency of the reader and of mypy."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("agent", "wallet", "judge", "chain")
ALLOWED: dict[str, set[str]] = {
    "agent": {"agent", "judge", "wallet", "chain"},
    "wallet": {"wallet", "judge", "chain"},
    "judge": {"judge"},
    "chain": {"chain"},
}
SEAM = "judge.storage"  # the database seam: the bottom of the stack, importing only itself


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            found[_module_name(path)] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Product modules that ``name`` imports (resolved to the deepest existing module)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    is_pkg = path.name == "__init__.py"
    targets: set[str] = set()

    def resolve(dotted: str) -> str | None:
        while dotted and dotted not in modules:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                for alias in child.names:
                    if (hit := resolve(alias.name)) is not None:
                        targets.add(hit)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = name.split(".") if is_pkg else name.split(".")[:-1]
                    anchor = anchor[: len(anchor) - (child.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                for alias in child.names:
                    hit = resolve(f"{base}.{alias.name}") or resolve(base)
                    if hit is not None:
                        targets.add(hit)
                    if hit == f"{base}.{alias.name}" and base in modules:
                        # ``from wallet import totals`` names the package: its __init__
                        # runs first and is what the line depends on.
                        targets.add(base)
            visit(child)

    visit(tree)
    targets.discard(name)
    return targets


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp: list[str] = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    import sys

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for v in sorted(graph):
            if v not in index:
                strong(v)
    finally:
        sys.setrecursionlimit(limit)
    return found


def test_no_import_cycle_between_product_modules() -> None:
    # A package's __init__ importing its children (to re-export them) is an edge like any
    # other: a child that imports its package back (``from wallet import totals``) closes
    # a cycle through the __init__.
    cycles = _cycles(_graph())
    assert cycles == [], (
        f"found {len(cycles)} import cycle(s) between product modules: {cycles}; expected none. "
        "Fix: move the shared piece into the module both import, or invert the dependency; "
        "an import under TYPE_CHECKING counts too (a helper module typed against the class "
        "that calls it: give it a small Protocol of what it uses, or pass it the parts), and "
        "so does `from <package> import <module>` inside the package (it runs the package's "
        "__init__, which imports its children: write `from <package>.<module> import ...`)."
    )


def test_imports_follow_the_dependency_direction() -> None:
    bad = sorted(
        f"{name} imports {target}"
        for name, targets in _graph().items()
        for target in targets
        if target.split(".")[0] not in ALLOWED[name.split(".")[0]]
    )
    assert bad == [], (
        f"found imports against the direction agent → judge, wallet, chain; wallet → judge, "
        f"chain; judge and chain → nothing of ours: {bad}. Fix: move the shared piece down "
        "or inject it as a callable."
    )


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_the_storage_seam_imports_nothing_of_ours_outside_itself() -> None:
    bad = sorted(
        f"{name} imports {target}"
        for name, targets in _graph().items()
        if name == SEAM or name.startswith(SEAM + ".")
        for target in targets
        if not (target == SEAM or target.startswith(SEAM + "."))
    )
    assert bad == [], (
        f"found {bad}; expected {SEAM} (the database seam every package uses) to import only "
        "itself. Fix: pass what it needs in as a parameter."
    )


#: The longest a product function and a product class may be (lines, decorators aside).
FUNCTION_LINES, CLASS_LINES = 80, 300


def test_no_product_function_over_80_lines_nor_class_over_300() -> None:
    long: list[str] = []
    for name, path in sorted(_modules().items()):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                continue
            size = (node.end_lineno or node.lineno) - node.lineno + 1
            limit = CLASS_LINES if isinstance(node, ast.ClassDef) else FUNCTION_LINES
            if size > limit:
                long.append(f"{name}:{node.name} ({size} lines > {limit})")
    assert long == [], (
        f"found {long}; expected functions of at most {FUNCTION_LINES} lines and classes of "
        f"at most {CLASS_LINES}. Fix: split by meaning (wallet.signer.Wallet is a façade "
        "over parts with one job each); a helper that needs no instance state can be a "
        "module function."
    )


#: The ``re`` functions whose first argument is a pattern.
_RE_CALLS = frozenset({"compile", "match", "search", "fullmatch", "findall", "finditer", "sub",
                       "split"})


def _pattern_text(node: ast.expr) -> str | None:
    """The literal text of a pattern argument (an f-string's literal parts), else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value for v in node.values
                       if isinstance(v, ast.Constant) and isinstance(v.value, str))
    return None


def test_no_pattern_ends_in_a_dollar_that_lets_a_final_newline_through() -> None:
    """In Python's ``re``, ``$`` also matches just before a final newline: "0x" + 64 hex +
    "\\n" passed the nonce check, and an outside attacker's payment signed under it stopped
    `nib audit reconcile` for every task (round 17 of the attacks, V4). An anchored pattern
    ends in ``\\Z`` (or is used with ``fullmatch``), unless it reads lines (MULTILINE)."""
    found = []
    for name, path in sorted(_modules().items()):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "re"
                    and node.func.attr in _RE_CALLS and node.args):
                continue
            text = _pattern_text(node.args[0])
            flags = ast.unparse(node)
            if text and text.endswith("$") and not text.endswith("\\$") and "MULTILINE" not in flags \
                    and "re.M" not in flags:
                found.append(f"{name}:{node.lineno} {text[-30:]!r}")
    assert found == [], (
        f"found patterns ending in $ {found}; expected \\Z at the end of an anchored pattern "
        "($ lets a value with a final newline through); fix: end it with \\Z.")
