"""Every payment the task orders is an item of the run's checklist, whatever the planner.

The judge holds the task's orders as mandates (judge/mandates.py ``mandates_in``, read from
the task text at registration). A checklist that leaves one of them out could end covered
while an ordered payment was neither made nor named: "Send 0.01 USDC to 0xA and also 0.01
USDC to 0xB" paid 0xA and exited 0. Here each order the checklist does not name (by its
recipient, in an item of any kind, declined or not) becomes an item of its own, so the
run makes it or ends naming it as not made.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from agent.loop.checklist import Checklist, ChecklistItem
from chain.money import format_usdc
from judge.mandates import Mandate, mandates_in

__all__ = ["with_every_order"]


def with_every_order(checklist: Checklist, task: str) -> tuple[Checklist, list[str]]:
    """``checklist`` with one ``transfer_receipt`` item added per order of ``task`` it does
    not name, and the texts of the items added. An order the task withholds ("do not
    send", "otherwise") orders nothing and adds nothing."""
    items = list(checklist.items)
    added: list[str] = []
    for order in mandates_in(task):
        if order.withheld or any(_names(item, order) for item in items):
            continue
        text = f"send {format_usdc(order.amount)} to {order.recipient}"
        params = {"to": order.recipient, "amount": str(order.amount)}
        items.append(ChecklistItem(id=f"c{len(items) + 1}", text=text,
                                   kind="transfer_receipt", params=params))  # fmt: skip
        added.append(text)
    return Checklist(tuple(items)), added


def _names(item: ChecklistItem, order: Mandate) -> bool:
    """True when ``item`` is this order: a transfer to its recipient of its amount (or of
    no stated amount), or an item of any kind naming its recipient (declined, say)."""
    if item.kind != "transfer_receipt":
        return order.recipient in item.text.lower()
    if str(item.params.get("to", "")).lower() != order.recipient:
        return False
    amount = str(item.params.get("amount", "")).strip()
    return not amount or _atomic(amount) == order.amount


def _atomic(amount: str) -> int | None:
    """An item's amount in atomic USDC: "10000" as written, "0.01" (a decimal) as USDC."""
    try:
        value = Decimal(amount.split()[0])
    except (InvalidOperation, IndexError):
        return None
    return int(value) if "." not in amount else int(value.scaleb(6))
