"""Transaction nonces for concurrent sends from one key: no gaps, no collisions.

Every allocation re-reads ``eth_getTransactionCount(address, "pending")``: the chain's
count is the truth for every number not in flight, so a number the chain has used is
never handed out and a number the manager thought used but the chain never kept (a
devnet reverted to a snapshot or reset, a transaction dropped from the pool) is handed
out again instead of leaving a gap. A number confirmed with its transaction's hash
stays used while the node still has that transaction (the pending count can lag one
being mined). A transaction signed above a gap is accepted into the node's pool and then
waits there, unmined, with its spend counted; ``unsent_below`` lets the wallet broadcast
in nonce order and refuse one above a gap. A number whose send failed is released and
handed out again before any new one.

The state lives in memory (one process), or, given the wallet's ``Store``, in the
``wallet_nonces`` table: every operation is then a read-modify-write inside a wallet
write section, so worker processes on different connections and machines share one
sequence. Each number in flight records its holder (``storage.process_identity()``), so
a dead worker's numbers can be given back (``recover``). Each process re-reads the
chain's pending count on its first use (the chain may have moved: outside sends, a
devnet reset) without dropping numbers other live processes hold.
"""

from __future__ import annotations

import heapq
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from web3 import Web3
from web3.exceptions import TransactionNotFound

from judge.storage import process_identity
from wallet.errors import NonceHoldRefused

if TYPE_CHECKING:
    from wallet._store import Store

NONCES = "wallet_nonces"
#: How long a number stays in flight for its holder without being sent or given back.
#: Past it (or once the holder's process is gone) the next sync frees it: a caller that
#: takes numbers and never sends them blocks other transfers for at most this long. A
#: transfer that waits longer (a run paused for approval) quotes afresh.
NONCE_LEASE_S = float(os.environ.get("NIB_NONCE_LEASE_S") or 120.0)
#: A confined caller's hold is bounded by task (its groups, see ``acting_for``), so forking
#: new processes renews nothing: at most MAX_HELD numbers in flight per task, and one lease
#: of holding time over the task's whole history. A stretch of holding (from the first
#: number taken to the moment the task holds none) that ended with a number given back or
#: run out unsent counts in full; one whose numbers were all sent counts for nothing. The
#: numbers held now are leased until the task's lease is used up (allocating, or releasing
#: and claiming back, extends nothing), and a task that let a lease run out unsent
#: allocates nothing for BAR_LEASES leases.
MAX_HELD = 16
BAR_LEASES = 10
#: A task's holding time is remembered this long after it last held a number (so the
#: state does not grow with every task ever run): far longer than any run.
FORGET_S = 7 * 24 * 3600.0

#: The holder the current request acts for (see ``acting_for``); None: the manager's own.
_ACTING_FOR: ContextVar[str | None] = ContextVar("nib_nonce_holder", default=None)
#: The tasks a confined caller acts for (its hold is bounded by them); None: unbounded.
_GROUPS: ContextVar[tuple[str, ...] | None] = ContextVar("nib_nonce_groups", default=None)


@contextmanager
def acting_for(holder: str | None) -> Iterator[None]:
    """Nonce operations inside are made for ``holder``, not this process.

    The wallet service allocates, confirms and releases numbers for the worker processes
    it serves: recorded as the worker's, a dead worker's numbers are the ones its recovery
    gives back (``recover(worker)``), and a live worker releases only its own.
    """
    token = _ACTING_FOR.set(holder or None)
    try:
        yield
    finally:
        _ACTING_FOR.reset(token)


@contextmanager
def bounded_by(groups: tuple[str, ...] | None) -> Iterator[None]:
    """Numbers allocated or claimed inside are held for ``groups`` (a confined caller's
    tasks): at most MAX_HELD, leased from when the group began holding, none while the
    group is barred (see MAX_HELD). None: the service's own or the user's, unbounded."""
    token = _GROUPS.set(groups)
    try:
        yield
    finally:
        _GROUPS.reset(token)


def wait_for_lower_nonces(
    nonces: NonceManager, n: int, wait_s: float = 30.0, poll_s: float = 0.05
) -> tuple[list[int], list[int]]:
    """``nonces.unsent_below(n)`` once no lower number is still on its way to the node
    (bounded by ``wait_s``): both lists empty when a transaction with nonce ``n`` may be
    broadcast; else the gap, or the numbers still unsent after the wait."""
    deadline = time.monotonic() + wait_s
    gap, waiting = nonces.unsent_below(n)
    while waiting and not gap and time.monotonic() < deadline:
        time.sleep(poll_s)
        gap, waiting = nonces.unsent_below(n)
    return gap, waiting


@dataclass
class _State:
    next: int | None = None
    free: list[int] = field(default_factory=list)  # released numbers below next, a heap
    in_flight: dict[int, str] = field(default_factory=dict)  # number -> holder
    #: Numbers confirmed (handed to the node) the chain's pending count had not passed at
    #: the last sync -> their tx hash ("" when not given): used while the node knows them.
    sent: dict[int, str] = field(default_factory=dict)
    #: Number in flight -> when its lease ends (unix seconds; see NONCE_LEASE_S).
    until: dict[int, float] = field(default_factory=dict)
    #: Number in flight -> the groups (tasks) of a bounded holder (see bounded_by).
    groups: dict[int, list[str]] = field(default_factory=dict)
    #: Group -> since when it holds numbers without a break; group -> barred until.
    since: dict[str, float] = field(default_factory=dict)
    barred: dict[str, float] = field(default_factory=dict)
    #: Group -> [seconds of holding it has used up, when it last held a number]: earlier
    #: stretches that ended with a number unsent (see MAX_HELD); never reset.
    used: dict[str, list[float]] = field(default_factory=dict)
    #: Groups whose current stretch has given a number back or let one run out unsent.
    wasted: set[str] = field(default_factory=set)
    #: Free number -> the groups (tasks) of the bounded holder that gave it back or let
    #: it run out unsent: another task's transfer above it may fill it (wallet.gaps).
    freed_by: dict[int, list[str]] = field(default_factory=dict)

    def lease_end(self, g: str, now: float) -> float:
        """When group ``g``'s numbers held now (or taken now) stop being its own."""
        return self.since.get(g, now) + NONCE_LEASE_S - self.used.get(g, [0.0, now])[0]

    def hold(self, n: int, holder: str, now: float) -> None:
        groups = _GROUPS.get()
        until = now + NONCE_LEASE_S
        if groups is not None:
            self.check_bound(groups, now)
            for g in groups:
                self.since.setdefault(g, now)
                until = min(until, self.lease_end(g, now))
            self.groups[n] = list(groups)
        self.in_flight[n] = holder
        self.until[n] = until
        self.freed_by.pop(n, None)

    def check_bound(self, groups: tuple[str, ...], now: float) -> None:
        """NonceHoldRefused when ``groups`` may take no number now (see MAX_HELD)."""
        if not groups:
            raise NonceHoldRefused(
                "found a confined process asking for a nonce before proving its task; "
                "expected a task's process. Nothing was allocated. Fix: prove the task "
                "first (WalletClient.prove_task), as nib run and the worker do."
            )
        for g in groups:
            held = sum(g in gs for gs in self.groups.values())
            if self.barred.get(g, 0) > now or held >= MAX_HELD or self.lease_end(g, now) <= now:
                used = self.used.get(g, [0.0, now])[0]
                raise NonceHoldRefused(
                    f"found task {g} holding {held} nonce numbers (this stretch since "
                    f"{self.since.get(g, now):.0f}, {used:.0f} s used up before it), barred "
                    f"until {self.barred.get(g, 0):.0f}; expected at most {MAX_HELD}, at most "
                    f"{NONCE_LEASE_S:g} s of holding unsent over the task's whole life "
                    "(releasing and claiming back renews nothing), and none while barred for "
                    "a lease that ran out unsent. Nothing was allocated. Fix: send the numbers "
                    "held right after taking them."
                )

    def drop(self, n: int, *, expired: bool = False, unsent: bool = False, now: float = 0.0) -> None:
        """``n`` is no longer in flight: sent, or (``unsent``/``expired``) given back or run
        out; a bounded group's stretch that ends with a number unsent is used up in full."""
        self.in_flight.pop(n, None)
        self.until.pop(n, None)
        if (expired or unsent) and self.groups.get(n):
            self.freed_by[n] = list(self.groups[n])
        for g in self.groups.pop(n, []):
            if expired:  # a lease that ran out unsent: the task waits BAR_LEASES leases
                self.barred[g] = max(self.barred.get(g, 0.0), now + BAR_LEASES * NONCE_LEASE_S)
            if expired or unsent:
                self.wasted.add(g)
            if not any(g in gs for gs in self.groups.values()):
                self._end_stretch(g, now)

    def _end_stretch(self, g: str, now: float) -> None:
        since = self.since.pop(g, None)
        if g in self.wasted and since is not None:
            self.wasted.discard(g)
            used = self.used.get(g, [0.0, now])[0]
            self.used[g] = [used + max(now - since, 0.0), now]
        self.used = {k: v for k, v in self.used.items() if v[1] + FORGET_S > now}

    def dumps(self) -> str:
        return json.dumps(
            {"next": self.next, "free": sorted(self.free),
             "in_flight": {str(n): h for n, h in self.in_flight.items()},
             "sent": {str(n): h for n, h in self.sent.items()},
             "until": {str(n): t for n, t in self.until.items()},
             "groups": {str(n): g for n, g in self.groups.items()},
             "since": self.since, "barred": self.barred, "used": self.used,
             "wasted": sorted(self.wasted),
             "freed_by": {str(n): g for n, g in self.freed_by.items()}}
        )  # fmt: skip

    @classmethod
    def loads(cls, text: str) -> _State:
        raw = json.loads(text)
        free = [int(n) for n in raw["free"]]
        heapq.heapify(free)
        in_flight = {int(n): str(h) for n, h in raw["in_flight"].items()}
        sent = {int(n): str(h) for n, h in raw.get("sent", {}).items()}
        until = {int(n): float(t) for n, t in raw.get("until", {}).items()}
        groups = {int(n): [str(g) for g in gs] for n, gs in raw.get("groups", {}).items()}
        since = {str(g): float(t) for g, t in raw.get("since", {}).items()}
        barred = {str(g): float(t) for g, t in raw.get("barred", {}).items()}
        used = {str(g): [float(u[0]), float(u[1])] for g, u in raw.get("used", {}).items()}
        freed_by = {int(n): [str(g) for g in gs] for n, gs in raw.get("freed_by", {}).items()}
        return cls(raw["next"], free, in_flight, sent, until, groups, since, barred, used,
                   {str(g) for g in raw.get("wasted", [])}, freed_by)


def holder_state(holder: str) -> Literal["alive", "gone", "unknown"]:
    """Whether ``holder`` (``host:pid``, see process_identity) is a process of this host
    that runs, one that no longer runs (its numbers can never be sent), or neither."""
    host, _, pid = holder.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return "unknown"
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return "gone"
    except PermissionError:
        return "alive"
    return "alive"


class NonceManager:
    """Allocates nonces for ``address``; safe across threads, asyncio tasks and, with a
    ``store``, across processes.

    The thread lock is held only for the (synchronous) operation, so coroutines on one
    loop and threads in one process see one sequence.
    """

    def __init__(
        self,
        w3: Web3,
        address: str,
        *,
        store: Store | None = None,
        scope: str | None = None,
        holder: str | None = None,
    ) -> None:
        self.w3 = w3
        self.address = Web3.to_checksum_address(address)
        self._lock = threading.Lock()
        self._store = store
        self._scope = scope or self.address.lower()
        self.holder = holder or process_identity()
        self._mem = _State()
        self._synced = False

    def __repr__(self) -> str:
        return f"NonceManager(address={self.address!r}, next={self.snapshot()['next']})"

    def _holder(self) -> str:
        return _ACTING_FOR.get() or self.holder

    def _pending_count(self) -> int:
        return int(self.w3.eth.get_transaction_count(self.address, "pending"))

    def pending_count(self) -> int:
        """The chain's pending transaction count for the address (one RPC)."""
        return self._pending_count()

    @contextmanager
    def _state(self) -> Iterator[_State]:
        """The state, locked for one operation (and written back when shared)."""
        if self._store is None:
            with self._lock:
                yield self._mem
            return
        with self._lock, self._store.transaction() as tx:
            row = tx.one(f"SELECT state FROM {NONCES} WHERE scope = ?", (self._scope,))
            st = _State.loads(str(row[0])) if row else _State()
            if not self._synced:
                # Read under the lock: a number another process confirmed is already in
                # the node's pending count; one it has not confirmed is still in flight.
                self._sync(st)
            yield st
            tx.execute(
                f"INSERT INTO {NONCES} (scope, state, updated_at) VALUES (?, ?, ?) "
                "ON CONFLICT (scope) DO UPDATE SET state = excluded.state, "
                "updated_at = excluded.updated_at",
                (self._scope, st.dumps(), time.time()),
            )
        self._synced = True

    def _known(self, tx_hash: str) -> bool:
        """Whether the node has ``tx_hash`` (pooled or mined); True when it cannot say."""
        try:
            self.w3.eth.get_transaction(tx_hash)  # type: ignore[arg-type]
        except TransactionNotFound:
            return False
        except Exception:  # no answer: keep the number used (never hand it out twice)
            return True
        return True

    def _sync(self, st: _State) -> int:
        """Every number from the chain's pending count up is free except those in flight
        and those sent whose transaction the node still has (its count may lag behind a
        transaction being mined, or one queued behind a number in flight). A number sent
        that the node no longer knows (a devnet reverted or reset, a dropped transaction)
        is free again; one sent without a hash stays used until the count passes it."""
        pending = self._pending_count()
        now = time.time()
        for n, holder in list(st.in_flight.items()):
            if holder_state(holder) == "gone":
                st.drop(n, unsent=True, now=now)  # its process is gone: free again below
            elif st.until.get(n, now + 1) <= now:
                st.drop(n, expired=True, now=now)  # its lease ran out: free again below
        st.barred = {g: t for g, t in st.barred.items() if t > now}
        st.sent = {
            n: h for n, h in st.sent.items() if n >= pending and (not h or self._known(h))
        }
        held = set(st.in_flight) | set(st.sent)
        top = max([pending, *(n + 1 for n in held)])
        st.free = [n for n in range(pending, top) if n not in held]
        heapq.heapify(st.free)
        st.next = top
        st.freed_by = {n: g for n, g in st.freed_by.items() if n in st.free}
        return pending

    def allocate(self) -> int:
        """The next nonce to use, never above a gap; pair it with ``confirm`` or
        ``release`` (or ``claim`` it back after a release).

        Re-reads the chain's pending count first (one RPC): numbers the chain has used
        are skipped and numbers it never kept are reused, keeping those in flight.
        """
        with self._state() as st:
            self._sync(st)
            assert st.next is not None
            if st.free:
                n = heapq.heappop(st.free)
            else:
                n = st.next
                st.next += 1
            st.hold(n, self._holder(), time.time())
            return n

    def confirm(self, n: int, tx_hash: str | None = None) -> None:
        """``n`` was handed to the node (as ``tx_hash``): used while the node knows that
        transaction, and for good once the chain's count passes it."""
        with self._state() as st:
            st.drop(n, now=time.time())
            st.sent[n] = tx_hash or ""

    def release(self, n: int) -> None:
        """``n``'s send failed before the node accepted it: hand it out again.

        Only a number this holder allocated and has not confirmed can be released;
        anything else is ignored, so a caller's own nonce (or another worker's) is never
        handed out twice.
        """
        with self._state() as st:
            if st.in_flight.get(n) != self._holder():
                return
            st.drop(n, unsent=True, now=time.time())
            if st.next is None or n >= st.next:
                return
            if n == st.next - 1 and not st.free:
                st.next = n
            elif n not in st.free:
                heapq.heappush(st.free, n)

    def claim(self, n: int) -> bool:
        """Take back ``n`` for a quote that pinned it and gave it back (a paused run resumed).

        True, and ``n`` is in flight again, only when nothing else holds or used it: ``n``
        was released here, or it is the next fresh number. False when another caller
        holds it, it was confirmed, or taking it would skip numbers (a gap the node would
        wait on); the caller must then quote afresh instead of signing ``n``.
        """
        with self._state() as st:
            if st.next is None:
                self._sync(st)
            assert st.next is not None
            if n in st.in_flight:
                return False
            if n in st.free:
                st.free.remove(n)
                heapq.heapify(st.free)
            elif n == st.next:
                st.next += 1
            else:
                return False
            st.hold(n, self._holder(), time.time())
            return True

    def resync(self) -> int:
        """Re-read the pending count (after "nonce too low", a dropped tx, an outside send).

        Every number from the chain's pending count up is free again except those still
        in flight, so nothing the chain has not seen is skipped. Returns the pending count.
        """
        with self._state() as st:
            return self._sync(st)

    def unsent_below(self, n: int) -> tuple[list[int], list[int]]:
        """The numbers below ``n`` that have not reached the node: ``(gap, waiting)``.

        ``gap``: numbers from the chain's pending count up that neither a send under way
        nor a sent transaction the node still has covers (released, never handed out, or
        forgotten by the node: the chain moved back, a dropped transaction); a
        transaction with nonce ``n`` would wait on them, unmined, for good. ``waiting``:
        numbers handed out but not yet broadcast (another call between its quote and its
        broadcast); each will either reach the node or be released, becoming a gap. Both
        empty when ``n`` is safe to broadcast.
        """
        with self._state() as st:
            # Read under the lock: a number confirmed before it is in the pending count.
            pending = self._sync(st)
            lower = [k for k in range(pending, n) if k not in st.sent]
            return [k for k in lower if k not in st.in_flight], [k for k in lower if k in st.in_flight]

    def keep_while_sending(self, n: int, seconds: float) -> None:
        """``n``, held for a send about to wait its turn, is not freed by its lease for
        ``seconds`` more (a bounded holder's lease is left as it is: its task's bound)."""
        with self._state() as st:
            if n in st.in_flight and n not in st.groups:
                st.until[n] = max(st.until.get(n, 0.0), time.time() + seconds)

    def take_over(self, n: int, task: str, *, held: bool = False) -> list[str] | None:
        """Take ``n`` for the wallet itself, to fill it (wallet.gaps), when it is the lowest
        number not yet sent (every number from the chain's pending count below it is sent,
        so a filler is never broadcast above a gap) and either free (given back or run out
        unsent, whoever held it, or forgotten by the node) or, with ``held``, held unsent
        by another confined task than ``task``. Returns the tasks it is taken from (the
        groups that held or last gave it back; empty when none was a confined task's),
        else None (held by someone else, sent, or a lower number not sent). A holder's
        stretch counts as given back (see MAX_HELD)."""
        with self._state() as st:
            pending = self._sync(st)
            now = time.time()
            if n < pending or n in st.sent or any(k not in st.sent for k in range(pending, n)):
                return None
            if n in st.in_flight:
                owners = st.groups.get(n)
                if not held or not owners or task in owners:
                    return None
                owners = list(owners)
                st.drop(n, unsent=True, now=now)
            elif n in st.free:
                owners = st.freed_by.get(n, [])
                st.free.remove(n)
                heapq.heapify(st.free)
            else:
                return None
            st.freed_by.pop(n, None)
            st.in_flight[n] = self._holder()
            st.until[n] = now + NONCE_LEASE_S
            return list(owners)

    def recover(self, holder: str) -> list[int]:
        """Give back the numbers a dead ``holder`` (a killed worker) left in flight.

        A number the chain has used stays used; the rest become free for the next
        allocation, so the dead worker leaves no gap. Returns the numbers taken back.
        Warning: call it only for a holder that can no longer send (its lease expired).
        """
        with self._state() as st:
            taken = sorted(n for n, h in st.in_flight.items() if h == holder)
            for n in taken:
                st.drop(n, unsent=True, now=time.time())
            if taken:
                self._sync(st)
            return taken

    @contextmanager
    def use(self) -> Iterator[int]:
        """``with nonces.use() as n:`` send; released if the block raises, else confirmed."""
        n = self.allocate()
        try:
            yield n
        except BaseException:
            self.release(n)
            raise
        self.confirm(n)

    def snapshot(self) -> dict[str, object]:
        """Debug view: next fresh number, released numbers, numbers in flight."""
        if self._store is None:
            with self._lock:
                st = self._mem
        else:
            rows = self._store.query(f"SELECT state FROM {NONCES} WHERE scope = ?", (self._scope,))
            st = _State.loads(str(rows[0]["state"])) if rows else _State()
        return {"next": st.next, "free": sorted(st.free), "in_flight": sorted(st.in_flight)}
