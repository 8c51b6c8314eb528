"""Ordered payments: a payment the task itself orders ("if the base fee is under 50 gwei,
send 0.25 USDC to 0x...") read from the task text at registration, before any model or
tool output exists.

A mandate names a recipient, an exact amount and, optionally, a condition on a fact the
judge can read from the chain itself: the latest base fee, the gas price, or one
address's USDC or ETH balance ("if 0x... holds more than 10 USDC"). The judge approves a direct transfer that matches a
mandate on the user's order (not on expected value) once the judge has read the
condition true, still within caps, balance, recipients and the approval threshold.
Nothing else creates or widens a mandate: it is parsed here, from the text the user gave,
and stored with the task's registration. A condition this module cannot read is kept as
``unreadable`` and never proven, so such a payment is judged like any other.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Literal

from judge.amounts import GLUED_NUMBER, format_usdc, plain_numbers
from judge.spend_bound import blank_spend_bounds, spend_bound

__all__ = [
    "BALANCE_FACTS",
    "CONDITION_WORDS",
    "CROWDED",
    "MENTIONED",
    "SELF",
    "ConditionFact",
    "FactReader",
    "Mandate",
    "MandateCondition",
    "OP_WORDS",
    "THRESHOLD_OPS",
    "crowded",
    "mandate_for",
    "mandates_in",
    "mentioned_only",
    "normalize_thresholds",
    "resolve_branches",
    "rule_on_mandate",
    "spell_out_orders",
    "threshold_op",
    "unordered",
    "withheld_by",
]

ConditionFact = Literal["base_fee_gwei", "gas_price_gwei", "usdc_balance", "eth_balance",
                        "unreadable"]  # fmt: skip
"""What a condition compares. ``base_fee_gwei``: the latest block's base fee, gwei.
``gas_price_gwei``: the node's gas price, gwei. ``usdc_balance``: the condition's
``subject`` address's USDC balance (``self``: the agent's wallet), in USDC. ``eth_balance``: its ETH balance, in ETH.
``unreadable``: a condition the judge cannot read from the chain (it is never proven)."""

#: A condition's ``subject`` when the task says "my balance": the agent's own wallet.
SELF = "self"
#: A mandate's ``withheld`` word for a payment the task only mentions ("Should I send 1 USDC
#: to 0x..?", "My boss said to send ..."): no order, and the task's other direct transfers
#: are refused but what it orders (:func:`unordered`).
MENTIONED = "mentioned, not ordered"
#: The facts read of one address (the condition's ``subject``), and their unit.
BALANCE_FACTS: dict[str, str] = {"usdc_balance": "USDC", "eth_balance": "ETH"}
_READABLE = frozenset({"base_fee_gwei", "gas_price_gwei", *BALANCE_FACTS})

_ADDR = r"0x[0-9a-fA-F]{40}(?![0-9a-fA-F])"
_SEND = re.compile(
    rf"\b(?:send|transfer|pay|give)\s+(\d+(?:\.\d+)?)\s*usdc\s+to\s+({_ADDR})", re.IGNORECASE
)
_AMOUNT_TO = rf"\d+(?:\.\d+)?\s*usdc\s+to\s+{_ADDR}"
_LEAD = re.compile(rf"\b(?:send|transfer|pay|give)\s+{_AMOUNT_TO}", re.IGNORECASE)
#: What joins a further order that shares the verb of the one before it: "..., 0.02 USDC to
#: 0x..", "and also 0.02 USDC to 0x..", "plus", "then", "as well as".
_MORE = re.compile(
    r"(\s*[,;]\s*(?:and\s+|then\s+|plus\s+)?|\s+(?:and|plus|then)\s+|\s+as\s+well\s+as\s+)"
    rf"((?:also|then|too)\s+)?(?={_AMOUNT_TO})",
    re.IGNORECASE,
)
_AMOUNT_TO_RE = re.compile(_AMOUNT_TO, re.IGNORECASE)
#: "Pay 0xA 0.15 USDC": the recipient before the amount (outside rounds 61 and 64 declined
#: it), read as "Pay 0.15 USDC to 0xA".
_RECIPIENT_FIRST = re.compile(
    rf"\b(send|transfer|pay|give)\s+({_ADDR})\s+(\d+(?:\.\d+)?\s*usdc)\b(?!\s+to\b)", re.IGNORECASE
)
#: A further recipient before its amount in such a list: "..., and 0xB 0.02 USDC".
_MORE_FIRST = re.compile(rf"(\s*,\s*(?:and\s+)?|\s+and\s+)({_ADDR})\s+(\d+(?:\.\d+)?\s*usdc)\b(?!\s+to\b)",
                         re.IGNORECASE)


def _recipients_first(text: str) -> str:
    """Each "pay 0xA 0.15 USDC" (and "..., and 0xB 0.02 USDC" after it) as "pay 0.15 USDC to
    0xA" (and "..., and 0.02 USDC to 0xB")."""
    pos = 0
    while (m := _RECIPIENT_FIRST.search(text, pos)) is not None:
        said = f"{m[1]} {m[3]} to {m[2]}"
        text, end = text[: m.start()] + said + text[m.end() :], m.start() + len(said)
        while (more := _MORE_FIRST.match(text, end)) is not None:
            said = f"{more[1]}{more[3]} to {more[2]}"
            text, end = text[:end] + said + text[more.end() :], end + len(said)
        pos = end
    return text


#: "send 0.01 USDC each to 0xA and 0xB": one amount to each recipient of a list.
_EACH = re.compile(
    rf"\b(send|transfer|pay|give)\s+(\d+(?:\.\d+)?\s*usdc)\s+each\s+to\s+"
    rf"({_ADDR}(?:(?:\s*,\s*(?:and\s+)?|\s+and\s+){_ADDR})+)",
    re.IGNORECASE,
)


def spell_out_orders(text: str) -> str:
    """Every ordered payment of ``text`` written with its own verb, so each is read as
    one order: "send 0.01 USDC to 0xA and also 0.02 USDC to 0xB" -> "... and also send
    0.02 USDC to 0xB"; "send 0.01 USDC each to 0xA and 0xB" -> one order per recipient;
    "pay 0xA 0.15 USDC" -> "pay 0.15 USDC to 0xA".
    One home: the judge's mandates and the offline planner read orders after this."""
    text = _recipients_first(text)
    text = _EACH.sub(
        lambda m: " and ".join(f"{m.group(1)} {m.group(2)} to {a}"
                               for a in re.findall(_ADDR, m.group(3))),
        text,
    )  # fmt: skip
    pos = 0
    while (m := _LEAD.search(text, pos)) is not None:
        end = m.end()
        while (more := _MORE.match(text, end)) is not None:
            sep = " and " if "well" in more.group(1).lower() else more.group(1)
            joined = f"{sep}{more.group(2) or ''}send "
            order = _AMOUNT_TO_RE.match(text, more.end())
            assert order is not None  # the lookahead of _MORE holds it
            text = text[:end] + joined + text[more.end():]
            end += len(joined) + len(order.group(0))
        pos = end
    return text


#: The words that open a condition. One home: the offline planner splits a task on them.
CONDITION_WORDS = ("only if", "if", "provided that", "provided", "providing that",
                   "assuming that", "assuming", "as long as", "on condition that",
                   "so long as", "whenever", "when", "until")  # fmt: skip
_IF = re.compile(
    r"\b(?:" + "|".join(re.escape(w).replace(r"\ ", r"\s+") for w in CONDITION_WORDS) + r")\b",
    re.IGNORECASE,
)
#: Threshold words and the comparison each means. One home: the offline planner reads a
#: task's conditions with these too (agent/models/_factpatterns.py).
THRESHOLD_OPS: dict[str, str] = {
    "below": "<", "under": "<", "less than": "<", "lower than": "<", "smaller than": "<",
    "fewer than": "<", "at most": "<=", "no more than": "<=", "not more than": "<=",
    "above": ">", "over": ">", "more than": ">", "greater than": ">", "higher than": ">",
    "larger than": ">", "bigger than": ">",
    "exceeds": ">", "exceed": ">", "at least": ">=", "no less than": ">=",
    "not less than": ">=",
}  # fmt: skip
#: The threshold words as a regex alternation, longest first ("no more than" before "more
#: than"), each on word boundaries; with the symbols.
OP_WORDS = "<=|>=|<|>|" + "|".join(
    r"\b" + re.escape(w).replace(r"\ ", r"\s+") + r"\b"
    for w in sorted(THRESHOLD_OPS, key=len, reverse=True)
)
_NUMBER_UNIT = r"(\d+(?:\.\d+)?\s*(?:usdc|eth|ether|gwei|wei)?)"
_POSTFIX = (
    (re.compile(r"\b(?:greater|more|higher)\s+than\s+or\s+equal\s+to\b", re.I), "at least"),
    (re.compile(r"\b(?:less|lower|fewer|smaller)\s+than\s+or\s+equal\s+to\b", re.I), "at most"),
    (re.compile(_NUMBER_UNIT + r"\s+or\s+(?:more|above|greater|higher)\b", re.I), r"at least \1"),
    (re.compile(_NUMBER_UNIT + r"\s+or\s+(?:less|below|fewer|lower)\b", re.I), r"at most \1"),
)


def normalize_thresholds(text: str) -> str:
    """Thresholds written after their number or with "or equal to" made one form: "10 USDC
    or more" and "greater than or equal to 10 USDC" -> "at least 10 USDC"; every number
    written plainly first ("1k" -> "1000", judge.amounts.plain_numbers)."""
    text = plain_numbers(text)
    for regex, rewrite in _POSTFIX:
        text = regex.sub(rewrite, text)
    return text


def threshold_op(words: str) -> str:
    """The comparison a threshold word means ("more than" -> ">"), or the symbol itself."""
    return THRESHOLD_OPS.get(re.sub(r"\s+", " ", words.lower()), words)


_COND = re.compile(
    r"\b(base[\s-]*fee|gas\s+price)\b[^.;!?0-9]{0,50}?"
    rf"({OP_WORDS})\s*(\d+(?:\.\d+)?)\s*(gwei|wei)?",
    re.IGNORECASE,
)
_OP_WORDS = OP_WORDS
#: "0x.. holds more than 10 USDC", "the USDC balance of 0x.. is above 10", "0x..'s ETH
#: balance is at least 1 ETH": one address's balance against a number.
_BALANCE = re.compile(
    rf"(?:\b(?:the\s+)?(?:(?P<unit1>usdc|eth|ether)\s+)?balance\s+(?:of|at|held\s+by)\s+"
    rf"(?P<addr1>{_ADDR})|(?P<addr2>{_ADDR})|\b(?P<mine>my|our|i|we|the\s+agent['’]?s?)"
    rf"(?=\s+(?:(?:usdc|eth|ether)\s+)?(?:wallet\s+)?balance\b|\s+(?:hold|have|own|keep)\b))"
    r"(?P<gap>(?:\s*(?:'s|’s|is|holds?|has|have|owns?|keeps?|carries|still|currently|now|"
    r"a|an|the|total|usdc|eth|ether|balance|of|in|it)\b)*)\s*"
    rf"(?P<op>{_OP_WORDS})\s*(?P<num>\d+(?:\.\d+)?)\s*(?P<unit2>usdc|eth|ether|wei)?\b",
    re.IGNORECASE,
)
_SENTENCE = re.compile(r"(?<=[.;!?])\s+")


@dataclass(frozen=True)
class MandateCondition:
    """``fact op threshold`` (threshold in the fact's unit), as the task wrote it."""

    fact: ConditionFact
    op: str
    threshold: Decimal
    text: str
    subject: str | None = None
    """The address a balance is read of (lower case); None for the chain-wide facts."""

    def shown(self, value: Decimal) -> str:
        """The comparison as the judge read it ("usdc_balance of 0x.. 12.5 > 10")."""
        of = f" of {self.subject}" if self.subject else ""
        if self.subject == SELF:
            of = " of the agent's wallet"
        return f"{self.fact}{of} {_plain(value)} {self.op} {_plain(self.threshold)}"

    def holds(self, value: Decimal) -> bool:
        """True when ``value`` (the fact read from the chain) meets the condition."""
        return {
            "<": value < self.threshold,
            "<=": value <= self.threshold,
            ">": value > self.threshold,
            ">=": value >= self.threshold,
        }.get(self.op, False)


@dataclass(frozen=True)
class Mandate:
    """One payment the task orders: ``amount`` atomic USDC to ``recipient`` (lower case),
    when ``condition`` holds (None: unconditional). ``withheld``: the word by which the task
    forbids, takes back or branches its payments ("do not", "never mind", "otherwise"; ""
    when none): such a mandate orders nothing, and every direct transfer of its task is
    refused (:func:`unordered`)."""

    recipient: str
    amount: int
    condition: MandateCondition | None
    text: str
    withheld: str = ""

    def to_wire(self) -> dict[str, object]:
        cond = self.condition
        return {
            "recipient": self.recipient,
            "amount": self.amount,
            "text": self.text,
            "withheld": self.withheld,
            "condition": None
            if cond is None
            else {"fact": cond.fact, "op": cond.op, "threshold": str(cond.threshold),
                  "text": cond.text, "subject": cond.subject},  # fmt: skip
        }

    @classmethod
    def from_wire(cls, data: Mapping[str, object]) -> Mandate:
        cond = data.get("condition")
        condition = None
        if isinstance(cond, Mapping):
            fact = str(cond.get("fact"))
            subject = cond.get("subject")
            subject = str(subject).lower() if isinstance(subject, str) and subject else None
            readable = subject == SELF or (subject is not None and re.fullmatch(_ADDR, subject))
            if fact in BALANCE_FACTS and not readable:
                fact = "unreadable"  # a balance of no address is no condition to prove
            condition = MandateCondition(
                fact=fact if fact in _READABLE else "unreadable",  # type: ignore[arg-type]
                op=str(cond.get("op")),
                threshold=Decimal(str(cond.get("threshold"))),
                text=str(cond.get("text", "")),
                subject=subject if fact in BALANCE_FACTS else None,
            )
        amount = data.get("amount")
        if isinstance(amount, bool) or not isinstance(amount, int) or amount <= 0:
            raise ValueError(f"found mandate amount {amount!r}; expected an int > 0 (atomic USDC)")
        withheld = data.get("withheld") or ""
        return cls(str(data["recipient"]).lower(), amount, condition, str(data.get("text", "")),
                   str(withheld))  # fmt: skip


FactReader = Callable[[MandateCondition], Decimal | None]
"""How the judge reads a condition's fact from the chain itself, in the condition's unit
(gwei, USDC, ETH); None when it cannot."""


def _condition(sentence: str) -> MandateCondition | None:
    """The condition of a sentence that orders a payment (None: it has no "if" clause)."""
    if not _IF.search(sentence):
        return None
    if GLUED_NUMBER.search(sentence):
        # "if the base fee is above 2x gwei": read without its letters the number would be
        # another threshold than the one said; a condition it cannot read is never proven.
        return MandateCondition("unreadable", "", Decimal(0), sentence.strip())
    if len(re.findall(rf"(?:{OP_WORDS})\s*\d", sentence, re.IGNORECASE)) > 1:
        # "if A and B", "if A or B": one mandate proves one condition, never half of two.
        return MandateCondition("unreadable", "", Decimal(0), sentence.strip())
    balance = _balance_condition(sentence)
    if balance is not None:
        return balance
    m = _COND.search(sentence)
    if m is None:
        return MandateCondition("unreadable", "", Decimal(0), sentence.strip())
    fact: ConditionFact = "base_fee_gwei" if "base" in m.group(1).lower() else "gas_price_gwei"
    threshold = Decimal(m.group(3))
    if (m.group(4) or "").lower() == "wei":
        threshold = threshold.scaleb(-9)
    op = threshold_op(m.group(2))
    return MandateCondition(fact, op, threshold, m.group(0).strip())


def _balance_condition(sentence: str) -> MandateCondition | None:
    """One address's balance against a number, or None when the sentence holds none.
    The unit names the fact (USDC, or ETH/ether/wei); a balance in no unit is unreadable."""
    m = _BALANCE.search(sentence)
    if m is None:
        return None
    words = f"{m.group('unit1') or ''} {m.group('gap') or ''} {m.group('unit2') or ''}".lower()
    units = set(re.findall(r"\b(usdc|eth|ether|wei)\b", words))
    threshold = Decimal(m.group("num"))
    fact: ConditionFact
    if units == {"usdc"}:
        fact = "usdc_balance"
    elif units and units <= {"eth", "ether", "wei"}:
        fact = "eth_balance"
        if (m.group("unit2") or "").lower() == "wei":
            threshold = threshold.scaleb(-18)
    else:  # no unit, or USDC and ETH both: which balance is meant is not said
        return MandateCondition("unreadable", "", Decimal(0), m.group(0).strip())
    op = threshold_op(m.group("op"))
    subject = SELF if m.group("mine") else (m.group("addr1") or m.group("addr2")).lower()
    return MandateCondition(fact, op, threshold, m.group(0).strip(), subject)


#: Where the clause of an order's verb begins: the sentence's start, a comma, semicolon or
#: bracket, a dash between words, "and", "then", "but", "plus". Never a colon: what comes
#: before one is said of the words after it ("Note to self: send ...", "The invoice says:
#: Send ...", "My friend asked: can you send ...": outside round 62 had each paid), but for
#: a label the user gives its own order ("Task: send ...").
_CLAUSE_START = re.compile(r"[,;(]|\s[-–—]+\s|\b(?:and|then|but|plus)\b", re.IGNORECASE)
#: A label the user puts before its own order and a colon: "Task: send ...".
LABEL = re.compile(r"(?:please\s+)?(?:task|order|instructions?|request|action|to-?do|"
                   r"(?:step|question|part|item|q)\s*\d*)", re.IGNORECASE)
#: Words before the verb by which the task itself orders nib: "please", "also", "go ahead
#: and", "can you", "I want you to", "make sure to"; or forbids or branches an order.
_ADDRESSED = re.compile(
    r"(?:(?:please|kindly|also|now|just|so|ok(?:ay)?|finally|first|next|afterwards|go\s+ahead\s+and|"
    # A greeting before the order ("Hi :) send ...", "Hey there! Send ..."), as the planner
    # drops it (agent/models/_factpatterns.py::drop_pleasantries).
    r"(?:hi|hiya|hello|hey|howdy)(?:\s+there)?(?:\s*(?:[:;]-?[)D]|[!.,]))*|"
    # Words that forbid or branch the order: it is one, held back (``withheld_by``).
    r"do\s+not|don['’]?t|dont|never|otherwise|else|instead|"
    rf"{LABEL.pattern}\s*:|"
    r"(?:can|could|would|will)\s+you(?:\s+please)?|(?:i|we)(?:\s+(?:want|need|would\s+like|ask)|['’]d\s+like)"
    r"\s+you\s+to|(?:make\s+sure|be\s+sure|remember)\s+to)\s+)*",
    re.IGNORECASE,
)
_SAID_COLON = re.compile(r":(?=\s)")
#: A condition before the verb with no comma: "if the base fee is below 1 gwei send ...".
_CONDITION_LEAD = re.compile(
    r"(?:only\s+)?(?:if|when|whenever|once|provided|providing|as\s+long\s+as|in\s+case)\b", re.IGNORECASE
)
#: A verb whose doer is someone else, or that is said and not done: "I send", "should I
#: send", "told me to send", "if I were to send", "I will send".
_ANOTHERS = re.compile(
    r"\b(?:i|we|he|she|they|it|someone|somebody|anyone|nobody|one|people|me|us|him|her|them|to|"
    r"will|would|shall|should|might|may|must|could|can|did|do|does|had|have|has|was|were|be|"
    r"being|been|gonna|wanna|i['’]ll|we['’]ll|i['’]d|let['’]?s)\s*\Z",
    re.IGNORECASE,
)


#: Where an order's clause ends after its recipient: a stop (never a decimal point), or a
#: word opening another clause or a condition ("and tell me ...", "if 0xB holds ...").
_CLAUSE_END = re.compile(r"[,;!?]|\.(?=\s|$)|\b(?:and|then|also|plus|but|if|unless|when|whenever|"
                         r"provided|providing|assuming|as\s+long\s+as|so\s+long\s+as|only)\b",
                         re.IGNORECASE)
_OTHER_TERMS = re.compile(rf"{_ADDR}|\d+(?:\.\d+)?\s*usdc\b|[(\[](?!\s*(?:only\s+)?(?:if|provided|"
                          r"providing|assuming|as\s+long\s+as|so\s+long\s+as|when)\b)",
                          re.IGNORECASE)  # a condition in brackets is read as any condition
#: The withheld reason of an order that names another recipient or amount, or says
#: something in brackets, in its own clause ("Send 0.1 USDC to 0xA or 0xB", "... rather
#: than 0.2 USDC", "Pay 0.2 USDC to 0xA (it's a scam address)": outside round 67 had the
#: last paid): which is meant is the user's to say, never nib's to pick.
CROWDED = "another recipient or amount, or an aside, in its clause"


def crowded(text: str, end: int) -> bool:
    """Whether the order ending at ``end`` of ``text`` names another recipient or amount,
    or opens an aside in brackets, before its clause ends (``CROWDED``)."""
    stop = _CLAUSE_END.search(text, end)
    other = _OTHER_TERMS.search(text, end)  # its lookahead sees past the clause's end
    return other is not None and (stop is None or other.start() < stop.start())


def mentioned_only(text: str, start: int) -> bool:
    """Whether the payment verb at ``start`` of ``text`` is said without being ordered: in
    double quotes, or with words before it in its clause that make it someone's act, a
    question or a plan ("I sent", "Should I send", "My boss said to send", "Before I send",
    "Would it be possible to transfer"; outside round 61 had eight such tasks paid). An
    order is the verb alone ("Send ...", "if X, send ..."), after words addressing nib
    ("please", "can you", "I want you to"), or after a condition ("if X send ..."); never
    inside quotes or brackets."""
    sentence = _SENTENCE.split(text[:start])[-1]
    if sum(sentence.count(q) for q in '"“”') % 2:
        return True  # inside a quotation: "'Send 0.2 USDC to 0x..' is what the email said"
    if text[:start].count("(") + text[:start].count("[") > text[:start].count(")") + text[:start].count("]"):
        return True  # inside brackets, an aside: "(send 0.1 USDC to 0x..) What is ...?" (round 67)
    said = ":".join(_SAID_COLON.split(sentence)[:-1]).strip()  # never "http://", "10:30"
    if said and not LABEL.fullmatch(said) and not _CONDITION_LEAD.match(_CLAUSE_START.split(said)[-1].strip()):
        return True  # said of what follows: "Someone told me: if C, send ..."
    lead = _CLAUSE_START.split(sentence)[-1].strip()
    if _ADDRESSED.fullmatch(lead + " " if lead else ""):
        return False
    return not _CONDITION_LEAD.match(lead) or bool(_ANOTHERS.search(lead))


#: Words by which a task forbids, takes back, branches or puts off a payment: "do not send",
#: "Actually, never mind", "cancel that", "otherwise send", "tomorrow". A task holding one orders
#: nothing: which order it negates is not read, so none is honoured. One home: the offline
#: planner declines a task's payments and purchases on the same words.
_WITHHOLD = re.compile(
    r"\b(?:do\s+not|does\s+not|did\s+not|don['’]?t|dont|doesn['’]?t|never\s*mind|never|not|"
    r"no\s+longer|cancel(?:led|ed)?|call\s+(?:it|that)\s+off|forget\s+(?:it|that|about)|"
    r"scratch\s+that|hold\s+off|hold\s+on|refrain|instead|otherwise|else|unless|except|"
    r"change[sd]?\s+my\s+mind|second\s+thoughts?|disregard|ignore\s+(?:that|this|it|my|the)|"
    r"abort|rather\s+not|no\s+need|"
    # A payment for another time: nib pays now or not at all (outside round 61: "later this
    # week" was paid at once).
    r"tomorrow|tonight|later|eventually|some\s*day|at\s+some\s+point|next\s+(?:week|month|year|time)|"
    r"this\s+(?:evening|afternoon|weekend)|(?:in|within|after)\s+(?:a|an|one|two|three|a\s+few|\d+)\s+"
    r"(?:minutes?|hours?|days?|weeks?|months?)|(?:on|by|before|until)\s+(?:mon|tues|wednes|thurs|fri|satur|sun)day|"
    r"by\s+the\s+end\s+of|end\s+of\s+(?:the\s+)?(?:day|week|month))\b",
    re.IGNORECASE,
)
_THRESHOLD_WORDS = re.compile(OP_WORDS, re.IGNORECASE)


#: The opposite of each threshold: "more than 10" is false exactly when "at most 10" holds.
_NEGATED = {"<": "at least", "<=": "more than", ">": "at most", ">=": "less than"}
_PAY = r"(?:send|transfer|pay|give)"
#: An arm of a branch that pays nothing: "do not send anything", "don't pay", "do nothing".
_NOTHING = (
    rf"(?:(?:do\s+not|don['’]?t|dont|never)\s+{_PAY}(?:\s+(?:anything|any\s+usdc|it|them|"
    r"a\s+thing|any\s+money|money|usdc|a\s+cent))?|do\s+nothing|(?:send|pay|transfer)\s+nothing|"
    r"nothing)"
)
_ELSE = r"(?:otherwise|else|if\s+not|in\s+any\s+other\s+case)"
#: One character of a clause: no clause mark, but the point of a decimal number ("0.02").
_IN = r"(?:[^,;.!?]|(?<=\d)\.(?=\d))"
#: One character of a sentence part: a comma allowed too.
_IN_PART = r"(?:[^;.!?]|(?<=\d)\.(?=\d))"
#: "If C, do not send anything; otherwise send ..." -> the order on the opposite of C.
_IF_NOTHING_ELSE = re.compile(
    rf"\b(?:if|when)\s+(?P<cond>{_IN}+?)\s*[,;:]?\s*(?:then\s+)?{_NOTHING}\s*[,;.]?\s*"
    rf"(?:and\s+|but\s+)?{_ELSE}\s*[,:]?\s*(?=(?:please\s+)?{_PAY}\b)",
    re.IGNORECASE,
)
#: "If C, send ...; otherwise do nothing." -> the order on C alone (the other arm is none).
_ELSE_NOTHING = re.compile(
    rf"(?P<order>\b(?:if|when)\s+{_IN_PART}+?\b{_PAY}\s+\d{_IN_PART}*?)\s*[,;.]?\s*"
    rf"(?:and\s+|but\s+)?{_ELSE}\s*[,:]?\s*(?:just\s+)?{_NOTHING}\s*(?=[.!?]|$)",
    re.IGNORECASE,
)
#: "If C, send A; otherwise send B." -> "If C, send A. If not C, send B."
_IF_ELSE = re.compile(
    rf"\b(?:if|when)\s+(?P<cond>{_IN}+?)\s*[,;:]\s*(?:then\s+)?(?P<first>{_PAY}\s+\d{_IN_PART}*?)"
    rf"\s*[,;.]\s*(?:and\s+|but\s+)?{_ELSE}\s*[,:]?\s*(?=(?:please\s+)?{_PAY}\s+\d)",
    re.IGNORECASE,
)
#: "Unless C, send ..." and "Send ... unless C": the order on the opposite of C.
_UNLESS_FIRST = re.compile(rf"\bunless\s+(?P<cond>{_IN}+?)\s*,\s*(?=(?:please\s+)?{_PAY}\b)",
                           re.IGNORECASE)  # fmt: skip
_UNLESS_AFTER = re.compile(rf"\s*,?\s*\bunless\s+(?P<cond>{_IN}+)", re.IGNORECASE)


def _negated(cond: str) -> str | None:
    """``cond`` with its one threshold turned to the opposite ("holds more than 10 USDC" ->
    "holds at most 10 USDC"), or None when it holds no threshold or several (not read)."""
    marks = list(re.finditer(rf"(?:{OP_WORDS})(?=\s*\d)", cond, re.IGNORECASE))
    if len(marks) != 1:
        return None
    m = marks[0]
    return cond[: m.start()] + _NEGATED[threshold_op(m.group(0))] + cond[m.end() :]


def resolve_branches(task: str) -> str:
    """A branch whose arms the chain decides, written as plain conditional orders: "If C,
    do not send anything; otherwise send S" -> "If not-C, send S"; "If C, send S;
    otherwise do nothing" -> "If C, send S"; "If C, send A; otherwise send B" -> "If C,
    send A. If not-C, send B"; "Unless C, send S" / "Send S unless C" -> "If not-C, send
    S". Only a condition with one threshold is turned; any other branch is left as
    written (and withheld by :func:`withheld_by`). One home: the judge's mandates, the
    loop's gate and the offline planner all read a task through this."""
    text = normalize_thresholds(task)

    def nothing_else(m: re.Match[str]) -> str:
        neg = _negated(m.group("cond"))
        return m.group(0) if neg is None else f"if {neg}, "

    def if_else(m: re.Match[str]) -> str:
        neg = _negated(m.group("cond"))
        if neg is None:
            return m.group(0)
        return f"if {m.group('cond')}, {m.group('first')}. If {neg}, "

    def unless_first(m: re.Match[str]) -> str:
        neg = _negated(m.group("cond"))
        return m.group(0) if neg is None else f"if {neg}, "

    def unless_after(m: re.Match[str]) -> str:
        neg = _negated(m.group("cond"))
        return m.group(0) if neg is None else f" if {neg}"

    text = _IF_NOTHING_ELSE.sub(nothing_else, text)
    text = _ELSE_NOTHING.sub(lambda m: m.group("order") if _negated(m.group(0)) else m.group(0), text)
    text = _IF_ELSE.sub(if_else, text)
    text = _UNLESS_FIRST.sub(unless_first, text)
    if re.search(rf"\b{_PAY}\s+\d{_IN_PART}*\bunless\b", text, re.IGNORECASE):
        text = _UNLESS_AFTER.sub(unless_after, text)
    return text


def withheld_by(task: str) -> str | None:
    """The first word of ``task`` that forbids, takes back or branches a payment (see
    ``_WITHHOLD``), or None. Threshold words ("no more than", "not less than") are none,
    and neither is a branch the chain decides (:func:`resolve_branches`), nor a bound on
    spending ("don't spend more than 0.20 USDC", judge/spend_bound.py) in a task that
    orders no transfer."""
    text = resolve_branches(task)
    orders = bool(re.search(r"\b(?:send|transfer|give)\b", text, re.IGNORECASE) or _SEND.search(text))
    m = _WITHHOLD.search(_THRESHOLD_WORDS.sub(" ", text if orders else blank_spend_bounds(text)))
    if m:
        return re.sub(r"\s+", " ", m.group(0)).lower()
    # Beside an ordered transfer, which amount a bound is about is not read: it withholds.
    bound = spend_bound(text) if orders else None
    return bound.words.lower() if bound else None


def mandates_in(task: str) -> tuple[Mandate, ...]:
    """The payments ``task`` orders, in order. Only the user's task text may be given here:
    text from a model or a tool never becomes a mandate. In a task that says not to pay,
    takes an order back or branches one (:func:`withheld_by`), each is ``withheld``: it
    orders nothing, and the task's direct transfers are refused. A payment the task only
    mentions (:func:`mentioned_only`) is held back as :data:`MENTIONED`."""
    out: list[Mandate] = []
    withheld = withheld_by(task) or ""
    for sentence in _SENTENCE.split(spell_out_orders(resolve_branches(task))):
        sends = list(_SEND.finditer(sentence))
        if not sends:
            continue
        condition = _condition(sentence)
        for m in sends:
            held = withheld or (MENTIONED if mentioned_only(sentence, m.start()) else "") or (
                CROWDED if crowded(sentence, m.end()) else "")
            try:
                atomic = Decimal(m.group(1)).scaleb(6)
            except InvalidOperation:  # pragma: no cover - the regex admits only digits
                continue
            if atomic != atomic.to_integral_value() or atomic <= 0:
                continue  # more than 6 decimals: no exact order to honour
            out.append(Mandate(m.group(2).lower(), int(atomic), condition, m.group(0), held))
    return tuple(out)


def mandate_for(mandates: tuple[Mandate, ...], recipient: str, amount: int) -> Mandate | None:
    """The mandate a direct transfer of ``amount`` to ``recipient`` carries out, if any:
    the same recipient and exactly the ordered amount (never more, never a split). A
    withheld mandate carries out nothing."""
    return next(
        (m for m in mandates
         if m.recipient == recipient.lower() and m.amount == amount and not m.withheld),
        None,
    )  # fmt: skip


def unordered(mandates: tuple[Mandate, ...], recipient: str, amount: int) -> str | None:
    """Why a direct transfer matching no mandate is refused outright when the task orders
    a payment to the same recipient: another amount widens the order, which only the task
    text can set (a model or tool output asking for more is never judged on expected
    value). A task whose text forbids, takes back or branches its payments (a withheld
    mandate) has every direct transfer refused. None when no mandate names ``recipient``."""
    withheld = next((m for m in mandates if m.withheld), None)
    if withheld is not None:
        said = (f"mentions {withheld.text!r} without ordering it" if withheld.withheld == MENTIONED
                else f"names {CROWDED} ({withheld.text!r}): which is meant is not read"
                if withheld.withheld == CROWDED
                else f"says {withheld.withheld!r} about its payments ({withheld.text!r} is not an order)")
        return (f"found a direct transfer of {_usdc(amount)} to {recipient.lower()}; the task "
                f"{said}. Nothing is paid on a task that says not to pay, takes an order back, "
                "puts it off, only mentions it or leaves it open, but what it orders. Fix: ask again "
                "with only "
                "the payment you want ('Send 0.10 USDC to 0x...').")  # fmt: skip
    orders = [m for m in mandates if m.recipient == recipient.lower()]
    if not orders:
        return None
    ordered = " and ".join(_usdc(m.amount) for m in orders)
    return (
        f"found a direct transfer of {_usdc(amount)} to {recipient.lower()}; the task orders "
        f"{ordered} to it, exactly. A model or tool output cannot widen an order. Fix: put "
        "the amount in the task text."
    )


def _plain(value: Decimal) -> str:
    """``value`` without trailing zeros or an exponent (0.200000 -> 0.2, 100 -> 100)."""
    return f"{value:f}".rstrip("0").rstrip(".") if "." in f"{value:f}" else f"{value:f}"


def _usdc(atomic: int) -> str:
    return f"{format_usdc(atomic)} USDC"


def rule_on_mandate(
    mandate: Mandate,
    *,
    fact_value: Decimal | None,
    price_limits: Iterable[tuple[str, int, str]],
    approval_threshold_atomic: int | None,
    used: bool,
) -> tuple[Literal["approve", "escalate", "refuse"], str]:
    """The judge's decision on a payment the task ordered, and its reason (naming the real
    cause of a refusal). ``fact_value``: the condition's fact as the judge read it from
    the chain (None: unread). ``price_limits``: (name, limit, fix) the price must not
    exceed (per-call cap, remaining budget, balance). ``used``: the judge already approved
    this ordered payment once for the task."""
    order = f"the task orders {_usdc(mandate.amount)} to {mandate.recipient}"
    if used:
        return "refuse", f"{order} once, and the judge already approved it; a second payment is refused"
    cond = mandate.condition
    proof = ""
    if cond is not None:
        if cond.fact == "unreadable":
            return "refuse", (
                f"{order} on a condition the judge cannot read from the chain ({cond.text!r}); "
                "fix: state it as 'if the base fee is under N gwei' or 'if 0x... holds more than N USDC'"
            )
        if fact_value is None:
            of = f" of {cond.subject}" if cond.subject else ""
            return "refuse", f"{order} if {cond.text}, and the judge could not read {cond.fact}{of}"
        shown = cond.shown(fact_value)
        if not cond.holds(fact_value):
            return "refuse", f"{order} only if {cond.text}; the judge read {shown}: false"
        proof = f"; condition {cond.text!r} proven: the judge read {shown}"
    for name, limit, fix in price_limits:
        if mandate.amount > limit:
            return "refuse", (
                f"{order}, but {_usdc(mandate.amount)} exceeds {name} {_usdc(limit)} (fix: {fix})"
            )
    if approval_threshold_atomic is not None and mandate.amount >= approval_threshold_atomic:
        return "escalate", (
            f"{order}{proof}; {_usdc(mandate.amount)} is at or above the approval threshold "
            f"{_usdc(approval_threshold_atomic)}: a human must approve"
        )
    return "approve", f"{order}{proof}: approved on the user's order"
