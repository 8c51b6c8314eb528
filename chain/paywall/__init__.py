"""The devnet's x402 sellers: the paywall app, what it sells (``datasets``) and the
in-process facilitator that settles on Anvil. Run with ``python -m chain.paywall``."""
