"""OS users and the wallet service: what a process of the same user, and of another user,
can reach. The processes drop to unprivileged uids (forked from tests/service_child.py,
then setuid): no account is created, so nothing is left to clean up.

- The agent runs as the same OS user as the services. An ordinary process of that user
  can read another's memory (``/proc/PID/mem``): the control proves the scan finds a key
  there. The wallet service makes itself non-dumpable before it loads its key, so the
  same scan of its memory, and of its environment, is refused by the kernel.
- Another (non-root) user cannot reach the wallet's socket at all (0600, in a 0700
  directory); the agent's user can, and the service answers with its address, never a key.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from eth_account import Account

from tests._services import kill
from wallet.service import WalletClient

AGENT_UID, OTHER_UID = 64011, 64012  # unprivileged; no passwd entry needed


def _private_dir(uid: int) -> Path:
    path = Path(tempfile.mkdtemp(prefix="nib-user-"))
    os.chown(path, uid, uid)
    return path


def test_same_user_cannot_read_the_wallet_services_memory_other_users_cannot_reach_it(
    anvil: Any, service_forks: Any
) -> None:
    assert os.geteuid() == 0, "this test drops to unprivileged uids: run the suite as root"
    account = Account.create()  # a key that exists only in the wallet service (and holder)
    key = bytes(account.key)
    home, other = _private_dir(AGENT_UID), _private_dir(OTHER_UID)
    pids: list[int] = []
    try:
        chain = {"rpc_url": anvil.rpc_url, "chain_id": anvil.chain_id, "usdc": anvil.usdc}
        pid, ready = service_forks.start(
            {"role": "wallet", "uid": AGENT_UID, "db": str(home / "nib.db"), "home": str(home),
             "key": key.hex(), "token": "", **chain}, home / "wallet.ready")
        pids.append(pid)
        sock = ready["socket"]
        holder, _ = service_forks.start(
            {"role": "holder", "uid": AGENT_UID, "key": key.hex()}, home / "holder.ready")
        pids.append(holder)
        needles = [key.hex(), key.hex().encode().hex()]
        reader, seen = service_forks.start(
            {"role": "reader", "uid": AGENT_UID, "pids": [pid, holder], "needles": needles,
             "socket": sock}, home / "reader.ready")
        pids.append(reader)
        stranger, strange = service_forks.start(
            {"role": "reader", "uid": OTHER_UID, "pids": [], "needles": needles,
             "socket": sock}, other / "reader.ready")
        pids.append(stranger)

        assert (home.stat().st_uid, home.stat().st_mode & 0o777) == (AGENT_UID, 0o700)
        st = Path(sock).stat()
        assert (st.st_uid, st.st_mode & 0o777) == (AGENT_UID, 0o600)
        # The same user: an ordinary process's memory gives the key away (the scan works);
        # the wallet service's memory and environment are refused by the kernel.
        assert seen[str(holder)] == {"mem": True, "environ": "readable"}, seen
        assert seen[str(pid)] == {"mem": "PermissionError", "environ": "PermissionError"}, seen
        assert seen["socket"] == {"connect": "connected"}  # the agent reaches the wallet
        client = WalletClient(sock, timeout_s=30)
        health = client.health()
        client.close()
        assert health["address"] == account.address and key.hex() not in str(health)
        # Another user cannot even connect.
        assert strange["socket"] == {"connect": "PermissionError"}, strange
    finally:
        for p in pids:
            kill(p)
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(other, ignore_errors=True)
