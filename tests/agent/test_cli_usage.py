"""The `nib` console script as a user meets it before any run: every parser error of the
installed typer is one line on stderr with the fix and exit 2, and the command line
starts without loading the chain, the wallet or the models."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from _chain_free import run_reporting_chain_code

ROOT = Path(__file__).resolve().parents[2]
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
        (("devnet",), "`nib devnet` needs a command; expected one of: down, fund, status, up."),
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


@pytest.mark.parametrize("args", [("runs",), ("show", "X"), ("audit", "--run", "X"), ("approve", "X")],
                         ids=["runs", "show", "audit-run", "approve-unknown"])
def test_reading_runs_loads_no_chain_wallet_mcp_or_tool_code(tmp_path, args):
    """What keeps `nib runs`, `nib show` and `nib audit --run` at ~0.35 s of CPU instead of
    ~2 s: reading the run store loads no web3, eth-account (py_ecc computes its BLS tables
    on import), mcp or tool registry, and an unknown run is refused before the loop loads."""
    probe = ("import sys\nfrom agent.cli.app import main\nrc = main(sys.argv[1:])\n"
             "print(rc, *sorted(sys.modules))")
    env = {**os.environ, "NIB_HOME": str(tmp_path)}
    env.pop("NIB_CONFIG", None)
    r = subprocess.run([sys.executable, "-c", probe, *args], env=env, capture_output=True,
                       text=True, timeout=120, stdin=subprocess.DEVNULL, cwd=ROOT)
    rc, *loaded = r.stdout.splitlines()[-1].split()
    assert rc in ("0", "2"), r.stderr  # `show X` on an empty home: no such run, exit 2
    heavy = {"web3", "eth_account", "py_ecc", "mcp", "agent.tools.registry_default",
             "agent.loop.run", "chain.client", "wallet.client"}
    assert not heavy & set(loaded), f"`nib {' '.join(args)}` imported {sorted(heavy & set(loaded))}"


#: Every `nib` command that neither talks to a chain nor signs: its arguments in the home
#: _home_with_money builds, and the exit code its work there ends with. None may load web3
#: or eth-account (~0.7 s of start-up: `nib wallet address` took 0.87 s, `nib audit verify`
#: 0.99 s, `nib submit` 1.25 s; now 0.23-0.33 s).
CHAIN_FREE: dict[str, tuple[tuple[str, ...], int]] = {
    "runs": (("runs",), 0),
    "show": (("show", "abc1"), 0),
    "report": (("report", "--out", "report.html"), 0),
    "audit": (("audit",), 0),
    "audit verify": (("audit", "verify"), 0),
    "wallet address": (("wallet", "address"), 0),
    "judge calibration": (("judge", "calibration"), 0),
    # No services: nothing to grant at (exit 2); with them, the grant is asked for in a
    # forked child, which must load no chain code either (tests/agent/test_cli.py).
    "judge approve": (("judge", "approve", "fed0"), 2),
    # No services: the task is only queued (with them it is registered through the runtime).
    "submit": (("submit", "What is the base fee?"), 0),
    "services down": (("services", "down"), 0),
    "devnet down": (("devnet", "down"), 0),
}
#: Every other command, and what it needs the chain or eth-account (a key) for.
NEEDS_CHAIN: dict[str, str] = {
    "run": "pays on the chain",
    "approve": "resumes a paused run, which pays (an unknown run is refused first: above)",
    "deny": "resumes a paused run (an unknown run is refused first: above)",
    "worker": "runs queued tasks, which pay",
    "eval": "runs the task suites on a devnet",
    "audit reconcile": "reads the Transfer logs",
    "wallet new": "creates a key",
    "wallet import": "encrypts a key",
    "wallet balance": "reads the balances",
    "wallet serve": "unlocks the key and signs",
    "judge serve": "signs verdicts and reads the chain",
    "devnet up": "starts and funds a chain",
    "devnet fund": "mints on the chain",
    "devnet status": "asks the chain for its id",
    "services up": "starts the wallet and the judge",
    "services status": "asks the devnet whether the services' chain is still up",
}


def _command_paths(command: object, prefix: str = "") -> list[str]:
    """Every command of the installed click tree under ``command``, by its path."""
    subs = getattr(command, "commands", None)
    if subs is None:
        return [prefix]
    own = [prefix] if prefix and getattr(command, "invoke_without_command", False) else []
    return own + [p for name, sub in subs.items() for p in _command_paths(sub, f"{prefix} {name}".strip())]


def test_every_command_is_pinned_chain_free_or_says_what_it_needs_the_chain_for():
    """A new command fails here until it is put in CHAIN_FREE (and so pinned below) or in
    NEEDS_CHAIN with its reason."""
    import typer.main

    from agent.cli.app import app

    found = set(_command_paths(typer.main.get_command(app)))
    assert not CHAIN_FREE.keys() & NEEDS_CHAIN.keys()
    assert found == CHAIN_FREE.keys() | NEEDS_CHAIN.keys(), (
        f"unclassified: {sorted(found - CHAIN_FREE.keys() - NEEDS_CHAIN.keys())}; "
        f"gone: {sorted((CHAIN_FREE.keys() | NEEDS_CHAIN.keys()) - found)}")


@dataclass(frozen=True)
class _Verdict:
    """What SpendMeter.reserve reads of a verdict."""

    id: str
    payload_fingerprint: str = "0x" + "ab" * 32
    asset: str = "0x" + "11" * 20
    recipient: str = "0x" + "22" * 20
    chain_id: int = 31337


def _home_with_money(home: Path) -> str:
    """A home as the chain-free commands meet it, without a chain: the runs of
    _store_with_runs and one whose process died (the first reader closes it, reading its
    spend from the ledger), a ledger with a settled and a held payment, and a keystore.
    Returns the keystore's address."""
    from agent.store import RunStore
    from wallet.keystore import DEVNET_SCRYPT_N, Keystore, default_keystore_path
    from wallet.meter import SpendMeter

    ids = _store_with_runs(home)
    store = RunStore(home / "nib.db")
    store.start_run("dead00000005", "a run whose process died", "cost-optimized")
    store.db.execute("UPDATE agent_runs SET owner = 'elsewhere:1', beat_at = 1000.0 "
                     "WHERE run_id = 'dead00000005'")
    store.close()
    meter = SpendMeter(home / "nib.db")
    for n, run_id in enumerate((ids[1], "dead00000005")):
        meter.reserve(run_id, _Verdict(f"v{n}-held"), 20_000, 1_000_000, 10_000_000)
        paid = meter.reserve(run_id, _Verdict(f"v{n}-paid"), 30_000, 1_000_000, 10_000_000)
        meter.mark_signed(paid, auth_nonce="0x" + f"{n + 1:02x}" * 32, valid_before=2_000_000_000)
        meter.settle(paid, "0x" + f"{n + 10:02x}" * 32)
    # Closed here, never by the collector later: an open connection keeps nib.db-shm, and
    # its close during a copy of this home removed the file under shutil.copytree (a flake).
    meter.store.close()
    return Keystore(default_keystore_path(home), scrypt_n=DEVNET_SCRYPT_N).new("pw")


@pytest.fixture(scope="module")
def money_home(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    home = tmp_path_factory.mktemp("money-home")
    return home, _home_with_money(home)


@pytest.mark.parametrize("name", sorted(CHAIN_FREE))
def test_a_command_that_needs_no_chain_loads_no_web3_or_eth_account(tmp_path, money_home, name):
    """What keeps `nib wallet address`, `nib audit verify`, `nib submit` and every other
    command that reads only this machine's files at ~0.25 s instead of ~1 s: none of them
    imports web3 or eth-account, at the top of a module or lazily, in its own process or a
    child it forks."""
    import shutil

    template, address = money_home
    home = tmp_path / "home"
    shutil.copytree(template, home)  # each command meets the same home (the dead run open)
    args, code = CHAIN_FREE[name]
    r, loaded = run_reporting_chain_code(home, *(a.replace("report.html", str(tmp_path / a))
                                                 for a in args))
    assert r.returncode == code, (r.stdout, r.stderr)
    assert not loaded, f"`nib {' '.join(args)}` imported {sorted(loaded)[:6]}"
    if name == "wallet address":
        assert r.stdout.split() == ["address", address]  # EIP-55, as eth-account spelt it


def test_a_mistyped_variable_is_warned_about_naming_the_nearest_one(tmp_path):
    env_args = {"NIB_MODEL_PROVIDR": "openai"}
    env = {**os.environ, "NIB_HOME": str(tmp_path), **env_args}
    r = subprocess.run([str(NIB), "runs"], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert ("warning: NIB_MODEL_PROVIDR is not a nib setting and is ignored; did you mean "
            "NIB_MODEL_PROVIDER?") in r.stderr


def test_a_mistyped_config_key_names_the_nearest_one(tmp_path):
    (tmp_path / "config.toml").write_text('profil = "quality-first"\n')
    r = nib(tmp_path, "runs")
    assert r.returncode == 2 and "profil='quality-first'" in r.stderr
    assert "(did you mean profile?)" in r.stderr


def test_an_unreachable_rpc_off_the_devnet_names_that_network_s_fix(tmp_path):
    env = {**os.environ, "NIB_HOME": str(tmp_path), "NIB_NETWORK": "base-sepolia",
           "NIB_RPC_URL": "http://127.0.0.1:9"}
    r = subprocess.run([str(NIB), "wallet", "balance"], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 1, r.stderr
    assert "check that the node at http://127.0.0.1:9 (chain 84532) is up" in r.stderr
    assert "devnet" not in r.stderr


def test_task_text_over_the_limit_is_refused_with_the_limit(tmp_path):
    r = nib(tmp_path, "run", "What is the base fee? " * 1000)
    assert r.returncode == 2
    assert "the task is 22,000 characters; expected at most 4,000" in r.stderr
    assert len(r.stderr.splitlines()) == 1


def _store_with_runs(home: Path) -> list[str]:
    """Five runs in the home's store (two finished, one stopped, one died, one paused),
    a worker's task whose run is the oldest, and one task still queued."""
    from agent.queue import TaskQueue
    from agent.store import RunStore

    store = RunStore(home / "nib.db")
    queue = TaskQueue(store.db)
    worker_task = queue.submit("worker task", max_spend=500_000)
    ids = [worker_task, "abc123000001", "abc999000002", "def000000003", "fed000000004"]
    for n, run_id in enumerate(ids):
        store.start_run(run_id, f"task {n}", "cost-optimized")
        store.db.execute("UPDATE agent_runs SET started_at = ? WHERE run_id = ?", (1000.0 + n, run_id))
        if n < 3:
            store.finish_run(run_id, {
                "stop_reason": "evidence-covered" if n != 2 else "max-steps", "finished": n != 2,
                "steps": n + 1, "spend": {"usdc_atomic": 20_000 * (n + 1), "gas_wei": 0},
                "tokens": {"input": 0, "output": 0}, "elapsed_s": 0.5 + n,
                "lines": [{"grade": "observed", "text": f"answer {n}"}]})
    store.db.execute("UPDATE agent_runs SET status = 'paused' WHERE run_id = ?", (ids[4],))
    store.db.execute("UPDATE agent_runs SET status = 'died', stop_reason = 'process-died', "
                     "finished = 0 WHERE run_id = ?", (ids[3],))
    claimed = queue.claim("w1")
    assert claimed is not None and claimed.id == worker_task
    queue.finish(worker_task, "w1", finished=True, stop_reason="evidence-covered")
    queue.submit("still queued")
    store.close()
    return ids


def test_runs_limit_returns_exactly_n_rows_with_the_same_figures(tmp_path):
    import json

    ids = _store_with_runs(tmp_path)
    every = json.loads(nib(tmp_path, "runs", "--json").stdout)
    assert len(every) == 6
    by_id = {r["run_id"]: r for r in every}
    assert [by_id[i]["status"] for i in ids] == ["finished", "finished", "stopped", "died", "paused"]
    assert by_id[ids[0]]["worker"] == "w1" and by_id[ids[0]]["spend_usdc_atomic"] == 20_000
    def steady(rows: list[dict]) -> list[dict]:  # a paused run's elapsed time keeps growing
        return [{k: v for k, v in r.items() if k != "elapsed_s" or r["status"] != "paused"}
                for r in rows]

    for n in (1, 3, 5, 6):
        rows = json.loads(nib(tmp_path, "runs", "--limit", str(n), "--json").stdout)
        # Exactly n rows, the newest n, each with the figures it has without a limit (the
        # worker's run is the oldest: it showed 0.00 USDC and 0.0 s under a small limit).
        assert steady(rows) == steady(every[:n]), (n, rows)


def test_run_ids_by_unique_prefix_and_unknown_ids_are_exit_2_everywhere(tmp_path):
    ids = _store_with_runs(tmp_path)
    shown = nib(tmp_path, "show", "def")
    assert shown.returncode == 0 and ids[3] in shown.stdout and "died" in shown.stdout
    ambiguous = nib(tmp_path, "show", "abc")
    assert ambiguous.returncode == 2 and "is ambiguous" in ambiguous.stderr
    assert "abc123000001" in ambiguous.stderr and "abc999000002" in ambiguous.stderr
    for args in (("show", "zzz"), ("approve", "zzz"), ("deny", "zzz"), ("audit", "--run", "zzz"),
                 ("show", "%")):
        r = nib(tmp_path, *args)
        assert r.returncode == 2, (args, r.stderr)
        assert len(r.stderr.splitlines()) == 1 and "no such run" in r.stderr, (args, r.stderr)
