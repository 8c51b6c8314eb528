"""Networks the agent can use, named CAIP-2 style where the x402 wire needs it.

``anvil`` takes its token address from the running devnet; ``base-sepolia`` uses
Circle's USDC with the EIP-712 domain the ``x402`` package knows for it; any other
RPC + token pair can be registered from configuration.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from chain.errors import UnknownNetwork

ANVIL_CHAIN_ID = 31337
BASE_SEPOLIA_CHAIN_ID = 84532


@dataclass(frozen=True)
class Network:
    """One chain the agent can read and pay on."""

    name: str
    chain_id: int
    rpc_url: str
    usdc: str | None
    usdc_name: str = "USDC"
    usdc_version: str = "2"
    decimals: int = 6

    @property
    def caip2(self) -> str:
        """The CAIP-2 id used on the x402 wire, e.g. ``eip155:84532``."""
        return f"eip155:{self.chain_id}"

    @property
    def is_devnet(self) -> bool:
        return self.chain_id == ANVIL_CHAIN_ID

    def with_(self, **changes: object) -> Network:
        return replace(self, **changes)  # type: ignore[arg-type]


def _registry() -> dict[str, Network]:
    # The token's EIP-712 domain comes from the x402 package's known-assets table, so
    # our signatures match what x402 sellers and facilitators expect.
    from x402.mechanisms.evm.default_assets import get_default_asset

    asset = get_default_asset(f"eip155:{BASE_SEPOLIA_CHAIN_ID}")
    return {
        "anvil": Network("anvil", ANVIL_CHAIN_ID, "http://127.0.0.1:8545", None),
        "base-sepolia": Network(
            "base-sepolia",
            BASE_SEPOLIA_CHAIN_ID,
            "https://sepolia.base.org",
            asset["asset"],
            usdc_name=asset["name"],
            usdc_version=asset["version"],
        ),
    }


NETWORKS: dict[str, Network] = _registry()


def get_network(name: str, *, rpc_url: str | None = None, usdc: str | None = None) -> Network:
    """Look up a network by name (or CAIP-2 id), optionally overriding its RPC URL and token."""
    net = NETWORKS.get(name) or next((n for n in NETWORKS.values() if n.caip2 == name), None)
    if net is None:
        known = ", ".join(sorted(NETWORKS))
        raise UnknownNetwork(
            f"network {name!r} is not registered; expected one of: {known}. Fix: pick one of "
            "those, or use `custom_network(name, chain_id, rpc_url, usdc)` for your own RPC."
        )
    if rpc_url:
        net = net.with_(rpc_url=rpc_url)
    if usdc:
        net = net.with_(usdc=usdc)
    return net


def custom_network(name: str, chain_id: int, rpc_url: str, usdc: str) -> Network:
    """A user-configured network: any RPC and token address."""
    return Network(name, chain_id, rpc_url, usdc)
