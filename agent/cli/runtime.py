"""The composition root: build everything a run needs from settings and the devnet.

One place wires the chain client, the wallet (keystore, meter, ledger), the judge
(in-process with its own key, or the HTTP judge service), the tool registry and the
model, so the CLI, the eval suite, the benchmarks and the tests all run the same
agent. The judge's key never reaches the wallet; the wallet's key never leaves it.
"""

from __future__ import annotations

import functools
import json
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from eth_account import Account
from eth_account.signers.local import LocalAccount

from agent.config import NibSettings, load_settings
from agent.errors import AgentConfigError, DependencyDown
from agent.loop.limits import Limits, Profile
from agent.loop.run import Deps
from agent.models.base import Model
from agent.seams import AgentJudge, RuntimeWallet
from agent.store import RunStore, spend_reader
from agent.tools.base import ToolRegistry
from chain import devnet as _devnet
from chain.client import ChainClient
from chain.devkeys import JUDGE, dev_account
from chain.networks import Network, custom_network, get_network

if TYPE_CHECKING:
    from agent.cli.services import ServicesInfo
    from agent.confine import Confinement, Policy
    from agent.loop.result import AgentResult
    from agent.queue import QueuedTask
    from agent.worker import Worker
    from judge.client import JudgeClient
    from judge.jev import Judge
    from judge.mandates import FactReader, MandateCondition
    from judge.payto import TermsOf
    from judge.records import VerdictRecord
    from judge.tasks import TaskRegistry
    from wallet.keystore import KeyHandle
    from wallet.recovery import RunRecovery
    from wallet.service import WalletClient

JUDGE_KEY_FILE = "judge-key.json"


@dataclass
class Runtime:
    """Everything one process needs to run, resume and audit tasks."""

    settings: NibSettings
    network: Network
    chain: ChainClient
    store: RunStore
    wallet: RuntimeWallet
    judge: AgentJudge
    registry: ToolRegistry
    model: Model
    paywall_url: str | None
    devnet: _devnet.DevnetInfo | None = None
    extras: dict[str, object] = field(default_factory=dict)
    #: The judge and wallet services this runtime's clients talk to (None: in-process).
    services: ServicesInfo | None = None

    def __post_init__(self) -> None:
        self.store.spend_of = spend_reader(self.wallet.meter)

    @property
    def db_path(self) -> str | Path:
        """Where the stores live: a SQLite file, or a PostgreSQL URL."""
        return self.settings.database

    @property
    def records(self) -> str | Path:
        """Where the ledger and the judge's records are (the services' database when they
        were started for this home; see agent.cli.services.records_database)."""
        from agent.cli.services import records_database

        return records_database(self.settings)

    def deps(
        self,
        *,
        profile: str | None = None,
        limits: Limits | None = None,
        on_event: Callable[[str, str, dict[str, object]], None] | None = None,
        judge: AgentJudge | None = None,
    ) -> Deps:
        """Dependencies for one run (or a resume)."""
        allow = (self.paywall_url,) if self.paywall_url else ()
        # The devnet's own market is as trusted as its paywall; discovery elsewhere is
        # NIB_DISCOVERY_URL, and a discovered seller still needs the allowlist.
        devnet = self.devnet if self.network.is_devnet else None
        market = tuple(str(s["url"]) for s in devnet.market) if devnet else ()
        discovery = self.settings.discovery_url or (devnet.facilitator_url if devnet else "") or ""
        extras = {"paywall_url": self.paywall_url, "discovery_urls": discovery, **self.extras}
        return Deps(
            model=self.model,
            registry=self.registry,
            store=self.store,
            network=self.network,
            chain=self.chain,
            judge=judge if judge is not None else self.judge,
            wallet=self.wallet,
            wallet_address=self.wallet.address,
            meter=self.wallet.meter,
            limits=limits,
            profile=profile,
            allowlist=allow + market + self.settings.allowlist.entries,
            extras=extras,
            on_event=on_event,
        )

    def register_task(self, run_id: str, task: str, limits: Limits) -> None:
        """When the judge runs as its own service, register the task's limits with it
        first: the judge rules only on tasks registered by the user's side, never on limits
        the agent sends. In-process judges take the limits from ``deps`` instead. The admin
        token is read by a short-lived child (agent.cli.services.as_user), never here; this
        process gets back the task's own token and acts with it (see :meth:`act_for`)."""
        from agent.cli.services import register_task, task_limits

        if self.services is not None:
            self.act_for(register_task(self.settings, self.services,
                                       task_limits(self, run_id, task, limits)))
            return
        registered = task_limits(self, run_id, task, limits)
        if registered.mandates and hasattr(self.judge, "register_task"):
            # An in-process judge learns a task's ordered payments the same way: from the
            # task text, registered before the run starts (no order, no registration: its
            # rulings stay on the request's limits, as in tests).
            self.judge.register_task(registered)

    def resume_task(self, run_id: str) -> None:
        """A resumed run (``nib approve/deny``) acts with a new token of its task (issued
        by the admin, in a child), as :meth:`register_task` leaves ``nib run``."""
        from agent.cli.services import held_verdict, task_token

        if self.services is not None:
            held_verdict(self.store, run_id)  # a run that is not paused: say so, ask nothing
            self.act_for(task_token(self.settings, self.services, run_id))

    def act_for(self, token: str) -> None:
        """This process's judge client acts for one task: with its token the judge
        answers for that task and its verdicts only."""
        self.judge = self.task_judge(token)
        self.prove_task(token)

    def prove_task(self, token: str) -> None:
        """The wallet service learns (from the token) that this process acts for its task:
        a confined process reads and changes only its own tasks' ledger rows."""
        prove = getattr(self.wallet, "prove_task", None)
        if self.services is not None and prove is not None:
            prove(token)

    def task_judge(self, token: str) -> AgentJudge:
        """A client of the judge service holding one task's token (in-process: the judge)."""
        if self.services is None:
            return self.judge
        return judge_client(self.services, token)

    def confine(self, *, unconfined: bool = False) -> Confinement:
        """Confine this agent process (agent.confine), once its task is registered and
        before the first model call: the services' directory, the keystore and the judge's
        key file unreadable and unwritable, the code the services run read-only. Off the
        devnet an agent process that cannot be confined is refused unless ``unconfined``
        (the user's explicit ``--unconfined``). The result's line joins the first line."""
        from agent.confine import FULL_ABI, Confinement, confine, landlock_abi

        abi, why = landlock_abi()
        if self.services is None:
            done = Confinement(0, "the judge and the wallet share its process")
        elif unconfined:
            done = Confinement(0, "--unconfined was given")
        elif not abi:
            done = Confinement(0, why)
        else:
            done = confine(agent_policy(self.settings))
            self._drop_connections_opened_before()
        if not done.complete and self.services is not None and not self.network.is_devnet \
                and not unconfined:
            raise AgentConfigError(
                f"the agent process cannot be confined on this machine ({done.gap or done.why});"
                f" expected Landlock ABI {FULL_ABI} or newer off the devnet "
                f"({self.network.name}), so that a compromised agent cannot read the judge's "
                "admin token, edit the services' records or stand in for the judge. Fix: a "
                "kernel with Landlock ABI 6 (Linux 6.12+, landlock in the lsm= boot parameter), "
                "or pass --unconfined to run without it."
            )
        self.extras["confinement"] = done.line() + self._secrets_held()
        return done

    def _drop_connections_opened_before(self) -> None:
        """Close the wallet connections this process opened before it confined itself
        (the health check, the task's proof). The wallet judges a caller confined or not
        when it accepts a connection, so code planted in this process after confinement
        could otherwise act through one of them as the unconfined user, past every
        per-task check; the next call connects again, confined."""
        close = getattr(self.wallet, "close", None)
        if self.services is not None and callable(close):
            close()

    def _secrets_held(self) -> str:
        """With services, the services' secrets must not be in this process's environment
        (a compromised agent reads its own): refused off the devnet; on the devnet, whose
        passphrases are public, a warning for the first line."""
        from agent.cli.services import SERVICE_SECRETS

        held = [k for k in SERVICE_SECRETS if os.environ.get(k)]
        if self.services is None or not held:
            return ""
        if not self.network.is_devnet:
            raise AgentConfigError(
                f"found {', '.join(held)} in the agent process's environment; expected the "
                "services' secrets only in the environment of `nib services up` (a "
                "compromised agent reads its own environment). Fix: run without them, e.g. "
                f"`env -u {held[0]} nib run ...`."
            )
        return f" (warning: {', '.join(held)} in its environment; the services need it only "\
               "at `nib services up`)"

    def first_line(self) -> str:
        """What the run's first line says: the composition, and the confinement."""
        parts = (self.extras.get("composition"), self.extras.get("confinement"))
        return " · ".join(str(p) for p in parts if p)

    def queued_limits(self, max_spend: int | None) -> tuple[Profile, Limits]:
        """The profile applied and the limits a queued task runs with: the configured ones,
        its ``max_spend`` as the spend cap (what ``nib submit`` registers and ``nib
        worker`` runs)."""
        return self.settings.resolve_limits(
            model_local=bool(getattr(self.model, "local", False)), spend_cap_atomic=max_spend,
        )

    def worker(self, *, concurrency: int = 1, lease_s: float = 30.0, poll_s: float = 0.25,
               worker_token: str | None = None,
               on_result: Callable[[QueuedTask, AgentResult], None] | None = None,
               on_error: Callable[[QueuedTask, Exception], None] | None = None) -> Worker:
        """A queue worker that runs tasks with this runtime (what ``nib worker`` runs).

        Each task gets the configured limits with its own ``max_spend`` as the spend cap
        (registered with the judge service by ``nib submit``, never by the worker, which
        holds no admin token: a task found only in the agents' database, which an agent
        may write, is never registered). With the services, ``worker_token`` (see
        agent.cli.services.worker_token, taken before this process confines itself)
        claims each task's own token from the judge, which gives it only for tasks
        ``nib submit`` registered as queued. A dead worker's runs are recovered by this
        runtime's wallet: in-process, or the wallet service. ``on_result(task, result)`` is
        called as each task's run returns (``nib worker`` prints one line per task), and
        ``on_error(task, exc)`` for a task that was not run or whose run raised (a claim the
        judge refused, a queue row that no longer matches what `nib submit` registered).
        """
        import asyncio

        from agent.loop.run import run_task
        from agent.queue import TaskQueue
        from agent.worker import Worker
        from judge.tasks import text_digest

        async def execute(task: QueuedTask) -> AgentResult:
            try:
                result = await run_queued(task)
            except Exception as exc:
                if on_error is not None:
                    on_error(task, exc)
                raise
            if on_result is not None:
                on_result(task, result)
            return result

        async def run_queued(task: QueuedTask) -> AgentResult:
            applied, limits = self.queued_limits(task.max_spend)
            judge = self.judge
            if self.services is not None:
                claims = judge_client(self.services, worker_token or "")
                token, digest = await asyncio.to_thread(claims.claim, task.id)
                found = text_digest(task.task, limits.spend_cap_atomic)
                if found != digest:
                    raise AgentConfigError(
                        f"queued task {task.id}: its text and cap in the queue digest to "
                        f"{found[:16]}, but `nib submit` registered it with the judge as "
                        f"{digest[:16] or 'nothing'}; expected the task as submitted (the queue "
                        "is the agents' database, which an agent may write). Not run. Fix: "
                        "`nib submit` the task again."
                    )
                judge = self.task_judge(token)
                await asyncio.to_thread(self.prove_task, token)
            deps = self.deps(profile=applied, limits=limits, judge=judge)
            return await run_task(task.task, deps, run_id=task.id)

        def recover(task: QueuedTask) -> RunRecovery:
            return self.wallet.recover_run(task.id, task.worker or "", f"worker {task.worker} died")

        return Worker(
            TaskQueue(self.store.db, lease_s=lease_s), execute, recover,
            store=self.store, concurrency=concurrency, poll_s=poll_s,
        )


def judge_client(services: ServicesInfo, token: str) -> JudgeClient:
    """A client of the judge service ``services`` runs, holding ``token``."""
    from judge.client import JudgeClient

    return JudgeClient(services.judge_url, trusted_judge=services.judge_address, token=token)


def _same_database(settings: NibSettings, wallet: WalletClient) -> None:
    """The wallet service must keep its ledger where this home's records are (where
    `nib services up` put them): otherwise audit and reconcile would read another ledger
    than the one the wallet pays into."""
    from agent.cli.services import records_database
    from wallet.service import database_identity

    ours, theirs = database_identity(records_database(settings)), wallet.database
    if ours != theirs:
        raise AgentConfigError(
            f"the wallet service keeps its ledger in {theirs}, but the services of "
            f"{settings.home} keep their records in {ours}; expected the wallet service "
            "`nib services up` started for this NIB_HOME. Fix: `nib services down`, then "
            "`nib services up` with the same NIB_HOME."
        )


#: The devices a confined agent process keeps (the rest of /dev is denied). Not /dev/pts:
#: through it the agent could open the user's other terminals and read what is typed
#: there (a passphrase at another prompt); its own terminal it already holds (stdin).
AGENT_DEVICES = ("null", "zero", "full", "random", "urandom", "tty", "ptmx", "shm")


def agent_policy(settings: NibSettings) -> Policy:
    """What a confined agent process keeps (agent.confine.Policy): no access to the
    services' directory, the keystore, the judge's key file (or an admin token where older
    versions kept it); no writing to the code the services run; writing only its own
    database, a temp directory and a few devices (AGENT_DEVICES)."""
    from agent.cli.services import ADMIN_TOKEN_FILE, records_database, services_home
    from agent.confine import Policy, code_paths, sqlite_files, temp_dir
    from judge.storage import is_url
    from wallet.keystore import default_keystore_path, keystore_temp_path

    home = settings.home
    keystore = default_keystore_path(home)
    deny = [services_home(home), keystore, keystore_temp_path(keystore), home / JUDGE_KEY_FILE,
            home / ADMIN_TOKEN_FILE, Path("/dev")]
    records = records_database(settings)
    if not is_url(records) and records != settings.database:
        deny += sqlite_files(Path(records))
    read_only = code_paths()
    writable: list[Path] = []
    sqlite: list[Path] = []
    if not is_url(settings.database):
        db = Path(os.path.realpath(settings.database))
        sqlite.append(db)
        holds = [Path(os.path.realpath(p)) for p in (*deny, *read_only)]
        # Its directory, unless something it must not touch is in there (NIB_HOME): then
        # the files themselves (made and kept open before the rules apply).
        if any(db.parent in p.parents or db.parent == p for p in holds):
            writable += sqlite_files(db)
        else:
            writable.append(db.parent)
    writable.append(temp_dir([*deny, *read_only], home / "tmp"))
    devices = tuple(Path("/dev", name) for name in AGENT_DEVICES)
    return Policy(tuple(deny), tuple(read_only), tuple(writable), tuple(sqlite), devices)


def paywall_for(
    explicit: str | None, settings: NibSettings, devnet_info: _devnet.DevnetInfo | None
) -> str | None:
    """The paywall a run uses (and allowlists): the caller's, else NIB_PAYWALL_URL, else
    the running devnet's."""
    return explicit or settings.paywall_url or (devnet_info.paywall_url if devnet_info else None)


def audit_into(store: RunStore) -> Callable[[str, dict[str, object]], None]:
    """Wallet refusals and settlements join the run's own audit trail."""

    def emit(type_: str, data: dict[str, object]) -> None:
        store.event(str(data.get("run_id") or "-"), type_, data)

    return emit


def ensure_devnet_wallet(info: _devnet.DevnetInfo, home: Path | None = None) -> str:
    """Import the devnet's agent key into the keystore if there is none yet."""
    from wallet.keystore import ensure_devnet_wallet as _ensure

    return _ensure(home or _devnet.nib_home())


def _judge_account(settings: NibSettings, network: Network) -> LocalAccount:
    """The judge's signing key: Anvil's judge dev key on the devnet, else a key file of its own."""
    if network.is_devnet:
        return dev_account(JUDGE)
    path = settings.home / JUDGE_KEY_FILE
    # Its own passphrase, never the wallet's: whoever can unlock the wallet must not
    # also be able to approve its spending.
    secret = settings.judge_password.get_secret_value() if settings.judge_password else None
    if not secret:
        raise AgentConfigError(
            "the judge's key file needs a passphrase and NIB_JUDGE_PASSWORD is not set; "
            "expected a passphrase of the judge's own (the wallet's is never used for it). "
            "Fix: export NIB_JUDGE_PASSWORD, or run the judge as a service with "
            "`nib judge serve` and set NIB_JUDGE_URL."
        )
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        acct = Account.create()
        # Created 0600 from the start: the file is never readable by others, even briefly.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, stat.S_IRUSR | stat.S_IWUSR)
        with os.fdopen(fd, "w") as fh:
            fh.write(json.dumps(Account.encrypt(acct.key, secret)))
        return acct
    return Account.from_key(Account.decrypt(json.loads(path.read_text()), secret))


def build_judge(
    settings: NibSettings, network: Network, *, database: str | Path | None = None,
) -> AgentJudge:
    """The in-process judge (its records in ``database``), or a client of the judge service
    when NIB_JUDGE_URL is set."""
    if settings.judge_url:
        from judge.client import JudgeClient

        # The wallet trusts a configured address, never whatever the service claims to be.
        trusted = settings.judge_address or (dev_account(JUDGE).address if network.is_devnet else None)
        if not trusted:
            raise AgentConfigError(
                f"NIB_JUDGE_URL is set ({settings.judge_url}) but NIB_JUDGE_ADDRESS is not; expected "
                "the judge's address so the wallet can verify its verdicts. Fix: set "
                "NIB_JUDGE_ADDRESS to the address `nib judge serve` printed."
            )
        return JudgeClient(settings.judge_url, trusted_judge=trusted, token=settings.judge_token)
    return build_local_judge(settings, network, database=database)


def settled_on(chain: ChainClient) -> Callable[[VerdictRecord], bool]:
    """Whether a verdict record's EIP-3009 authorization (``payer:nonce``) settled on
    ``chain`` at the approved amount and recipient: what the judge's outcomes count on."""
    from chain.usdc import authorization_settled

    def settled(rec: VerdictRecord) -> bool:
        payer, _, nonce = str(rec.authorization or "").partition(":")
        return bool(nonce) and authorization_settled(
            chain.w3, token=rec.asset, authorizer=payer, nonce=nonce, recipient=rec.recipient,
            value=rec.amount)

    return settled


def build_local_judge(
    settings: NibSettings, network: Network, *, service: bool = False,
    database: str | Path | None = None,
) -> Judge:
    """The judge with its own key, calibration store and record of verdicts, in
    ``database`` (default: the settings' database).

    ``service`` (``nib judge serve``): it also keeps task registrations, reads the wallet's
    balance from the chain itself and, once it has an admin token to register tasks
    with (always off the devnet), rules only on registered tasks. Either way it reads a
    seller's own 402 before it approves a purchase from it.
    """
    from judge.calibration import BetaCalibrator
    from judge.jev import Judge
    from judge.payto import advertised_terms
    from judge.records import VerdictRecords
    from judge.verdict import VerdictSigner

    db = database if database is not None else settings.database
    signer = VerdictSigner(_judge_account(settings, network))
    calibrator = BetaCalibrator(db)
    # In-process too, an x402 purchase pays exactly what its seller's own 402 states, read
    # by the judge (an unregistered task's origin is the agent's allowlist's: judge.tasks.unbound).
    parts = _service_parts(settings, network, db) if service else _ServiceParts(
        terms_of=advertised_terms)
    return Judge(
        signer,
        calibrator,
        allowed_assets={network.chain_id: [network.usdc or ""]},
        # The wallet keeps its ledger in this same database (in-process: this file; as
        # services: the services' records, checked by _same_database) and syncs
        # its reservation after each re-check.
        records=VerdictRecords(db, wallet_syncs_after=True),
        fact_of=chain_fact_reader(network.rpc_url, network.chain_id, network.usdc,
                                  _keystore_owner(settings)),
        **parts,
    )


def _keystore_owner(settings: NibSettings) -> str | None:
    """The agent wallet's address (its keystore's, read without the password), or None."""
    from wallet.keystore import Keystore, default_keystore_path

    keystore = Keystore(default_keystore_path(settings.home))
    return keystore.address() if keystore.exists() else None


class _ServiceParts(TypedDict, total=False):
    """What the judge service has and an in-process judge does not (``Judge``'s keywords)."""

    tasks: TaskRegistry
    require_task: bool
    balance_of: Callable[[str], int] | None
    terms_of: TermsOf
    token_domain: Callable[[str], tuple[str, str]]
    payment_settled: Callable[[VerdictRecord], bool]


def _service_parts(settings: NibSettings, network: Network, db: str | Path) -> _ServiceParts:
    """The judge service's task registrations, its own read of the wallet's balance, the
    payTo check and the settlement check (``nib judge serve``)."""
    from chain.usdc import token_domain
    from judge.payto import advertised_terms
    from judge.tasks import TaskRegistry

    admin = bool(os.environ.get("NIB_JUDGE_ADMIN_TOKEN"))
    if not admin and not network.is_devnet:
        raise AgentConfigError(
            f"the judge service on {network.name} needs NIB_JUDGE_ADMIN_TOKEN to register "
            "tasks; expected it set (off the devnet the judge rules only on registered "
            "tasks). Fix: start it with `nib services up`, which sets it."
        )
    owner = _keystore_owner(settings)
    chain = ChainClient(network.rpc_url, network.chain_id)
    return {
        "tasks": TaskRegistry(db),
        "require_task": admin,
        "balance_of": (lambda asset: chain.token_balance(asset, owner)) if owner else None,
        # An allowlisted seller origin admits the terms its own 402 states.
        "terms_of": advertised_terms,
        "token_domain": functools.cache(lambda asset: token_domain(chain.w3, asset)),
        "payment_settled": settled_on(chain),
    }


def chain_fact_reader(
    rpc_url: str, chain_id: int, usdc: str | None = None, owner: str | None = None
) -> FactReader:
    """What the judge reads from the chain itself to prove an ordered payment's condition:
    the latest base fee or the gas price in gwei, one address's USDC (``usdc``) or ETH
    balance, the agent's own (``owner``, its keystore's address) for "my balance"; None
    for anything else."""
    from chain.client import ChainClient
    from judge.mandates import SELF

    chain = ChainClient(rpc_url, chain_id)

    def fact_of(cond: MandateCondition) -> Decimal | None:
        if cond.fact == "base_fee_gwei":
            return Decimal(int(chain.block("latest").get("baseFeePerGas", 0))).scaleb(-9)
        if cond.fact == "gas_price_gwei":
            return Decimal(chain.gas_price()).scaleb(-9)
        address = owner if cond.subject == SELF else cond.subject
        if cond.fact == "usdc_balance" and address and usdc:
            return Decimal(chain.token_balance(usdc, address)).scaleb(-6)
        if cond.fact == "eth_balance" and address:
            return Decimal(chain.eth_balance(address)).scaleb(-18)
        return None

    return fact_of


def resolve_network(settings: NibSettings, devnet_info: _devnet.DevnetInfo | None) -> Network:
    domain = {"usdc_name": settings.usdc_name, "usdc_version": settings.usdc_version}
    if settings.network == "anvil":
        if devnet_info is None:
            raise DependencyDown(
                "network 'anvil' needs the local devnet and none is running; expected "
                "`nib devnet up` first. Fix: run `nib devnet up`, or set NIB_NETWORK."
            )
        given = settings.usdc_address
        if given and given.lower() != devnet_info.usdc.lower():
            raise AgentConfigError(
                f"NIB_USDC_ADDRESS={given} but the running devnet's sellers take {devnet_info.usdc}; "
                "expected the same token (a payment in another would be refused by every seller). "
                "Fix: `nib devnet up` with NIB_USDC_ADDRESS set (it checks the token and points "
                "the devnet's sellers at it), or unset NIB_USDC_ADDRESS."
            )
        return get_network("anvil", rpc_url=devnet_info.rpc_url, usdc=devnet_info.usdc, **domain)
    if settings.network.startswith("custom") or settings.network.isdigit():
        if not (settings.rpc_url and settings.usdc_address):
            raise AgentConfigError(
                f"network {settings.network!r} needs NIB_RPC_URL and NIB_USDC_ADDRESS; "
                "expected both for a custom network. Fix: set them."
            )
        chain_id = int(settings.network) if settings.network.isdigit() else ChainClient(settings.rpc_url).chain_id()
        return custom_network(settings.network, chain_id, settings.rpc_url, settings.usdc_address, **domain)
    return get_network(settings.network, rpc_url=settings.rpc_url, usdc=settings.usdc_address, **domain)


def build_runtime(
    settings: NibSettings | None = None,
    *,
    model: Model | None = None,
    devnet_info: _devnet.DevnetInfo | None = None,
    paywall_url: str | None = None,
    in_process: bool = False,
) -> Runtime:
    """Wire a runtime against the running devnet (or ``devnet_info``) and the running judge
    and wallet services. It starts nothing: a devnet or services that are down stop it
    with DependencyDown and the fix. ``in_process`` (tests, benchmarks, ``--in-process``)
    composes the judge and the wallet in this process instead, unconfined: asked for,
    never a fallback."""
    from agent.cli.services import running
    from agent.models.factory import model_from_config
    from agent.tools.registry_default import default_registry
    from wallet.meter import SpendMeter
    from wallet.signer import Wallet

    settings = settings or load_settings()
    devnet_info = _devnet_for(settings, devnet_info)
    network = resolve_network(settings, devnet_info)
    chain = ChainClient(network.rpc_url, network.chain_id)
    if network.usdc is None:
        raise AgentConfigError(
            f"network {network.name} has no USDC address; expected one. Fix: set NIB_USDC_ADDRESS."
        )
    if network.is_devnet and devnet_info is not None:
        ensure_devnet_wallet(devnet_info, settings.home)
    paywall = paywall_for(paywall_url, settings, devnet_info)
    registry = default_registry(paywall_url=paywall)
    chosen = model or model_from_config(settings)
    store = RunStore(settings.database)
    services = None if in_process else running(settings.home)
    if services is not None:
        _same_chain(services, network)
        remote_wallet, remote_judge = _service_clients(services)
        _same_database(settings, remote_wallet)
        remote_wallet.emit = audit_into(store)  # the service's events join the run's trace
        return Runtime(settings, network, chain, store, remote_wallet, remote_judge,
                       registry, chosen, paywall, devnet_info,
                       extras={"composition": "services: " + services.describe()},
                       services=services)
    if not in_process:
        up = "`nib devnet up`" if network.is_devnet else "`nib services up`"
        raise DependencyDown(
            f"no judge and wallet services are running for {network.name} (NIB_HOME "
            f"{settings.home}); expected them as their own processes (the agent process must "
            f"not hold the key or the limits). Fix: {up} starts them (the in-process "
            "composition, unconfined, is for tests and benchmarks: --in-process)."
        )
    from agent.cli.services import records_database

    records = records_database(settings)  # the ledger and verdicts: where the services keep theirs
    key = _unlocked_key(settings, network)
    judge = build_judge(settings, network, database=records)
    wallet = Wallet(
        key,
        db_path=records,
        meter=SpendMeter(records, chain, treasury_cap_atomic=settings.treasury_cap_atomic),
        chain=chain,
        usdc=network.usdc,
        trusted_judge=judge.address,
        recheck=judge.recheck,
        emit=audit_into(store),
        eth_price_usdc=settings.eth_price_usdc,
    )
    return Runtime(settings, network, chain, store, wallet, judge, registry, chosen, paywall, devnet_info,
                   extras={"composition": "in-process judge and wallet (--in-process: tests and benchmarks)"})


def chain_view(settings: NibSettings) -> tuple[Network, ChainClient, str]:
    """The network, a client of its chain and the wallet's address: what the user's
    commands that only read the chain need (``wallet balance``, ``audit reconcile``). No
    key is unlocked and no judge or wallet composed; a devnet that is down stops it."""
    from wallet.keystore import Keystore, default_keystore_path

    network = resolve_network(settings, _devnet_for(settings, None))
    chain = ChainClient(network.rpc_url, network.chain_id)
    keystore = Keystore(default_keystore_path(settings.home))
    if not keystore.exists():
        raise AgentConfigError(
            f"no wallet keystore at {keystore.path}; expected one for network {network.name}. "
            "Fix: `nib devnet up` (the devnet's) or `nib wallet new`."
        )
    return network, chain, keystore.address()


def _service_clients(services: ServicesInfo) -> tuple[WalletClient, JudgeClient]:
    """Clients of the running wallet and judge services. The judge client holds no token
    until the task is registered (Runtime.register_task gives it the task's)."""
    from judge.client import JudgeClient
    from wallet.service import WalletClient

    judge = JudgeClient(services.judge_url, trusted_judge=services.judge_address)
    return WalletClient(services.wallet_socket), judge


def _devnet_for(
    settings: NibSettings, devnet_info: _devnet.DevnetInfo | None
) -> _devnet.DevnetInfo | None:
    """The devnet a run on ``anvil`` uses: the one given, else the running one. A devnet
    that is down is never started here (only ``nib devnet up`` starts it)."""
    if settings.network != "anvil" or devnet_info is not None:
        return devnet_info
    info = _devnet.status(settings.home)
    if info is None or not info.running:
        found = "none was ever started" if info is None else f"the one at {info.rpc_url} is down"
        raise DependencyDown(
            f"the local devnet is not running for NIB_HOME {settings.home} ({found}); "
            "expected it up for network 'anvil'. Fix: `nib devnet up` (or set NIB_NETWORK "
            "for another chain)."
        )
    return info


def _same_chain(services: ServicesInfo, network: Network) -> None:
    """The services read their chain once, at start: services started against another
    chain (a devnet restarted on a new port) would rule and pay on a dead one."""
    if services.rpc_url and network.rpc_url and services.rpc_url != network.rpc_url:
        raise DependencyDown(
            f"the judge and wallet services run against the chain at {services.rpc_url}, "
            f"but {network.name} is now at {network.rpc_url}; expected the same chain. Fix: "
            "`nib devnet up` restarts them on the devnet's chain (elsewhere: `nib services "
            "down && nib services up`)."
        )


def _unlocked_key(settings: NibSettings, network: Network) -> KeyHandle:
    """The wallet's key for an in-process wallet (devnet, tests, benchmarks), unlocked."""
    from wallet.keystore import DEVNET_PASSPHRASE, Keystore, default_keystore_path

    ks = Keystore(default_keystore_path(settings.home))
    if not ks.exists():
        raise AgentConfigError(
            f"no wallet keystore at {ks.path}; expected one for network {network.name}. Fix: "
            "`nib wallet new` (then fund it) or `nib wallet import`."
        )
    # The devnet keystore holds Anvil's published key; its documented default passphrase
    # lets `make run` work on a fresh machine. Real networks always need the variable.
    given = settings.wallet_password.get_secret_value() if settings.wallet_password else None
    secret = given or (DEVNET_PASSPHRASE if network.is_devnet else None)
    return ks.unlock(secret, chain_id=network.chain_id)
