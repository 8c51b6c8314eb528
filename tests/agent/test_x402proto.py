"""The buyer's x402 helpers: parsing, choosing, building and encoding, then paying for real."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from eth_account import Account
from x402.http import (
    decode_payment_signature_header,
    encode_payment_required_header,
    encode_payment_response_header,
)
from x402.mechanisms.evm.eip712 import hash_eip3009_authorization
from x402.mechanisms.evm.types import ExactEIP3009Payload
from x402.schemas import (
    PaymentPayload,
    PaymentPayloadV1,
    PaymentRequired,
    PaymentRequiredV1,
    PaymentRequirements,
    PaymentRequirementsV1,
    ResourceInfo,
    SettleResponse,
)

from agent.tools.x402.protocol import (
    RequirementRefused,
    X402ProtocolError,
    build_authorization,
    choose_requirement,
    encode_payment_header,
    parse_payment_required,
    parse_payment_response,
    requirement_amount,
)
from chain.devkeys import AGENT, DEPLOYER, SELLER, dev_account
from chain.usdc import usdc_contract

URL = "http://seller.test/data"
NETWORK = "eip155:31337"
USDC = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
OTHER = "0x036CbD53842c5426634e7929541eC2318f3dCF7e"
PAY_TO = dev_account(SELLER).address
PAYER = dev_account(AGENT).address


def requirement(**changes: Any) -> PaymentRequirements:
    fields: dict[str, Any] = {
        "scheme": "exact",
        "network": NETWORK,
        "asset": USDC,
        "amount": "50000",
        "pay_to": PAY_TO,
        "max_timeout_seconds": 300,
        "extra": {"name": "USDC", "version": "2"},
    }
    return PaymentRequirements(**{**fields, **changes})


def payment_required(*accepts: PaymentRequirements) -> PaymentRequired:
    return PaymentRequired(
        accepts=list(accepts) or [requirement()],
        resource=ResourceInfo(url=URL, description="data", mime_type="application/json"),
    )


def v1_required(**changes: Any) -> PaymentRequiredV1:
    fields: dict[str, Any] = {
        "scheme": "exact",
        "network": "base-sepolia",
        "max_amount_required": "10000",
        "resource": URL,
        "pay_to": PAY_TO,
        "max_timeout_seconds": 60,
        "asset": OTHER,
        "extra": {"name": "USDC", "version": "2"},
    }
    return PaymentRequiredV1(accepts=[PaymentRequirementsV1(**{**fields, **changes})])


def response_402(*, headers: dict[str, str] | None = None, body: Any = None) -> httpx.Response:
    content = (
        body if isinstance(body, bytes) else json.dumps(body if body is not None else {}).encode()
    )
    return httpx.Response(
        402, headers=headers or {}, content=content, request=httpx.Request("GET", URL)
    )


def header_402(pr: PaymentRequired) -> httpx.Response:
    return response_402(headers={"PAYMENT-REQUIRED": encode_payment_required_header(pr)})


def b64(obj: Any) -> str:
    text = obj if isinstance(obj, str) else json.dumps(obj)
    return base64.b64encode(text.encode()).decode()


# ---------------------------------------------------------------------------- parse


def test_parses_the_v2_header() -> None:
    pr = parse_payment_required(header_402(payment_required()))
    assert isinstance(pr, PaymentRequired)
    assert pr.accepts[0] == requirement()
    assert pr.resource is not None and pr.resource.url == URL


def test_parses_a_v1_json_body() -> None:
    body = v1_required().model_dump(by_alias=True, exclude_none=True)
    pr = parse_payment_required(response_402(body=body))
    assert isinstance(pr, PaymentRequiredV1)
    assert pr.accepts[0].max_amount_required == "10000"


@pytest.mark.parametrize(
    ("resp", "message"),
    [
        (
            httpx.Response(200, request=httpx.Request("GET", URL)),
            "expected HTTP 402 Payment Required from http://seller.test/data, got 200",
        ),
        (
            response_402(headers={"PAYMENT-REQUIRED": "%%%not base64%%%"}),
            "PAYMENT-REQUIRED header of the 402 from http://seller.test/data is not "
            "base64-encoded UTF-8",
        ),
        (
            response_402(headers={"PAYMENT-REQUIRED": b64("not json")}),
            "PAYMENT-REQUIRED header of the 402 from http://seller.test/data decodes to text "
            "that is not JSON",
        ),
        (
            response_402(headers={"PAYMENT-REQUIRED": b64([1, 2])}),
            "is a JSON list; expected a PaymentRequired object",
        ),
        (
            response_402(headers={"PAYMENT-REQUIRED": b64({"accepts": []})}),
            "lacks x402Version; expected 1 or 2",
        ),
        (
            response_402(headers={"PAYMENT-REQUIRED": b64({"x402Version": 3, "accepts": []})}),
            "has x402Version 3; expected 1 or 2",
        ),
        (
            response_402(
                headers={
                    "PAYMENT-REQUIRED": b64(
                        {
                            "x402Version": 2,
                            "accepts": [
                                {
                                    "scheme": "exact",
                                    "network": NETWORK,
                                    "asset": USDC,
                                    "amount": "1",
                                    "maxTimeoutSeconds": 60,
                                }
                            ],
                        }
                    )
                }
            ),
            "does not match the x402 v2 PaymentRequired schema: accepts.0.payTo: Field required",
        ),  # fmt: skip
        (
            response_402(headers={"PAYMENT-REQUIRED": b64({"x402Version": 2, "accepts": []})}),
            "offers no payment requirements (accepts is empty)",
        ),
        (
            response_402(body=b"<html>pay me</html>"),
            "has no PAYMENT-REQUIRED header and its body is not JSON",
        ),
        (
            response_402(body={"error": "payment required"}),
            "JSON body of the 402 from http://seller.test/data lacks x402Version",
        ),
    ],
)
def test_malformed_402_names_what_is_malformed(resp: httpx.Response, message: str) -> None:
    with pytest.raises(X402ProtocolError) as err:
        parse_payment_required(resp)
    assert message in str(err.value)


def test_parses_the_settlement_receipt() -> None:
    settled = SettleResponse(
        success=True, transaction="0x" + "ab" * 32, network=NETWORK, payer=PAYER
    )
    resp = httpx.Response(
        200, headers={"PAYMENT-RESPONSE": encode_payment_response_header(settled)}
    )
    assert parse_payment_response(resp) == {
        "success": True,
        "transaction": "0x" + "ab" * 32,
        "network": NETWORK,
        "payer": PAYER,
        "amount": None,
        "error_reason": None,
    }
    v1 = httpx.Response(
        200, headers={"X-PAYMENT-RESPONSE": encode_payment_response_header(settled)}
    )
    assert parse_payment_response(v1)["transaction"] == "0x" + "ab" * 32


def test_missing_or_bad_settlement_receipt_is_a_protocol_error() -> None:
    with pytest.raises(X402ProtocolError, match="carries no PAYMENT-RESPONSE"):
        parse_payment_response(httpx.Response(200, request=httpx.Request("GET", URL)))
    bad = httpx.Response(200, headers={"PAYMENT-RESPONSE": b64({"success": True})})
    with pytest.raises(X402ProtocolError, match="not a base64 x402 SettleResponse.*transaction"):
        parse_payment_response(bad)


# --------------------------------------------------------------------------- choose


def test_chooses_the_cheapest_matching_requirement() -> None:
    pr = payment_required(
        requirement(amount="90000"),
        requirement(asset=OTHER, amount="1"),
        requirement(amount="50000"),
        requirement(network="eip155:84532", amount="2"),
    )
    chosen = choose_requirement(pr, network_caip2=NETWORK, asset=USDC.lower())
    assert chosen.amount == "50000"


@pytest.mark.parametrize(
    "offer",
    [
        requirement(network="eip155:8453"),
        requirement(asset=OTHER),
        requirement(scheme="upto"),
        requirement(extra={"name": "USDC", "version": "2", "assetTransferMethod": "permit2"}),
    ],
)
def test_refuses_another_chain_or_asset_before_quoting(offer: PaymentRequirements) -> None:
    with pytest.raises(RequirementRefused) as err:
        choose_requirement(payment_required(offer), network_caip2=NETWORK, asset=USDC)
    assert err.value.code == "no-matching-requirement"
    assert f"we pay scheme 'exact' (EIP-3009) on {NETWORK} in {USDC}" in str(err.value)
    assert f"offered: {offer.scheme} on {offer.network} in {offer.asset} for 50000" in str(
        err.value
    )
    assert len(err.value.offered) == 1


def test_refuses_a_price_above_the_limit() -> None:
    with pytest.raises(RequirementRefused) as err:
        choose_requirement(payment_required(), network_caip2=NETWORK, asset=USDC, max_amount=49_999)
    assert err.value.code == "price-above-limit"
    assert "costs 50000 atomic units, above the limit of 49999" in str(err.value)
    assert choose_requirement(
        payment_required(), network_caip2=NETWORK, asset=USDC, max_amount=50_000
    )


def test_v1_legacy_network_names_map_to_caip2() -> None:
    chosen = choose_requirement(v1_required(), network_caip2="eip155:84532", asset=OTHER)
    assert isinstance(chosen, PaymentRequirementsV1)
    assert requirement_amount(chosen) == 10_000
    with pytest.raises(RequirementRefused):
        choose_requirement(v1_required(), network_caip2=NETWORK, asset=OTHER)


def test_malformed_amount_is_a_protocol_error() -> None:
    with pytest.raises(X402ProtocolError, match="amount '0.05' is not a positive integer string"):
        choose_requirement(
            payment_required(requirement(amount="0.05")), network_caip2=NETWORK, asset=USDC
        )


# ---------------------------------------------------------------------------- build


def test_validity_window_comes_from_chain_time_not_the_wall_clock() -> None:
    chain_time = 1_000_000  # far from today: the window must follow the chain
    nonce = bytes(range(32))
    typed, auth = build_authorization(
        requirement(), payer=PAYER, chain_time=chain_time, nonce=nonce
    )
    assert typed["message"]["validAfter"] == chain_time - 600
    assert typed["message"]["validBefore"] == chain_time + 300
    assert auth == {
        "from": PAYER,
        "to": PAY_TO,
        "value": "50000",
        "validAfter": str(chain_time - 600),
        "validBefore": str(chain_time + 300),
        "nonce": "0x" + nonce.hex(),
    }
    assert typed["domain"] == {
        "name": "USDC",
        "version": "2",
        "chainId": 31337,
        "verifyingContract": USDC,
    }
    assert typed["primaryType"] == "TransferWithAuthorization"


def test_validity_is_capped_by_the_seller_and_by_us() -> None:
    short, _ = build_authorization(
        requirement(max_timeout_seconds=60), payer=PAYER, chain_time=5_000
    )
    assert short["message"]["validBefore"] == 5_060
    long, _ = build_authorization(
        requirement(max_timeout_seconds=86_400), payer=PAYER, chain_time=5_000
    )
    assert long["message"]["validBefore"] == 5_300
    custom, _ = build_authorization(requirement(), payer=PAYER, chain_time=5_000, validity_s=30)
    assert custom["message"]["validBefore"] == 5_030
    early, _ = build_authorization(requirement(), payer=PAYER, chain_time=100)
    assert early["message"]["validAfter"] == 0


def test_each_authorization_gets_a_fresh_random_nonce() -> None:
    nonces = {
        build_authorization(requirement(), payer=PAYER, chain_time=9)[1]["nonce"] for _ in range(5)
    }
    assert len(nonces) == 5 and all(len(n) == 66 for n in nonces)


def test_typed_data_hashes_like_x402_builds_it() -> None:
    key = dev_account(AGENT).key
    typed, auth = build_authorization(requirement(), payer=PAYER, chain_time=1_700_000_000)
    ours = Account.sign_typed_data(key, full_message=typed).signature
    digest = hash_eip3009_authorization(
        ExactEIP3009Payload.from_dict({"authorization": auth}).authorization,
        31337,
        USDC,
        "USDC",
        "2",
    )
    assert ours == Account.unsafe_sign_hash(digest, key).signature


def test_missing_eip712_domain_is_a_protocol_error() -> None:
    with pytest.raises(X402ProtocolError, match="extra lacks the token's EIP-712 domain"):
        build_authorization(requirement(extra={}), payer=PAYER, chain_time=10)
    with pytest.raises(X402ProtocolError, match="payTo '0xnope' is not an EVM address"):
        build_authorization(requirement(pay_to="0xnope"), payer=PAYER, chain_time=10)


# --------------------------------------------------------------------------- encode


def test_v2_header_decodes_with_x402_and_echoes_the_requirement() -> None:
    pr = payment_required()
    req = pr.accepts[0]
    _, auth = build_authorization(req, payer=PAYER, chain_time=10)
    name, value = encode_payment_header(req, pr, auth, b"\x01" * 65)
    assert name == "PAYMENT-SIGNATURE"
    payload = decode_payment_signature_header(value)
    assert isinstance(payload, PaymentPayload)
    assert payload.accepted == req
    assert payload.resource == pr.resource
    assert payload.payload == {"authorization": auth, "signature": "0x" + "01" * 65}


def test_v1_header_is_x_payment() -> None:
    pr = v1_required()
    req = pr.accepts[0]
    _, auth = build_authorization(req, payer=PAYER, chain_time=10)
    name, value = encode_payment_header(req, pr, auth, "0x" + "02" * 65)
    assert name == "X-PAYMENT"
    payload = decode_payment_signature_header(value)
    assert isinstance(payload, PaymentPayloadV1)
    assert (payload.scheme, payload.network) == ("exact", "base-sepolia")


def test_refuses_to_encode_an_authorization_for_other_terms() -> None:
    pr = payment_required()
    _, auth = build_authorization(pr.accepts[0], payer=PAYER, chain_time=10)
    with pytest.raises(ValueError, match="differs from the requirement's price 50000"):
        encode_payment_header(pr.accepts[0], pr, {**auth, "value": "50001"}, b"\x01" * 65)
    with pytest.raises(ValueError, match="differs from the requirement's payTo"):
        encode_payment_header(pr.accepts[0], pr, {**auth, "to": PAYER}, b"\x01" * 65)
    with pytest.raises(ValueError, match="not one of this 402's accepts"):
        encode_payment_header(requirement(amount="7"), pr, auth, b"\x01" * 65)


# ------------------------------------------------------------------- real payments


@pytest.fixture(scope="module")
def paywall_url(anvil: Any) -> Iterator[str]:
    from chain.paywall.app import PaywallServer

    with PaywallServer(anvil.rpc_url, anvil.usdc) as server:
        yield server.url


def usdc_balance(chain: Any, who: str) -> int:
    return int(usdc_contract(chain.w3, chain.usdc).functions.balanceOf(who).call())


def test_pays_the_local_paywall_v2(chain: Any, paywall_url: str) -> None:
    agent = dev_account(AGENT)
    seller = dev_account(SELLER).address
    before = usdc_balance(chain, agent.address), usdc_balance(chain, seller)
    # Move the chain clock away from the wall clock's second, as a revert can.
    # Ahead of both clocks: an idle session chain lags the wall clock, and the facilitator
    # checks validBefore against its wall clock.
    latest = int(chain.w3.eth.get_block("latest")["timestamp"])
    chain.rpc("evm_mine", [max(latest, int(time.time())) + 120])
    with httpx.Client(timeout=30) as http:
        url = paywall_url + "/datasets/protocol/aave"
        pr = parse_payment_required(http.get(url))
        req = choose_requirement(pr, network_caip2=NETWORK, asset=chain.usdc, max_amount=1_000_000)
        now = int(chain.w3.eth.get_block("latest")["timestamp"])
        typed, auth = build_authorization(req, payer=agent.address, chain_time=now)
        assert typed["message"]["validBefore"] == now + 300
        signature = Account.sign_typed_data(agent.key, full_message=typed).signature
        name, value = encode_payment_header(req, pr, auth, signature)
        paid = http.get(url, headers={name: value})

    assert paid.status_code == 200, paid.text
    assert paid.json()["facts"]["governance_token"] == "AAVE"
    assert usdc_balance(chain, agent.address) == before[0] - 250_000
    assert usdc_balance(chain, seller) == before[1] + 250_000
    settlement = parse_payment_response(paid)
    assert settlement["success"] and settlement["payer"] == agent.address
    assert chain.w3.eth.get_transaction_receipt(settlement["transaction"])["status"] == 1


def test_pays_a_v1_seller(chain: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A v1 (X-PAYMENT) seller settling with x402's own v1 facilitator on Anvil."""
    from x402.mechanisms.evm.exact.v1.facilitator import ExactEvmSchemeV1
    from x402.mechanisms.evm.signers import FacilitatorWeb3Signer
    from x402.mechanisms.evm.v1.constants import V1_NETWORK_CHAIN_IDS

    # v1 names networks; x402 has no v1 name for Anvil, so register one for this test.
    monkeypatch.setitem(V1_NETWORK_CHAIN_IDS, "anvil", 31337)
    facilitator = ExactEvmSchemeV1(
        FacilitatorWeb3Signer(private_key=dev_account(DEPLOYER).key.hex(), rpc_url=chain.rpc_url)
    )
    offer = v1_required(network="anvil", asset=chain.usdc, max_amount_required="30000").accepts[0]

    def seller(request: httpx.Request) -> httpx.Response:
        header = request.headers.get("X-PAYMENT")
        if header is None:
            body = PaymentRequiredV1(accepts=[offer]).model_dump(by_alias=True, exclude_none=True)
            return httpx.Response(402, json=body)
        payload = decode_payment_signature_header(header)
        assert isinstance(payload, PaymentPayloadV1)
        verified = facilitator.verify(payload, offer)
        if not verified.is_valid:
            return httpx.Response(
                402, json={"x402Version": 1, "error": verified.invalid_reason, "accepts": []}
            )
        settled = facilitator.settle(payload, offer)
        return httpx.Response(
            200,
            json={"ok": True},
            headers={"X-PAYMENT-RESPONSE": encode_payment_response_header(settled)},
        )

    agent = dev_account(AGENT)
    before = usdc_balance(chain, agent.address)
    with httpx.Client(transport=httpx.MockTransport(seller)) as http:
        pr = parse_payment_required(http.get(URL))
        assert isinstance(pr, PaymentRequiredV1)
        req = choose_requirement(pr, network_caip2=NETWORK, asset=chain.usdc)
        now = int(chain.w3.eth.get_block("latest")["timestamp"])
        wall = int(time.time())
        typed, auth = build_authorization(req, payer=agent.address, chain_time=now, wall_time=wall)
        # the seller's maxTimeoutSeconds, from the later of the two clocks
        assert typed["message"]["validBefore"] == max(now, wall) + 60
        signature = Account.sign_typed_data(agent.key, full_message=typed).signature
        name, value = encode_payment_header(req, pr, auth, signature)
        assert name == "X-PAYMENT"
        paid = http.get(URL, headers={name: value})

    assert paid.status_code == 200, paid.text
    settlement = parse_payment_response(paid)
    assert settlement["success"] is True
    assert usdc_balance(chain, agent.address) == before - 30_000
    assert chain.w3.eth.get_transaction_receipt(settlement["transaction"])["status"] == 1


def test_window_covers_both_clocks_when_the_chain_lags():
    """An idle chain's latest block can be minutes behind the wall clock that x402
    facilitators check; the window must be valid on both clocks."""
    typed, _ = build_authorization(requirement(), payer=PAYER, chain_time=1_000, wall_time=5_000)
    assert typed["message"]["validAfter"] == 1_000 - 600
    assert typed["message"]["validBefore"] == 5_000 + 300
