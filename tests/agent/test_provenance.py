"""Every answer line is graded by how it was reached: observed, derived or asserted."""

from __future__ import annotations

from agent.loop.checklist import Checklist, ChecklistItem
from agent.loop.provenance import answer_grade, backing, grade_answer
from agent.loop.result import EvidenceItem

A, B = "0x" + "a1" * 20, "0x" + "b2" * 20
EVIDENCE = [
    EvidenceItem(id="e1", step=1, tool="token_balance", args={"address": A},
                 summary=f"{A} holds 12.50 USDC", facts={"usdc_balance": "12.50 USDC"},
                 params={"address": A}),
    EvidenceItem(id="e2", step=1, tool="token_balance", args={"address": B},
                 summary=f"{B} holds 3.00 USDC", facts={"usdc_balance": "3.00 USDC"},
                 params={"address": B}),
    EvidenceItem(id="e3", step=2, tool="pay_http", args={"url": "http://s/datasets/token/USDC"},
                 summary="bought", facts={"token_factsheet": "issuer=Circle"}, cost_usdc=10_000),
]  # fmt: skip
TASK = f"Which of {A} and {B} holds more USDC, and who issues USDC?"


def checklist() -> Checklist:
    items = (
        ChecklistItem("c1", "a", "usdc_balance", params={"address": A}),
        ChecklistItem("c2", "b", "usdc_balance", params={"address": B}),
        ChecklistItem("c3", "more", "comparison", params={"of": "c1,c2", "op": "max"}),
    )
    cl = Checklist(items).cover({"usdc_balance": "12.50 USDC"}, "e1", params={"address": A})
    return cl.cover({"usdc_balance": "3.00 USDC"}, "e2", params={"address": B})


def grades(answer: str) -> list[str]:
    return [line.grade for line in grade_answer(answer, TASK, EVIDENCE, checklist())]


def test_observed_a_tool_result_holds_the_value_cited_or_not() -> None:
    assert grades(f"{A}: 12.50 USDC (evidence e1)") == ["observed"]
    assert grades("The second address holds 3.00 USDC.") == ["observed"]
    assert grades("The issuer is Circle.") == ["observed"]  # a named value from a purchase
    lines = grade_answer(f"{A}: 12.50 USDC (evidence e1)", TASK, EVIDENCE, checklist())
    assert lines[0].evidence == ["e1"]


def test_derived_computed_from_observed_values_with_the_computation_shown() -> None:
    c3 = checklist().items[2]
    assert c3.provenance == "derived" and c3.computation
    assert grades(f"more: {c3.value} (derived: {c3.computation})") == ["derived"]


def test_asserted_values_no_evidence_holds() -> None:
    assert grades("The base fee is 41.7 gwei.") == ["asserted"]
    assert grades(f"{A} holds 99.00 USDC") == ["asserted"]  # the right address, a wrong value
    assert grades("Yes, it is raining in Lisbon.") == ["asserted"]
    assert grades("The issuer is Tether.") == ["asserted"]


def test_lines_that_claim_nothing_are_not_graded_as_claims() -> None:
    assert grades("owner of the contract: not answered (no tool reads it)") == ["not-answered"]
    assert grades("Here is what I found:") == ["note"]


def test_a_decline_restating_the_runs_own_reason_claims_nothing() -> None:
    """The outside tester's Q21 and Q23 (round 19): "block 5000 does not exist yet (the head
    at run start is 10)" and a receipt that failed "on anvil (chain 31337)" were graded
    asserted, so the whole answer read `asserted`; 10 counted as big (Decimal wrote it
    1E+1) and 31337 was no value the run had observed, though the run itself wrote both."""
    tx = "0x5b2e" + "0" * 56 + "8e0b"
    cases = [("What is the gas used by block 5000?",
              "block 5000 does not exist yet (the head at run start is 10)"),
             (f"Did transaction {tx} succeed?",
              f"tx_receipt failed in steps 1 and 2 (last error: ToolError: tx_receipt: no "
              f"receipt for {tx} on anvil (chain 31337); it is unknown or not mined)")]  # fmt: skip
    for task, why in cases:
        item = ChecklistItem("c1", "the fact", "tx_status", unanswerable=why)
        (line,) = grade_answer(f"the fact: not answered ({why})", task, [], Checklist((item,)))
        assert line.grade == "not-answered", line
    # A value the run's reasons do not hold still claims something on a decline.
    item = ChecklistItem("c1", "the fact", "tx_status", unanswerable="no tool reads it")
    (line,) = grade_answer("the fact: not answered, it is 1842180 gas", "Gas?", [],
                           Checklist((item,)))
    assert line.grade == "asserted", line


def test_a_decline_restating_the_item_as_read_claims_nothing() -> None:
    """Outside round 64's O06b: "send half a USDC to it" was read as "send 0.5 USDC to it",
    and its "not answered" line was graded asserted for the 0.5 the task never wrote."""
    task = f"If {A} holds less than 5 USDC, send half a USDC to it."
    item = ChecklistItem("c2", "send 0.5 USDC to it", None, unanswerable="no pattern (send)")
    (line,) = grade_answer("send 0.5 USDC to it: not answered (no pattern (send))", task, [],
                           Checklist((item,)))
    assert line.grade == "not-answered", line


def test_the_answer_takes_its_weakest_line() -> None:
    lines = grade_answer(f"{A}: 12.50 USDC [e1]\nGas: 9.9 gwei", TASK, EVIDENCE, checklist())
    assert answer_grade(lines) == "asserted"
    assert answer_grade(grade_answer("Here:", TASK, EVIDENCE, checklist())) == "none"


def test_an_asserted_line_makes_a_covered_checklist_unbacked() -> None:
    cl = checklist()
    assert cl.complete
    good = grade_answer(f"{A}: 12.50 USDC [e1]", TASK, EVIDENCE, cl)
    assert backing(cl, good) is None
    bad = grade_answer(f"{A}: 12.50 USDC [e1]\nSupply: 7,000 USDC", TASK, EVIDENCE, cl)
    reason, message = backing(cl, bad) or ("", "")
    assert reason == "unbacked-answer" and "Supply: 7,000 USDC" in message


def test_both_ends_of_a_range_a_tool_read_back_a_line_that_names_it() -> None:
    """Outside test 21, Q7: the blocks a window read ("blocks 0..11" in the tool's
    summary) are named in the answer; the grader read only the first end of "0..11", so the
    line naming the last block was asserted. A block no range holds still is."""
    scan = [EvidenceItem(id="e1", step=1, tool="token_transfers", args={"blocks": 20},
                         summary="10 USDC transfers in blocks 0..11",
                         facts={"transfer_count": "10"}, params={"blocks": "20"})]  # fmt: skip
    items = Checklist((ChecklistItem("c1", "count", "transfer_count", params={"blocks": "20"}),))
    items = items.cover({"transfer_count": "10"}, "e1", params={"blocks": "20"}, read_range="0..11")
    task = "How many USDC transfers happened in the last 20 blocks?"
    line = "USDC transfer count in the last 20 blocks (blocks 0 to 11): 10 (observed, evidence e1)"
    assert [g.grade for g in grade_answer(line, task, scan, items)] == ["observed"]
    wrong = line.replace("to 11", "to 12")
    assert [g.grade for g in grade_answer(wrong, task, scan, items)] == ["asserted"]
    assert [g.grade for g in grade_answer("blocks 0..99: 10", task, scan, items)] == ["asserted"]
