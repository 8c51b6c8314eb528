"""The names of the wallet's tables and of the lock its write sections hold: one home,
read by the store that creates them (wallet/_store.py) and every module that reads them."""

from __future__ import annotations

__all__ = ["CAPS", "GAS", "JOURNAL", "LOCK", "SPENDS", "TOTALS", "USED_VERDICTS"]

SPENDS = "wallet_spends"
USED_VERDICTS = "wallet_used_verdicts"
GAS = "wallet_gas"
#: The ledger's hash chain (wallet/journal.py): one entry per write to the tables above.
JOURNAL = "wallet_journal"
#: Running totals over every row (wallet/totals.py): what the treasury and balance checks read.
TOTALS = "wallet_totals"
#: Each run's cap as its last payment was held to (a task's registered cap): what bounds
#: the gas of a cancel the wallet sends for the run later (wallet/cancel.py).
CAPS = "wallet_run_caps"
#: The lock every wallet write section holds (one wallet's money state, one queue).
LOCK = "wallet"
