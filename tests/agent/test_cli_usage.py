"""The `nib` console script as a user meets it before any run: every parser error of the
installed typer is one line on stderr with the fix and exit 2, and the command line
starts without loading the chain, the wallet or the models."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

#: The real console script pip installed (not `python -m agent.cli`).
NIB = Path(sys.executable).parent / "nib"


def nib(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NIB_HOME": str(tmp_path)}
    env.pop("NIB_CONFIG", None)
    return subprocess.run([str(NIB), *args], env=env, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("rnu",), "No such command 'rnu'. Did you mean 'run'? Fix: `nib --help`"),
        (("--max-spnd",), "No such option: --max-spnd. Fix: `nib --help`"),
        (("run", "x", "--max-spnd", "1"), "(Possible options: --max-spend, --max-steps)"),
        (("runs", "--limit", "abc"), "Invalid value for '--limit'"),
        (("show",), "Missing argument 'run_id'. Fix: `nib show --help`"),
        ((), "`nib` needs a command; expected one of: approve, audit,"),
        (("devnet",), "`nib devnet` needs a command; expected one of: down, status, up."),
    ],
    ids=["unknown-command", "unknown-flag", "misspelt-flag", "bad-value", "missing-argument",
         "no-command", "no-subcommand"],
)
def test_every_usage_error_is_one_line_with_the_fix_and_exit_2(tmp_path, args, needle):
    r = nib(tmp_path, *args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Fix: " in lines[0], r.stderr
    assert needle in lines[0]


def test_help_still_prints_and_exits_0(tmp_path):
    r = nib(tmp_path, "--help")
    assert r.returncode == 0 and "devnet" in r.stdout and "Usage" in r.stdout


def test_the_command_line_loads_no_chain_wallet_or_model_code_before_a_command_needs_it():
    """What keeps `nib --help` and every usage error fast (~0.2 s instead of ~2 s): the
    heavy imports stay behind the commands that use them."""
    probe = ("import sys, agent.cli.app; print('\\n'.join(sorted(sys.modules)))")
    loaded = set(subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                                check=True).stdout.split())
    heavy = {"web3", "eth_account", "httpx", "pydantic_settings", "x402", "mcp", "psycopg",
             "agent.config", "agent.loop.run", "chain.client", "wallet.signer", "judge.jev"}
    assert not heavy & loaded, f"imported by `nib` before any command runs: {sorted(heavy & loaded)}"
