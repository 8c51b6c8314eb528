"""The paid path's shape, as tests: one purchase reads top to bottom as a pipeline of
named steps, each money word has one home (``agent/tools/money.py``), no tool borrows
from a sibling tool or from the wallet's reconcile, and no function of the tools is over
80 lines nor any class over 300."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from agent.tools.x402.pay_http import PayHttpTool

ROOT = Path(__file__).resolve().parents[3]
TOOLS = ROOT / "agent" / "tools"
#: Money words the paying tools share, and their one home.
MONEY_WORDS = {"spend_cap", "UsdcAmount", "parse_usdc_amount", "require_wallet"}
HOME = TOOLS / "money.py"


def _trees() -> dict[Path, ast.Module]:
    return {p: ast.parse(p.read_text(encoding="utf-8")) for p in sorted(TOOLS.rglob("*.py"))}


def _defined(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def _imported_from(tree: ast.Module) -> set[str]:
    return {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}


def test_each_money_word_has_one_home() -> None:
    homes = {w: [p for p, t in _trees().items() if w in _defined(t)] for w in MONEY_WORDS}
    assert homes == {w: [HOME] for w in MONEY_WORDS}, (
        f"found money words defined at {homes}; expected each only in {HOME.name}. Fix: "
        "import it from agent.tools.money instead of defining it again."
    )


def test_no_tool_borrows_from_a_sibling_tool_or_from_reconcile() -> None:
    tools = {"agent.tools.transfer", "agent.tools.discover", "agent.tools.x402.pay_http",
             "agent.tools.x402.pay_mcp"}
    for path, tree in _trees().items():
        borrowed = (_imported_from(tree) & tools) | (_imported_from(tree) & {"wallet.reconcile"})
        if path.parent.name == "tools" and path.name in ("__init__.py", "registry_default.py"):
            continue  # the tool set itself names every tool
        assert not borrowed, (
            f"{path.relative_to(ROOT)} imports from {sorted(borrowed)}; expected a tool to "
            "import shared words from agent.tools.money (money), agent.tools.base or "
            "agent.tools.x402's step modules. Fix: move the shared word to its one home."
        )


def test_no_function_over_80_lines_nor_class_over_300_in_the_tools() -> None:
    long: list[str] = []
    for path, tree in _trees().items():
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                continue
            size = (node.end_lineno or node.lineno) - node.lineno + 1
            limit = 300 if isinstance(node, ast.ClassDef) else 80
            if size > limit:
                long.append(f"{path.relative_to(ROOT)}:{node.name} ({size} lines > {limit})")
    assert not long, f"found {long}; expected functions <= 80 lines and classes <= 300"


def test_a_paid_purchase_reads_top_to_bottom() -> None:
    """``execute`` calls the steps in the order they happen, each once (the record step
    last: an earlier record is the free answer of a seller that stopped charging)."""
    source = inspect.getsource(PayHttpTool.execute)
    steps = ["check_terms(", "sign_when_free(", "_payment_header(", "send_paid(",
             "prove_settlement(", "self.catalog.observation("]
    at = [source.rfind(step) for step in steps]
    assert all(i >= 0 for i in at) and at == sorted(at), dict(zip(steps, at, strict=True))
    assert all(source.count(step) == 1 for step in steps[:-1])
