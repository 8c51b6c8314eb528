"""How answer lines word what the evidence holds (agent/loop/answers.py, the derived values
of agent/loop/checklist.py): the outside tester's round 21 found a tie read as "equal (...)
is smaller" (Q20), a transaction hash cut to "(tx…" (Q6), a count over "the last 20
blocks" that named no block (Q7) and a yes/no question answered with the value alone (Q3).
"""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from agent.loop.answers import fit_line, item_line
from agent.loop.checklist import Checklist, ChecklistItem, task_checklist
from agent.tools.chain_reads import TokenTransfersTool, UsdcTotalsTool

A, B, C = ("0x" + c * 40 for c in "abc")
TX = "0x88adcde18d3d9c5bdbd2feb5184a1131c7a21f55c78cc2c6f482c26cd7c2e0d8"
ZERO = "0x" + "0" * 40
SELLER = "0x26a1a62354671AcCeaC7FECD3B523300AD9cdB90"


def _value(n: int, kind: str, address: str, value: str) -> ChecklistItem:
    return ChecklistItem(id=f"c{n}", text=f"{kind} of {address}", kind=kind, covered=True,
                         value=value, evidence_id=f"e{n}", params={"address": address},
                         provenance="observed")  # fmt: skip


def _compared(op: str, label: str, kind: str, *values: str) -> ChecklistItem:
    inputs = [_value(n, kind, a, v) for n, (a, v) in enumerate(zip((A, B, C), values, strict=False), 1)]
    agg = ChecklistItem(id="c9", text=label, kind="comparison",
                        params={"of": ",".join(i.id for i in inputs), "op": op})  # fmt: skip
    return Checklist((*inputs, agg)).derive().items[-1]


@pytest.mark.parametrize(
    ("op", "label", "kind", "values", "said", "computed"),
    [
        # Q20: "Which of these two has less ETH", both holding 10000 ETH.
        ("min", "which holds less (ETH balance)", "eth_balance", ("10000 ETH", "10000 ETH"),
         "neither: both hold 10000 ETH", "a tie, neither is smaller"),
        ("max", "which holds more (ETH balance)", "eth_balance", ("10000 ETH", "10000 ETH"),
         "neither: both hold 10000 ETH", "a tie, neither is larger"),
        ("max", "which holds the most USDC", "usdc_balance", ("1 USDC", "1 USDC", "1 USDC"),
         "none: all 3 hold 1 USDC", "a tie, none is the largest"),
        ("min", "which holds the least USDC", "usdc_balance", ("1 USDC", "1 USDC", "1 USDC"),
         "none: all 3 hold 1 USDC", "a tie, none is the smallest"),
        ("max", "which holds the most USDC", "usdc_balance", ("3.75 USDC", "3.75 USDC", "2.50 USDC"),
         f"a tie for the most: {A} and {B}, 3.75 USDC each", "c1 and c2 tie for the largest"),
        ("min", "which holds the least USDC", "usdc_balance", ("2.50 USDC", "3.75 USDC", "2.50 USDC"),
         f"a tie for the least: {A} and {C}, 2.50 USDC each", "c1 and c3 tie for the smallest"),
        ("max", "which made more transfers", "transfer_count", ("6", "6"),
         "neither: both have 6 transfers", "a tie, neither is larger"),
    ],
)  # fmt: skip
def test_a_tie_reads_as_a_tie_in_every_comparison_wording(
    op: str, label: str, kind: str, values: tuple[str, ...], said: str, computed: str
) -> None:
    item = _compared(op, label, kind, *values)
    assert item.covered and item.value == said, item
    line = item_line(item.as_dict())
    assert line.startswith(f"{label}: {said} (derived: ") and line.endswith(f": {computed})"), line
    assert not re.search(r"\b(?:equal|is (?:the )?(?:larger|smaller|largest|smallest))\b.*\)$",
                         line.replace(computed, "")), line  # fmt: skip


def test_a_single_holder_is_still_named_with_its_value() -> None:
    item = _compared("min", "which holds less (ETH balance)", "eth_balance", "10000 ETH", "9999 ETH")
    assert item.value == f"{B} (9999 ETH)"
    assert item.computation == f"c1 10000 ETH vs c2 9999 ETH: {B} (9999 ETH) is smaller"


def test_a_hash_or_an_address_in_an_answer_line_is_never_cut() -> None:
    """Q6: the largest transfer's line ended "in block 10 (tx…"; a value with several
    addresses is never cut inside one either: the other text is shortened."""
    value = f"7.50 USDC from {ZERO} to {SELLER} in block 10 (tx {TX})"
    item = {"text": "largest USDC transfer in blocks 4 to 10", "kind": "transfer_max",
            "covered": True, "value": value, "evidence_id": "e1",
            "params": {"from_block": "4", "to_block": "10"}, "provenance": "observed"}  # fmt: skip
    assert item_line(item) == f"largest USDC transfer in blocks 4 to 10: {value} (observed, evidence e1)"

    words = " ".join(["word"] * 20)  # 99 characters
    cut = fit_line(f"{words} {TX} {words} {A} {words}", 160)
    assert cut.endswith("…") and TX in cut and A not in cut and "0x" not in cut.replace(TX, "")
    assert len(cut.replace(TX, "")) <= 160
    cut = fit_line(f"a {A} b {B} c {C} d " + "x" * 200, 20)
    assert all(h in cut for h in (A, B, C)), cut
    for n in range(1, 140):  # wherever the bound falls: each id whole or not at all
        cut = fit_line(f"sent by {A} to {B} in {TX} of {C}", n)
        assert all(len(h) in (42, 66) for h in re.findall(r"0x[0-9a-f]+", cut)), (n, cut)


def test_a_task_too_long_for_its_item_keeps_its_hashes_whole() -> None:
    task = "Tell me " + "very " * 37 + f"{TX} please"  # the hash spans character 200
    text = task_checklist(task).items[0].text
    assert TX in text and text.endswith("…"), text


def _counted(label: str, value: str, read_range: str | None, **params: str) -> str:
    item = Checklist((ChecklistItem(id="c1", text=label, kind="transfer_count", params=params),))
    covered = item.cover({"transfer_count": value}, "e1", params=params, read_range=read_range)
    return item_line(covered.items[0].as_dict())


def test_an_answer_over_a_window_names_the_blocks_read() -> None:
    """Q7: "USDC transfer count in the last 20 blocks: 10" named no block; the evidence
    read blocks 0..11."""
    line = _counted("USDC transfer count in the last 20 blocks", "10", "0..11", blocks="20")
    assert line == "USDC transfer count in the last 20 blocks (blocks 0 to 11): 10 (observed, evidence e1)"
    # A range the label names already is said once; so is one the value states.
    named = _counted("USDC transfer count in blocks 4 to 10", "6", "4..10", from_block="4", to_block="10")
    assert named == "USDC transfer count in blocks 4 to 10: 6 (observed, evidence e1)"
    item = ChecklistItem(id="c1", text="total USDC received by 0xA in the last 30 blocks",
                         kind="usdc_received_total", covered=True, evidence_id="e1",
                         value="0.16 USDC (160000 atomic) received by 0xA in 8 transfers, blocks 0..11",
                         provenance="observed", read_range="0..11")  # fmt: skip
    assert "(blocks 0 to 11)" not in item_line(item.as_dict())
    # A model's label with no window gets the range too.
    assert _counted("transfer count", "3", "8..10", blocks="3").startswith("transfer count (blocks 8 to 10): 3")


def test_the_log_scans_say_they_read_a_range() -> None:
    assert TokenTransfersTool.reads_range and UsdcTotalsTool.reads_range


def test_a_condition_answers_yes_or_no() -> None:
    source = _value(1, "usdc_balance", A, "0.00 USDC")
    cond = ChecklistItem(id="c2", text=f"USDC balance of {A} > 0 usdc", kind="condition",
                         params={"of": "c1", "op": ">", "than": "0"})  # fmt: skip
    done = Checklist((source, cond)).derive().items[1]
    assert done.value == "false"  # what gates an order reads, unchanged
    assert item_line(done.as_dict()) == f"USDC balance of {A} > 0 usdc: no (derived: c1 0.00 > 0 = false)"


@pytest.mark.parametrize(
    ("read_at", "said"),
    [(("7", "7"), " at block 7, the latest"), (("7", "8"), ""), ((None, None), "")],
)
def test_a_value_computed_from_values_of_one_latest_block_names_that_block(
    read_at: tuple[str | None, str | None], said: str
) -> None:
    # Outside rounds 21 and 22: "10000 + 10000 = 20000 ETH" named no block while its
    # inputs did; inputs read at two heads name none (no one block is true of both).
    a, b = (replace(_value(n, "eth_balance", h, "10000 ETH"), read_at=at)
            for n, h, at in ((1, A, read_at[0]), (2, B, read_at[1])))  # fmt: skip
    total = ChecklistItem(id="c3", text="combined ETH balance", kind="comparison",
                          params={"of": "c1,c2", "op": "sum"})  # fmt: skip
    cond = ChecklistItem(id="c4", text=f"ETH balance of {A} > 0 eth", kind="condition",
                         params={"of": "c1", "op": ">", "than": "0"})  # fmt: skip
    done = Checklist((a, b, total, cond)).derive().items
    assert f"(derived{said}: " in item_line(done[2].as_dict()), item_line(done[2].as_dict())
    one = " at block 7, the latest" if read_at[0] == "7" else ""
    assert item_line(done[3].as_dict()).startswith(f"ETH balance of {A} > 0 eth: yes (derived{one}: ")


@pytest.mark.parametrize(("kind", "unit", "value", "shown"), [
    # Outside round 36 (F2): a fee asked in gwei was declined; it is its ETH shifted, exact.
    ("tx_fee", "gwei", "0.000078467446677168 ETH (51522 gas at 1.522989144 gwei)",
     "78467.446677168 gwei"),
    ("tx_fee", "wei", "0.000078467446677168 ETH (51522 gas at 1.522989144 gwei)",
     "78467446677168 wei"),
    ("tx_gas_price", "wei", "1.522989144", "1522989144 wei"),
])
def test_a_transactions_fee_and_price_are_given_in_the_unit_asked(
    kind: str, unit: str, value: str, shown: str
) -> None:
    from agent.loop.answers import computed_unit, in_unit

    assert in_unit(kind, unit, value) == shown
    assert computed_unit(kind, unit)  # on a derived line of its own, never as the tool's


def test_a_gas_price_in_eth_is_its_gwei_shifted() -> None:
    from agent.loop.answers import in_unit

    assert in_unit("tx_gas_price", "eth", "1.522989144") == "0.000000001522989144 ETH"
