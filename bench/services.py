"""x402 round trip with the judge and the wallet as separate processes vs in-process.

Both compositions pay the same local paywall (on a private Anvil) from the same agent
account for the same resource, interleaved (the order rotates every round). In-process:
the JEV judge and the verdict-gated wallet live in the bench process, as `nib run` builds
them without services (the judge with its calibration store and its durable record of
verdicts issued and consumed); the bare judge of the other benchmarks (no record) is
measured too, as the peer before round 4. Services: the judge service (loopback HTTP with a token, the
task registered, the payload re-checked, the balance read by the judge) and the wallet
service (over a 0600 Unix socket, re-checking with the judge) each run as their own
process, as `nib services up` starts them; the bench process holds only a JudgeClient
and a WalletClient, as the agent does. The goal is <= 1.15x.

``python -m bench.services [--quick]``
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from statistics import median
from typing import Any

import httpx

from bench._util import (
    BENCH_PATH,
    BenchEnv,
    Figure,
    Spread,
    bench_main,
    fmt_ms,
    fmt_ratio,
    on_fresh_chain,
    ratio,
    run_async,
)

__all__ = ["main", "run"]

NAME = "x402 round trip, services vs in-process (median)"
SERVICES_TOKEN = "bench-services-token"  # the wallet's re-check only
ADMIN = "bench-admin-token"
TASK_CAP = 10**9
PEER = "in-process: judge (calibration, record of verdicts) and wallet in the agent's process"


def _judge_child(config: dict[str, Any]) -> None:
    """The judge service's process, until stdin closes (as `nib judge serve` runs it)."""
    from chain.client import ChainClient
    from chain.devkeys import AGENT, JUDGE, dev_account
    from judge.calibration import BetaCalibrator
    from judge.jev import Judge
    from judge.records import VerdictRecords
    from judge.service import JudgeServer, refuse_inspection
    from judge.tasks import TaskRegistry
    from judge.verdict import VerdictSigner

    refuse_inspection()
    chain = ChainClient(config["rpc_url"], 31337)
    agent = dev_account(AGENT).address
    db = Path(config["home"]) / "services.db"
    # As `nib judge serve` builds it (agent.cli.runtime.build_local_judge, service=True).
    judge = Judge(
        VerdictSigner(dev_account(JUDGE)), BetaCalibrator(db), allowed_assets={31337: [config["usdc"]]},
        records=VerdictRecords(db), tasks=TaskRegistry(db), require_task=True,
        balance_of=lambda asset: chain.token_balance(asset, agent),
    )
    with JudgeServer(judge, token=SERVICES_TOKEN, admin_token=ADMIN) as judge_server:
        print(json.dumps({"judge_url": judge_server.url}), flush=True)
        sys.stdin.readline()


def _wallet_child(config: dict[str, Any]) -> None:
    """The wallet service's process, until stdin closes (as `nib wallet serve` runs it):
    the agent's key, the ledger, the judge's re-check over loopback HTTP."""
    from chain.client import ChainClient
    from chain.devkeys import AGENT, JUDGE, dev_account
    from judge.service import JudgeClient, refuse_inspection
    from wallet.keystore import KeyHandle
    from wallet.service import WalletServer
    from wallet.signer import Wallet

    refuse_inspection()
    judge_address = dev_account(JUDGE).address
    recheck = JudgeClient(config["judge_url"], trusted_judge=judge_address, token=SERVICES_TOKEN,
                          timeout_s=10).recheck
    wallet = Wallet(KeyHandle(dev_account(AGENT)), db_path=Path(config["home"]) / "services.db",
                    chain=ChainClient(config["rpc_url"], 31337), usdc=config["usdc"],
                    trusted_judge=judge_address, recheck=recheck)
    with WalletServer(wallet, Path(config["home"])) as wallet_server:
        print(json.dumps({"socket": str(wallet_server.socket_path)}), flush=True)
        sys.stdin.readline()


class _Child:
    """One service as its own process (``python -m bench.services --child ROLE CONFIG``)."""

    def __init__(self, role: str, config: dict[str, Any]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.services", "--child", role, json.dumps(config)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if not line:
            self.proc.kill()
            raise RuntimeError(f"benchmark: the {role} service process did not start")
        self.where: dict[str, str] = json.loads(line)

    def stop(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.write("\n")
            self.proc.stdin.flush()
        self.proc.wait(timeout=30)


class _Services:
    """The judge service and the wallet service, each its own process as `nib services up`
    starts them (two interpreters, two GILs), on one database."""

    def __init__(self, env: BenchEnv) -> None:
        config = {"home": str(env.tmp / "services"), "rpc_url": env.rpc_url, "usdc": env.usdc}
        Path(config["home"]).mkdir(parents=True, exist_ok=True)
        self._judge = _Child("judge", config)
        try:
            self.judge_url = self._judge.where["judge_url"]
            self._wallet = _Child("wallet", {**config, "judge_url": self.judge_url})
        except BaseException:
            self._judge.stop()
            raise
        self.socket = self._wallet.where["socket"]
        self.pids = (self._judge.proc.pid, self._wallet.proc.pid)

    def stop(self) -> None:
        try:
            self._wallet.stop()
        finally:
            self._judge.stop()


def _in_process(env: BenchEnv) -> tuple[Any, Any]:
    """The in-process composition as `nib run` builds it without services
    (agent.cli.runtime.build_local_judge): the judge with its calibration store and its
    durable record of verdicts issued and consumed, in the run's database, and the
    verdict-gated wallet re-checking with it directly (no task registry: the request
    carries the limits and the balance)."""
    from chain.client import ChainClient
    from chain.devkeys import AGENT, JUDGE, dev_account
    from judge.calibration import BetaCalibrator
    from judge.jev import Judge
    from judge.records import VerdictRecords
    from judge.verdict import VerdictSigner
    from wallet.keystore import KeyHandle
    from wallet.signer import Wallet

    db = env.tmp / "services-inprocess.db"
    judge = Judge(VerdictSigner(dev_account(JUDGE)), BetaCalibrator(db),
                  allowed_assets={env.network.chain_id: [env.usdc]}, records=VerdictRecords(db))
    wallet = Wallet(KeyHandle(dev_account(AGENT)), db_path=db,
                    chain=ChainClient(env.rpc_url, env.network.chain_id), usdc=env.usdc,
                    trusted_judge=judge.address, recheck=judge.recheck)
    return judge, wallet


#: The sides of one measurement, run in turn (the order rotates every round).
SIDES = ("services", "local", "bare")


async def _measure(env: BenchEnv, iterations: int, warmup: int) -> dict[str, Any]:
    from agent.tools.x402.pay_http import PayHttpTool
    from chain.devkeys import SELLER, dev_account
    from chain.paywall.app import DEFAULT_PRICES
    from judge.service import JudgeClient
    from judge.tasks import TaskLimits
    from wallet.service import WalletClient

    url = env.paywall_url + BENCH_PATH
    tool = PayHttpTool(env.paywall_url)
    local_judge, local_wallet = _in_process(env)
    # The earlier peer: the bench's bare judge (no calibration store, no record of
    # verdicts), reported for comparison with the figures before this change.
    bare_wallet = env.wallet("services-bare")
    services = _Services(env)
    try:
        # The agent's side acts with each run's task token (as `nib run`): set per run.
        judge = JudgeClient(services.judge_url, timeout_s=10)
        admin = JudgeClient(services.judge_url, token=ADMIN, timeout_s=10)
        sides = {
            "services": (WalletClient(services.socket), judge),
            "local": (local_wallet, local_judge),
            "bare": (bare_wallet, None),
        }
        samples: dict[str, list[float]] = {side: [] for side in SIDES}
        registrations: list[float] = []
        async with httpx.AsyncClient(timeout=30) as http:

            async def one(i: int, side: str) -> float:
                run_id = f"bench-{side}-{i}"
                wallet, judge_of_side = sides[side]
                ctx = env.context(wallet, http, run_id)
                if side == "services":
                    # Once per task (a run), not per payment: timed apart from the round trip.
                    registered = time.perf_counter()
                    judge.use_token(admin.register_task_for_token(TaskLimits(
                        task_id=run_id, spend_cap=TASK_CAP, per_call_cap=TASK_CAP,
                        approval_threshold=None, recipients=(dev_account(SELLER).address,),
                        sellers=(env.paywall_url,))))
                    registrations.append(time.perf_counter() - registered)
                start = time.perf_counter()
                await env.paid_call(tool, ctx, url, judge=judge_of_side)
                return time.perf_counter() - start

            for i in range(warmup + iterations):
                turn = i % len(SIDES)
                for side in SIDES[turn:] + SIDES[:turn]:
                    took = await one(i, side)
                    if i >= warmup:
                        samples[side].append(took)
    finally:
        services.stop()
    return {**samples, "registrations": registrations, "price_atomic": DEFAULT_PRICES["token"]}


def run(quick: bool = False, env: BenchEnv | None = None) -> dict[str, Any]:
    """Measure both compositions; medians, p95s (seconds) and services / in-process."""
    iterations, warmup = (3, 1) if quick else (20, 3)
    data = on_fresh_chain(env, lambda e: run_async(lambda: _measure(e, iterations, warmup)))
    svc, loc, bare = data["services"], data["local"], data["bare"]
    s, lo, b = Spread.of(svc), Spread.of(loc), Spread.of(bare)
    figure = Figure(
        benchmark=NAME,
        ours=str(s),
        peer=f"{lo} ({PEER})",
        ratio=ratio(s.median, lo.median),
        notes=(
            f"services/in-process median (goal <= 1.15x); p95 ratio "
            f"{fmt_ratio(ratio(s.p95, lo.p95))}; {iterations} paid GETs each of {BENCH_PATH}, "
            f"interleaved (the order of the sides rotates), {warmup} warm-up dropped. "
            "Services: the judge and the wallet as two processes (judge over loopback HTTP "
            "with its token, wallet over its 0600 Unix socket), the judge ruling on the "
            "registered task, reading the balance itself and recording each verdict and its "
            "use; each run's task registered before its payment (once per run, timed "
            "apart: registration_median_s). In-process: as `nib run` builds it without "
            "services (the judge with its calibration store and record of verdicts). "
            f"Against the bare in-process judge (no record; the peer before round 4): "
            f"{fmt_ratio(ratio(s.median, b.median))}."
        ),
        raw={"kind": "own", "goal": "median <= 1.15x", "met": ratio(s.median, lo.median) <= 1.15,
             "ratio_p95": ratio(s.p95, lo.p95), "peer_name": PEER,
             "median_services_s": s.median, "median_inprocess_s": lo.median,
             "median_bare_s": b.median, "p95_bare_s": b.p95,
             "ratio_bare": ratio(s.median, b.median),
             "registration_median_s": median(data["registrations"]),
             "p95_services_s": s.p95, "p95_inprocess_s": lo.p95, "iterations": iterations,
             "samples_services_s": svc, "samples_inprocess_s": loc, "samples_bare_s": bare},
    )
    return figure.as_dict()


def report(result: dict[str, Any]) -> str:
    return "\n".join([
        f"x402 paid round trip, {result['iterations']} interleaved requests each",
        f"  judge + wallet as services: median {fmt_ms(result['median_services_s'])}, "
        f"p95 {fmt_ms(result['p95_services_s'])}",
        f"  judge + wallet in-process:  median {fmt_ms(result['median_inprocess_s'])}, "
        f"p95 {fmt_ms(result['p95_inprocess_s'])}",
        f"  ratio services/in-process: median {fmt_ratio(result['ratio'])}, "
        f"p95 {fmt_ratio(result['ratio_p95'])}",
        f"  peer: {result['peer_name']}",
        f"  bare in-process judge (no record of verdicts; the peer before round 4): median "
        f"{fmt_ms(result['median_bare_s'])}, p95 {fmt_ms(result['p95_bare_s'])}; "
        f"services/bare {fmt_ratio(result['ratio_bare'])}",
        f"  (task registration with the judge, once per run, apart: median "
        f"{fmt_ms(result['registration_median_s'])})",
    ])


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--child"]:
        child = _judge_child if args[1] == "judge" else _wallet_child
        child(json.loads(args[2]))
        return 0
    return bench_main("python -m bench.services", __doc__, run, report, argv)


if __name__ == "__main__":
    raise SystemExit(main())
