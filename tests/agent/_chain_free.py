"""Which chain code a `nib` command loads: each module of web3 and eth-account it imports,
in its own process and in the children it forks (agent.cli.services.as_user), read from
Python's import-time report (PYTHONPROFILEIMPORTTIME, which a forked or started child
inherits), so an import anywhere on the command's path counts, top-level or lazy."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: What a command that neither talks to a chain nor signs must not load (~0.7 s of start-up).
CHAIN_CODE = ("web3", "eth_account")
#: What answering a question (``nib run``) must not load: a web server and the MCP SDK
#: (~0.55 s of start-up together: the market's seller table came with FastAPI, a type
#: annotation with mcp); it talks HTTP through httpx and MCP only when it buys over MCP.
SERVER_CODE = ("fastapi", "starlette", "uvicorn", "mcp")


def run_reporting_chain_code(
    home: Path, *args: str, env: dict[str, str] | None = None, code: tuple[str, ...] = CHAIN_CODE
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """Run ``nib ARGS`` on ``home``: its result (stderr without the import report) and the
    modules of the packages ``code`` names (web3 and eth-account by default) it imported, in
    the order it imported them."""
    full = {**os.environ, "NIB_HOME": str(home), **(env or {}), "PYTHONPROFILEIMPORTTIME": "1"}
    full.pop("NIB_CONFIG", None)
    r = subprocess.run([sys.executable, "-m", "agent.cli", *args], env=full, cwd=ROOT,
                       capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    loaded, rest = [], []
    for line in r.stderr.splitlines():
        if not line.startswith("import time:"):
            rest.append(line)
        elif (name := line.rpartition("|")[2].strip()).split(".")[0] in code:
            loaded.append(name)
    return subprocess.CompletedProcess(r.args, r.returncode, r.stdout, "\n".join(rest)), loaded
