"""The audit events the wallet emits (through the ``emit`` callable the agent injects),
each type with what its ``data`` says. ``agent.store.EVENT_TYPES`` lists them with the
agent's own; ``tests/agent/test_event_types.py`` fails on an emitted type not listed."""

from __future__ import annotations

__all__ = ["EVENT_TYPES"]

EVENT_TYPES: dict[str, str] = {
    "wallet.signed": "the wallet signed a spend: its reservation, the payload's fingerprint and "
    "what identifies it on chain (auth nonce or tx hash)",
    "wallet.refused": "the wallet refused to sign: the run, the verdict, the code and the reason",
    "wallet.broadcast": "a signed transfer was broadcast: its reservation, tx hash and nonce",
    "wallet.settled": "the chain proved a spend: its ledger row and tx hash",
    "wallet.settlement_unproven": "a claimed settlement the chain did not prove; the spend "
    "stays pending (tx hash, finding)",
    "wallet.failed": "a spend that moved no money was closed: its ledger row and why",
    "wallet.cancelled": "an abandoned x402 authorization was cancelled on chain: its ledger "
    "row, the cancel's tx hash and gas, and why it was abandoned",
    "wallet.reconciled": "the ledger was reconciled against on-chain Transfer logs: counts, "
    "mismatches, whether the hash chain holds",
}
