"""Shopping requests: "buy the cheapest fact sheet about USDC and tell me what it contains",
"buy the cheapest research dataset the local paywall sells", "buy the one about gas from
the paywall", "buy a dataset under 0.10 USDC from http://seller".

A request to buy picks one offer: by price (``cheapest``, ``priciest``), by what it is
about, within a price bound (``under``). With a subject (a token symbol or a protocol name
the sellers have sheets for) it is one checklist item of that sold kind with ``pick`` set.
Without one, it names the seller whose offers it picks from (the local paywall or a seller
URL): one item with no kind yet, whose ``pick``, ``seller``, ``about`` and ``under`` the
loop resolves against that seller's catalog at run start (agent/loop/offerpick.py).
Every word of the request is accounted for; a word no shopping request takes is declined
naming it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

from judge.mandates import CONDITION_WORDS

__all__ = ["PICKS", "Shopping", "read_shopping"]

_USDC_DECIMALS = 6

#: How a request picks its offer, and the words that say so.
PICKS: dict[str, tuple[str, ...]] = {
    "cheapest": ("cheapest", "least expensive", "lowest priced", "lowest-priced",
                 "lowest cost", "lowest-cost", "most affordable"),
    "priciest": ("priciest", "most expensive", "dearest", "highest priced", "highest-priced"),
    # Read so that it is declined by name: nib has no measure of an offer's value.
    "value": ("best value", "best-value", "best deal", "best bang for the buck",
              "best value for money", "most value for money", "most bang for the buck"),
}  # fmt: skip
_PICK_WORDS = {w: pick for pick, words in PICKS.items() for w in words}
_PICK = "|".join(re.escape(w).replace(r"\ ", r"[\s-]+") for w in sorted(_PICK_WORDS, key=len)[::-1])
#: The rest of a request's sentence: a "." inside a number or a URL, or the "?" opening a
#: URL's query ("/tokens?symbol=USDC"), ends no sentence.
_REST = r"(?:[^.?!;]|\.(?=[\w/:])|(?<=[\w/])\?(?=[\w.~%-]+=))*"
_REQUEST = re.compile(
    rf"\b(?:buy|purchase|order|get|fetch|pay\s+for)\s+(?:me\s+)?"
    rf"(?:the\s+|a\s+|one\s+|its\s+|their\s+|(?P<owner>(?:the\s+)?(?:x402\s+)?paywall|"
    rf"https?://[^\s']+)['’]s\s+)?(?P<pick>{_PICK})\b(?P<rest>{_REST})",
    re.IGNORECASE,
)
#: A request to buy without a pick word: "buy the dataset about gas from the paywall",
#: "buy a dataset under 0.10 USDC from http://...". Taken only when it names a seller or
#: a price bound (else it is a question for the vocabulary: "buy the premium report").
_PLAIN_REQUEST = re.compile(
    r"\b(?:buy|purchase|order|pay\s+for)\s+(?:me\s+)?(?:(?P<det>the|a|an|one|any)\s+)?"
    rf"(?P<rest>{_REST})",
    re.IGNORECASE,
)
#: "get me the USDC fact sheet from the market": a request to buy only when it names both
#: a subject and where to buy it ("get me the base fee" asks a fact).
_GET_REQUEST = re.compile(
    r"\b(?:get|fetch|grab|obtain)\s+(?:me\s+)?(?:(?P<det>the|a|an|one|any)\s+)?"
    rf"(?P<rest>{_REST})",
    re.IGNORECASE,
)
#: "under 0.10 USDC", "for at most $0.05", "that costs less than 0.1": a price bound.
_BOUND = re.compile(
    r"(?:\b(?:that\s+|which\s+)?(?:costs?|is\s+priced|priced|sells?\s+for|for)\s+)?"
    r"\b(?:under|below|less\s+than|at\s+most|no\s+more\s+than|cheaper\s+than|up\s+to|"
    r"within)\s+(?P<dollar>\$\s*)?(?P<num>\d+(?:\.\d+)?)\s*(?:usdc|dollars?)?",
    re.IGNORECASE,
)
#: "about gas", "on transfers", "covering tokens": what the offer is about.
_TOPIC = re.compile(
    r"\b(?:about|covering|regarding|concerning|on|with)\s+(?:the\s+)?"
    r"(?P<topic>[a-z][a-z0-9-]*(?:\s+[a-z][a-z0-9-]*)?)",
    re.IGNORECASE,
)
_URL = re.compile(r"https?://[^\s'\"<>),;]+", re.IGNORECASE)
_MARKET = re.compile(r"\b(?:market|marketplace|x402)\b", re.IGNORECASE)
#: A word naming which market ("the data market"): no topic of the offer.
_WHICH_MARKET = re.compile(
    r"\s*(?:[\w-]+\s+)?market(?:place)?\b(?![\s-]+(?:data|caps?|prices?|reports?)\b)", re.IGNORECASE
)
#: "... and tell me what it contains": how the request asks for the contents (part of it).
_CONTENTS = re.compile(
    r"(?:,\s*|\s+)?(?:and\s+|then\s+)*(?:(?:please\s+)?(?:(?:tell|show|give)\s+me|report|"
    r"list|share|print|return)\s+)?"
    r"(?:what(?:'s|’s|\s+is)?\s+(?:it|that|the\s+\w+)\s+(?:contains|holds|has|says)|"
    r"what(?:'s|’s|\s+is)\s+(?:in\s+(?:it|there)|inside(?:\s+it)?)|its\s+contents|the\s+contents|"
    r"(?:describe|summari[sz]e)\s+(?:it|them|its\s+contents))\b",
    re.IGNORECASE,
)
#: Words that pick an offer by a criterion nib has no measure of ("the best dataset"):
#: declined by name, never read as what the offer is about.
UNMEASURED = frozenset(
    """best top finest greatest most useful popular newest latest biggest largest
    smallest freshest richest""".split()
)
#: What a request may call the thing it buys (a sold sheet or dataset of one subject).
_GOODS = frozenset(
    """dataset datasets data set sets sheet sheets fact factsheet factsheets facts report
    reports offer offers research info information document file token protocol one
    ones thing item product""".split()
)
#: Words that only say where or how to buy ("from a seller in the market").
_WHERE = frozenset(
    """about on for of from the a an any in at by to with that which sold sells sell
    offered offers available seller sellers market marketplace x402 local paywall devnet
    here there you can find listed me please it one has have offers lists carries
    provides stocks its their whichever and then catalog catalogue listing store shop
    menu""".split()
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
    seller: str | None = None
    """Whose offers it picks from: ``paywall`` (the local one), a seller URL, ``market``."""
    about: str | None = None
    """What the offer is about, in the request's words, when it names no subject."""
    under: int | None = None
    """The price bound the request sets (atomic USDC), or None."""


#: A condition word after the request's words: where the request ends and its condition
#: (a part the planner reads on its own, gating the purchase) begins.
_CONDITION_AFTER = re.compile(
    r"\s+(?:" + "|".join(re.escape(w).replace(r"\ ", r"\s+") for w in CONDITION_WORDS) + r")\b",
    re.IGNORECASE,
)


def read_shopping(
    task: str, symbols: tuple[str, ...], protocols: tuple[str, ...]
) -> Shopping | None:
    """The shopping request in ``task`` (the first one), or None when it makes none."""
    m = _REQUEST.search(task)
    plain = None if m is not None else _PLAIN_REQUEST.search(task)
    got = None if m is not None or plain is not None else _GET_REQUEST.search(task)
    plain = plain or got
    if m is None and plain is None:
        return None
    found = m if m is not None else plain
    assert found is not None
    rest, base = found.group("rest"), found.start("rest")
    cond = _CONDITION_AFTER.search(rest)
    if cond is not None:  # "... sells if 0x.. holds over 5 USDC": a condition of its own
        rest = rest[: cond.start()]
    clause, end = _request_clause(task, rest, base)
    bound = _BOUND.search(clause)
    under = _atomic(bound.group("num")) if bound else None
    if bound:
        clause = clause[: bound.start()] + " " + clause[bound.end() :]
    # The seller may be named before the verb ("From the paywall, buy its cheapest ...") or
    # as the owner ("the paywall's cheapest dataset").
    before = re.split(r"[.?!;]", task[: found.start()])[-1]
    owner = m.group("owner") if m is not None else None
    seller = _seller(clause) or _seller(owner or "") or _seller(before)
    in_clause = _named(clause, symbols) or _named(clause, protocols)
    if got is not None and not (in_clause and seller):
        return None  # "get me the base fee": a question, not a request to buy
    if m is None and not in_clause and _not_a_pick(task, seller, under, symbols, protocols):
        # "buy the premium report": the fact it names, read by the vocabulary (no subject,
        # no bound, no seller's offers to pick among). A request naming its subject ("buy
        # the USDC fact sheet from the market") is a request to buy: bought once.
        return None
    about, clause = _topic(clause, symbols, protocols)
    sym = _named(clause, symbols)
    proto = _named(clause, protocols)
    clause = _URL.sub(" ", clause)
    words = [re.sub(r"['’]s\Z", "", w) for w in _WORD.findall(clause.lower())]
    words = [w for w in words if w not in _GOODS and w not in _WHERE]
    unknown = tuple(w for w in words if w not in {s.lower() for s in (*symbols, *protocols)})
    if unknown and about is None and not (sym or proto) and seller not in (None, "market") \
            and not UNMEASURED & set(unknown):
        # "the gas dataset", "the transfer statistics" of a named seller: what the offer is
        # about, matched against its catalog (a word it matches nothing of is named there).
        about, unknown = " ".join(unknown), ()
    kind, subject = None, None
    if sym:
        kind, subject = "token_factsheet", sym
    elif proto:
        kind, subject = "protocol_factsheet", proto
    if m is not None:
        pick = _PICK_WORDS.get(" ".join(m.group("pick").lower().replace("-", " ").split()))
    else:  # "the dataset about gas": the one that fits; "a dataset under 0.1": any that fits
        # "buy USDC's fact sheet", "buy USDC fact sheet": the one, as "the"
        pick = "only" if (found.group("det") or "the").lower() == "the" else "any"
    return Shopping(found.start(), end, pick or "cheapest", kind, subject,
                    task[found.start() : end], unknown, seller, about, under)  # fmt: skip


def _not_a_pick(
    task: str, seller: str | None, under: int | None, symbols: tuple[str, ...],
    protocols: tuple[str, ...],
) -> bool:
    """True when a request to buy without a pick word is no pick among a seller's offers:
    it names no seller or bound ("buy the premium report"), a resource by its URL path
    ("buy the token fact sheet at http://h/lookup"), or a subject anywhere in the task
    ("Who issues USDC? Buy the token fact sheet from the paywall"; its own words name
    none): the vocabulary reads those as the facts they ask."""
    if seller in (None, "market") and under is None:
        return True
    if seller is not None and re.match(r"https?://[^/]+/.+", seller):
        return True
    unpriced = re.sub(r"\d(?:[\d.]*)\s*usdc\b", " ", _BOUND.sub(" ", task), flags=re.IGNORECASE)
    return bool(_named(unpriced, symbols) or _named(unpriced, protocols))


def _request_clause(task: str, rest: str, base: int) -> tuple[str, int]:
    """(the request's own words, where it ends in ``task``): up to "... and tell me what it
    contains" when it asks so, else up to a later clause of its own."""
    contents = _CONTENTS.search(rest)
    if contents is not None:  # "... and tell me what it contains" in the same sentence
        return rest[: contents.start()], base + contents.end()
    # A later clause of its own ("..., then tell me the base fee") is not the request's.
    clause = _OWN_CLAUSE.split(rest)[0]
    end = base + len(clause)
    nxt = re.compile(r"\s*[.;]\s*").match(task, end)
    after = _CONTENTS.match(task, nxt.end()) if nxt else None
    if after is not None and re.match(r"\s*(?:[.?!;]|$)", task[after.end() :]):
        end = after.end()  # "... USDC. Tell me what it contains."
    return clause, end


def _atomic(number: str) -> int | None:
    atomic = Decimal(number).scaleb(_USDC_DECIMALS)
    return int(atomic) if atomic == atomic.to_integral_value() and atomic > 0 else None


def _seller(clause: str) -> str | None:
    url = _URL.search(clause)
    if url is not None:
        return url.group(0).rstrip(".")
    if re.search(r"\bpaywall\b", clause, re.IGNORECASE):
        return "paywall"
    return "market" if _MARKET.search(clause) else None


def _topic(clause: str, symbols: tuple[str, ...], protocols: tuple[str, ...]) -> tuple[str | None, str]:
    """(what the request says the offer is about when that is no subject, the clause
    without those words): "about gas" -> "gas"."""
    names = {n.lower() for n in (*symbols, *protocols)}
    for m in _TOPIC.finditer(clause):
        words = [w for w in m.group("topic").lower().split() if w not in _WHERE]
        if _WHICH_MARKET.match(clause, m.start("topic")):
            continue  # "on the data market": which market, no topic
        if words and not any(w in names for w in words) and words[0] not in _WHERE:
            # Only the words up to the first where-word ("gas from ..." -> "gas").
            topic = m.group("topic").lower().split()
            kept = []
            for w in topic:
                if w in _WHERE:
                    break
                kept.append(w)
            if kept:
                cut = m.start("topic") + len(" ".join(m.group("topic").split()[: len(kept)]))
                return " ".join(kept), clause[: m.start()] + " " + clause[cut:]
    return None, clause


def _named(text: str, names: tuple[str, ...]) -> str | None:
    for name in names:
        if re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", text, re.IGNORECASE):
            return name
    return None
