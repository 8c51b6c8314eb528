""""it" in a count of transfers is the one address said before it (outside round 56, Q56:
"What is the USDC balance of 0xA, how many transfers did it receive in the last 12 blocks,
...?" declined "receive"); after two addresses it stays declined."""

from __future__ import annotations

from agent.models._factpatterns import extract_checklist

A = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
B = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"


def test_it_in_a_count_is_the_address_said_before() -> None:
    items = extract_checklist(f"What is the USDC balance of {A}, and how many transfers did it "
                              "receive in the last 12 blocks?")
    assert [i["kind"] for i in items] == ["usdc_balance", "transfer_count"]
    assert items[1]["params"] == {"blocks": "12", "recipient": A}


def test_it_after_two_addresses_is_declined() -> None:
    items = extract_checklist(f"What is the USDC balance of {A} and {B}, and how many transfers "
                              "did it receive?")
    assert items[-1]["kind"] is None and items[-1].get("unanswerable")
