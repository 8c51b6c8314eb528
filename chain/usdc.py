"""TestUSDC on the devnet, and the EIP-712 payloads USDC holders sign.

Deploys and drives the committed TestUSDC artifact (a FiatToken-v2-compatible stand-in
for Circle's USDC), and builds full EIP-712 typed-data dicts for EIP-3009 transfer/receive/
cancel authorizations and EIP-2612 permits, in the exact shape
``eth_account.Account.sign_typed_data(full_message=...)`` accepts.

Typed-data values are JSON-serialisable so they can be fingerprinted and stored as-is:
addresses are checksum strings, integers are Python ``int``, and ``bytes32`` nonces are
``0x``-prefixed lower-case 64-digit hex strings.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal, TypedDict, TypeVar, cast

import requests
from eth_account.signers.local import LocalAccount
from eth_account.types import TransactionDictType
from eth_typing import ABI
from web3 import Web3
from web3.contract import Contract
from web3.contract.contract import ContractConstructor, ContractFunction
from web3.exceptions import (
    ContractLogicError,
    TimeExhausted,
    Web3RPCError,
)
from web3.types import FilterParams, TxParams, TxReceipt

from chain.client import checksum_address, raw_rpc
from chain.errors import (
    ChainError,
    DevnetError,
    RpcError,
    RpcUnreachable,
    TokenDomainMismatch,
)

#: The committed build output of contracts/src/TestUSDC.sol (see contracts/build.mjs).
ARTIFACT_PATH = Path(__file__).resolve().parent.parent / "contracts" / "out" / "TestUSDC.json"

#: TestUSDC's default EIP-712 domain (the name is a deploy-time choice, the version fixed;
#: Circle's USDC on Base and most testnets says the same, Ethereum mainnet's is named
#: "USD Coin"). Anything that pays reads the token's own: ``token_domain``.
USDC_NAME = "USDC"
USDC_VERSION = "2"

_RECEIPT_TIMEOUT_S = 60.0


class Eip712Domain(TypedDict):
    """The EIP-712 domain of a token: checksum ``verifyingContract``, ``chainId`` an int."""

    name: str
    version: str
    chainId: int
    verifyingContract: str


#: The signed fields of an EIP-3009 authorization (``from`` is a Python keyword, hence
#: the functional form): checksum addresses, int amounts and times, 0x-hex nonce.
AuthorizationMessage = TypedDict(
    "AuthorizationMessage",
    {
        "from": str,
        "to": str,
        "value": int,
        "validAfter": int,
        "validBefore": int,
        "nonce": str,
    },
)


class AuthorizationTypedData(TypedDict):
    """A full EIP-712 ``Transfer``/``ReceiveWithAuthorization`` message, ready to sign."""

    types: dict[str, list[dict[str, str]]]
    primaryType: str
    domain: Eip712Domain
    message: AuthorizationMessage


#: The two EIP-3009 authorizations that move tokens.
AuthorizationKind = Literal["TransferWithAuthorization", "ReceiveWithAuthorization"]

_T = TypeVar("_T")

_DOMAIN_FIELDS = [
    {"name": "name", "type": "string"},
    {"name": "version", "type": "string"},
    {"name": "chainId", "type": "uint256"},
    {"name": "verifyingContract", "type": "address"},
]

_AUTHORIZATION_FIELDS = [
    {"name": "from", "type": "address"},
    {"name": "to", "type": "address"},
    {"name": "value", "type": "uint256"},
    {"name": "validAfter", "type": "uint256"},
    {"name": "validBefore", "type": "uint256"},
    {"name": "nonce", "type": "bytes32"},
]

_CANCEL_FIELDS = [
    {"name": "authorizer", "type": "address"},
    {"name": "nonce", "type": "bytes32"},
]

_PERMIT_FIELDS = [
    {"name": "owner", "type": "address"},
    {"name": "spender", "type": "address"},
    {"name": "value", "type": "uint256"},
    {"name": "nonce", "type": "uint256"},
    {"name": "deadline", "type": "uint256"},
]

_ARTIFACT_KEYS = ("abi", "bytecode", "contractName", "deployedBytecode", "sourceHash")


class LinkReference(TypedDict):
    """Where a library's address goes in unlinked creation code (offsets in bytes)."""

    start: int
    length: int


class ContractArtifact(TypedDict, total=False):
    """A compiled contract as its build artifact's JSON gives it (TestUSDC's, Circle's)."""

    abi: ABI
    bytecode: str
    deployedBytecode: str
    contractName: str
    sourceHash: str
    compiler: str
    #: source file -> library name -> where its address goes
    linkReferences: dict[str, dict[str, list[LinkReference]]]


# --------------------------------------------------------------------------- artifact


def load_artifact(path: Path | None = None) -> ContractArtifact:
    """Return the TestUSDC build artifact (abi, bytecode, compiler, sourceHash, ...).

    ``path`` defaults to :data:`ARTIFACT_PATH`. Raises when the file is missing or malformed.
    The result is a fresh copy: callers may mutate it.
    """
    return copy.deepcopy(_load_artifact(ARTIFACT_PATH if path is None else Path(path)))


@cache
def _load_artifact(path: Path) -> ContractArtifact:
    fix = "Fix: rebuild it with `node contracts/build.mjs` from the repository root"
    try:
        artifact: ContractArtifact = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DevnetError(f"TestUSDC artifact not found at {path}. {fix}.") from None
    except json.JSONDecodeError as exc:
        raise DevnetError(f"TestUSDC artifact at {path} is not valid JSON ({exc}). {fix}.") from exc
    missing = [key for key in _ARTIFACT_KEYS if not artifact.get(key)]
    if missing:
        raise DevnetError(
            f"TestUSDC artifact at {path} lacks {', '.join(missing)}; "
            f"expected keys {', '.join(_ARTIFACT_KEYS)}. {fix}."
        )
    return artifact


# --------------------------------------------------------------------- transactions


def usdc_contract(w3: Web3, address: str) -> Contract:
    """Return a web3 contract for the USDC-compatible token at ``address`` (TestUSDC ABI)."""
    return w3.eth.contract(
        address=checksum_address(address), abi=_load_artifact(ARTIFACT_PATH)["abi"]
    )


def deploy_test_usdc(w3: Web3, owner: LocalAccount, *, name: str = USDC_NAME) -> str:
    """Deploy TestUSDC from ``owner`` (who becomes the faucet owner); return its checksum address.

    ``name`` is the token's ``name()`` and EIP-712 domain name ("USD Coin" stands in for
    Circle's Ethereum-mainnet token, whose domain differs from the default "USDC").

    The transaction is signed locally and the call waits for the receipt. Raises
    :class:`~chain.errors.DevnetError` when the deploy reverts or leaves no code.
    """
    artifact = _load_artifact(ARTIFACT_PATH)
    factory = w3.eth.contract(abi=artifact["abi"], bytecode=artifact["bytecode"])
    if not name:
        raise ValueError("name must be a non-empty string, e.g. 'USDC' or 'USD Coin'.")
    what = f"TestUSDC ({name!r}) deploy from {owner.address}"
    try:
        receipt = _transact(w3, owner, factory.constructor(name), what=what)
    except ChainError as exc:
        raise DevnetError(f"{exc} Is {_url(w3)} an Anvil devnet with the owner funded?") from exc
    address = receipt["contractAddress"]
    if not address or not _rpc(w3, "eth_getCode", lambda: w3.eth.get_code(address)):
        raise DevnetError(
            f"TestUSDC deploy tx {receipt['transactionHash'].to_0x_hex()} left no code at "
            f"{address}; expected deployed bytecode. Fix: run a node whose hardfork supports "
            "evmVersion 'cancun' (Anvil's default does)."
        )
    return checksum_address(address)


def mint(w3: Web3, usdc: str, owner: LocalAccount, to: str, amount: int) -> str:
    """Mint ``amount`` atomic units of TestUSDC to ``to`` (devnet faucet); return the tx hash.

    Only the deployer (``owner``) may mint. Waits for the receipt; a revert raises
    :class:`~chain.errors.RpcError` (would revert) or :class:`~chain.errors.ChainError`.
    """
    _require_amount(amount)
    fn = usdc_contract(w3, usdc).functions.mint(checksum_address(to), amount)
    receipt = _transact(w3, owner, fn, what=f"mint of {amount} atomic USDC to {to}")
    return str(receipt["transactionHash"].to_0x_hex())


def transfer(w3: Web3, usdc: str, account: LocalAccount, to: str, amount: int) -> str:
    """MOVES MONEY: send ``amount`` atomic USDC from ``account`` to ``to``; return the tx hash.

    Signs with ``account``'s key directly, with no verdict check: this is devnet plumbing
    (faucets, fixtures). Agent spends must go through the wallet's verdict-gated signer.
    Waits for the receipt; a revert (e.g. insufficient balance) raises
    :class:`~chain.errors.RpcError` (would revert) or :class:`~chain.errors.ChainError`.
    """
    _require_amount(amount)
    fn = usdc_contract(w3, usdc).functions.transfer(checksum_address(to), amount)
    receipt = _transact(w3, account, fn, what=f"transfer of {amount} atomic USDC to {to}")
    return str(receipt["transactionHash"].to_0x_hex())


def _require_amount(amount: int) -> None:
    if isinstance(amount, bool) or not isinstance(amount, int) or amount <= 0:
        raise ValueError(
            f"amount must be a positive int of atomic units (1 USDC = 1_000_000); got {amount!r}."
        )


def _transact(
    w3: Web3, account: LocalAccount, fn: ContractFunction | ContractConstructor, *, what: str
) -> TxReceipt:
    """Build (gas estimated by the node), sign locally, send, and wait for a successful receipt."""

    def build() -> TxParams:
        params: TxParams = {
            "from": account.address,
            "nonce": w3.eth.get_transaction_count(account.address, "pending"),
            "chainId": w3.eth.chain_id,
        }
        try:
            return fn.build_transaction(params)
        except ContractLogicError as exc:
            # Gas estimation executes the call first, so a would-be revert surfaces here.
            raise RpcError(
                _url(w3),
                "eth_estimateGas",
                3,
                f"{what} from {account.address} would revert ({exc.message})",
            ) from exc

    tx = _rpc(w3, "eth_estimateGas", build)
    signed = account.sign_transaction(cast(TransactionDictType, tx))  # web3's TxParams, eth_account's own name
    tx_hash = _rpc(
        w3, "eth_sendRawTransaction", lambda: w3.eth.send_raw_transaction(signed.raw_transaction)
    )
    receipt = _rpc(
        w3,
        "eth_getTransactionReceipt",
        lambda: w3.eth.wait_for_transaction_receipt(tx_hash, timeout=_RECEIPT_TIMEOUT_S),
    )
    if receipt["status"] != 1:
        raise ChainError(
            f"{what} tx {tx_hash.to_0x_hex()} reverted in block {receipt['blockNumber']} "
            f"(status {receipt['status']}, expected 1). Fix: replay it with "
            f"`cast run {tx_hash.to_0x_hex()} --rpc-url {_url(w3)}` to see the revert."
        )
    return receipt


def _rpc(w3: Web3, method: str, fn: Callable[[], _T]) -> _T:
    """Run one RPC-backed step, translating transport and node errors (as ChainClient.call)."""
    try:
        return fn()
    except (requests.ConnectionError, requests.Timeout, ConnectionError, TimeoutError) as exc:
        raise RpcUnreachable(_url(w3), type(exc).__name__) from exc
    except TimeExhausted as exc:
        raise RpcError(
            _url(w3), method, None, f"no receipt within {_RECEIPT_TIMEOUT_S:.0f} s ({exc})"
        ) from exc
    except Web3RPCError as exc:
        resp = exc.rpc_response or {}
        err = resp.get("error") if isinstance(resp, dict) else None
        code = err.get("code") if isinstance(err, dict) else None
        msg = err.get("message") if isinstance(err, dict) else str(exc)
        raise RpcError(_url(w3), method, code, str(msg)) from exc


def _url(w3: Web3) -> str:
    return str(getattr(w3.provider, "endpoint_uri", None) or type(w3.provider).__name__)


# ------------------------------------------------------------------------ typed data


def eip3009_typed_data(
    *,
    name: str,
    version: str,
    chain_id: int,
    verifying_contract: str,
    sender: str,
    recipient: str,
    value: int,
    valid_after: int,
    valid_before: int,
    nonce: bytes,
    primary_type: AuthorizationKind = "TransferWithAuthorization",
) -> AuthorizationTypedData:
    """Full EIP-712 ``TransferWithAuthorization`` message (EIP-3009), ready to sign;
    ``primary_type="ReceiveWithAuthorization"`` makes the receive form, which only
    ``recipient`` itself may submit (``receiveWithAuthorization``).

    Warning: a signature over this lets *anyone* who holds it move ``value`` from ``sender``
    to ``recipient`` between ``valid_after`` and ``valid_before`` (unix seconds, exclusive),
    once per ``nonce``. ``nonce`` is 32 random bytes; it appears in the message as 0x-hex.
    """
    return {
        "types": {"EIP712Domain": list(_DOMAIN_FIELDS), primary_type: list(_AUTHORIZATION_FIELDS)},
        "primaryType": primary_type,
        "domain": _domain(name, version, chain_id, verifying_contract),
        "message": {
            "from": checksum_address(sender),
            "to": checksum_address(recipient),
            "value": _uint256(value, "value"),
            "validAfter": _uint256(valid_after, "valid_after"),
            "validBefore": _uint256(valid_before, "valid_before"),
            "nonce": _bytes32_hex(nonce),
        },
    }


def cancel_authorization_typed_data(
    *,
    name: str,
    version: str,
    chain_id: int,
    verifying_contract: str,
    authorizer: str,
    nonce: bytes,
) -> dict[str, object]:
    """Full EIP-712 ``CancelAuthorization`` message: voids ``authorizer``'s unused ``nonce``."""
    return {
        "types": {
            "EIP712Domain": list(_DOMAIN_FIELDS),
            "CancelAuthorization": list(_CANCEL_FIELDS),
        },
        "primaryType": "CancelAuthorization",
        "domain": _domain(name, version, chain_id, verifying_contract),
        "message": {
            "authorizer": checksum_address(authorizer),
            "nonce": _bytes32_hex(nonce),
        },
    }


#: ``cancelAuthorization(address authorizer, bytes32 nonce, uint8 v, bytes32 r, bytes32 s)``:
#: the EIP-3009 form every FiatTokenV2 (Circle's USDC) and TestUSDC have.
CANCEL_AUTHORIZATION_SELECTOR = Web3.keccak(
    text="cancelAuthorization(address,bytes32,uint8,bytes32,bytes32)"
)[:4].hex().removeprefix("0x")


def cancel_authorization_calldata(authorizer: str, nonce: bytes, v: int, r: int, s: int) -> str:
    """ABI calldata (0x-hex) of EIP-3009 ``cancelAuthorization(authorizer, nonce, v, r, s)``:
    whoever submits it, the token then refuses ``authorizer``'s ``nonce`` for good."""
    if len(nonce) != 32:
        raise ValueError(f"found a {len(nonce)}-byte nonce; expected 32 bytes")
    words = (
        bytes.fromhex(checksum_address(authorizer)[2:]).rjust(32, b"\0"),
        nonce,
        int(v).to_bytes(32, "big"),
        int(r).to_bytes(32, "big"),
        int(s).to_bytes(32, "big"),
    )
    return "0x" + CANCEL_AUTHORIZATION_SELECTOR + b"".join(words).hex()


def permit_typed_data(
    *,
    name: str,
    version: str,
    chain_id: int,
    verifying_contract: str,
    owner: str,
    spender: str,
    value: int,
    nonce: int,
    deadline: int,
) -> dict[str, object]:
    """Full EIP-712 ``Permit`` message (EIP-2612).

    Warning: a signature over this lets anyone set ``spender``'s allowance over ``owner``'s
    tokens to ``value`` until ``deadline``. ``nonce`` is the token's ``nonces(owner)`` (an int).
    """
    return {
        "types": {"EIP712Domain": list(_DOMAIN_FIELDS), "Permit": list(_PERMIT_FIELDS)},
        "primaryType": "Permit",
        "domain": _domain(name, version, chain_id, verifying_contract),
        "message": {
            "owner": checksum_address(owner),
            "spender": checksum_address(spender),
            "value": _uint256(value, "value"),
            "nonce": _uint256(nonce, "nonce"),
            "deadline": _uint256(deadline, "deadline"),
        },
    }


def _domain(name: str, version: str, chain_id: int, verifying_contract: str) -> Eip712Domain:
    return {
        "name": name,
        "version": version,
        "chainId": _uint256(chain_id, "chain_id"),
        "verifyingContract": checksum_address(verifying_contract),
    }


def _uint256(value: int, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**256:
        raise ValueError(f"{field} must be an int in [0, 2**256); got {value!r}.")
    return value


def _bytes32_hex(nonce: bytes) -> str:
    if not isinstance(nonce, bytes | bytearray) or len(nonce) != 32:
        length = len(nonce) if isinstance(nonce, bytes | bytearray | str) else "n/a"
        raise ValueError(
            f"nonce must be exactly 32 bytes (e.g. os.urandom(32)); got {type(nonce).__name__} "
            f"of length {length}."
        )
    return "0x" + bytes(nonce).hex()


def token_domain(
    w3: Web3, token: str, *, expected: tuple[str, str] | None = None
) -> tuple[str, str]:
    """The token's own EIP-712 domain ``(name, version)``, read from its contract: the one
    home of the domain every seller advertises and every buyer signs under.

    An authorization signed under another name or version (Circle's mainnet FiatTokenV2_2
    is named "USD Coin", TestUSDC "USDC") is rejected by the token, so every payment would
    fail. ``expected``: the domain the configured network pins (``Network.domain``); a
    token reporting another raises :class:`TokenDomainMismatch` naming both and the fix.
    """
    contract = usdc_contract(w3, token)
    name = str(_rpc(w3, "name", contract.functions.name().call))
    version = str(_rpc(w3, "version", contract.functions.version().call))
    if expected is not None and (name, version) != tuple(expected):
        raise TokenDomainMismatch(
            f"the configured network pins the USDC EIP-712 domain (name={expected[0]!r}, "
            f"version={expected[1]!r}), but the token at {token} reports (name={name!r}, "
            f"version={version!r}); an authorization signed for one is rejected by the other, "
            "so nothing was signed. Fix: correct NIB_USDC_NAME / NIB_USDC_VERSION (or unset "
            "them to use the token's own), or point NIB_USDC_ADDRESS at the intended token."
        )
    return name, version


# ------------------------------------------------------------------ settlement proofs

#: ``AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce)`` (EIP-3009).
AUTHORIZATION_USED_TOPIC = "0x" + Web3.keccak(
    text="AuthorizationUsed(address,bytes32)"
).hex().removeprefix("0x")
#: ``AuthorizationCanceled(address indexed authorizer, bytes32 indexed nonce)`` (EIP-3009).
AUTHORIZATION_CANCELED_TOPIC = "0x" + Web3.keccak(
    text="AuthorizationCanceled(address,bytes32)"
).hex().removeprefix("0x")
_TRANSFER_TOPIC = "0x" + Web3.keccak(text="Transfer(address,address,uint256)").hex().removeprefix(
    "0x"
)

_TX_HASH = re.compile(r"^0x[0-9a-fA-F]{64}\Z")

SettlementFinding = Literal[
    "proven", "not-mined", "reverted", "no-authorization-used", "no-matching-transfer"
]
"""What a transaction says about one EIP-3009 authorization.

- ``proven``: it succeeded and the token emitted ``AuthorizationUsed(authorizer, nonce)``
  and ``Transfer(authorizer -> recipient, value)``.
- ``not-mined``: no receipt (unknown or pending transaction).
- ``reverted``: mined with status 0.
- ``no-authorization-used``: it succeeded but did not consume this authorization.
- ``no-matching-transfer``: it consumed the authorization without the expected Transfer.
"""


@dataclass(frozen=True)
class SettlementProof:
    """The verdict of :func:`prove_authorization_settled` on one transaction."""

    tx_hash: str
    finding: SettlementFinding
    detail: str
    block_number: int | None = None

    @property
    def proven(self) -> bool:
        return self.finding == "proven"


def prove_authorization_settled(
    w3: Web3,
    tx_hash: str,
    *,
    token: str,
    authorizer: str,
    nonce: str,
    recipient: str,
    value: int,
) -> SettlementProof:
    """Whether ``tx_hash`` settled exactly this EIP-3009 authorization of ``token``.

    Warning: a seller's receipt is only a claim. Any successful transaction hash (someone
    else's payment, an unrelated call) would pass a status check; only the token's own
    ``AuthorizationUsed(authorizer, nonce)`` and ``Transfer(authorizer, recipient, value)``
    logs, emitted by ``token`` in that transaction, prove that *our* signature moved the
    money. Transport failures raise :class:`~chain.errors.ChainError`.
    """

    if not isinstance(tx_hash, str) or not _TX_HASH.match(tx_hash):
        return SettlementProof(str(tx_hash), "not-mined", "not a 0x + 64 hex transaction hash")
    # The raw receipt (hex as the node sent it): this runs after every paid request, and
    # web3's formatted receipt costs several times the request.
    receipt = _rpc(
        w3,
        "eth_getTransactionReceipt",
        lambda: raw_rpc(w3, "eth_getTransactionReceipt", [tx_hash]),
    )
    if receipt is None:
        return SettlementProof(tx_hash, "not-mined", "no receipt: the chain has no such mined tx")
    if not isinstance(receipt, dict):
        raise RpcError(_url(w3), "eth_getTransactionReceipt", None,
                       f"found {type(receipt).__name__}; expected a receipt object or null")
    block = int(str(receipt["blockNumber"]), 16)
    if int(str(receipt["status"]), 16) != 1:
        return SettlementProof(tx_hash, "reverted", f"reverted in block {block}", block)
    used, transfer = _authorization_logs(
        receipt.get("logs") or [],
        token=token,
        authorizer=authorizer,
        nonce=nonce,
        recipient=recipient,
        value=value,
    )
    if not used:
        return SettlementProof(
            tx_hash,
            "no-authorization-used",
            f"the tx carries no AuthorizationUsed({authorizer}, {nonce}) from {token}",
            block,
        )
    if not transfer:
        return SettlementProof(
            tx_hash,
            "no-matching-transfer",
            f"the tx carries no Transfer({authorizer} -> {recipient}, {value}) from {token}",
            block,
        )
    return SettlementProof(tx_hash, "proven", f"settled in block {block}", block)


def _authorization_logs(
    logs: list[dict[str, object]],
    *,
    token: str,
    authorizer: str,
    nonce: str,
    recipient: str,
    value: int,
) -> tuple[bool, bool]:
    """(``AuthorizationUsed(authorizer, nonce)`` found, ``Transfer(authorizer, recipient,
    value)`` found) among raw receipt ``logs``, counting only logs ``token`` emitted."""
    token_addr = token.lower()
    who = _topic_address(authorizer)
    used = transfer = False
    for log in logs:
        raw_topics = log["topics"]
        if str(log["address"]).lower() != token_addr or not isinstance(raw_topics, list) or not raw_topics:
            continue
        topics = [str(t).lower() for t in raw_topics]
        if topics[0] == AUTHORIZATION_USED_TOPIC and len(topics) == 3:
            used = used or (topics[1] == who and topics[2] == nonce.lower())
        elif topics[0] == _TRANSFER_TOPIC and len(topics) == 3:
            data = bytes.fromhex(str(log["data"]).removeprefix("0x"))
            amount = int.from_bytes(data, "big") if data else 0
            transfer = transfer or (
                topics[1] == who and topics[2] == _topic_address(recipient) and amount == value
            )
    return used, transfer


def _topic_address(address: str) -> str:
    return "0x" + address.lower().removeprefix("0x").rjust(64, "0")


def authorization_settled(
    w3: Web3, *, token: str, authorizer: str, nonce: str, recipient: str, value: int
) -> bool:
    """Whether ``authorizer``'s EIP-3009 authorization ``nonce`` of ``token`` was used on
    chain, moving exactly ``value`` to ``recipient`` (found by its AuthorizationUsed log,
    then proven by :func:`prove_authorization_settled` on that transaction)."""
    params: FilterParams = {
        "address": checksum_address(token), "fromBlock": 0, "toBlock": "latest",
        "topics": [AUTHORIZATION_USED_TOPIC, _topic_address(authorizer), nonce.lower()],
    }
    logs = _rpc(w3, "eth_getLogs", lambda: w3.eth.get_logs(params))
    return any(
        prove_authorization_settled(
            w3, "0x" + bytes(log["transactionHash"]).hex(), token=token, authorizer=authorizer,
            nonce=nonce, recipient=recipient, value=value,
        ).proven
        for log in logs
    )
