"""Shopping requests: "buy the cheapest fact sheet about USDC and tell me what it contains".

A request to buy picks one offer (the cheapest) of a sold fact kind about one subject (a
token symbol or a protocol name the sellers have sheets for). It is read as one checklist
item of that kind with ``pick`` set: the planner discovers the offers, proposes the one
the request picks, buys once, and the answer says what was bought and what it contains.
Every word of the request is accounted for; a request naming no subject, or a word no
shopping request takes, is declined naming it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["PICKS", "Shopping", "read_shopping"]

#: How a request picks its offer, and the words that say so.
PICKS: dict[str, tuple[str, ...]] = {
    "cheapest": ("cheapest", "least expensive", "lowest priced", "lowest-priced",
                 "lowest cost", "lowest-cost", "most affordable"),
}  # fmt: skip
_PICK_WORDS = {w: pick for pick, words in PICKS.items() for w in words}
_PICK = "|".join(re.escape(w).replace(r"\ ", r"[\s-]+") for w in sorted(_PICK_WORDS, key=len)[::-1])
_REQUEST = re.compile(
    rf"\b(?:buy|purchase|order|get|fetch|pay\s+for)\s+(?:me\s+)?(?:the\s+|a\s+|one\s+)?"
    rf"(?P<pick>{_PICK})\b(?P<rest>[^.?!;]*)",
    re.IGNORECASE,
)
#: "... and tell me what it contains": how the request asks for the contents (part of it).
_CONTENTS = re.compile(
    r"(?:,\s*|\s+)?(?:and\s+|then\s+)*(?:(?:please\s+)?(?:tell|show|give)\s+me\s+)?"
    r"(?:what(?:'s|\s+is)?\s+(?:it|that|the\s+\w+)\s+(?:contains|holds|has|says)|"
    r"what(?:'s|\s+is)\s+in\s+(?:it|there)|its\s+contents|the\s+contents|"
    r"(?:describe|summari[sz]e)\s+(?:it|them|its\s+contents))\b",
    re.IGNORECASE,
)
#: What a request may call the thing it buys (a sold sheet or dataset of one subject).
_GOODS = frozenset(
    """dataset datasets data set sets sheet sheets fact factsheet factsheets facts report
    reports offer offers research info information document file token protocol""".split()
)
#: Words that only say where or how to buy ("from a seller in the market").
_WHERE = frozenset(
    """about on for of from the a an any in at by to with that which sold sells sell
    offered offers available seller sellers market marketplace x402 local paywall devnet
    here there you can find listed me please it one""".split()
)
_WORD = re.compile(r"[a-z][a-z0-9']*")
_OWN_CLAUSE = re.compile(
    r",\s*(?:and|then|also|plus)?\s*|\s+(?:and|then|also|plus)\s+(?=what|how|who|which|tell|give)"
)


@dataclass(frozen=True)
class Shopping:
    """One shopping request read from a task: the span it covers (to take out of the task
    before the rest is read), what it picks, its subject and any word it cannot take."""

    start: int
    end: int
    pick: str
    kind: str | None
    subject: str | None
    text: str
    unknown: tuple[str, ...]


def read_shopping(
    task: str, symbols: tuple[str, ...], protocols: tuple[str, ...]
) -> Shopping | None:
    """The shopping request in ``task`` (the first one), or None when it makes none."""
    m = _REQUEST.search(task)
    if m is None:
        return None
    rest, base = m.group("rest"), m.start("rest")
    contents = _CONTENTS.search(rest)
    if contents is not None:  # "... and tell me what it contains" in the same sentence
        clause, end = rest[: contents.start()], base + contents.end()
    else:
        # A later clause of its own ("..., then tell me the base fee") is not the request's.
        clause = _OWN_CLAUSE.split(rest)[0]
        end = base + len(clause)
        nxt = re.compile(r"\s*[.;]\s*").match(task, end)
        after = _CONTENTS.match(task, nxt.end()) if nxt else None
        if after is not None and re.match(r"\s*(?:[.?!;]|$)", task[after.end() :]):
            end = after.end()  # "... USDC. Tell me what it contains."
    sym = _named(clause, symbols)
    proto = _named(clause, protocols)
    words = [w for w in _WORD.findall(clause.lower()) if w not in _GOODS and w not in _WHERE]
    unknown = tuple(w for w in words if w not in {s.lower() for s in (*symbols, *protocols)})
    kind, subject = None, None
    if sym:
        kind, subject = "token_factsheet", sym
    elif proto:
        kind, subject = "protocol_factsheet", proto
    pick = _PICK_WORDS.get(" ".join(m.group("pick").lower().replace("-", " ").split()), "cheapest")
    return Shopping(m.start(), end, pick, kind, subject, task[m.start() : end], unknown)


def _named(text: str, names: tuple[str, ...]) -> str | None:
    for name in names:
        if re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", text, re.IGNORECASE):
            return name
    return None
