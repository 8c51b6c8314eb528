"""The verdict checks: each one refuses (a ``SpendRefused``) or passes, and signs nothing.

In the order the wallet runs them: the judge's signature and decision, the payload's
fingerprint against the approved one, the verdict's expiry, the payload's terms (chain,
asset, recipient, amount, sender, the token's EIP-712 domain, the authorization's
validity window) and, last, the judge's own re-check.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from chain.usdc import token_domain
from judge.errors import FingerprintError, VerdictConsumed, VerdictInvalid
from judge.fingerprint import TOKEN_DOMAIN_FIELDS
from judge.verdict import Verdict, verify_verdict
from wallet.core import WalletCore
from wallet.errors import (
    NoVerdict,
    PayloadMismatch,
    RecheckFailed,
    VerdictBadSignature,
    VerdictExpired,
    VerdictNotApproved,
    VerdictReplayed,
    VerdictRevoked,
    VerdictVoid,
)
from wallet.terms import Terms, as_int

__all__ = ["MAX_AUTHORIZATION_S", "VerdictChecks", "ask_recheck"]

#: The longest an EIP-3009 authorization may stay valid from now (x402 asks for minutes).
MAX_AUTHORIZATION_S = 3600


class VerdictChecks:
    """The checks of one verdict against the trusted judge and the exact payload."""

    def __init__(self, core: WalletCore, trusted_judge: str) -> None:
        self._core = core
        self.trusted_judge = trusted_judge
        self._domain: tuple[str, str] | None = None

    def verdict(self, verdict: Verdict | None) -> Verdict:
        """The verdict, signed by the trusted judge and approving; else refused."""
        if verdict is None:
            raise NoVerdict(
                "No verdict was given; the wallet signs only with an approving verdict from "
                "the judge. Fix: send the quote to the judge first."
            )
        if not isinstance(verdict, Verdict):
            raise NoVerdict(
                f"Expected a judge.verdict.Verdict; got {type(verdict).__name__}. Fix: parse "
                "it with judge.verdict.parse_verdict first."
            )
        try:
            verify_verdict(verdict, self.trusted_judge)
        except VerdictInvalid as exc:
            raise VerdictBadSignature(
                f"Verdict {verdict.id} is not signed by the trusted judge "
                f"{self.trusted_judge}: {exc}",
                verdict_id=verdict.id,
            ) from None
        except Exception as exc:  # fail closed on anything verify cannot decide
            raise VerdictBadSignature(
                f"Verdict {verdict.id} could not be verified ({type(exc).__name__}); expected "
                f"a signature by {self.trusted_judge}. Fix: request a fresh verdict.",
                verdict_id=verdict.id,
            ) from None
        if verdict.decision != "approve":
            raise VerdictNotApproved(
                f"Verdict {verdict.id} decided {verdict.decision!r}, expected 'approve' "
                f"(judge's reason: {verdict.reason}). Fix: do not pay; follow the decision.",
                verdict_id=verdict.id,
            )
        return verdict

    def fingerprint(
        self, verdict: Verdict, payload: dict[str, object], fingerprint_of: Callable[[Mapping[str, object]], str]
    ) -> None:
        try:
            found = fingerprint_of(payload)
        except FingerprintError as exc:
            raise VerdictVoid(
                f"Verdict {verdict.id} is void: the payload has no canonical fingerprint ({exc}).",
                verdict_id=verdict.id,
            ) from None
        if found != (verdict.payload_fingerprint or "").lower():
            raise VerdictVoid(
                f"Verdict {verdict.id} is void: the payload's fingerprint is {found}, the "
                f"verdict approved {verdict.payload_fingerprint}; the payload changed after "
                "approval. Fix: re-quote and ask the judge again.",
                verdict_id=verdict.id,
            )

    def fresh(self, verdict: Verdict) -> None:
        now = self._core.clock()
        if now >= verdict.expires_at:
            raise VerdictExpired(
                f"Verdict {verdict.id} expired at {verdict.expires_at}; now is {int(now)} "
                f"({int(now) - verdict.expires_at} s late). Fix: ask the judge for a fresh "
                "verdict.",
                verdict_id=verdict.id,
            )

    def terms(
        self,
        verdict: Verdict,
        payload: dict[str, object],
        terms_of: Callable[[dict[str, object]], Terms],
    ) -> None:
        """The payload's terms against the verdict, the connected chain, the wallet's token
        and its domain (its validity window: :meth:`window`)."""
        try:
            terms = terms_of(payload)
        except PayloadMismatch as exc:
            raise PayloadMismatch(exc.message, verdict_id=verdict.id) from None
        core = self._core
        live_chain = core.chain.chain_id()
        checks: list[tuple[str, object, object]] = [
            ("chain id (payload vs verdict)", terms.chain_id, verdict.chain_id),
            ("chain id (payload vs connected chain)", terms.chain_id, live_chain),
            ("asset (payload vs verdict)", terms.asset.lower(), verdict.asset.lower()),
            ("asset (payload vs wallet's USDC)", terms.asset.lower(), core.usdc.lower()),
            ("recipient", terms.recipient.lower(), verdict.recipient.lower()),
            ("amount", terms.amount, verdict.amount),
        ]
        if terms.sender is not None:
            checks.append(("sender", terms.sender.lower(), core.address.lower()))
        domain = payload.get("domain")
        if isinstance(domain, Mapping):  # the token verifies under its own domain only
            name, version = self._token_domain()
            checks.append(("EIP-712 domain name (payload vs the token on chain)",
                           domain.get("name"), name))
            checks.append(("EIP-712 domain version (payload vs the token on chain)",
                           str(domain.get("version")), version))
            checks.append(("EIP-712 domain fields (payload vs the token's)",
                           sorted(domain), sorted(TOKEN_DOMAIN_FIELDS)))
        for name, found, expected in checks:
            if found != expected:
                raise PayloadMismatch(
                    f"Verdict {verdict.id}: {name} is {found}, expected {expected}. Fix: "
                    "re-quote against the connected chain and ask the judge again.",
                    verdict_id=verdict.id,
                )
        core.key.check_chain(live_chain)

    def _token_domain(self) -> tuple[str, str]:
        """The USDC contract's own EIP-712 ``(name, version)``, read from the chain once."""
        if self._domain is None:
            self._domain = token_domain(self._core.chain.w3, self._core.usdc)
        return self._domain

    def window(
        self, verdict: Verdict, payload: dict[str, object], head_time: Callable[[], int]
    ) -> None:
        """An EIP-3009 authorization is a bearer instrument until validBefore: refuse long
        ones (``head_time``: the chain's latest block time)."""
        message = payload.get("message")
        if not isinstance(message, Mapping) or "validBefore" not in message:
            return
        valid_before = as_int(message["validBefore"])
        # From the later of the two clocks: a devnet's chain may run ahead of the wall clock.
        now = max(int(self._core.clock()), head_time())
        limit = now + MAX_AUTHORIZATION_S
        if valid_before > limit:
            raise PayloadMismatch(
                f"Verdict {verdict.id}: the authorization is valid until {valid_before}, more "
                f"than {MAX_AUTHORIZATION_S} s from now ({limit}); a signed authorization can be "
                "relayed by anyone until then. Fix: quote with a shorter validity window.",
                verdict_id=verdict.id,
            )


def ask_recheck(ask: Callable[[Verdict], None] | None, verdict: Verdict) -> None:
    """The judge's re-check (``ask``), which also consumes the verdict; its refusals as the
    wallet's. Without an ``ask`` nothing is asked."""
    if ask is None:
        return
    try:
        ask(verdict)
    except VerdictConsumed as exc:
        raise VerdictReplayed(
            f"Verdict {verdict.id} was already used, as the judge's record shows: {exc}",
            verdict_id=verdict.id,
        ) from exc
    except VerdictInvalid as exc:
        raise VerdictRevoked(
            f"Verdict {verdict.id} failed the judge's re-check: {exc}",
            verdict_id=verdict.id,
        ) from exc
    except Exception as exc:
        raise RecheckFailed(
            f"The judge's re-check of verdict {verdict.id} did not complete "
            f"({type(exc).__name__}: {exc}); expected a confirmation. Fix: make the judge "
            "reachable and try again.",
            verdict_id=verdict.id,
        ) from exc
