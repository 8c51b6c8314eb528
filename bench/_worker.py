"""One worker process for bench/workers.py: the real ``nib worker`` composition (runtime
from settings, offline planner, in-process judge, verdict-gated wallet) on the bench's
devnet, draining the queue at LOCATION (a SQLite file or a PostgreSQL URL).

``python -m bench._worker LOCATION RPC_URL USDC PAYWALL_URL HOME``
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path


def main(location: str, rpc_url: str, usdc: str, paywall_url: str, home: str) -> None:
    from agent.cli.runtime import build_runtime
    from agent.config import load_settings
    from chain.devkeys import AGENT, SELLER, dev_account
    from chain.devnet import DevnetInfo
    from judge.storage import is_url

    where = {"database_url": location} if is_url(location) else {"db_path": Path(location)}
    settings = load_settings(home=Path(home), **where)
    info = DevnetInfo(rpc_url, 31337, usdc, dev_account(AGENT).address,
                      dev_account(SELLER).address, paywall_url, None, None, running=True)
    rt = build_runtime(settings, devnet_info=info, paywall_url=paywall_url, in_process=True)
    asyncio.run(rt.worker(poll_s=0.05).run(drain=True))


if __name__ == "__main__":
    main(*sys.argv[1:6])
