"""Errors raised by the agent package.

Three kinds, never mixed: the user's mistake (configuration, unknown run), a
dependency that stops a run, and loop signals the loop turns into feedback or a
failed step. Every message says what was found, what was expected, and the fix.

    AgentError
    ├── AgentConfigError        the user's mistake: bad config file, unknown profile, bad flag
    │   └── RunStateError       resume asked for a run that is unknown or not paused
    ├── DependencyDown          the devnet or the judge and wallet services a command needs
    │                           are not running (exit 1; the fix is `nib devnet up`)
    ├── ModelUnavailable        the model provider is silent or refuses (stop: llm-unreachable)
    └── LoopSignal              handled inside the loop; never escapes a run
        ├── ToolError           a tool failed; the message is shown to the model
        │   ├── ToolArgsError   a tool's arguments were missing or invalid
        │   ├── DeliveryFailed  a seller was handed a payment and did not deliver
        │   └── PermanentToolError  the same call can never succeed in this run (terms no
        │                           buyer can pay, a payee the run may not pay): not run again
        └── ProposalInvalid     the model's reply is not a valid proposal
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

ModelFailureKind = Literal[
    "auth", "rate-limit", "server", "timeout", "bad-response", "context-overflow"
]

NotDeliveredOutcome = Literal["paid-for-nothing", "nothing-paid", "undecided"]
"""What a purchase that did not deliver cost, as the chain shows it once the wallet ended
its authorization.

- ``paid-for-nothing``: the seller settled the authorization: the money moved.
- ``nothing-paid``: the authorization was cancelled on chain or expired unused.
- ``undecided``: it could not be ended yet; ``nib audit reconcile`` settles or fails it.
"""

#: How every message says a purchase was not delivered (after the seller's origin), by what
#: it cost; None: a record that keeps only the seller (the offline planner's view).
#: Short: a call's summary is cut at 200 characters, and the reason follows them.
_NOT_DELIVERED: dict[NotDeliveredOutcome | None, str] = {
    "paid-for-nothing": "was paid and did not deliver",
    "nothing-paid": "did not deliver (nothing paid)",
    "undecided": "did not deliver (may still be paid)",
    None: "was handed a payment and did not deliver",
}

__all__ = [
    "AgentConfigError",
    "AgentError",
    "DeliveryFailed",
    "LoopSignal",
    "ModelFailureKind",
    "ModelUnavailable",
    "NonDelivery",
    "NotDeliveredOutcome",
    "PermanentToolError",
    "ProposalInvalid",
    "RunStateError",
    "ToolArgsError",
    "ToolError",
    "not_delivered_words",
]


class AgentError(Exception):
    """Root of every error the agent package raises."""


class AgentConfigError(AgentError):
    """The user's configuration (file, environment, flags) is invalid.

    ``source`` names where the bad value came from (a file path, ``NIB_*`` variable
    or flag) so the message can point at it.
    """

    def __init__(self, message: str, *, source: str | None = None) -> None:
        super().__init__(message)
        self.source = source


class RunStateError(AgentConfigError):
    """A run id given by the user is unknown, or the run is not in the state asked for."""


class DependencyDown(AgentError):
    """What a command needs is not running: the local devnet, or the judge and wallet
    services (or they run against another chain). Only ``nib devnet up`` (or ``nib
    services up``) starts them; every other command stops with this and the fix."""


class ModelUnavailable(AgentError):
    """The model provider is unreachable or refused; the run stops with ``llm-unreachable``.

    ``kind`` classifies the failure; ``fix`` is the human fix ("set OPENAI_API_KEY",
    "wait and retry: rate limited", ...). Providers raise it from the original
    exception at their boundary.
    """

    def __init__(self, kind: ModelFailureKind, fix: str, message: str | None = None) -> None:
        self.kind: ModelFailureKind = kind
        self.fix = fix
        super().__init__(message or f"model unavailable ({kind}): {fix}")


class LoopSignal(AgentError):
    """Raised inside a turn and handled by the loop (feedback or a failed step)."""


class ToolError(LoopSignal):
    """A tool could not produce an observation; ``str(err)`` is shown to the model.

    Tools raise it with a message that names what went wrong and what to try
    instead. Any other exception a tool raises is also turned into a failed step.
    ``http_status``: the HTTP status a seller answered, when that is what failed; kept
    apart from the message (which may quote the seller) so a lesson can name it.
    """

    def __init__(self, message: str = "", *, http_status: int | None = None) -> None:
        super().__init__(message)
        self.http_status = http_status


class ToolArgsError(ToolError):
    """A proposal named a tool with missing or invalid arguments."""


class PermanentToolError(ToolError):
    """A call refused for a reason that proposing the same call again cannot change: a
    seller's stated terms no buyer-side retry can pay (a window too short to settle, an
    asset or network we do not pay, a price above the call's own limit, an EIP-712 domain
    that is not the token's), or a seller or recipient the run may not pay.

    The loop records the call as failed for good: the same call fingerprint is not run
    again in the run, and the model is told that retrying will not help. Anything that
    may pass on a later try (a network error, a timeout, a seller's 5xx, a stale quote, a
    balance that may be funded) stays a plain ToolError and remains retryable.
    """


@dataclass(frozen=True)
class NonDelivery:
    """A seller handed a signed payment that did not deliver what was bought.

    ``seller``: its origin (never paid again in the run). ``spend_id``: the ledger row of
    the payment (None when the delivery failed without one, e.g. nothing covered).
    ``status``: the row's status once the wallet ended the authorization (``settled``:
    the seller took the money; ``cancelled``/``failed``: nothing moved; ``signed``: not
    decided yet). ``paid``: the money moved, i.e. paid for nothing. ``why``: what failed.
    """

    seller: str
    why: str
    paid: bool
    spend_id: str | None = None
    status: str | None = None

    @property
    def outcome(self) -> NotDeliveredOutcome:
        """What it cost: ``paid`` is the money moving; cancelled or failed, nothing did."""
        if self.paid:
            return "paid-for-nothing"
        return "nothing-paid" if self.status in ("cancelled", "failed") else "undecided"

    def said(self) -> str:
        """What happened, after the seller's origin ("was paid and did not deliver", "did
        not deliver (nothing paid)", ...): the one wording every message uses."""
        return not_delivered_words(self.outcome)

    def as_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


def not_delivered_words(outcome: NotDeliveredOutcome | None) -> str:
    """How a seller's non-delivery is said, after its origin, by what it cost (None: not
    known where the words are used, e.g. a record of the seller alone)."""
    return _NOT_DELIVERED[outcome]


class DeliveryFailed(ToolError):
    """A paid request got no delivery (an error status, a redirect, an oversized or late
    answer, no valid receipt); the wallet has ended the authorization. ``delivery`` tells
    the loop whom not to pay again and whether the money moved."""

    def __init__(
        self, message: str, delivery: NonDelivery, *, http_status: int | None = None
    ) -> None:
        super().__init__(message, http_status=http_status)
        self.delivery = delivery


class ProposalInvalid(LoopSignal):
    """The model's reply is not a valid proposal (bad JSON, unknown action, bad shape)."""
