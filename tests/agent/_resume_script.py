"""Resume a paused run in a fresh process (used by test_resume.py via subprocess).

argv: TMP_DIR RPC_URL CHAIN_ID USDC RUN_ID DECISION REPLIES_JSON
Prints the AgentResult as JSON on stdout.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from types import SimpleNamespace

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[1]), str(HERE)]

from _loop_support import FactTool, paid_deps  # noqa: E402

from agent.loop.run import resume  # noqa: E402
from agent.models.scripted import ScriptedModel  # noqa: E402


def main() -> None:
    tmp, rpc_url, chain_id, usdc, run_id, decision, replies = sys.argv[1:8]
    dev = SimpleNamespace(rpc_url=rpc_url, chain_id=int(chain_id), usdc=usdc)
    model = ScriptedModel(json.loads(replies))
    base_fee = FactTool("base_fee", {"base_fee_gwei": "1.0"})
    deps = paid_deps(Path(tmp), dev, model, extra_tools=(base_fee,))
    result = asyncio.run(resume(run_id, decision, deps))  # type: ignore[arg-type]
    print(result.model_dump_json())


if __name__ == "__main__":
    main()
