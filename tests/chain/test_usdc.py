"""TestUSDC on a real Anvil: ERC-20, EIP-2612 permit and EIP-3009 authorizations behave like
Circle's FiatToken v2, and the official x402 exact-EVM facilitator settles against it."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest
from eth_account import Account
from eth_account.messages import encode_typed_data
from eth_account.signers.local import LocalAccount
from eth_utils import keccak
from web3 import Web3
from web3.exceptions import ContractLogicError
from web3.logs import DISCARD

from chain.devkeys import AGENT, DEPLOYER, OUTSIDER, SELLER, dev_account
from chain.errors import RpcError
from chain.usdc import (
    USDC_NAME,
    USDC_VERSION,
    cancel_authorization_typed_data,
    eip3009_typed_data,
    mint,
    permit_typed_data,
    transfer,
    usdc_contract,
)

ONE_USDC = 1_000_000
SECP256K1_N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141

agent = dev_account(AGENT)
seller = dev_account(SELLER)
relayer = dev_account(DEPLOYER)  # submits authorizations, as the x402 facilitator does
outsider = dev_account(OUTSIDER)


# ---------------------------------------------------------------------------- helpers


def _balance(chain: Any, address: str) -> int:
    return usdc_contract(chain.w3, chain.usdc).functions.balanceOf(address).call()


def _used(chain: Any, authorizer: str, nonce: bytes) -> bool:
    token = usdc_contract(chain.w3, chain.usdc)
    return token.functions.authorizationState(authorizer, nonce).call()


def _latest_timestamp(w3: Web3) -> int:
    return int(w3.eth.get_block("latest")["timestamp"])


def _submit(w3: Web3, sender: LocalAccount, fn: Any) -> dict[str, Any]:
    tx = fn.build_transaction(
        {
            "from": sender.address,
            "nonce": w3.eth.get_transaction_count(sender.address, "pending"),
            "chainId": w3.eth.chain_id,
        }
    )
    tx_hash = w3.eth.send_raw_transaction(sender.sign_transaction(tx).raw_transaction)
    receipt = w3.eth.wait_for_transaction_receipt(tx_hash, timeout=30)
    assert receipt["status"] == 1
    return receipt


def _revert_reason(sender: LocalAccount, fn: Any) -> str:
    with pytest.raises(ContractLogicError) as info:
        fn.call({"from": sender.address})
    return str(info.value.message)


def _authorization(
    chain: Any,
    *,
    signer: LocalAccount = agent,
    sender: str | None = None,
    recipient: str = seller.address,
    value: int = ONE_USDC,
    valid_after: int = 0,
    valid_before: int | None = None,
    nonce: bytes | None = None,
    receive: bool = False,
) -> tuple[dict[str, Any], Any]:
    """Typed data for an agent -> seller authorization and ``signer``'s signature over it."""
    typed = eip3009_typed_data(
        primary_type="ReceiveWithAuthorization" if receive else "TransferWithAuthorization",
        name=USDC_NAME,
        version=USDC_VERSION,
        chain_id=chain.chain_id,
        verifying_contract=chain.usdc,
        sender=sender or agent.address,
        recipient=recipient,
        value=value,
        valid_after=valid_after,
        valid_before=valid_before
        if valid_before is not None
        else _latest_timestamp(chain.w3) + 600,
        nonce=nonce if nonce is not None else os.urandom(32),
    )
    return typed, Account.sign_typed_data(signer.key, full_message=typed)


def _args(typed: dict[str, Any]) -> list[Any]:
    m = typed["message"]
    return [m["from"], m["to"], m["value"], m["validAfter"], m["validBefore"], m["nonce"]]


def _twa_vrs(chain: Any, typed: dict[str, Any], signed: Any) -> Any:
    fn = usdc_contract(chain.w3, chain.usdc).get_function_by_signature(
        "transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,uint8,bytes32,bytes32)"
    )
    return fn(*_args(typed), signed.v, _b32(signed.r), _b32(signed.s))


def _twa_bytes(chain: Any, typed: dict[str, Any], signature: bytes) -> Any:
    fn = usdc_contract(chain.w3, chain.usdc).get_function_by_signature(
        "transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,bytes)"
    )
    return fn(*_args(typed), signature)


def _b32(n: int) -> bytes:
    return n.to_bytes(32, "big")


# ------------------------------------------------------------------ metadata & domain


def test_token_metadata_and_domain_match_circle_usdc(chain: Any) -> None:
    token = usdc_contract(chain.w3, chain.usdc)
    assert token.functions.name().call() == "USDC"
    assert token.functions.symbol().call() == "USDC"
    assert token.functions.decimals().call() == 6
    assert token.functions.version().call() == "2"
    assert token.functions.owner().call() == relayer.address

    typehashes = {
        "TRANSFER_WITH_AUTHORIZATION_TYPEHASH": "TransferWithAuthorization(address from,"
        "address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)",
        "RECEIVE_WITH_AUTHORIZATION_TYPEHASH": "ReceiveWithAuthorization(address from,"
        "address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)",
        "CANCEL_AUTHORIZATION_TYPEHASH": "CancelAuthorization(address authorizer,bytes32 nonce)",
        "PERMIT_TYPEHASH": "Permit(address owner,address spender,uint256 value,uint256 nonce,"
        "uint256 deadline)",
    }
    for getter, type_string in typehashes.items():
        assert getattr(token.functions, getter)().call() == keccak(text=type_string), getter

    typed, _ = _authorization(chain)
    expected_separator = encode_typed_data(full_message=typed).header
    assert token.functions.DOMAIN_SEPARATOR().call() == expected_separator

    fields, name, version, chain_id, contract, salt, extensions = (
        token.functions.eip712Domain().call()
    )
    assert (fields, name, version, chain_id, contract) == (
        b"\x0f",
        "USDC",
        "2",
        chain.chain_id,
        chain.usdc,
    )
    assert (salt, extensions) == (b"\x00" * 32, [])


# ------------------------------------------------------------------------ ERC-20 & faucet


def test_transfer_moves_balance(chain: Any) -> None:
    agent_before = _balance(chain, agent.address)
    seller_before = _balance(chain, seller.address)

    tx_hash = transfer(chain.w3, chain.usdc, agent, seller.address, 3 * ONE_USDC)

    assert tx_hash.startswith("0x") and len(tx_hash) == 66
    assert _balance(chain, agent.address) == agent_before - 3 * ONE_USDC
    assert _balance(chain, seller.address) == seller_before + 3 * ONE_USDC


def test_transfer_beyond_balance_is_refused_with_the_revert_reason(chain: Any) -> None:
    too_much = _balance(chain, agent.address) + 1
    with pytest.raises(RpcError) as info:
        transfer(chain.w3, chain.usdc, agent, seller.address, too_much)
    assert info.value.method == "eth_estimateGas"
    assert (
        f"transfer of {too_much} atomic USDC to {seller.address} from {agent.address} would "
        "revert (execution reverted: ERC20: transfer amount exceeds balance)"
    ) in str(info.value)


def test_mint_is_owner_only(chain: Any) -> None:
    before = _balance(chain, outsider.address)
    mint(chain.w3, chain.usdc, relayer, outsider.address, 5 * ONE_USDC)
    assert _balance(chain, outsider.address) == before + 5 * ONE_USDC

    with pytest.raises(
        RpcError, match=r"would revert \(execution reverted: TestUSDC: caller is not the owner\)"
    ):
        mint(chain.w3, chain.usdc, outsider, outsider.address, ONE_USDC)
    assert _balance(chain, outsider.address) == before + 5 * ONE_USDC


# ------------------------------------------------------------------------------ permit


def test_permit_sets_allowance_and_bumps_nonce(chain: Any) -> None:
    token = usdc_contract(chain.w3, chain.usdc)
    nonce = token.functions.nonces(agent.address).call()
    typed = permit_typed_data(
        name=USDC_NAME,
        version=USDC_VERSION,
        chain_id=chain.chain_id,
        verifying_contract=chain.usdc,
        owner=agent.address,
        spender=outsider.address,
        value=7 * ONE_USDC,
        nonce=nonce,
        deadline=_latest_timestamp(chain.w3) + 600,
    )
    signed = Account.sign_typed_data(agent.key, full_message=typed)
    m = typed["message"]
    permit_vrs = token.get_function_by_signature(
        "permit(address,address,uint256,uint256,uint8,bytes32,bytes32)"
    )

    _submit(
        chain.w3,
        relayer,
        permit_vrs(
            m["owner"],
            m["spender"],
            m["value"],
            m["deadline"],
            signed.v,
            _b32(signed.r),
            _b32(signed.s),
        ),
    )

    assert token.functions.allowance(agent.address, outsider.address).call() == 7 * ONE_USDC
    assert token.functions.nonces(agent.address).call() == nonce + 1
    # The same signature cannot be replayed: the nonce it committed to is gone.
    replay = permit_vrs(
        m["owner"],
        m["spender"],
        m["value"],
        m["deadline"],
        signed.v,
        _b32(signed.r),
        _b32(signed.s),
    )
    assert _revert_reason(relayer, replay) == "execution reverted: EIP2612: invalid signature"

    # The spender can now pull funds, and only up to the allowance.
    agent_before = _balance(chain, agent.address)
    _submit(
        chain.w3,
        outsider,
        token.functions.transferFrom(agent.address, seller.address, 2 * ONE_USDC),
    )
    assert _balance(chain, agent.address) == agent_before - 2 * ONE_USDC
    assert token.functions.allowance(agent.address, outsider.address).call() == 5 * ONE_USDC


def test_expired_permit_is_refused(chain: Any) -> None:
    token = usdc_contract(chain.w3, chain.usdc)
    deadline = _latest_timestamp(chain.w3) - 1
    typed = permit_typed_data(
        name=USDC_NAME,
        version=USDC_VERSION,
        chain_id=chain.chain_id,
        verifying_contract=chain.usdc,
        owner=agent.address,
        spender=outsider.address,
        value=ONE_USDC,
        nonce=token.functions.nonces(agent.address).call(),
        deadline=deadline,
    )
    signature = Account.sign_typed_data(agent.key, full_message=typed).signature
    permit_bytes = token.get_function_by_signature("permit(address,address,uint256,uint256,bytes)")
    fn = permit_bytes(agent.address, outsider.address, ONE_USDC, deadline, bytes(signature))
    assert _revert_reason(relayer, fn) == "execution reverted: FiatTokenV2: permit is expired"
    assert token.functions.allowance(agent.address, outsider.address).call() == 0


# ------------------------------------------------------------- transferWithAuthorization


@pytest.mark.parametrize("form", ["vrs", "bytes"])
def test_transfer_with_authorization_settles_once(chain: Any, form: str) -> None:
    typed, signed = _authorization(chain, value=2 * ONE_USDC)
    nonce = bytes.fromhex(typed["message"]["nonce"][2:])
    agent_before = _balance(chain, agent.address)
    seller_before = _balance(chain, seller.address)
    assert not _used(chain, agent.address, nonce)

    fn = (
        _twa_vrs(chain, typed, signed)
        if form == "vrs"
        else _twa_bytes(chain, typed, bytes(signed.signature))
    )
    receipt = _submit(chain.w3, relayer, fn)

    assert _balance(chain, agent.address) == agent_before - 2 * ONE_USDC
    assert _balance(chain, seller.address) == seller_before + 2 * ONE_USDC
    assert _used(chain, agent.address, nonce)
    token = usdc_contract(chain.w3, chain.usdc)
    used_events = token.events.AuthorizationUsed().process_receipt(receipt, errors=DISCARD)
    assert [(e.args.authorizer, e.args.nonce) for e in used_events] == [(agent.address, nonce)]

    # Replaying the same signed authorization, in either form, is refused.
    for replay in (_twa_vrs(chain, typed, signed), _twa_bytes(chain, typed, signed.signature)):
        assert _revert_reason(relayer, replay) == (
            "execution reverted: FiatTokenV2: authorization is used or canceled"
        )
    assert _balance(chain, agent.address) == agent_before - 2 * ONE_USDC


def test_expired_authorization_is_refused(chain: Any) -> None:
    typed, signed = _authorization(chain, valid_before=_latest_timestamp(chain.w3))
    nonce = bytes.fromhex(typed["message"]["nonce"][2:])
    before = _balance(chain, agent.address)

    reason = _revert_reason(relayer, _twa_bytes(chain, typed, signed.signature))

    assert reason == "execution reverted: FiatTokenV2: authorization is expired"
    assert _balance(chain, agent.address) == before
    assert not _used(chain, agent.address, nonce)


def test_not_yet_valid_authorization_is_refused(chain: Any) -> None:
    typed, signed = _authorization(
        chain,
        valid_after=_latest_timestamp(chain.w3) + 3600,
        valid_before=_latest_timestamp(chain.w3) + 7200,
    )
    nonce = bytes.fromhex(typed["message"]["nonce"][2:])
    before = _balance(chain, agent.address)

    reason = _revert_reason(relayer, _twa_vrs(chain, typed, signed))

    assert reason == "execution reverted: FiatTokenV2: authorization is not yet valid"
    assert _balance(chain, agent.address) == before
    assert not _used(chain, agent.address, nonce)


def test_authorization_signed_by_someone_else_is_refused(chain: Any) -> None:
    # The outsider signs a message claiming to move the agent's funds.
    typed, forged = _authorization(chain, signer=outsider)
    nonce = bytes.fromhex(typed["message"]["nonce"][2:])
    before = _balance(chain, agent.address)

    for fn in (_twa_vrs(chain, typed, forged), _twa_bytes(chain, typed, forged.signature)):
        assert _revert_reason(relayer, fn) == "execution reverted: FiatTokenV2: invalid signature"
    assert _balance(chain, agent.address) == before
    assert not _used(chain, agent.address, nonce)


def test_tampered_authorization_is_refused(chain: Any) -> None:
    typed, signed = _authorization(chain, value=ONE_USDC)
    typed["message"]["value"] = 50 * ONE_USDC  # signature covers 1 USDC, not 50
    reason = _revert_reason(relayer, _twa_bytes(chain, typed, signed.signature))
    assert reason == "execution reverted: FiatTokenV2: invalid signature"


def test_malleable_high_s_signature_is_refused(chain: Any) -> None:
    typed, signed = _authorization(chain)
    # (r, n - s, flipped v) recovers the same signer; EIP-2 low-s rules it out.
    high_s = _b32(signed.r) + _b32(SECP256K1_N - signed.s) + bytes([55 - signed.v])
    reason = _revert_reason(relayer, _twa_bytes(chain, typed, high_s))
    assert reason == "execution reverted: ECRecover: invalid signature 's' value"


def test_cancelled_authorization_cannot_be_used(chain: Any) -> None:
    typed, signed = _authorization(chain)
    nonce = bytes.fromhex(typed["message"]["nonce"][2:])
    cancel = cancel_authorization_typed_data(
        name=USDC_NAME,
        version=USDC_VERSION,
        chain_id=chain.chain_id,
        verifying_contract=chain.usdc,
        authorizer=agent.address,
        nonce=nonce,
    )
    cancel_sig = Account.sign_typed_data(agent.key, full_message=cancel)
    token = usdc_contract(chain.w3, chain.usdc)
    cancel_vrs = token.get_function_by_signature(
        "cancelAuthorization(address,bytes32,uint8,bytes32,bytes32)"
    )
    before = _balance(chain, agent.address)

    receipt = _submit(
        chain.w3,
        relayer,
        cancel_vrs(agent.address, nonce, cancel_sig.v, _b32(cancel_sig.r), _b32(cancel_sig.s)),
    )

    cancelled = token.events.AuthorizationCanceled().process_receipt(receipt, errors=DISCARD)
    assert [(e.args.authorizer, e.args.nonce) for e in cancelled] == [(agent.address, nonce)]
    assert _used(chain, agent.address, nonce)
    reason = _revert_reason(relayer, _twa_bytes(chain, typed, signed.signature))
    assert reason == "execution reverted: FiatTokenV2: authorization is used or canceled"
    # A cancellation is itself single-use (bytes form this time).
    cancel_bytes = token.get_function_by_signature("cancelAuthorization(address,bytes32,bytes)")
    reason = _revert_reason(relayer, cancel_bytes(agent.address, nonce, cancel_sig.signature))
    assert reason == "execution reverted: FiatTokenV2: authorization is used or canceled"
    assert _balance(chain, agent.address) == before


# -------------------------------------------------------------- receiveWithAuthorization


def test_receive_with_authorization_only_by_the_payee(chain: Any) -> None:
    typed, signed = _authorization(chain, receive=True, value=4 * ONE_USDC)
    nonce = bytes.fromhex(typed["message"]["nonce"][2:])
    token = usdc_contract(chain.w3, chain.usdc)
    receive_vrs = token.get_function_by_signature(
        "receiveWithAuthorization(address,address,uint256,uint256,uint256,bytes32,uint8,bytes32,bytes32)"
    )
    receive_bytes = token.get_function_by_signature(
        "receiveWithAuthorization(address,address,uint256,uint256,uint256,bytes32,bytes)"
    )
    agent_before = _balance(chain, agent.address)
    seller_before = _balance(chain, seller.address)

    # A third party holding the signature cannot push it through.
    reason = _revert_reason(relayer, receive_bytes(*_args(typed), signed.signature))
    assert reason == "execution reverted: FiatTokenV2: caller must be the payee"
    # Nor can it be redeemed as a plain transferWithAuthorization (different type hash).
    reason = _revert_reason(relayer, _twa_bytes(chain, typed, signed.signature))
    assert reason == "execution reverted: FiatTokenV2: invalid signature"

    _submit(
        chain.w3,
        seller,
        receive_vrs(*_args(typed), signed.v, _b32(signed.r), _b32(signed.s)),
    )

    assert _balance(chain, agent.address) == agent_before - 4 * ONE_USDC
    assert _balance(chain, seller.address) == seller_before + 4 * ONE_USDC
    assert _used(chain, agent.address, nonce)


# ------------------------------------------------------------------ typed-data helpers


def test_typed_data_is_json_shaped_and_validated() -> None:
    nonce = bytes(range(32))
    typed = eip3009_typed_data(
        name="USDC",
        version="2",
        chain_id=31337,
        verifying_contract="0x5fbdb2315678afecb367f032d93f642f64180aa3",
        sender=agent.address.lower(),
        recipient=seller.address,
        value=1,
        valid_after=0,
        valid_before=10,
        nonce=nonce,
    )
    assert typed["primaryType"] == "TransferWithAuthorization"
    assert set(typed["types"]) == {"EIP712Domain", "TransferWithAuthorization"}
    assert typed["message"]["nonce"] == "0x" + nonce.hex()
    assert typed["message"]["from"] == agent.address
    assert typed["domain"]["verifyingContract"] == "0x5FbDB2315678afecb367f032d93F642f64180aa3"

    with pytest.raises(ValueError, match="nonce must be exactly 32 bytes"):
        eip3009_typed_data(**{**_kwargs(typed), "nonce": b"\x01" * 31})
    with pytest.raises(ValueError, match=r"value must be an int in \[0, 2\*\*256\)"):
        eip3009_typed_data(**{**_kwargs(typed), "value": -1})


def _kwargs(typed: dict[str, Any]) -> dict[str, Any]:
    m, d = typed["message"], typed["domain"]
    return {
        "name": d["name"],
        "version": d["version"],
        "chain_id": d["chainId"],
        "verifying_contract": d["verifyingContract"],
        "sender": m["from"],
        "recipient": m["to"],
        "value": m["value"],
        "valid_after": m["validAfter"],
        "valid_before": m["validBefore"],
        "nonce": bytes.fromhex(m["nonce"][2:]),
    }


# -------------------------------------------------------------- x402 facilitator compat


def test_x402_exact_facilitator_verifies_and_settles_our_authorization(chain: Any) -> None:
    """The official x402 facilitator accepts a payload signed over eip3009_typed_data and
    settles it on TestUSDC (every token function it calls exists with its ABI)."""
    from x402.mechanisms.evm.exact.facilitator import ExactEvmScheme
    from x402.mechanisms.evm.signers import FacilitatorWeb3Signer
    from x402.schemas import PaymentPayload, PaymentRequirements

    requirements = PaymentRequirements(
        scheme="exact",
        network=f"eip155:{chain.chain_id}",
        asset=chain.usdc,
        amount=str(ONE_USDC),
        pay_to=seller.address,
        max_timeout_seconds=300,
        extra={"name": USDC_NAME, "version": USDC_VERSION},
    )
    # The facilitator checks its wall clock and the token the chain's: an idle session chain
    # lags the wall clock, so the window covers both, as the agent's authorizations do.
    later = max(_latest_timestamp(chain.w3), int(time.time()))
    typed, signed = _authorization(chain, valid_before=later + 300)
    m = typed["message"]
    payload = PaymentPayload(
        payload={
            "authorization": {
                "from": m["from"],
                "to": m["to"],
                "value": str(m["value"]),
                "validAfter": str(m["validAfter"]),
                "validBefore": str(m["validBefore"]),
                "nonce": m["nonce"],
            },
            "signature": "0x" + bytes(signed.signature).hex(),
        },
        accepted=requirements,
    )
    # Devnet key of the DEPLOYER (publicly known Anvil key), only ever used on chain 31337.
    facilitator = ExactEvmScheme(FacilitatorWeb3Signer("0x" + relayer.key.hex(), chain.rpc_url))
    agent_before = _balance(chain, agent.address)
    seller_before = _balance(chain, seller.address)

    verified = facilitator.verify(payload, requirements)
    assert verified.is_valid, verified
    settled = facilitator.settle(payload, requirements)
    assert settled.success, settled

    assert _balance(chain, agent.address) == agent_before - ONE_USDC
    assert _balance(chain, seller.address) == seller_before + ONE_USDC
    assert _used(chain, agent.address, bytes.fromhex(m["nonce"][2:]))
