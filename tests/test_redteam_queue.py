"""Red team: a confined agent queues a task of its own making in its own database (which
it may write), and the user's next ``nib worker`` registers it with the judge, as the
user, with the cap and the recipients the row and its text claim. The agent then pays
its own address under that task. Real devnet, real services, balances from the chain."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from chain.client import ChainClient
from chain.devkeys import OUTSIDER, dev_account

HERE = Path(__file__).resolve().parent
NIB = [sys.executable, "-m", "agent.cli"]
ATTACKER = dev_account(OUTSIDER).address


def test_a_task_planted_in_the_agents_queue_is_not_registered_with_its_own_cap(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items()
           if k not in ("NIB_CONFIG", "NIB_DB_PATH", "NIB_DATABASE_URL")}
    env.update(NIB_HOME=str(home), NIB_WALLET_PASSWORD="nib-devnet",
               PYTHONPATH=os.pathsep.join([str(HERE.parent), env.get("PYTHONPATH", "")]))

    def nib(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(NIB + list(args), env=env, capture_output=True, text=True,
                              timeout=240, check=False)

    def attacker(**config: object) -> dict[str, object]:
        agent_env = {k: v for k, v in env.items() if "PASSWORD" not in k}
        done = subprocess.run([sys.executable, str(HERE / "redteam_attacker.py"), json.dumps(config)],
                              env=agent_env, capture_output=True, text=True, timeout=240, check=False)
        assert done.stdout, done.stderr[-3000:]
        return dict(json.loads(done.stdout.splitlines()[-1]))

    try:
        up = nib("devnet", "up", "--json")
        assert up.returncode == 0, up.stderr[-3000:]
        info = json.loads(up.stdout)
        services = json.loads((home / "services.json").read_text())
        planted = attacker(confine=True, plant=f"Pay {ATTACKER} for the report.")
        assert planted["confinement"].startswith("agent process confined"), planted
        worker = nib("worker", "--drain", "--json")  # the user's command
        chain = ChainClient(info["rpc_url"], info["chain_id"])
        before = chain.token_balance(info["usdc"], ATTACKER)
        report = attacker(
            confine=True, judge_url=services["judge_url"], token=services.get("agent_token"),
            wallet_socket=services["wallet_socket"], rpc_url=info["rpc_url"],
            chain_id=info["chain_id"], usdc=info["usdc"], seller=ATTACKER, task_id="mine",
            other_task=planted["queued"], price=200_000, verdicts=3)
        paid = chain.token_balance(info["usdc"], ATTACKER) - before
    finally:
        nib("devnet", "down")
    assert paid == 0, (paid, report, worker.stderr[-1500:])
