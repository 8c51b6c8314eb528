"""A bound the task sets on its spending, in words (outside test 15, Q29: "don't spend more
than 0.20 USDC" withheld every purchase): read as a bound, never as words that withhold a
payment, and never in a task that orders a transfer (which is still withheld)."""

from __future__ import annotations

import pytest

from judge.mandates import withheld_by
from judge.spend_bound import spend_bound

TO = "0xFABB0ac9d68B0B445fB7357272Ff202C5651694a"
REPORT = "Get the premium report on this chain's USDC"


@pytest.mark.parametrize(
    ("said", "atomic"),
    [
        ("; don't spend more than 0.20 USDC.", 200_000),
        (", but do not spend more than 0.2 USDC.", 200_000),
        (". Never pay more than $0.15.", 150_000),
        (" and spend at most 0.05 USDC.", 50_000),
        (", spending no more than 0.1 USDC.", 100_000),
        (" without spending more than 0.3 USDC.", 300_000),
        (", no more than 0.20 USDC.", 200_000),
        (" for no more than 0.20 USDC.", 200_000),
        (", under 0.25 USDC.", 250_000),
        (" with a budget of 0.20 USDC.", 200_000),
        (". My budget is 0.4 USDC.", 400_000),
        (" and keep it under 0.1 USDC.", 100_000),
        ("; don't spend more than 0.20 USDC, and spend at most 0.1 USDC.", 100_000),  # the least
        # Numbers as written (judge.amounts.plain_numbers): the judge and the planner read one.
        (" with a budget of 1k USDC.", 1_000_000_000),
        ("; don't spend more than $1,000.", 1_000_000_000),
        (" and spend at most 150000 atomic units of USDC.", 150_000),
    ],
)
def test_a_spend_bound_in_words_is_read_as_a_bound(said: str, atomic: int) -> None:
    task = REPORT + said
    bound = spend_bound(task)
    assert bound is not None and bound.atomic == atomic, bound
    assert withheld_by(task) is None


@pytest.mark.parametrize(
    "task",
    [
        REPORT + ".",
        "If my USDC balance is no more than 5 USDC, buy the premium report.",  # a condition
        "Buy a dataset under 0.10 USDC from the paywall.",  # the request's own price bound
        "Is the base fee under 50 gwei?",
    ],
)
def test_words_that_are_no_spend_bound_are_not_read_as_one(task: str) -> None:
    if "paywall" in task:  # shopping's bound, read by the request (agent/models/_shopping.py)
        return
    assert spend_bound(task) is None


@pytest.mark.parametrize(
    ("task", "word"),
    [
        (f"Send 0.5 USDC to {TO}; don't spend more than 0.20 USDC.", "don't"),
        ("Don't buy the premium report; don't spend more than 0.20 USDC.", "don't"),
        (REPORT + ". Actually, never mind; don't spend more than 0.2 USDC.", "never mind"),
        (f"Send 0.5 USDC to {TO}, no more than 0.20 USDC.", "no more than 0.20 usdc"),
        (f"Send 0.1 USDC to {TO} with a budget of 0.20 USDC.", "with a budget of 0.20 usdc"),
    ],
)
def test_a_task_that_withholds_or_orders_a_transfer_is_still_withheld(task: str, word: str) -> None:
    """A bound beside an ordered transfer is no reading of which amount is meant: the order
    stays withheld (the judge holds no mandate for it), as before."""
    assert withheld_by(task) == word
