"""The seams between the agent and what it does not own: the chain it reads, the
judge that rules on money, and the wallet that signs.

Each is a Protocol that the real part satisfies, in-process or as a service client
(``judge.Judge`` and ``judge.JudgeClient``; ``wallet.Wallet``). The run and the paid
tools are typed against these, never ``Any``, so mypy checks the money path end to end.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from judge.calibration import Delivery
from judge.jev import PaidCallRequest
from judge.records import Standing
from judge.seller_terms import AheadRead
from judge.verdict import Verdict
from wallet.ledger import SpendRow
from wallet.meter import Reservation, RunSpend
from wallet.recovery import RunRecovery
from wallet.signed import SentTx, SignedTx, SignedTypedData

__all__ = [
    "AgentJudge",
    "AgentWallet",
    "ChainReader",
    "NonceView",
    "RuntimeWallet",
    "SpendView",
]


class ChainReader(Protocol):
    """What the run itself reads from the chain (free tools get the full client)."""

    def token_balance(self, token: str, owner: str) -> int: ...


class AgentJudge(Protocol):
    """The judge as the agent sees it: rule on a paid call, re-check a verdict before
    the wallet signs it, and learn whether a paid call covered what it was bought for."""

    @property
    def address(self) -> str: ...

    def decide(self, request: PaidCallRequest) -> Verdict: ...

    def read_ahead(
        self, task_id: str, url: str, method: str = "GET", body: object = None
    ) -> AheadRead: ...

    def recheck(self, verdict: Verdict) -> None: ...

    def record_outcome(
        self, verdict_id: str, fact_kind: str, covered: bool, delivery: Delivery = "delivered"
    ) -> None: ...

    def hold_outcome(self, verdict_id: str, fact_kind: str, spend_id: str) -> None: ...

    def verdict_standing(
        self, verdict_id: str, payload_fingerprint: str | None, task_id: str | None = None
    ) -> Standing: ...


class SpendView(Protocol):
    """The wallet's spend meter as the agent sees it: a run's money, and keeping a
    signed spend pending when a seller refused after payment."""

    @property
    def eth_price_usdc(self) -> int: ...

    def usage(self, run_id: str) -> RunSpend: ...

    def keep_signed(self, res: Reservation | str, note: str) -> object: ...


class NonceView(Protocol):
    """The wallet's transaction numbers as the transfer tool pins them: one handed out
    for a quote, claimed back on resume, confirmed once used, released when not."""

    def allocate(self) -> int: ...

    def resync(self) -> int: ...

    def claim(self, n: int) -> bool: ...

    def confirm(self, n: int) -> None: ...

    def release(self, n: int) -> None: ...


class AgentWallet(Protocol):
    """The wallet as the paid tools see it. Every ``sign_*`` MOVES MONEY and refuses
    (``wallet.errors.SpendRefused``) unless the verdict approves exactly the payload."""

    @property
    def address(self) -> str: ...

    @property
    def meter(self) -> SpendView: ...

    @property
    def nonces(self) -> NonceView: ...

    @property
    def clock(self) -> Callable[[], float]: ...

    def sign_typed_data(
        self,
        payload: Mapping[str, object],
        verdict: Verdict | None,
        *,
        run_id: str,
        spend_cap_atomic: int,
        resource: str | None = None,
    ) -> SignedTypedData: ...

    def sign_transaction(
        self, tx: Mapping[str, object], verdict: Verdict | None, *, run_id: str, spend_cap_atomic: int
    ) -> SignedTx: ...

    def send_transaction(
        self, signed: SignedTx, reservation: Reservation | None = None
    ) -> SentTx: ...

    def settle(self, signed: SignedTypedData | SignedTx | SpendRow, tx_hash: str) -> None: ...

    def keep_payment(self, signed: SignedTypedData, header: tuple[str, str]) -> None: ...

    def live_authorization(self, resource: str) -> SpendRow | None: ...

    def spend_row(self, spend_id: str) -> SpendRow: ...

    def fail(self, signed: SignedTypedData | SignedTx, note: str) -> None: ...

    def abandon_authorization(self, spend_id: str, why: str) -> SpendRow:
        """SPENDS GAS: the wallet ends an abandoned purchase's authorization from what
        the chain shows: settled (used), failed (expired) or cancelled on chain."""
        ...


class RuntimeWallet(AgentWallet, Protocol):
    """The wallet as the composition root holds it (in-process ``wallet.Wallet`` or the
    service's ``wallet.WalletClient``): the paid tools' view, its USDC, and closing the
    spend of a run whose process died."""

    @property
    def usdc(self) -> str: ...

    def recover_run(self, run_id: str, holder: str, why: str) -> RunRecovery: ...
