"""The documentation names only what exists: every `nib` command and flag, every `make`
target, every repository path (and `tests/...::test_name`), every NIB_* variable."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "SECURITY.md", *sorted((ROOT / "docs").glob("*.md"))]
TOP_DIRS = ("agent", "wallet", "judge", "chain", "tests", "bench", "contracts", "docs", "tools")
PATH = re.compile(r"(?<![\w/.$])((?:" + "|".join(TOP_DIRS) + r")/[\w./*-]*\w(?:::\w+)?)")


def _code(text: str) -> list[str]:
    """The code the text shows: each line of a fenced block (comments cut), each `span`."""
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.S | re.M)
    lines = [re.sub(r"\s#\s.*$", "", line) for block in blocks for line in block.splitlines()]
    prose = re.sub(r"^```[^\n]*\n.*?^```", "", text, flags=re.S | re.M)
    return lines + re.findall(r"`([^`\n]+)`", prose)


def _tree() -> Any:
    from typer.main import get_command

    from agent.cli.app import app

    return get_command(app)


def _flags(command: Any) -> set[str]:
    names = {"--help"}
    for param in command.params:
        names.update(n for n in (*param.opts, *param.secondary_opts) if n.startswith("--"))
    return names


def _check_invocation(root: Any, words: list[str]) -> str | None:
    """What is wrong with ``nib WORDS`` (None: it names a real command and real flags)."""
    command, i = root, 0
    while i < len(words) and hasattr(command, "commands"):
        # `approve/deny`, `up / status / down`: alternatives at one level, each checked
        names = [words[i]]
        while i + 2 < len(words) and words[i + 1] == "/":
            names.append(words[i + 2])
            i += 2
        alternatives = [n for name in names for n in name.split("/") if n]
        if not alternatives or alternatives[0].startswith(("-", "<")) or alternatives[0].isupper():
            break
        missing = [n for n in alternatives if n not in command.commands]
        if missing:
            return f"no command {' '.join(missing)!r} under {command.name!r}"
        command = command.commands[alternatives[-1]]
        i += 1
    unknown = [w for w in words[i:] if w.startswith("--") and w.split("=")[0] not in _flags(command)]
    return f"no flag {unknown} on {command.name!r}" if unknown else None


def _invocations(snippet: str) -> list[list[str]]:
    found = []
    for match in re.finditer(r"(?:^|[\s/(])nib((?: +[^\s`|;&)]+)*)", snippet):
        words = match.group(1).split()
        words = words[: next((k for k, w in enumerate(words) if w == "nib"), len(words))]
        if words:
            found.append([w.strip(",.[]").removesuffix("'s") for w in words if w.strip(",.[]")])
    return found


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_nib_command_and_flag_the_docs_name_exists(doc: Path) -> None:
    root = _tree()
    problems = [f"`nib {' '.join(words)}`: {why}"
                for snippet in _code(doc.read_text())
                for words in _invocations(snippet)
                if (why := _check_invocation(root, words))]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_path_make_target_and_variable_the_docs_name_exists(doc: Path) -> None:
    from agent.config import known_variables

    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([\w-]+):", makefile, flags=re.M))
    known = known_variables()
    problems = []
    for snippet in _code(doc.read_text()):
        for path in PATH.findall(snippet):
            file, _, test = path.partition("::")
            if not any(ROOT.glob(file)):
                problems.append(f"path {file} does not exist")
            elif test and not re.search(rf"def {test}\b", (ROOT / file).read_text()):
                problems.append(f"{file} has no {test}")
        for name in re.findall(r"(?<![\w/-])([A-Z]+\.md|Makefile)\b", snippet):
            if not (ROOT / name).exists():
                problems.append(f"{name} does not exist")
        problems += [f"make target {t} does not exist"
                     for t in re.findall(r"\bmake ([a-z][\w-]*)", snippet) if t not in targets]
        problems += [f"{v} is not a variable nib reads"
                     for v in re.findall(r"\bNIB_[A-Z_]*[A-Z]", snippet) if v not in known]
    assert not problems, "\n".join(problems)


def test_the_checks_catch_what_does_not_exist() -> None:
    """The checks themselves fail on a wrong name (they are not vacuous)."""
    root = _tree()
    assert _check_invocation(root, ["rnu"]) is not None
    assert _check_invocation(root, ["run", "--max-spnd", "1"]) is not None
    assert _check_invocation(root, ["devnet", "up", "/", "sideways"]) is not None
    assert _check_invocation(root, ["approve/deny", "RUN"]) is None
    assert _invocations("`.venv/bin/nib runs --limit 3`") == [["runs", "--limit", "3"]]


def test_the_readme_stays_short() -> None:
    lines = (ROOT / "README.md").read_text().count("\n")
    assert lines <= 250, f"README.md has {lines} lines; expected at most 250: move detail to docs/"


def test_the_readme_layout_names_every_package_of_the_tree() -> None:
    """README's Layout block lists every product package and sub-package (a directory
    with an __init__.py) and no directory that is not there: it cannot fall behind a move."""
    import re

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("## Layout", 1)[1].split("```")[1]
    packages = {p.parent.relative_to(ROOT).as_posix() for top in ("agent", "wallet", "judge", "chain")
                for p in (ROOT / top).rglob("__init__.py")}
    missing = sorted(p for p in packages if f"{p.rsplit('/', 1)[-1]}/" not in block)
    assert not missing, f"README's Layout does not name {missing}; add a line for each"
    named = set(re.findall(r"(?m)^\s*([a-z0-9_]+)/\s", block))
    gone = sorted(n for n in named if not any(p.endswith(n) for p in packages)
                  and not (ROOT / n).is_dir())
    assert not gone, f"README's Layout names {gone}, which are not in the tree"
