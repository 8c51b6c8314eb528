"""Networks the agent can use, named CAIP-2 style where the x402 wire needs it.

``anvil`` takes its token address from the running devnet; ``base-sepolia`` uses
Circle's USDC with the EIP-712 domain the ``x402`` package knows for it; any other
RPC + token pair can be registered from configuration.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from x402.mechanisms.evm.default_assets import get_default_asset

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
    #: The token's EIP-712 domain when configuration pins it (base-sepolia: the x402
    #: package's table; NIB_USDC_NAME / NIB_USDC_VERSION); None: the token's own
    #: name()/version(), read from the chain (``chain.usdc.token_domain``).
    usdc_name: str | None = None
    usdc_version: str | None = None
    decimals: int = 6

    @property
    def domain(self) -> tuple[str, str] | None:
        """The pinned ``(name, version)`` the token must report, or None when not pinned."""
        if self.usdc_name is None and self.usdc_version is None:
            return None
        if not self.usdc_name or not self.usdc_version:
            raise UnknownNetwork(
                f"network {self.name} pins half a USDC EIP-712 domain (name={self.usdc_name!r}, "
                f"version={self.usdc_version!r}); expected both or neither. Fix: set both "
                "NIB_USDC_NAME and NIB_USDC_VERSION, or neither."
            )
        return self.usdc_name, self.usdc_version

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


def get_network(
    name: str,
    *,
    rpc_url: str | None = None,
    usdc: str | None = None,
    usdc_name: str | None = None,
    usdc_version: str | None = None,
) -> Network:
    """Look up a network by name (or CAIP-2 id), optionally overriding its RPC URL, its
    token, and the token's EIP-712 domain (another token drops the table's pinned one)."""
    net = NETWORKS.get(name) or next((n for n in NETWORKS.values() if n.caip2 == name), None)
    if net is None:
        known = ", ".join(sorted(NETWORKS))
        raise UnknownNetwork(
            f"network {name!r} is not registered; expected one of: {known}. Fix: pick one of "
            "those, or use `custom_network(name, chain_id, rpc_url, usdc)` for your own RPC."
        )
    if rpc_url:
        net = net.with_(rpc_url=rpc_url)
    if usdc and (net.usdc or "").lower() != usdc.lower():
        net = net.with_(usdc=usdc, usdc_name=None, usdc_version=None)
    if usdc_name is not None or usdc_version is not None:
        net = net.with_(usdc_name=usdc_name, usdc_version=usdc_version)
    return net


def custom_network(
    name: str,
    chain_id: int,
    rpc_url: str,
    usdc: str,
    *,
    usdc_name: str | None = None,
    usdc_version: str | None = None,
) -> Network:
    """A user-configured network: any RPC and token address (and, when pinned, the
    token's EIP-712 domain)."""
    return Network(name, chain_id, rpc_url, usdc, usdc_name=usdc_name, usdc_version=usdc_version)
