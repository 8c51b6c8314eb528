"""Red team: a confined agent process going around the judge service instead of through it.

The judge and the wallet run as their own processes (tests/_services.py, the service code
``nib services up`` runs) on a real Anvil, their records in NIB_HOME/services. The agent
(tests/redteam_attacker.py) confines itself as ``nib run`` does, collects approvals it
revokes at once (so the judge counts none of them against the task's cap), then tries to
kill the judge and answer the wallet's re-checks on the judge's port itself. Confinement
must stop both (Landlock's signal scope and TCP bind right), so the wallet's re-check
reaches the real judge, which refuses the revoked verdicts: the seller is paid nothing
beyond the registered cap. Balances are read back from the chain.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from chain import devnet
from chain.devkeys import JUDGE, SELLER, dev_account
from chain.usdc import usdc_contract
from judge.tasks import TaskLimits
from tests._services import Composition

HERE = Path(__file__).resolve().parent
PRICE = 50_000
SELLER_ADDR = dev_account(SELLER).address
TASK = TaskLimits(task_id="task-redteam", spend_cap_atomic=3 * PRICE, per_call_cap_atomic=PRICE,
                  approval_threshold_atomic=10 * PRICE, recipients=(SELLER_ADDR,), sellers=())


def test_a_confined_agent_cannot_replace_the_judge_to_pay_beyond_its_cap(
    chain: Any, service_forks: Any, tmp_path: Path
) -> None:
    home, comp, token, before = _arena(chain, service_forks, tmp_path)
    try:
        services = comp.start(home / "services" / "nib.db")
        services.register_limits(TASK)  # the user, once; the agent gets the task's token
        judge_pid, _ = services.pids
        report = _attack(home, chain, services)
        judge_alive = devnet.pid_alive(judge_pid)
        admin_token = services.admin._headers["Authorization"].removeprefix("Bearer ")
    finally:
        comp.close()
    paid = int(token.functions.balanceOf(SELLER_ADDR).call()) - before

    assert report["confinement"].startswith("agent process confined (Landlock ABI "), report
    # The judge approved each payment, as each fit the cap once the one before was revoked.
    assert report["decisions"] == ["approve"] * 4, report["decisions"]
    # Its spend stays within the registered cap: the revoked verdicts pay nothing.
    assert paid <= TASK.spend_cap_atomic, (paid, report)
    assert paid == 0, report["paid_with_revoked_verdicts"]
    # Because the judge cannot be replaced: the agent can neither signal the services
    # nor listen on a TCP port (the judge's, or any).
    assert report["kill_judge"].startswith("refused PermissionError"), report["kill_judge"]
    assert judge_alive
    assert report["listen_on_judge_port"].startswith("refused PermissionError"), report
    assert report["listen_on_any_port"].startswith("refused PermissionError"), report
    assert all(r.startswith("refused VerdictRevoked") for r in report["paid_with_revoked_verdicts"]), \
        report["paid_with_revoked_verdicts"]
    # What the services' processes show in /proc holds none of their secrets (they take
    # them on stdin): the admin token never reaches the agent.
    for part in ("judge_environ", "judge_cmdline", "wallet_environ", "wallet_cmdline"):
        assert admin_token not in report[part], part


OTHER = TaskLimits(task_id="task-queued-for-a-worker", spend_cap_atomic=10 * PRICE, per_call_cap_atomic=PRICE,
                   approval_threshold_atomic=10 * PRICE, recipients=(SELLER_ADDR,), sellers=())


def test_a_confined_agent_cannot_spend_another_tasks_budget(
    chain: Any, service_forks: Any, tmp_path: Path
) -> None:
    """Its own task is registered with a cap of 0.15; another task (a queued one, or an
    earlier run's) with 0.50. Asking the judge under the other task's id must not pay."""
    home, comp, token, before = _arena(chain, service_forks, tmp_path)
    try:
        services = comp.start(home / "services" / "nib.db")
        # The agent holds its own task's token, as nib run hands it (never the services').
        own = services.admin.register_task_for_token(TASK)
        services.admin.register_task(OTHER)
        report = _attack(home, chain, services, verdicts=5, other_task=OTHER.task_id, token=own)
    finally:
        comp.close()
    paid = int(token.functions.balanceOf(SELLER_ADDR).call()) - before
    assert report["confinement"].startswith("agent process confined (Landlock ABI "), report
    assert paid == 0, (paid, report["paid_on_other_task"])
    assert all("TaskScopeRefused" in r for r in report["paid_on_other_task"]), report


def _arena(chain: Any, service_forks: Any, tmp_path: Path) -> tuple[Path, Composition, Any, int]:
    """A NIB_HOME with the services' private directory, a services composition, the USDC
    contract and the seller's balance before the attack."""
    home = tmp_path / "home"
    (home / "services").mkdir(parents=True, mode=0o700)
    token = usdc_contract(chain.w3, chain.usdc)
    before = int(token.functions.balanceOf(SELLER_ADDR).call())
    return home, Composition("services", chain, forks=service_forks), token, before


def _attack(home: Path, chain: Any, services: Any, **config: Any) -> dict[str, Any]:
    """Run tests/redteam_attacker.py, confined, with the agent's environment; its report."""
    env = {k: v for k, v in os.environ.items()
           if "PASSWORD" not in k and k not in ("NIB_DB_PATH", "NIB_DATABASE_URL")}
    env.update(NIB_HOME=str(home),
               PYTHONPATH=os.pathsep.join([str(HERE.parent), env.get("PYTHONPATH", "")]))
    judge_pid, wallet_pid = services.pids
    config = {"judge_url": services.judge.url, "token": services.agent_token,
              "judge_address": dev_account(JUDGE).address, "judge_pid": judge_pid,
              "wallet_pid": wallet_pid, "wallet_socket": str(services.wallet.socket_path),
              "rpc_url": chain.rpc_url, "chain_id": chain.chain_id, "usdc": chain.usdc,
              "seller": SELLER_ADDR, "task_id": TASK.task_id, "price": PRICE,
              "verdicts": 4, "confine": True, **config}
    done = subprocess.run(
        [sys.executable, str(HERE / "redteam_attacker.py"), json.dumps(config)],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.stdout, done.stderr[-3000:]
    return dict(json.loads(done.stdout.splitlines()[-1]))
