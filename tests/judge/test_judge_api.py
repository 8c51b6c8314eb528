"""The judge package's public API is its sorted __all__, and it imports nothing of ours."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import judge

JUDGE_DIR = Path(judge.__file__).parent


def test_all_is_sorted_and_complete() -> None:
    assert judge.__all__ == sorted(judge.__all__)
    for name in judge.__all__:
        assert getattr(judge, name) is not None


def test_judge_imports_nothing_else_of_ours() -> None:
    ours = {"agent", "wallet", "chain"}
    for path in JUDGE_DIR.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                roots = {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                roots = {(node.module or "").split(".")[0]}
            else:
                continue
            assert not roots & ours, f"{path.name} imports {roots & ours}"


def test_verdicts_do_not_pull_in_the_web_stack() -> None:
    code = "import judge.verdict, sys; print('fastapi' in sys.modules, 'uvicorn' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False False"
