"""nib's services as their own processes, for the suites' services composition.

``python tests/service_child.py`` imports the service code once (the slow part), then
forks one process per config line it reads on stdin and answers ``{"pid": N}``: the
judge service (``role`` ``judge``: its key, the task registrations and the record of
verdicts in ``db``, reading the wallet's balance from the chain, ruling only on
registered tasks) or the wallet service (``role`` ``wallet``: the agent's key, the ledger
in ``db``, re-checking with the judge at ``judge_url``), with the same service code
``nib services up`` runs (judge.service, wallet.service), on the test's chain and
database. A forked service writes ``ready_file`` once it serves and runs until killed;
no key is loaded before the fork (each service builds its own after it).
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
import threading
from functools import cache
from pathlib import Path
from typing import Any

import judge.service  # noqa: F401  (imported before the config arrives: the slow part)
import wallet.service  # noqa: F401
import wallet.signer  # noqa: F401
from chain.devkeys import dev_account as _derive_dev_account


@cache
def dev_account(index: int) -> Any:
    """Anvil dev account ``index``, derived once per process: deriving reads eth-account's
    word list from the virtualenv, which a child that dropped to another uid may not be
    allowed to read (a clone in a 0700 temp directory), so ``_preload`` derives first."""
    return _derive_dev_account(index)


def _judge(cfg: dict[str, Any]) -> Any:
    from agent.cli.runtime import settled_on
    from chain.client import ChainClient
    from chain.devkeys import AGENT, JUDGE
    from chain.usdc import token_domain
    from judge.calibration import BetaCalibrator
    from judge.jev import Judge
    from judge.records import VerdictRecords
    from judge.service import JudgeServer
    from judge.tasks import TaskRegistry
    from judge.verdict import VerdictSigner

    db, chain = cfg["db"], ChainClient(cfg["rpc_url"], cfg["chain_id"])
    owner = dev_account(AGENT).address
    judge = Judge(
        VerdictSigner(dev_account(JUDGE)), BetaCalibrator(db),
        allowed_assets={cfg["chain_id"]: [cfg["usdc"]]},
        records=VerdictRecords(db), tasks=TaskRegistry(db), require_task=True,
        balance_of=lambda asset: chain.token_balance(asset, owner),
        token_domain=cache(lambda asset: token_domain(chain.w3, asset)),
        payment_settled=settled_on(chain),
    )
    server = JudgeServer(judge, port=cfg["port"], token=cfg["token"],
                         admin_token=cfg["admin_token"]).start(timeout_s=60)
    return server, {"url": server.url}


def _wallet(cfg: dict[str, Any]) -> Any:
    from eth_account import Account

    from chain.client import ChainClient
    from chain.devkeys import AGENT, JUDGE
    from judge.service import JudgeClient
    from wallet.keystore import KeyHandle
    from wallet.meter import SpendMeter
    from wallet.service import WalletServer
    from wallet.signer import Wallet

    judge_address = dev_account(JUDGE).address
    judge = JudgeClient(cfg.get("judge_url") or "http://127.0.0.1:9", trusted_judge=judge_address,
                        token=cfg["token"], timeout_s=10)
    key = Account.from_key(bytes.fromhex(cfg["key"])) if cfg.get("key") else dev_account(AGENT)
    chain = ChainClient(cfg["rpc_url"], cfg["chain_id"])
    wallet = Wallet(
        KeyHandle(key), db_path=cfg["db"], chain=chain, usdc=cfg["usdc"],
        trusted_judge=judge_address, recheck=judge.recheck if cfg.get("judge_url") else None,
        meter=SpendMeter(cfg["db"], chain, treasury_cap_atomic=cfg.get("treasury_cap")),
    )
    if cfg.get("hang_on"):
        wallet.emit = _hang_on(cfg["hang_on"], Path(cfg["ready_file"] + ".hung"))
    server = WalletServer(wallet, Path(cfg["home"])).start(timeout_s=60)
    return server, {"socket": str(server.socket_path)}


def _hang_on(when: dict[str, str], marker: Path) -> Any:
    """The wallet's event sink, hanging the request that emits the event ``when`` names
    (``{"event": "wallet.signed", "kind": "transfer"}``) after writing its data to
    ``marker``: the service stops right there, at a crash point, until the test kills it.
    The wallet emits ``wallet.signed`` once the row is 'signed' and the signature exists,
    before the answer; ``wallet.broadcast`` once the node took the transaction, before
    the receipt is awaited and the row settled."""

    def emit(name: str, data: dict[str, object]) -> None:
        if name == when["event"] and data.get("kind") == when.get("kind", data.get("kind")):
            tmp = marker.with_suffix(".tmp")
            tmp.write_text(json.dumps(data, default=str))
            os.replace(tmp, marker)
            threading.Event().wait()  # until SIGKILL

    return emit


def _holder(cfg: dict[str, Any]) -> Any:
    """Not a service: an ordinary process of the user holding the key in memory, for the
    OS-user test's control."""
    key = bytes.fromhex(cfg["key"])
    return key, {"holds": len(key)}


def _reader(cfg: dict[str, Any]) -> Any:
    """Not a service: scan processes' memory and environment for needles (an attacker)."""
    from tests._keyscan import memory_holds

    needles = [bytes.fromhex(n) for n in cfg["needles"]]
    seen: dict[str, dict[str, object]] = {}
    for pid in cfg["pids"]:
        try:
            seen[str(pid)] = {"mem": bool(memory_holds(int(pid), needles))}
        except OSError as exc:
            seen[str(pid)] = {"mem": type(exc).__name__}
        try:
            Path(f"/proc/{pid}/environ").read_bytes()
            seen[str(pid)]["environ"] = "readable"
        except OSError as exc:
            seen[str(pid)]["environ"] = type(exc).__name__
    try:
        import socket

        with socket.socket(socket.AF_UNIX) as sock:
            sock.connect(cfg["socket"])
        seen["socket"] = {"connect": "connected"}
    except OSError as exc:
        seen["socket"] = {"connect": type(exc).__name__}
    return None, seen


def _preload() -> None:
    """What a child imports later, imported while it may still read every file (a child
    that drops to another uid may not read this Python's standard library)."""
    import ctypes  # noqa: F401
    import socket  # noqa: F401

    import eth_account  # noqa: F401
    import uvicorn.lifespan.off  # noqa: F401
    import uvicorn.loops.auto  # noqa: F401
    import uvicorn.protocols.http.auto  # noqa: F401
    import uvicorn.protocols.http.h11_impl  # noqa: F401
    import uvicorn.protocols.websockets.auto  # noqa: F401

    import chain.client  # noqa: F401
    import judge.jev  # noqa: F401
    import tests._keyscan  # noqa: F401
    from chain.devkeys import AGENT, JUDGE

    dev_account(AGENT), dev_account(JUDGE)


ROLES = {"judge": _judge, "wallet": _wallet, "holder": _holder, "reader": _reader}


def serve_one(cfg: dict[str, Any]) -> None:
    """In the forked child: build and start the service, say so, serve until killed.

    With ``uid``, it first drops to that (unprivileged) user and group.
    """
    from judge.service import refuse_inspection

    if cfg.get("uid") is not None:
        _preload()
        uid = int(cfg["uid"])
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
        # A uid change leaves the process non-dumpable; a program the user starts is
        # dumpable. Be that program, so only refuse_inspection() below makes it not.
        ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE 1
    if cfg["role"] in ("judge", "wallet"):
        refuse_inspection()  # as `nib judge serve` / `nib wallet serve` do before any key
    _, ready = ROLES[cfg["role"]](cfg)
    tmp = cfg["ready_file"] + ".tmp"
    Path(tmp).write_text(json.dumps(ready))
    os.replace(tmp, cfg["ready_file"])
    threading.Event().wait()


def main() -> None:
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # forked services are reaped as they die
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:  # closed stdin: the test session is over
        cfg = json.loads(line)
        pid = os.fork()
        if pid == 0:
            try:
                os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
                log = os.open(cfg["ready_file"] + ".log", os.O_WRONLY | os.O_CREAT, 0o600)
                os.dup2(log, 1)  # the forker's pipes are its own; a full pipe would block
                os.dup2(log, 2)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                serve_one(cfg)
            except BaseException as exc:  # the test reads why from the ready file's absence
                Path(cfg["ready_file"] + ".error").write_text(f"{type(exc).__name__}: {exc}")
            finally:
                os._exit(1)
        print(json.dumps({"pid": pid}), flush=True)


if __name__ == "__main__":
    main()
