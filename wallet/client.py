"""The wallet service's client: what the agent holds instead of a key.

:class:`WalletClient` makes the calls the paid tools make on
:class:`~wallet.signer.Wallet`, each an operation of :mod:`wallet.operations` sent over
the service's socket (:mod:`wallet.wire`). Refusals come back as the same
:mod:`wallet.errors` class; a service that does not answer in time is
:class:`~wallet.errors.WalletUnreachable`. Length-prefixed JSON over a Unix socket was
chosen over HTTP because only this client speaks to the service, and HTTP's framing,
routing and thread hops cost ~1-3 ms a call on the paid path where this costs ~0.05 ms
(bench/roundtrip.py).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar, cast

import wallet.errors as wallet_errors
import wallet.operations as ops
from judge.connections import ConnectionPool
from judge.storage import process_identity
from judge.verdict import Verdict
from judge.wire import from_wire, wire_int
from wallet.errors import TaskMismatch, WalletError, WalletUnreachable
from wallet.ledger import SpendRow
from wallet.meter import Reservation, RunSpend
from wallet.recovery import RunRecovery
from wallet.signed import SentTx, SignedTx, SignedTypedData
from wallet.wire import (
    STOPPING_STATUS,
    frame,
    read_answer,
    rebuilt,
    row_from_wire,
    signed_from_wire,
    signed_to_wire,
)

__all__ = ["DEFAULT_TIMEOUT_S", "WalletClient"]

DEFAULT_TIMEOUT_S = 75.0  # a send waits for its receipt (the wallet waits up to 60 s)

_Req = TypeVar("_Req", bound=Mapping[str, object])
_Resp = TypeVar("_Resp")


class _RemoteMeter:
    """The wallet's spend meter, behind the service (``agent.seams.SpendView``)."""

    def __init__(self, client: WalletClient) -> None:
        self._client = client
        self._eth_price: int | None = None

    @property
    def eth_price_usdc(self) -> int:
        """The wallet meter's ETH price (gas is held and metered at it)."""
        if self._eth_price is None:
            self._eth_price = wire_int(self._client.health()["eth_price_usdc"])
        return self._eth_price

    def usage(self, run_id: str) -> RunSpend:
        return from_wire(RunSpend, self._client._call(ops.USAGE, {"run_id": run_id}))

    def keep_signed(self, res: Reservation | str, note: str) -> None:
        rid = res if isinstance(res, str) else res.id
        self._client._call(ops.KEEP_SIGNED, {"reservation_id": rid, "note": note})


class _RemoteNonces:
    """The wallet's nonce manager, behind the service (the transfer tool pins nonces)."""

    def __init__(self, client: WalletClient) -> None:
        self._client = client

    def _op(
        self, op: ops.Operation[ops.NonceRequest, ops.NonceAnswer], n: int | None = None
    ) -> object:
        return self._client._call(op, {"n": n})["value"]

    def allocate(self) -> int:
        return wire_int(self._op(ops.NONCE_ALLOCATE))

    def resync(self) -> int:
        return wire_int(self._op(ops.NONCE_RESYNC))

    def claim(self, n: int) -> bool:
        return bool(self._op(ops.NONCE_CLAIM, n))

    def confirm(self, n: int) -> None:
        self._op(ops.NONCE_CONFIRM, n)

    def release(self, n: int) -> None:
        self._op(ops.NONCE_RELEASE, n)


class WalletClient:
    """The agent's handle on the wallet service: the same calls as the paid tools make on
    :class:`~wallet.signer.Wallet`, and no key. Every call finishes within ``timeout_s``
    or raises WalletUnreachable."""

    def __init__(self, socket_path: str | Path, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.socket_path = Path(socket_path)
        self.timeout_s = timeout_s
        self._connections: ConnectionPool[socket.socket] = ConnectionPool(
            self._connect, lambda conn: conn
        )
        self._address: str | None = None
        self.meter = _RemoteMeter(self)
        self.nonces = _RemoteNonces(self)
        self.clock: Callable[[], float] = time.time
        #: This process, as the holder of the nonces the service allocates for it.
        self.holder = process_identity()
        #: Where the service's events go (the run's audit trail), as Wallet(emit=...).
        self.emit: Callable[[str, dict[str, object]], None] | None = None

    def __repr__(self) -> str:
        return f"WalletClient(socket={str(self.socket_path)!r})"

    def close(self) -> None:
        self._connections.close()

    def _connect(self) -> socket.socket:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(str(self.socket_path))
        except OSError:
            conn.close()
            raise
        return conn

    def _unreachable(self, exc: BaseException, sent: bool) -> WalletUnreachable:
        outcome = (
            "the request was sent and its answer is unknown; `nib audit reconcile` "
            "settles what the ledger holds" if sent else "nothing was signed"
        )
        return WalletUnreachable(
            f"the wallet service on {self.socket_path} is unreachable "
            f"({type(exc).__name__}: {exc}); expected it to answer within "
            f"{self.timeout_s:g} s. Fix: start it with `nib services up` (or "
            f"`nib wallet serve`); {outcome}."
        )

    def _send(self, route: str, body: Mapping[str, object]) -> object:
        """The service's answer to one request. A reused connection that fails before the
        request could reach the service is replaced once; once the request may have
        reached it, it is never sent again (a signature is never asked for twice)."""
        request = frame({"route": route, "body": body})
        deadline = time.monotonic() + self.timeout_s
        for attempt in (1, 2):
            try:
                conn, reused = self._connections.take()
            except OSError as exc:
                raise self._unreachable(exc, sent=False) from exc
            try:
                conn.settimeout(max(deadline - time.monotonic(), 0.001))
                conn.sendall(request)
            except (BrokenPipeError, ConnectionResetError) as exc:
                # The write itself was refused: on a Unix socket the service had closed
                # this connection, so it never read the request.
                conn.close()
                if reused and attempt == 1:
                    continue
                raise self._unreachable(exc, sent=False) from exc
            except OSError as exc:  # a write that timed out may have reached it in part
                conn.close()
                raise self._unreachable(exc, sent=True) from exc
            try:
                answer = read_answer(conn, deadline)
            except (OSError, ValueError) as exc:
                # Sent: the service may have read it and acted (signed, broadcast) before
                # it died, whether the connection then ends in EOF or a reset. Never sent
                # again, never reported as nothing signed.
                conn.close()
                raise self._unreachable(exc, sent=True) from exc
            self._connections.give_back(conn)
            return answer
        raise AssertionError("unreachable")  # pragma: no cover

    def _call(
        self, op: ops.Operation[_Req, _Resp], body: _Req, run_id: str | None = None
    ) -> _Resp:
        """The data of ``op``'s answer to ``body``, or its refusal raised as the same
        wallet error class. ``run_id``: this process's run, for the service's events that
        name none (it takes no run from a caller, and a forged verdict's task proves none)."""
        path = f"/{op.name}"
        answer = self._send(op.route, body)
        status = answer.get("status") if isinstance(answer, dict) else None
        if status == 200 and isinstance(answer, dict) and isinstance(answer.get("data"), dict):
            data: dict[str, object] = answer["data"]
            self._relay(data.pop("events", None), run_id)
            return cast(_Resp, data)
        error = answer.get("error") if isinstance(answer, dict) else None
        if status == STOPPING_STATUS:
            raise WalletUnreachable(
                f"the wallet service on {self.socket_path} is stopping and did not run "
                f"{path}; nothing was signed. Fix: start it with `nib services up`."
            )
        if not isinstance(error, dict):
            raise WalletUnreachable(
                f"the wallet service failed to answer {path} (status {status}); its log "
                "has the cause; fix: restart it with `nib services up`."
            )
        self._relay(error.pop("events", None), run_id)
        cls = getattr(wallet_errors, str(error.get("type")), None)
        if not (isinstance(cls, type) and issubclass(cls, WalletError)):
            cls = WalletError
        raise rebuilt(cls, error)

    def health(self) -> ops.Health:
        """The service's address, USDC contract, ETH price and database (no secrets)."""
        return self._call(ops.HEALTH, {})

    def _relay(self, events: object, run_id: str | None = None) -> None:
        """The service's events for this call, into the run's audit trail (this process's
        run where the service named none)."""
        if self.emit is None or not isinstance(events, list):
            return
        for event in events:
            if isinstance(event, dict) and isinstance(event.get("data"), dict):
                data = event["data"]
                if run_id and not data.get("run_id"):
                    data = {**data, "run_id": run_id}
                self.emit(str(event.get("type")), data)

    @property
    def address(self) -> str:
        if self._address is None:
            self._address = str(self.health()["address"])
        return self._address

    @property
    def usdc(self) -> str:
        """The USDC contract the wallet service pays in."""
        return str(self.health()["usdc"])

    @property
    def database(self) -> str:
        """Which database the service keeps its ledger in (``database_identity``)."""
        return str(self.health()["database"])

    def prove_task(self, token: str) -> str:
        """Prove to the service that this process acts for the task ``token`` is the task
        token of (its id): a confined process names only its own tasks' rows."""
        return str(self._call(ops.PROVE_TASK, {"token": token})["task_id"])

    def recover_run(self, run_id: str, holder: str, why: str) -> RunRecovery:
        """The service recovers what the dead worker ``holder`` left for ``run_id`` (see
        ``Wallet.recover_run``)."""
        found = self._call(ops.RECOVER_RUN, {"run_id": run_id, "holder": holder, "why": why})
        return from_wire(RunRecovery, found)

    def sign_typed_data(
        self,
        payload: Mapping[str, object],
        verdict: Verdict | None,
        *,
        run_id: str,
        spend_cap_atomic: int,
        resource: str | None = None,
    ) -> SignedTypedData:
        """MOVES MONEY: the service signs an EIP-3009 authorization the verdict approved.

        ``run_id`` and ``spend_cap_atomic`` are not sent: the service books the payment under the
        verdict's task and holds it to that task's registered cap."""
        _check_run(verdict, run_id)
        body: ops.SignTypedDataRequest = {
            "payload": dict(payload),
            "verdict": _verdict_to_wire(verdict),
            "resource": resource,
        }
        signed = signed_from_wire(self._call(ops.SIGN_TYPED_DATA, body, run_id))
        assert isinstance(signed, SignedTypedData)
        return signed

    def sign_transaction(
        self, tx: Mapping[str, object], verdict: Verdict | None, *, run_id: str, spend_cap_atomic: int
    ) -> SignedTx:
        """MOVES MONEY: the service signs a pinned USDC transfer the verdict approved
        (under the verdict's task and its registered cap; see sign_typed_data)."""
        _check_run(verdict, run_id)
        body: ops.SignRequest = {"payload": dict(tx), "verdict": _verdict_to_wire(verdict)}
        signed = signed_from_wire(self._call(ops.SIGN_TRANSACTION, body, run_id))
        assert isinstance(signed, SignedTx)
        return signed

    def send_transaction(self, signed: SignedTx, reservation: Reservation | None = None) -> SentTx:
        """MOVES MONEY: the service broadcasts ``signed`` and waits for its receipt."""
        body: ops.SendRequest = {"signed": _record(signed)}
        return from_wire(SentTx, self._call(ops.SEND_TRANSACTION, body))

    def settle(self, signed: SignedTypedData | SignedTx | SpendRow, tx_hash: str) -> None:
        if isinstance(signed, SpendRow):
            self._call(ops.SETTLE_ROW, {"spend_id": signed.id, "tx_hash": tx_hash})
            return
        self._call(ops.SETTLE, {"signed": _record(signed), "tx_hash": tx_hash})

    def keep_payment(self, signed: SignedTypedData, header: tuple[str, str]) -> None:
        name, value = header
        self._call(ops.KEEP_PAYMENT, {"signed": _record(signed), "name": name, "value": value})

    def live_authorization(self, resource: str) -> SpendRow | None:
        row = self._call(ops.LIVE_AUTHORIZATION, {"resource": resource})["row"]
        return None if row is None else row_from_wire(row)

    def spend_row(self, spend_id: str) -> SpendRow:
        return row_from_wire(self._call(ops.SPEND_ROW, {"spend_id": spend_id})["row"])

    def fail(self, signed: SignedTypedData | SignedTx, note: str) -> None:
        self._call(ops.FAIL, {"signed": _record(signed), "note": note})

    def abandon_authorization(self, spend_id: str, why: str) -> SpendRow:
        """SPENDS GAS: the service ends x402 row ``spend_id``'s authorization (see
        ``Wallet.abandon_authorization``): settled, failed or cancelled on chain."""
        body: ops.AbandonRequest = {"spend_id": spend_id, "why": why}
        return row_from_wire(self._call(ops.ABANDON_AUTHORIZATION, body)["row"])


def _record(signed: SignedTypedData | SignedTx) -> ops.SignedRecord:
    return cast(ops.SignedRecord, signed_to_wire(signed))


def _check_run(verdict: Verdict | None, run_id: str) -> None:
    """An honest caller's mistake named at once: the service books the payment under the
    verdict's task whatever the caller says (this check is a courtesy, not the guard)."""
    if isinstance(verdict, Verdict) and verdict.task_id is not None and run_id and run_id != verdict.task_id:
        raise TaskMismatch.between(run_id, verdict.id, verdict.task_id)


def _verdict_to_wire(verdict: Verdict | None) -> dict[str, object] | None:
    return None if verdict is None else verdict.model_dump()
