"""The wallet service's operations, each said once: its route, the body it takes, the
answer it gives and the refusals it may raise.

The server (:mod:`wallet.server`) serves exactly these routes and refuses to start if a
handler is missing or extra; the client (:mod:`wallet.client`) calls them by these
constants, so mypy catches a call of an operation that is gone; and
``tests/wallet/test_wallet_operations.py`` holds the client's methods against the
agent's protocols (``agent.seams.AgentWallet``, ``SpendView``, ``NonceView``) through
``client``, the attribute path each operation is reached by. Adding an operation is one
entry here, one handler and one client method; the test names whichever is missing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Generic, TypedDict, TypeVar

from wallet.errors import (
    LedgerError,
    NonceHoldRefused,
    NotYourTask,
    SettlementUnproven,
    SpendRefused,
    WalletError,
)

__all__ = ["API", "OPERATIONS", "Operation", "by_route"]

#: Every route starts with it (the wire's version).
API: Final = "/v1"


class Empty(TypedDict):
    """A body with no fields."""


class Ok(TypedDict):
    ok: bool


class Health(TypedDict):
    address: str
    usdc: str
    eth_price_usdc: int
    database: str


class SignRequest(TypedDict):
    """No run and no cap: the payment is booked under the verdict's task and held to the
    cap that task registered with the judge (issue 22: no field to lie with)."""

    payload: dict[str, object]
    verdict: dict[str, object] | None


class SignTypedDataRequest(SignRequest):
    resource: str | None


class SignedRecord(TypedDict, total=False):
    """A :class:`~wallet.signed.SignedTypedData` or ``SignedTx`` with its ``kind``."""

    kind: str


class SendRequest(TypedDict):
    """The nonce's holder is the connecting process (SO_PEERCRED), not a field."""

    signed: SignedRecord


class SettleRequest(TypedDict):
    signed: SignedRecord
    tx_hash: str


class SettleRowRequest(TypedDict):
    spend_id: str
    tx_hash: str


class FailRequest(TypedDict):
    signed: SignedRecord
    note: str


class KeepPaymentRequest(TypedDict):
    signed: SignedRecord
    name: str
    value: str


class RunRequest(TypedDict):
    run_id: str


class ResourceRequest(TypedDict):
    resource: str


class SpendIdRequest(TypedDict):
    spend_id: str


class MaybeRow(TypedDict):
    row: dict[str, object] | None


class Row(TypedDict):
    row: dict[str, object]


class AbandonRequest(TypedDict):
    spend_id: str
    why: str


class KeepSignedRequest(TypedDict):
    reservation_id: str
    note: str


class NonceRequest(TypedDict):
    """The holder is the connecting process (SO_PEERCRED), not a field."""

    n: int | None


class NonceAnswer(TypedDict):
    value: int | bool | None


class ProveTaskRequest(TypedDict):
    """A task token: the calling process acts for that task (wallet.callers)."""

    token: str


class ProvedTask(TypedDict):
    task_id: str


class RecoverRequest(TypedDict):
    run_id: str
    holder: str
    why: str


class Record(TypedDict, total=False):
    """A dataclass's fields (``SentTx``, ``RunSpend``, ``RunRecovery``), rebuilt with
    ``judge.wire.from_wire`` on the client."""


RequestT = TypeVar("RequestT", covariant=True)
ResponseT = TypeVar("ResponseT", covariant=True)


@dataclass(frozen=True)
class Operation(Generic[RequestT, ResponseT]):
    """One call the wallet service answers: the client sends a ``request`` and gets a
    ``response`` back (both JSON objects; mypy holds the client's bodies to them)."""

    name: str
    request: type[RequestT]
    response: type[ResponseT]
    #: The refusals the client may raise for it (besides WalletUnreachable).
    errors: tuple[type[WalletError], ...]
    #: The client attribute that makes the call (``meter.usage``: ``client.meter.usage``);
    #: the agent's protocols are held against it.
    client: str
    #: Whether the wallet's audit events of the call travel back in its answer.
    relays_events: bool = False
    #: Other client attributes that make the same call (``address`` reads health).
    also: tuple[str, ...] = ()

    @property
    def route(self) -> str:
        return f"{API}/{self.name}"

    @property
    def handler(self) -> str:
        """The server's method that answers it (``nonces/claim``: ``nonces_claim``)."""
        return self.name.replace("-", "_").replace("/", "_")


_SIGN = (SpendRefused, LedgerError, WalletError)
_RECORD = (LedgerError, NotYourTask, SettlementUnproven, WalletError)

HEALTH: Final = Operation(
    "health",
    Empty,
    Health,
    (),
    "health",
    also=("address", "usdc", "database", "meter.eth_price_usdc"),
)
SIGN_TYPED_DATA: Final = Operation(
    "sign-typed-data", SignTypedDataRequest, SignedRecord, _SIGN, "sign_typed_data", True
)
SIGN_TRANSACTION: Final = Operation(
    "sign-transaction", SignRequest, SignedRecord, _SIGN, "sign_transaction", True
)
SEND_TRANSACTION: Final = Operation(
    "send-transaction", SendRequest, Record, _RECORD, "send_transaction", True
)
SETTLE: Final = Operation("settle", SettleRequest, Ok, _RECORD, "settle", True)
SETTLE_ROW: Final = Operation("settle-row", SettleRowRequest, Ok, _RECORD, "settle", True)
FAIL: Final = Operation("fail", FailRequest, Ok, _RECORD, "fail", True)
KEEP_PAYMENT: Final = Operation(
    "keep-payment", KeepPaymentRequest, Ok, _RECORD, "keep_payment", True
)
LIVE_AUTHORIZATION: Final = Operation(
    "live-authorization", ResourceRequest, MaybeRow, (WalletError,), "live_authorization"
)
SPEND_ROW: Final = Operation(
    "spend-row", SpendIdRequest, Row, (LedgerError, NotYourTask), "spend_row"
)
USAGE: Final = Operation("usage", RunRequest, Record, (NotYourTask, WalletError), "meter.usage")
KEEP_SIGNED: Final = Operation(
    "keep-signed", KeepSignedRequest, Ok, (LedgerError, NotYourTask), "meter.keep_signed", True
)
NONCE_ALLOCATE: Final = Operation(
    "nonces/allocate", NonceRequest, NonceAnswer, (NonceHoldRefused, WalletError), "nonces.allocate"
)
NONCE_RESYNC: Final = Operation(
    "nonces/resync", NonceRequest, NonceAnswer, (WalletError,), "nonces.resync"
)
NONCE_CLAIM: Final = Operation(
    "nonces/claim", NonceRequest, NonceAnswer, (NonceHoldRefused, WalletError), "nonces.claim"
)
NONCE_CONFIRM: Final = Operation(
    "nonces/confirm", NonceRequest, NonceAnswer, (WalletError,), "nonces.confirm"
)
NONCE_RELEASE: Final = Operation(
    "nonces/release", NonceRequest, NonceAnswer, (WalletError,), "nonces.release"
)
ABANDON_AUTHORIZATION: Final = Operation(
    "abandon-authorization", AbandonRequest, Row, _RECORD, "abandon_authorization", True
)
PROVE_TASK: Final = Operation(
    "prove-task", ProveTaskRequest, ProvedTask, (NotYourTask, WalletError), "prove_task"
)
RECOVER_RUN: Final = Operation(
    "recover-run", RecoverRequest, Record, (LedgerError, WalletError), "recover_run", True
)

#: Every operation, in the order the service's docs list them.
OPERATIONS: Final[tuple[Operation[object, object], ...]] = (
    HEALTH,
    SIGN_TYPED_DATA,
    SIGN_TRANSACTION,
    SEND_TRANSACTION,
    SETTLE,
    SETTLE_ROW,
    FAIL,
    KEEP_PAYMENT,
    LIVE_AUTHORIZATION,
    SPEND_ROW,
    USAGE,
    KEEP_SIGNED,
    NONCE_ALLOCATE,
    NONCE_RESYNC,
    NONCE_CLAIM,
    NONCE_CONFIRM,
    NONCE_RELEASE,
    ABANDON_AUTHORIZATION,
    PROVE_TASK,
    RECOVER_RUN,
)


def by_route() -> dict[str, Operation[object, object]]:
    """The operations by route (what the server dispatches on)."""
    return {op.route: op for op in OPERATIONS}
