"""The offline planner's reading of a task: parts, fact kinds, parameters, what it cannot do.

A task is split into parts (clauses). Each part is matched against a pattern table over the
shared fact-kind vocabulary (agent/loop/checklist.py) and read for its parameters (a block
number or range, addresses, a transaction hash, a token symbol, a protocol, a seller URL),
comparisons ("which holds more"), conditions ("if the base fee is below 100 gwei") and
transfers ("send 0.1 USDC to 0x..."). A part it cannot read, or a parameter a fact kind
cannot take, becomes an item marked ``unanswerable`` with the reason: it is named in the
answer, never swapped for a question the planner can answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from importlib import resources
from typing import TypedDict

from agent.loop.answers import computed_unit
from agent.loop.history import one_line
from agent.models._shopping import Shopping, read_shopping
from agent.models.vocabulary import (
    AGGREGATE_KINDS,
    AGGREGATES,
    COUNT_TESTS,
    KIND_WORDS,
    OTHER_CHAINS,
    OTHER_QUESTIONS,
    OVER_WORDS,
    PRESENTATION,
    STANDING,
    TOTAL_WORDS,
    UNIT_ASSETS,
    UNIT_FIRST,
    UNSUPPORTED,
    AggregateOp,
    Subject,
    compile_phrase,
)
from agent.tools.address import checked_address
from agent.tools.x402.pay_http import PAID_FACT_KINDS
from chain.money import format_usdc
from judge.amounts import GLUED_NUMBER
from judge.mandates import (
    CONDITION_WORDS,
    LABEL,
    OP_WORDS,
    crowded,
    mentioned_only,
    normalize_thresholds,
    resolve_branches,
    spell_out_orders,
    threshold_op,
    withheld_by,
)
from judge.spend_bound import blank_spend_bounds, spend_bound

__all__ = [
    "ADDRESS",
    "ChecklistRow",
    "FACT_PATTERNS",
    "MAX_ITEMS",
    "TX_HASH",
    "FactPattern",
    "Subject",
    "datasets",
    "extract_checklist",
    "infer_kind",
    "word_positions",
]

MAX_ITEMS = 5
ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}(?![0-9a-fA-F])")
TX_HASH = re.compile(r"0x[0-9a-fA-F]{64}(?![0-9a-fA-F])")
URL = re.compile(r"https?://[^\s'\"<>)]+")


def _blank_query(url: re.Match[str]) -> str:
    """A URL with its query blanked (same length, so positions in the task hold)."""
    text = url.group(0)
    base, mark, query = text.partition("?")
    kept = len(query) - len(query.rstrip(".,;:?"))  # the sentence's own closing mark
    return base + mark + " " * (len(query) - kept) + query[len(query) - kept :] if mark else text



@dataclass(frozen=True)
class FactPattern:
    """One phrase of the vocabulary (agent/models/vocabulary.py), compiled: the fact kind
    it asks for, the item text, what the fact is about, and the sheet field it names."""

    kind: str
    pattern: re.Pattern[str]
    label: str
    subject: Subject
    needs_hash: bool = False
    field: str | None = None


def _p(regex: str) -> re.Pattern[str]:
    return re.compile(regex, re.IGNORECASE)


FACT_PATTERNS: tuple[FactPattern, ...] = tuple(
    FactPattern(kw.kind, phrase.pattern, kw.label, kw.subject, kw.needs_hash, phrase.field)
    for kw in KIND_WORDS
    # Within a kind the longest phrase claims first ("how many usdc … in circulation"
    # before "in circulation").
    for phrase in sorted(kw.phrases, key=lambda p: -len(p.text))
)
"""The vocabulary table's phrases, compiled, in priority order (one table per kind)."""

_BLOCK_NUMBER = next(fp for fp in FACT_PATTERNS if fp.kind == "block_number")
_BLOCK_GAS_USED = next(fp for fp in FACT_PATTERNS if fp.kind == "block_gas_used")
_TRANSFER_LIST = next(fp for fp in FACT_PATTERNS if fp.kind == "transfer_list")

#: A part referring back to a transaction ("when was it mined"), and one naming a block.
_TX_WORD = re.compile(r"\b(?:it|its|this|that|transactions?|txs?)\b", re.I)
_TX_PRONOUN = re.compile(r"\b(?:it|its|this|that|the\s+(?:transaction|tx))\b", re.I)
_THAT_BLOCK = re.compile(r"\b(?:(?:that|its|this|the\s+same|the\s+(?:transaction|tx)['’]s)\s+block"
                         r"|the\s+block\s+(?:it|that|this)\s+(?:(?:was|is|got)\s+(?:mined\s+|included\s+)?"
                         r"|(?:landed|ended\s+up)\s+)in)\b",
                         re.I)
#: A block named by a transaction in it ("the block that included 0x<hash>", "the block
#: containing it", "0x<hash>'s block"): a block fact of it is of the block it was mined in.
_BLOCK_OF_TX = re.compile(
    r"\bblock\s+(?:(?:that|which)\s+(?:included|includes|contained|contains|holds|held|has|had)"
    r"|containing|including|holding|with)\b|0x[0-9a-fA-F]{64}['’]s\s+block\b"
    r"|\bblock\s+(?:(?:that|which)\s+)?(?:the\s+)?(?:transaction\s+|tx\s+)?0x[0-9a-fA-F]{64}\s+"
    r"(?:was|is|got|landed|ended\s+up)\s+(?:mined\s+|included\s+)?in\b"
    r"|\bblock\s+(?:contains|contained|includes|included)\s+(?:the\s+)?(?:transaction\s+|tx\s+)?0x"
    r"[0-9a-fA-F]{64}"
    r"|\bblock\s+(?:in\s+which|on\s+which|where)\s+(?:the\s+)?(?:transaction\s+|tx\s+)?0x[0-9a-fA-F]{64}"
    r"\s+(?:was|is|got)\s+(?:mined|included|confirmed)\b", re.I)


def _names_tx_block(text: str) -> bool:
    """Whether ``text`` names a transaction's block ("that block", "its block", "the block
    containing 0x<hash>", "the block in which 0x<hash> was mined", ...)."""
    return bool(_THAT_BLOCK.search(text) or _BLOCK_OF_TX.search(text))


#: The words naming that block, read with the block fact that claims "block".
_BLOCK_OF_TX_WORDS = re.compile(r"\b(?:(?:that|which)\s+)?(?:included|includes|contained|contains|"
                                r"containing|including|holding|landed|ended\s+up|where)\b", re.I)
#: A block fact said of now, beside a transaction's block ("... and the current base fee").
_NOW = re.compile(r"\b(?:current(?:ly)?|now|right\s+now|today|at\s+the\s+moment|latest|newest|"
                  r"head)\b", re.I)
_NAMES_A_BLOCK = re.compile(r"\b(?:blocks?|head|chain)\b", re.I)
_MINED = re.compile(r"\b(?:mined|included|confirmed)\b", re.I)

#: A price said as paid ("what gas price did 0x<hash> pay"): a transaction's, not the node's.
_PAID_PER_GAS = re.compile(r"\b(?:pa(?:y|id|ys)|spent|spend)\b", re.I)

#: The words leading a clause that frames a block ("Regarding the block containing 0x..").
_FRAME_LEADS = frozenset({"for", "in", "regarding", "concerning", "about", "as", "on", "with",
                          "respect", "to", "looking", "at", "the", "that", "was", "mined"})

_FRAME_START = re.compile(r"(?:for|in|regarding|concerning|about|as\s+for|on|with\s+respect\s+to|"
                          r"looking\s+at)\b", re.I)

#: Transfer facts read one way (from a sender, to a recipient), and the words saying it (a
#: total's counterparty too).
ONE_WAY_KINDS = frozenset({"transfer_count", "transfer_list", "transfer_max"})
_TO_FROM = re.compile(r"\b(to|from|into)\s+(?:the\s+)?(?:address\s+|account\s+|wallet\s+)?"
                      r"(0x[0-9a-fA-F]{40})", re.I)

_ONE_WAY_VERBS = re.compile(r"\b(?:went|go|goes|gone|going|sent|send|came|come|comes|moved|flowed|"
                            r"paid|made|make|received|receive|get|got)\b", re.I)
_THAN_ADDRESS = re.compile(r"\bthan\s+(?:to\s+|from\s+)?(?:the\s+)?0x[0-9a-fA-F]{40}", re.I)
#: The address a "did 0xA send/make/receive" says is the sender or the recipient.
#: One address or a list of them ("0xA", "0xA and 0xB", "0xA, 0xB or 0xC").
_HOLDERS = r"0x[0-9a-fA-F]{40}(?:\s*,?\s*(?:and|or|&)?\s*0x[0-9a-fA-F]{40})*"
_DID_SEND = re.compile(r"\b(?:did|has|have)\s+(" + _HOLDERS + r")"
                       r"\s+(?:each\s+|both\s+|all\s+)?(send|make|receive|get|sent|made|"
                       r"received|gotten|got)\b", re.I)
#: "the incoming transfers of 0xA", "outgoing USDC transfers from 0xA": to or from it.
_IN_OUT = re.compile(r"\b(incoming|inbound|outgoing|outbound)\s+((?:usdc\s+)?)transfers\s+"
                     r"(?:of|for|from|to|into)\s+(?=0x[0-9a-fA-F]{40})", re.I)
#: "the transfer(s) (that) 0xA received / sent": the recipient or the sender said before its verb.
_IT_DID = re.compile(r"\b(?:transfers?|ones?|that|which)\s+(0x[0-9a-fA-F]{40})\s+(?:has\s+|have\s+|had\s+)?"
                     r"(received|got|gotten|sent|made|paid)\b", re.I)
#: The address a "received by 0xA" / "sent by 0xA" says is the recipient or the sender.
_BY_ONE = re.compile(r"\b(received|got|sent|made|paid)\s+(?:out\s+)?by\s+(?:the\s+)?"
                     r"(?:address\s+|account\s+|wallet\s+)?(0x[0-9a-fA-F]{40})", re.I)

_TRANSFERS_WORD = re.compile(r"\btransfers?\b", re.I)
#: Words referring back to transfers asked before ("the largest one", "which of them").
_ONE_OF_THOSE = re.compile(r"\b(?:one|ones|(?:of|among)\s+(?:them|those|these))\b", re.I)

#: Kinds that take one block number, and kinds that take a window or range of blocks.
BLOCK_KINDS = frozenset({"base_fee_gwei", "block_timestamp", "block_number", "block_gas_used",
                         "block_gas_limit", "block_tx_count", "block_fullness"})
#: Block kinds whose words an account or a transaction has too ("the transaction count of
#: 0xA" is its nonce, "the gas limit of 0x<hash>" the transaction's): with a 0x address or
#: hash in their part they are declined, never read at the head as if a block were asked.
BLOCK_ONLY_KINDS = frozenset({"block_gas_used", "block_gas_limit", "block_tx_count",
                              "block_fullness"})
TOTAL_KINDS = frozenset({"usdc_sent_total", "usdc_received_total"})
WINDOW_KINDS = frozenset({"transfer_count", "transfer_list", "transfer_max"}) | TOTAL_KINDS
#: The unit a kind's value is written in, for thresholds in conditions.
VALUE_UNITS = {
    "base_fee_gwei": "gwei",
    "gas_price_gwei": "gwei",
    "usdc_balance": "usdc",
    "eth_balance": "eth",
    "usdc_sent_total": "usdc",
    "usdc_received_total": "usdc",
    "transfer_max": "usdc",
    "transfer_count": "",
    "block_number": "",
    "block_timestamp": "",
    "block_gas_used": "",
    "block_gas_limit": "",
    "block_tx_count": "",
    "tx_gas_used": "",
    "token_supply": "usdc",
}

_SEND = _p(
    r"\b(?:send|transfer|pay|give)\s+(\d+(?:\.\d+)?)\s*usdc\s+to\s+(0x[0-9a-fA-F]{40})(?![0-9a-fA-F])"
)
_PAY_WORD = _p(r"\b(?:send|transfer|pay|give|tip)\b")
#: A payment asked more than once in its own clause ("Send 0.1 USDC to 0x.. twice"): one
#: transfer made and the rest dropped would be a wrong payment at exit 0.
_REPEATED = _p(r"\b(?:twice|thrice|(?:\d+|one|two|three|four|five|six|seven|eight|nine|ten|"
               r"several|multiple|many|a\s+few)\s+times)\b")
_AMOUNT = _p(r"\d(?:[\d.]*)\s*(?:usdc|eth|ether|dollars?|\$)|\$\s*\d")
#: A number sent somewhere in no unit ("and 0.02 to 0x..").
_BARE_AMOUNT = _p(r"\d(?:[\d.]*)\s+to\b")
_BLOCK = _p(r"\bblock\s+(\d+|latest-\d+)(?![\w-])")
#: "blocks 5 and 9", "blocks 3, 4 and 7", "block 5 and 6": a list of single blocks (no range).
_BLOCK_LIST = _p(r"\bblocks?\s+(?:\d+|latest-\d+)(?:\s*,\s*(?:\d+|latest-\d+))*\s*,?\s*(?:and|&)\s+"
                 r"(?:block\s+)?(?:\d+|latest-\d+)(?![\w-])")
#: A plural "blocks N" left unread (no range, no list read above): a block reference too.
_BLOCKS_N = _p(r"\bblocks\s+(\d+|latest-\d+)(?![\w-])(?!\s*(?:to|-|–|\.\.|through|until)\b)")
_RANGE = _p(r"\bblocks?\s+(\d+|latest-\d+)\s*(?:to|-|–|\.\.|through|until)\s*(?:block\s+)?"
            r"(\d+|latest-\d+)(?![\w-])")
_WINDOW = _p(r"\b(?:last|past|previous|recent|latest|most\s+recent)\s+(\d+)\s+blocks\b")
#: "the last 3 and 5 blocks", "the last 3 and the last 5 blocks": two windows in one list.
_WINDOW_LIST = _p(r"\b(?:last|past|previous|recent|latest|most\s+recent)\s+(\d+)\s*(?:,|and|&|or)"
                  r"\s*(?:the\s+)?(?:(?:last|past|previous|recent|latest)\s+)?(\d+)\s+blocks\b")
#: A part that is only a span of blocks (", since block 0", rewritten "in blocks 0 to
#: latest-0"): the window of its sentence's other parts, read with them.
_ONLY_SPAN = _p(r"(?:(?:in|over|during|within|for|across)\s+)?(?:the\s+)?(?:blocks?\s+(?:\d+|latest-\d+)"
                r"\s*(?:to|-|–|\.\.|through|until)\s*(?:block\s+)?(?:\d+|latest-\d+)|(?:last|past|"
                r"previous|recent|latest|most\s+recent)\s+\d+\s+blocks)")
_LATEST = _p(r"\b(?:latest|current|currently|now|newest|most\s+recent|head)\b")
#: Nouns of the filler list that name a fact when they stand alone in a list ("the number
#: and the timestamp of the latest block"): never dropped, read or declined by name.
_BARE_FACT = _p(r"\b(number|height|value|values|data|info|information|total|count)\b")
_MINE = _p(r"\b(?:my|our|mine|your\s+own|the\s+agent['’]?s|i|we)\b")
#: The agent's own wallet named as one holder beside addresses ("Does my wallet hold more
#: USDC than 0xB?", "the combined ETH of 0xA and mine", "how much more do I hold than
#: 0xB"): one of the values a comparison, sum or difference is over.
_OWN_WALLET = _p(
    r"\b(?:my|our|your\s+own|(?:the\s+)?agent['’]?s)(?:\s+own)?\s+(?:wallet|address|account)\b|"
    r"\b(?:mine|ours)\b|\b(?:my|our)(?=\s+(?:usdc|eth|ether|balances?|holdings?|funds)\b)|"
    r"\b(?:do|did|does|can|could|would|will)\s+(?:i|we)(?=\s+(?:hold|have|own|possess|keep)\b)|"
    r"\bthan\s+(?:i|we)\b|\b(?:than|or|and|with)\s+(?:me|us)\b"
)
#: A sentence holding only holders after a question ("... of 0xS? And for 0xF?", "And of
#: 0xF?", "Also 0xF.", "0xF?"): the same facts asked of them (outside round 24 had them
#: declined; before this session they were dropped).
_SAME_FOR = _p(r"(?:(?:and|also|then|plus|same|likewise)\b\s*)*(?:(?:for|of|with)\b\s*)?(?:(?:and|or|,)\s*)*")
_ADDRESS_OR_MINE = _p(r"0x[0-9a-fA-F]{40}(?![0-9a-fA-F])|\b(?:my|our)\s+(?:wallet|address|account)\b|\bmine\b")
#: Words correcting what was asked ("I mean 0xF", "i.e. 0xF", "Sorry, 0xF"): the holder
#: after them replaces one, so it is never asked beside it (it is declined by name).
_CORRECTING = _p(r"\b(?:i\s+mean|i\s+meant|i\.?\s*e\b|in\s+other\s+words|to\s+be\s+(?:clear|precise)|"
                 r"that\s+is|sorry|actually|no\s+wait|wait|rather|instead|correction|oops|scratch\s+that)\b")
_REFERS_BACK = _p(r"\b(?:its|it|that|this|same)\b")
#: A value named without a fact phrase ("the total ETH of 0xA and 0xB"): an aggregate over
#: it is no aggregate of the fact a later part names ("..., and the ETH balance of 0xC").
_VALUE_WORD = _p(r"\b(?:usdc|eth|ether|balances?|tokens?|funds|money)\b")
#: A part starting a question of its own ("..., and how much does 0xC hold?"): no list
#: tail of the part before it, so no address of the question before it.
_ASKS_OWN = _p(r"^\s*(?:(?:and|also|then|so|but|plus)\s+)?(?:how|what|which|who|whose|where|"
               r"does|do|did|is|are|was|were|has|have|had|can|could)\b")
#: A part asking its own question ("what was ...", "when was block 7 mined"); "what
#: about ..." refers back. Its tense says whether a block another part names is its own.
#: How a question of its own opens ("And how much ...", "Did ..."), past a joining word.
_QUESTION_OPENS = (r"^\s*(?:(?:and|also|then|so|but|plus)\s+)?(?:how|what|which|who|whose|where|"
                   r"when|does|do|did|is|are|was|were|has|have|had")
_OWN_QUESTION = _p(_QUESTION_OPENS + r"|can|could)\b")
_ABOUT = _p(r"^\s*(?:(?:and|also|then|so|but|plus)\s+)?(?:what|how)\s+about\b")
_PRESENT = _p(r"(?:\b(?:is|are|does|do|has|have)\b|'s\b)")
_PAST = _p(r"\b(?:was|were|did|had)\b")
#: The aggregate words of the vocabulary, one pattern per operation, in priority order.
_AGGREGATES: tuple[tuple[AggregateOp, re.Pattern[str]], ...] = tuple(
    (op, _p(r"(?<![\w-])(?:" + "|".join(
        re.escape(w).replace(r"\ ", r"[\s-]+") for w in sorted(words, key=len, reverse=True)
    ) + r")(?![\w-])"))
    for op, words in AGGREGATES
)
_COMPARE_MAX = dict(_AGGREGATES)["max"]
_COMPARE_MIN = dict(_AGGREGATES)["min"]
_AGGREGATE_WORDS = _p(r"(?<![\w-])(?:" + "|".join(
    re.escape(w).replace(r"\ ", r"[\s-]+")
    for w in sorted((w for _op, ws in AGGREGATES for w in ws), key=len, reverse=True)
) + r")(?![\w-])")
_OVER_WORDS = _p(r"(?<![\w-])(?:" + "|".join(
    re.escape(w).replace(r"\ ", r"[\s-]+") for w in sorted(OVER_WORDS, key=len, reverse=True)
) + r")(?![\w-])")
#: The fact kinds an aggregate is taken over: their phrases hold no aggregate word.
_AGGREGATED = frozenset(k for kinds in AGGREGATE_KINDS.values() for k in kinds)
#: A count's test words ("hold any", "hold no", "non-zero" is no "zero"), longest first, and
#: the (comparison, threshold) each word names.
_COUNT_TEST = {" ".join(w.split()): (cmp, than) for cmp, than, words in COUNT_TESTS for w in words}
_COUNT_WORDS = _p(r"(?<![\w-])(?:" + "|".join(
    re.escape(w).replace(r"\ ", r"[\s-]+") for w in sorted(_COUNT_TEST, key=len, reverse=True)
) + r")(?![\w-])")
#: A ratio of two values ("how many times more"): never read, named.
_RATIO = _p(r"\bhow\s+many\s+times\b|\b(?:times|fold)\s+(?:more|less|as|larger|bigger|smaller|"
            r"higher|lower|greater|richer|poorer)\b|\bratio\b")
#: "..., and by how much?": the difference of the two values a comparison compared.
_BY_HOW_MUCH = _p(r"\bby\s+how\s+(?:much|many)(?:\s+(?:usdc|eth|ether|cents|wei|gwei))?\b")
#: Words grouping addresses inside a comparison ("0xA, or 0xB plus 0xC").
_GROUPED = _p(r"\bplus\b|\+|\b(?:together|along|combined)\s+with\b|\bas\s+well\s+as\b|"
              r"\badded\s+to\b")
_CONDITION = _p(rf"({OP_WORDS})\s*(\d+(?:\.\d+)?)\s*(gwei|wei|usdc|ether|eth)?")
#: A threshold word, with or without a number read after it ("if 0xA holds more than $2"):
#: a condition on something, never "if you need to" (it was dropped, the order left ungated).
_THRESHOLD = _p(rf"(?:{OP_WORDS})")
#: "how many (USDC) transfers ...": the opening of a count of transfers, said once for the
#: rewrites that read one (``_IT_COUNTED``, ``_EVER_COUNTED``, ``_EACH_DID``, ``_VERB_PAIR``).
_HOW_MANY_TRANSFERS = r"\bhow\s+many\s+(?:usdc\s+)?transfers\s+"
#: A share of a block's gas limit as a threshold ("more than half full", "over 50% full",
#: "at least 90 percent of its gas limit", "is the block full"): no condition reads one
#: (block_fullness is in no VALUE_UNITS), so it is declined naming these words.
_SHARE = (r"(?:\d+(?:\.\d+)?\s*(?:%|percent\b|per\s+cent\b)|(?:a\s+|one\s+)?(?:half|quarter|"
          r"third)\b|three\s+quarters\b)")
_FULL_TEST = _p(rf"(?:(?:{OP_WORDS})\s*)?{_SHARE}\s*(?:full\b|of\s+(?:the\s+|its\s+)?"
                r"(?:block(?:['’]s)?\s+)?gas\s+limit\b)|\b(?:block(?:\s+(?:\d+|latest-\d+))?|it)\s+"
                r"(?P<bare>(?:(?:almost|nearly|completely|entirely|totally|fully)\s+)?full)\b")
_SHARE_TEST = _p(rf"(?:{OP_WORDS})\s*\d+(?:\.\d+)?\s*(?:%|percent\b|per\s+cent\b)?")
#: A yes/no question whether there is any of one value ("Does 0xA hold any USDC?", "Were
#: there any USDC transfers in the last 20 blocks?"): the condition that it is above 0.
_ANY_QUESTION = _p(r"^\s*(?:does|do|did|has|have|had|is|are|was|were)\b.*\bany\b")
#: Words that change what is asked in a way no fact kind here can take ("average", a
#: year): a part holding one outside a matched phrase is not answered.
_MODIFIER = _p(
    r"\b(?:" + "|".join(re.escape(w).replace(r"\ ", r"\s+") for w in UNSUPPORTED)
    + r")\b|\b(?:19|20)\d\d\b"
)
#: The words of a total ("in total", "altogether"): a total's own scope, taken out of a
#: part asking for one before its other words are read.
_TOTAL_WORDS = _p(
    r"(?<![\w-])(?:" + "|".join(re.escape(w).replace(r"\ ", r"\s+")
                               for w in sorted(TOTAL_WORDS, key=len, reverse=True))
    + r")(?![\w-])"
)
_STANDING = [(w, compile_phrase(w)) for w in STANDING]
_CHAINS = [(w, compile_phrase(w)) for w in sorted(OTHER_CHAINS, key=len, reverse=True)]
_OTHER_QUESTIONS = [(w, compile_phrase(w)) for w in OTHER_QUESTIONS]
#: Units a fact kind's answer can be given in (presentation, never an item).
UNIT_KINDS: dict[str, frozenset[str]] = {
    # A transaction's gas price and fee are stated in gwei and in ETH: asked in those, as is.
    "gwei": frozenset({"base_fee_gwei", "gas_price_gwei", "eth_balance", "tx_gas_price", "tx_fee"}),
    "wei": frozenset({"base_fee_gwei", "gas_price_gwei", "eth_balance", "tx_gas_price", "tx_fee"}),
    "eth": frozenset({"eth_balance", "base_fee_gwei", "gas_price_gwei", "tx_fee", "tx_gas_price"}),
    "ether": frozenset({"eth_balance", "base_fee_gwei", "gas_price_gwei", "tx_fee", "tx_gas_price"}),
    "usdc": frozenset({"usdc_balance", "token_supply", "transfer_max"}) | TOTAL_KINDS,
    "atomic": frozenset({"usdc_balance", "token_supply", "transfer_max"}) | TOTAL_KINDS,
    "cents": frozenset({"usdc_balance", "token_supply", "transfer_max"}) | TOTAL_KINDS,
    "unix": frozenset({"block_timestamp", "tx_time"}),
    "utc": frozenset({"block_timestamp", "tx_time"}),
}
_NUMBER_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "a": 1, "an": 1,
}  # fmt: skip
_N = r"(\d+|one|two|three|four|five|six|seven|eight|nine|ten|an?)"
#: The word joining a list of numbers ("2 and also 4 blocks ago").
_AND = r"(?:and(?:\s+also)?|&|or)"
#: A number in a list of them ("2, 3 and 4 blocks ago"), not captured.
_NB = r"(?:\d+|one|two|three|four|five|six|seven|eight|nine|ten)\b"
_HEAD = r"(?:the\s+)?(?:latest|current|newest|last|most\s+recent|head|tip|chain\s+head)(?:\s+(?:one|block))?"
#: "the block just/right/immediately before ...": an adverb that changes nothing.
_ADV = r"(?:(?:just|right|immediately|directly)\s+)?"
#: Two or more block counts sharing one reference ("2 and 4", "1, 3 and 5 blocks"): the
#: first number, then the rest as one group.
_NUMBERS = rf"{_N}((?:\s+blocks?)?(?:\s*,\s*{_NB}(?:\s+blocks?)?)*\s*,?\s*{_AND}\s+{_NB})"
#: Relative block references, rewritten to ``block latest-N`` (resolved against the head
#: at run start by the loop) or to an absolute ``block N``.
_RELATIVE: tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], str]], ...] = (
    (_p(r"\b(?:the\s+)?(?:previous|prior|preceding|penultimate|second[\s-]+(?:to|from)[\s-]+"
        r"last)\s+block\b(?!\s+(?:number|height)\b)"), lambda m: "block latest-1"),
    (_p(rf"\b(?:the\s+)?block\s+{_ADV}(?:before|preceding)\s+{_HEAD}"), lambda m: "block latest-1"),
    (_p(rf"\b(?:the\s+)?block\s+{_ADV}before\s+last\b"), lambda m: "block latest-1"),
    # A list of blocks after the head ("2 and 4 blocks after the latest block": none exists
    # yet) or before/after "it" (a block named earlier, not resolved): every number is a
    # reference no tool reads, declined by its words, never the head's value for one.
    (_p(rf"\b{_NUMBERS}"
        rf"\s+blocks?\s+(after\s+{_HEAD}|(?:before|after|prior\s+to)\s+(?:it|that|this))\b"),
     lambda m: _each_unread(m)),
    (_p(rf"\b(?:the\s+)?blocks?\s+{_N}((?:\s*,\s*{_NB})*\s*,?\s*(?:{_AND}\s+{_NB})?)"
        r"\s+(before|after|prior\s+to)\s+(it|that|this)\b"),
     lambda m: _each_unread(m)),
    # "2 and 4 blocks ago", "1, 3 and 5 blocks back", "2 blocks and 4 blocks ago": one
    # reference per number.
    (_p(rf"\b{_NUMBERS}"
        rf"\s+blocks?\s+(ago|back|earlier|prior(?!\s+to)|(?:before|behind|prior\s+to)\s+{_HEAD})"),
     lambda m: _each_ago(m)),
    (_p(rf"\b{_NUMBERS}"
        r"\s+blocks?\s+(before|prior\s+to|after)\s+block\s+(\d+)\b"),
     lambda m: _each_from(m)),
    # "2 blocks ago and also 4?": a bare number after a relative reference is one too.
    (_p(rf"\b{_N}(\s+blocks?\s+(?:ago|back|earlier)\s*,?\s*{_AND}\s+{_NB})()"
        r"(?=\s*(?:[?.!;,]|$))"),
     lambda m: _each_ago(m)),
    # "the block two before block 9", "the block 2 after block 12".
    (_p(rf"\bthe\s+block\s+{_N}\s+(before|prior\s+to|after)\s+block\s+(\d+)\b"),
     lambda m: f"block {_shift(int(m.group(3)), _count(m.group(1)), m.group(2))}"),
    (_p(rf"\b{_N}\s+blocks?\s+(?:ago|back|earlier|prior(?!\s+to)|(?:before|behind|prior\s+to)\s+{_HEAD})"),
     lambda m: f"block latest-{_count(m.group(1))}"),
    (_p(rf"\b(?:the\s+)?block\s+{_ADV}(?:before|preceding)\s+(?:block\s+)?(\d+)\b"),
     lambda m: f"block {_shift(int(m.group(1)), 1, 'before')}"),
    (_p(rf"\b(?:the\s+)?block\s+{_ADV}after\s+(?:block\s+)?(\d+)\b"),
     lambda m: f"block {int(m.group(1)) + 1}"),
    (_p(rf"\b{_N}\s+blocks?\s+(?:before|prior\s+to)\s+block\s+(\d+)\b"),
     lambda m: f"block {_shift(int(m.group(2)), _count(m.group(1)), 'before')}"),
    (_p(rf"\b{_N}\s+blocks?\s+after\s+block\s+(\d+)\b"),
     lambda m: f"block {int(m.group(2)) + _count(m.group(1))}"),
)


def _count(word: str) -> int:
    return int(word) if word.isdigit() else _NUMBER_WORDS[word.lower()]


def _numbers(m: re.Match[str]) -> list[int]:
    return [_count(w) for w in re.findall(_NB, m.group(1) + " " + m.group(2), re.I)]


def _listed_after_block(m: re.Match[str]) -> bool:
    """ "block 12 and 5 blocks ago": the first number is a block of its own ("the blocks 2
    and 4 blocks ago" is relative)."""
    return bool(re.search(r"\bblock\s*\Z", m.string[: m.start()], re.I))


def _each_ago(m: re.Match[str]) -> str:
    if _listed_after_block(m):
        return m.group(0)
    return " and ".join(f"block latest-{n}" for n in _numbers(m))


def _shift(block: int, n: int, way: str) -> str:
    """The block ``n`` before/after ``block``; one before block 0 is named, never read."""
    shifted = block + n if way.lower() == "after" else block - n
    return str(shifted) if shifted >= 0 else "before-genesis"


def _each_unread(m: re.Match[str]) -> str:
    """ "block 2-after-tip and block 4-after-tip": a reference per number that no block
    pattern reads, so each part naming one is declined by its words."""
    tail = m.string[m.end(2) : m.end(0)].lower()
    way = "-".join(w for w in tail.split() if w not in ("block", "blocks", "the"))
    way = re.sub(r"\b(?:latest|current|newest|last|most-recent|head|tip|chain-head)\b.*",
                 "tip", way)
    return " and ".join(f"block {n}-{way}" for n in _numbers(m))


def _each_from(m: re.Match[str]) -> str:
    if _listed_after_block(m):
        return m.group(0)
    return " and ".join(f"block {_shift(int(m.group(4)), n, m.group(3))}" for n in _numbers(m))


#: A block of a range: a number or ``latest-N`` (a relative reference already rewritten).
_B = r"(\d+|latest-\d+)(?![\w-])"
#: The head named as a range's end: "the latest block", "the head", "now".
_TO_HEAD = (r"(?:(?:the\s+)?(?:latest|current|newest|most\s+recent|head|tip|chain\s+head|"
            r"present)(?:\s+(?:one|block))?|now)\b(?!-)")
_UP_TO = r"(?:to|till|until|through|thru|up\s+to|up\s+until|-|–|\.\.)"
#: "between block X and ...", "from block X to ...": the start of a range ("and" only after
#: "between": "the timestamp of block 3 and the current block number" asks two things).
_FROM = rf"\b(?:between\s+(?:the\s+)?blocks?\s+{_B}\s+and|from\s+(?:the\s+)?blocks?\s+{_B}\s*{_UP_TO})"
#: Ranges of blocks, rewritten to one form the reading takes (``blocks X to Y``, ``latest-0``
#: the head at run start; ``last N blocks``): "between block 1 and the latest block", "from
#: block 5 to now", "since block 5", "the last ten blocks up to the head". Rewritten whole,
#: so no word of a range is left to be read as a question of its own.
def _first(m: re.Match[str]) -> str:
    """The first block of a range matched by ``_FROM`` (after "between" or "from")."""
    return m.group(1) or m.group(2)


_RANGES: tuple[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]], ...] = (
    (_p(rf"{_FROM}\s*(?:block\s+)?{_B}"), lambda m: f"in blocks {_first(m)} to {m.group(3)}"),
    (_p(rf"{_FROM}\s*{_TO_HEAD}"), lambda m: f"in blocks {_first(m)} to latest-0"),
    (_p(rf"\bbetween\s+{_TO_HEAD}\s+and\s+(?:the\s+)?block\s+{_B}"),
     r"in blocks \1 to latest-0"),
    (_p(rf"\bblocks?\s+{_B}\s*{_UP_TO}\s*{_TO_HEAD}"), r"blocks \1 to latest-0"),
    (_p(rf"\b(?:since|starting\s+(?:at|from|with))\s+(?:the\s+)?block\s+{_B}"
        r"(?:\s+(?:on|onwards?|forward))?"), r"in blocks \1 to latest-0"),
    (_p(rf"\bfrom\s+(?:the\s+)?block\s+{_B}\s+(?:on|onwards?|forward|up)\b"),
     r"in blocks \1 to latest-0"),
    (_p(rf"\b(last|past|previous|recent|latest)\s+{_N}\s+blocks\b"),
     lambda m: f"{m.group(1)} {_count(m.group(2))} blocks"),
    (_p(rf"\b((?:last|past|previous|recent|latest)\s+\d+\s+blocks)\s+{_UP_TO}\s+{_TO_HEAD}"
        r"(?:\s+block)?"), r"\1"),
    (_p(rf"\bblocks?\s+{_B}\s*{_UP_TO}\s*(?:block\s+)?{_B}"), r"blocks \1 to \2"),
    # A range with only its end: from the first block ("up to block 5", "before block 5").
    (_p(rf"\b(?:up\s+to|until|till|through|thru)\s+(?:and\s+including\s+)?(?:the\s+)?block\s+{_B}"),
     r"in blocks 0 to \1"),
    (_p(r"\bbefore\s+(?:the\s+)?block\s+(\d+)\b(?!-)"), lambda m: f"in blocks 0 to {int(m.group(1)) - 1}"),
    (_p(r"\bafter\s+(?:the\s+)?block\s+(\d+)\b(?!-)"),
     lambda m: f"in blocks {int(m.group(1)) + 1} to latest-0"),
)
#: A direction word before a window ("transferred in the last 20 blocks").
_IN_WINDOW = _p(r"\b(transferred|moved|paid|sent)\s+in\s+(?=(?:the\s+)?(?:last|past|previous|"
                r"recent|latest|most\s+recent|first|blocks?)\b)")
#: The genesis block is block 0 ("since the genesis block", "the genesis block's timestamp").
_GENESIS = _p(r"\b(?:the\s+)?genesis(?:\s+block)?\b")


_CONNECTOR = _p(
    r"(?:^|\s+|\s*\()("
    + "|".join(re.escape(w).replace(r"\ ", r"\s+") for w in CONDITION_WORDS)
    + r")\s+"
)
_SPLIT = _p(
    r"\?|;|!|\.(?:\s+|$)|,\s*(?:and\s+|but\s+|then\s+|also\s+|plus\s+)?|\s+[-–—]+\s+|"
    r"\s+(?:and|then|also|plus|but)\s+"
)
#: Words that carry no question of their own: what is left of a part after its facts,
#: subjects and parameters are taken out. A part with other words is a question the
#: planner cannot read, and is named as not answered.
_FILLER = frozenset(
    """a about according account between accounts address addresses again alert all along also am among an
    and any anvil are as ask at be been block block's blocks both buy by can chain check checking
    contract could current currently data decimal devnet did do does each exact exactly eye
    fetch find for from get give go has have hold holds how i if in info information into is
    it its just keep know last latest let like list look me mined more most much my need
    network newest now rn number of on once one only or our over past per please plus poll provide read
    recent recently repeatedly report return right row see show so tell than that the them
    then there these this those three thrice times to token two up usdc use using value
    values want was we were what whats which you your eth ether gwei wei moment paid pay
    purchase if needed need s i'd id would held tokens it's what's who count total does did
    many when native still eip involve involves token's usdc's seller sellers market marketplace paywall vendor wallet agent agent's provider offer offers x402 discover discovery high low big large uses use with unix touched touching involving involved transaction transactions tx happened happen occurred made sent moved less fewer larger bigger higher greater richer smaller lower poorer whose""".split()
)

_WORD = re.compile(r"[a-z][a-z']*")


@lru_cache(maxsize=1)
def datasets() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(token symbols, protocol names) the paywall has fact sheets for."""

    def keys(name: str, field_: str, fallback: tuple[str, ...]) -> tuple[str, ...]:
        try:
            text = resources.files("chain").joinpath("data", f"{name}.json").read_text("utf-8")
            return tuple(json.loads(text)[field_])
        except (OSError, ValueError, KeyError, ModuleNotFoundError):
            return fallback

    return keys("tokens", "tokens", ("USDC",)), keys("protocols", "protocols", ())


def word_positions(text: str, names: Iterable[str]) -> list[tuple[int, str]]:
    found = []
    for name in names:
        for m in re.finditer(rf"(?<![\w]){re.escape(name)}(?![\w])", text, re.IGNORECASE):
            found.append((m.start(), name))
    return sorted(found)


#: A greeting opening the task or thanks closing it ("Hi!", "Thanks."): no question, no order.
_PLEASANTRIES = (
    _p(r"^\s*(?:hi|hiya|hello|hey|howdy|greetings|good\s+(?:morning|afternoon|evening|day))"
       r"(?:\s+(?:there|nib|all|friend|folks|team))?(?:\s*(?:[:;]-?[)D]|[!.,:;]+|[-–—]+(?=\s)))+\s*"),
    _p(r"[.!?;,]?\s*(?:(?:many\s+)?thanks|thank\s+you(?:\s+kindly)?|thx|ty|cheers|much\s+appreciated|"
       r"(?:i\s+)?appreciate\s+it)"
       r"(?:\s+(?:a\s+lot|so\s+much|very\s+much|in\s+advance|a\s+bunch|a\s+million|again))?"
       r"\s*[!.]*\s*$"),
    # A remark about the asker opening the task ("I'm new to this.", "Quick question:"):
    # outside round 46 (Q46) stopped at exit 1 on it with both facts right.
    _p(r"^\s*\(?(?:(?:i['’]?m|i\s+am)\s+(?:new|a\s+beginner)(?:\s+(?:to\s+(?:this|crypto|chains?|"
       r"ethereum|blockchains?|nib|all\s+this)|here))?|quick\s+(?:question|one|q)|(?:a\s+)?question\s+for\s+you)"
       r"(?:\)\s*[!.,:;-]*|\s*[!.,:;-]+)\s*"),
)


#: Words by which a task asks for something sold rather than read from the chain.
_ASKS_PAID = _p(r"\b(?:buy|purchase|pay\s+for|fact\s*sheets?|factsheets?|datasets?|reports?|"
                r"paywall|market|marketplace|sellers?|sold|according\s+to)\b|https?://")
#: Sheet fields a free chain read also answers, when the task asks nothing sold: a
#: question never buys what the chain tells for free (the issuer of the run's USDC is its
#: contract's owner()).
_FREE_FIELDS = {("token_factsheet", "issuer"): ("token_issuer", "issuer (owner) of")}
#: Words naming the run's own chain, whatever it is: "on this chain", "here" (clause end).
_OWN_CHAIN = _p(r"\b(?:on|in|at|from)\s+(?:this|the\s+current|our)\s+(?:chain|network|node|"
                r"blockchain)\b|\s+(?:right\s+)?here(?=\s*(?:[?.!,;]|$))")
#: Words naming a local chain, the run's own when it runs on one ("on the local devnet").
_LOCAL_CHAIN = _p(r"\b(?:on|in|at|from)\s+(?:the\s+|this\s+|our\s+|my\s+)?local\s+(?:anvil\s+)?"
                  r"(?:chain|devnet|network|node|blockchain|anvil)\b")
#: The networks that are a local chain (chain/networks.py).
LOCAL_NETWORKS = frozenset({"anvil"})


#: Words opening a sentence or clause that restates the question before it ("How full is
#: block 3? I mean what share of its gas limit was used."): the restated question is read
#: as any other (its items are the same items, asked once), the lead words as nothing.
_RESTATING = _p(r"(?:^|(?<=[.?!;,]))\s*(?:i\s+mean|in\s+other\s+words|i\.e\.|that\s+is(?=\s*,)"
                r"|to\s+be\s+(?:clear|precise)(?=\s*,))\s*[,:]?")


#: The phrases a restatement names its fact by (the bare "transaction"/"tx" is none).
_RESTATED_FACT = tuple(fp.pattern for fp in FACT_PATTERNS if not fp.pattern.fullmatch("transaction"))


def _restatement(m: re.Match[str]) -> str:
    """The lead words of a restatement dropped when the clause after them names a fact of
    its own ("I mean what share of its gas limit was used"): it is read as any question.
    A correction naming only another subject ("I mean 0xF", "To be clear, 0x<hash>") keeps
    them, so it is declined by name: read as a restatement, the first subject's answer was
    given for it at exit 0 (outside round 23)."""
    clause = re.split(r"[.?!;]", m.string[m.end() :], maxsplit=1)[0]
    return " " if any(p.search(clause) for p in _RESTATED_FACT) else m.group(0)


#: Courtesies anywhere in a task ("hopefully", "if you don't mind", "I'd love to know", "no
#: rush", "Hope your day is going well."): they ask nothing (outside round 60 stopped at exit
#: 1 on seven of them with the fact right, and read "if you don't mind" as a condition).
_COURTESY = _p(
    r"(?:^|(?<=[.!?]))\s*(?:i\s+)?hope\s+(?:your\s+day\s+is\s+going\s+well|all\s+is\s+well|"
    r"you(?:['’]re|\s+are)\s+(?:doing\s+)?well)\s*[.!]+"
    r"|,?\s*\b(?:hopefully|no\s+rush(?:\s+at\s+all)?|out\s+of\s+curiosity|by\s+the\s+way|"
    r"bear\s+with\s+me|(?:i\s+was\s+)?just\s+curious|if\s+you\s+(?:don['’]?t|do\s+not)\s+mind|"
    r"if\s+possible|(?:i['’]d|i\s+would)\s+love\s+to\s+know)\b\s*,?")


def drop_pleasantries(task: str) -> str:
    """``task`` without a greeting before it, thanks after it, courtesies anywhere
    (``_COURTESY``), or the lead words of a restatement (``_restatement``); the rest
    unchanged."""
    for regex in _PLEASANTRIES:
        task = regex.sub(lambda m: "." if m.group(0)[:1] in ".!?;," else "", task, count=1)
    return _RESTATING.sub(_restatement, _COURTESY.sub(" ", task))


#: Words describing a seller its URL names ("the MCP seller at http://h/mcp", "the x402
#: server at ...", "the paywall at ..."): the URL says which seller, and how it is asked.
_DESCRIBED_SELLER = _p(r"\b(?:the\s+|an?\s+)?(?:(?P<proto>mcp|x402)\s+)?(?:seller|server|"
                       r"service|endpoint|paywall|api)\s+(?:(?:at|on|behind)\s+)?"
                       r"(?=(?P<url>https?://[^\s'\"<>),;]+))")
#: The path of an MCP server's URL (docs/market.md): "/mcp" or "/sse".
_MCP_PATH = re.compile(r"https?://[^/\s]+/(?:mcp|sse)/?(?:[?#]|[.?!]*$)", re.IGNORECASE)


def _url_names_the_seller(m: re.Match[str]) -> str:
    """The description taken out, the URL left to name the seller; "MCP" said of a URL that
    names no MCP server is kept, and read (declined) as a word of its own."""
    if (m["proto"] or "").lower() == "mcp" and not _MCP_PATH.match(m["url"]):
        return m.group(0)
    return " "


_ASSET = r"(?:usdc|eth|ether)"
_ASSET_PAIR_AMOUNT = re.compile(
    rf"\b(?P<q>how\s+(?:much|many)|amount\s+of)\s+(?P<a>{_ASSET})\s*(?:,|and|&|\+|plus)\s*"
    rf"(?P<b>{_ASSET})\b", re.I)
_ASSET_PAIR_BALANCES = re.compile(
    rf"\b(?P<a>{_ASSET})\s*(?:,|and|&|\+|plus)\s*(?P<b>{_ASSET})\s+(?:balances?|holdings)\b", re.I)

#: An asset said of its holder with no balance word ("the combined ETH of my wallet and
#: 0xB", "the total USDC of 0xA and 0xB", "Is there any USDC in 0xB?"): that holder's
#: balance, said as "held by" (outside round 22 had it declined).
_ASSET_OF_HOLDER = re.compile(
    rf"\b(?P<w>any|some|combined|total|joint|summed)\s+(?P<a>{_ASSET})\s+(?:of|in|inside)\s+"
    r"(?=(?:my|our)\s+(?:wallet|address|account)\b|(?:the\s+)?agent['’]?s\s+wallet\b"
    r"|0x[0-9a-fA-F]{40}(?![0-9a-fA-F]))", re.I)

#: An asset said of "their" with no balance word ("What is their USDC?" after a balance
#: question): their balance of it (declined before, on 'their').
_THEIR_ASSET = re.compile(
    rf"\b(?P<p>their)\s+(?P<a>{_ASSET})\b(?!\s*(?:balances?|holdings?|transfers?|tokens?|contracts?|"
    r"address(?:es)?|prices?|supply|amounts?|decimals|sent|received|spent|paid|moved|gas|fees?|"
    r"values?|worth|flows?|payments?)\b)", re.I)

_BLOCK_AND_TIME = re.compile(
    r"\b(?P<w>which|what)\s+block\s+and\s+(?:what\s+|which\s+)?time\s+(?P<v>was|were|did)\s+"
    r"(?P<x>[^?.!;,]+?)\s+(?P<m>mined|included|confirmed|get\s+mined)(?:\s+(?:at|in|on))?\b", re.I)
_ASKS_WHEN = re.compile(
    r"\b(tell\s+me|show\s+me|(?:i|we)\s+(?:want|need|would\s+like)\s+to\s+know|find\s+out|"
    r"check|say)\s+when\b(?=\s+(?:was|were|did)\b[^.?!;]*\b(?:mined|included|confirmed)\b|"
    r"[^.?!;]*\b(?:was|were|got)\s+(?:mined|included|confirmed)\b)", re.I)


#: "..., and how many did it receive?", "... and how many were received by 0xA": a count of
#: the transfers the sentence asked before.
_ELIDED_COUNT = _p(r"\bhow\s+many\s+(?:did\s+(?P<who>0x[0-9a-fA-F]{40}(?![0-9a-fA-F])|it)\s+"
                   r"(?P<verb>send|receive|make|get)|(?P<be>were|was)\s+(?P<done>received|sent|made|"
                   r"paid)\s+by\s+(?P<by>0x[0-9a-fA-F]{40}(?![0-9a-fA-F])|it))\b")


def _elided_transfers(text: str) -> str:
    """ "How many USDC transfers did 0xA send, and how many did it receive?", "... and how many
    were received by 0xA": the second count is of the same transfers, said in full, from the
    sentence that last said transfers (this one or one before). "It" is the one address that
    sentence said, or the one that "did" send or receive there; with more, it is left unread
    (declined). Outside rounds 36 (T12) and 39 (B12) declined them."""

    def expand(m: re.Match[str]) -> str:
        said_at = [s.start() for s in re.finditer(r"(?:^|[.?!;]\s)[^.?!;]*\btransfers\b",
                                                  text[: m.start()], re.I)]  # fmt: skip
        sentence = text[said_at[-1] : m.start()] if said_at else ""
        noun = re.search(r"\b(?:usdc\s+)?transfers\b", sentence, re.I)
        said = {a.lower(): a for a in ADDRESS.findall(sentence)}
        did = {a.lower(): a for d in _DID_SEND.finditer(sentence) for a in ADDRESS.findall(d.group(1))}
        who: str | None = m["who"] or m["by"]
        if who is not None and who.lower() == "it":
            who = next(iter(said.values())) if len(said) == 1 else (
                next(iter(did.values())) if len(did) == 1 else None)
        if noun is None or who is None:
            return m.group(0)
        if m["verb"]:
            return f"how many {noun.group(0)} did {who} {m['verb']}"
        return f"how many {noun.group(0)} {m['be']} {m['done']} by {who}"

    text = _THEY_COUNTED.sub(lambda m: _they_counted(m, text[: m.start()]), text)
    text = _EACH_DID.sub(lambda m: _each_asked(m, f"{m['q']}did {{a}} {m['verb']}"), text)
    text = _ELIDED_COUNT.sub(expand, text)
    return _IT_COUNTED.sub(lambda m: m["q"] + (_nearest_holder(text[: m.start()]) or "it"), text)


#: "What are the USDC balances of 0xA and 0xB? How many transfers did each send?": "each",
#: "both", "they" are the nearest sentence's addresses (``_they_counted``; outside round 60).
_THEY_COUNTED = _p(r"(?P<q>" + _HOW_MANY_TRANSFERS + r"did\s+)(?:each|both|they)(?:\s+of\s+them)?(?=\s+(?:ever\s+)?"
                   r"(?:send|receive|make|get)\b)")
#: "What is the USDC balance of 0xA, and how many transfers did it receive?": "it" is the
#: one address said before it (``_nearest_holder``; outside round 56, Q56, declined it).
_IT_COUNTED = _p(r"(?P<q>" + _HOW_MANY_TRANSFERS + r"(?:did|has|have)\s+)it(?=\s+(?:ever\s+)?(?:send|sent|"
                 r"receive|received|make|made|get|got)\b)")


#: "How much USDC has 0xA received, and how much has it sent?": the same asset's total; "For
#: 0xA and 0xB, how much USDC did each send and how much did each receive?" (outside round
#: 60, A2, declined the second) asks each one's.
_ELIDED_AMOUNT = _p(r"\bhow\s+much\s+(?P<usdc>usdc\s+)?(?P<aux>has|have|did)\s+(?P<who>it|each|0x[0-9a-fA-F]{40}(?![0-9a-fA-F]))\s+"
                    r"(?P<verb>sent|send|received|receive|got|gotten|get)\b")


#: "the payments from 0xA", "how many payments did 0xA make": USDC transfers, in a task that
#: orders nothing ("a payment of 1 USDC to 0xA" is an order's, and left as it is).
_PAYMENT_WORD = _p(r"\b(?:usdc\s+)?payment(s?)\b(?!\s+of\s+\$?\d)")


def _payments(text: str) -> str:
    """Payments asked about (never ordered) said as the USDC transfers they are on chain
    (outside rounds declined "payments" by name)."""
    if _SEND.search(text) or re.search(r"\bpay\b", text, re.I):
        return text
    return _PAYMENT_WORD.sub(lambda m: "USDC transfer" + m.group(1), text)


#: Common misspellings of the words the planner reads (outside rounds declined "ballance",
#: "recieve"), spelled right before anything is read.
_SPELLINGS = {"ballance": "balance", "ballances": "balances", "blance": "balance",
              "recieve": "receive", "recieved": "received", "recieves": "receives",
              "transfered": "transferred", "tranfers": "transfers", "trasnfers": "transfers",
              "adress": "address", "addres": "address", "transacton": "transaction",
              "transcation": "transaction", "succesful": "successful", "sucessful": "successful",
              "succeded": "succeeded", "sucess": "success", "higest": "highest", "largets": "largest",
              "balanse": "balance", "balence": "balance", "rite": "right", "teh": "the",
              "txn": "tx", "txns": "txs", "bal": "balance", "bals": "balances", "blk": "block",
              "blks": "blocks", "recvd": "received", "recv'd": "received", "rcvd": "received",
              "limt": "limit", "trnasfer": "transfer", "trnasfers": "transfers", "wat": "what",
              "amt": "amount"}
_MISSPELT = _p(r"\b(?:" + "|".join(_SPELLINGS) + r")\b")


#: A hash named as one ("the tx with hash 0x<hash>", "transaction hash 0x<hash>", "the hash
#: 0x<hash>", "the other one, 0x<hash>": outside round 56, Q6): the transaction itself, as
#: "transaction 0x<hash>" names it.
_NAMED_HASH = _p(r"\b(?:(?:transaction|tx)\s+(?:with\s+(?:the\s+)?)?|(?:with\s+)?(?:the\s+)?)hash\s*(?::\s*)?"
                 r"(?=0x[0-9a-fA-F]{64}(?![0-9a-fA-F]))")


#: "How much gas did block 4 use, and how much did 0x<hash> use?": gas, said before it in the
#: task, is what the transaction used (outside round 56, Q57, declined it); with no gas said
#: before, "how much did 0x<hash> use" stays unread (a fee or gas).
_ELIDED_GAS = _p(r"\bhow\s+much\s+(?P<aux>did|does)\s+(?P<tx>(?:(?:the\s+)?(?:transaction|tx)\s+)?"
                 r"0x[0-9a-fA-F]{64}(?![0-9a-fA-F]))\s+(?P<verb>use|consume)\b")


#: "right now", "at the moment", "at present": now, the head (outside round 59: "the gas
#: price right now" beside "block 4" lost its "now" with the tone words, and was declined).
_NOW_SAID = _p(r"\b(?:right\s+now|at\s+the\s+moment|at\s+present|currently)\b")
#: "How much USDC has 0xA received and sent?": two questions, one per verb (the second verb
#: was dropped at exit 0, found beside outside round 59's "respectively").
_VERB_PAIR = _p(r"(?P<q>(?:\bhow\s+much\s+usdc\s+|" + _HOW_MANY_TRANSFERS + r")(?:has|have|did)\s+"
                r"(?:0x[0-9a-fA-F]{40}(?![0-9a-fA-F])|it))\s+(?P<v1>sent|send|received|receive|got|get)"
                r"\s*,?\s*(?:and|&|or)\s+(?P<v2>sent|send|received|receive|got|get)\b")
#: "... of 0xA, 0xB and 0xC respectively": the list says each already; the word asks nothing.
_RESPECTIVELY = _p(r"\s*,?\s*\brespectively\b")


#: "how many USDC transfers has 0xA ever received": "ever" is the whole chain, a count's
#: default; read, it made the phrase "usdc … ever received" a received total (round 59).
_EVER_COUNTED = _p(r"(" + _HOW_MANY_TRANSFERS + r"(?:has|have|did)\s+\S+)\s+ever\b")


def _gas_of_a_transaction(text: str) -> str:
    """ "the gas price of 0x<hash>" as what it paid, and "how much did 0x<hash> use" as its
    gas used when gas was said before it."""
    text = _GAS_PRICE_OF_TX.sub(r"gas price \g<tx> paid", text)
    return _ELIDED_GAS.sub(lambda m: f"how much gas {m['aux']} {m['tx']} {m['verb']}" if re.search(
        r"\bgas\b", text[: m.start()], re.I) else m.group(0), text)


#: "the other one, 0x..": the transaction or the address itself, also between commas ("how
#: much gas did the other one, 0x<hash>, use"; outside rounds 56 to 58 split or declined it).
_OTHER_ONE = _p(r"\b(?:the\s+)?other\s+(?:one|transaction|tx|address|account|wallet)\s*[,:]?\s*"
                r"(?P<x>0x(?:[0-9a-fA-F]{64}|[0-9a-fA-F]{40}))(?![0-9a-fA-F])(?P<comma>\s*,(?=\s*[a-z]))?")


def _the_other_one(m: re.Match[str]) -> str:
    return ("transaction " if len(m["x"]) == 66 else "") + m["x"] + (" " if m["comma"] else "")


#: "the gas price of (the transaction) 0x<hash>": what it paid (outside round 57, Q32,
#: declined it as an account's price), as "what gas price did 0x<hash> pay" is read.
_GAS_PRICE_OF_TX = _p(r"\bgas\s+price\s+(?:of|for|in)\s+(?:(?:the\s+)?(?:transaction|tx)\s+)?"
                      r"(?P<tx>0x[0-9a-fA-F]{64})(?![0-9a-fA-F])")


#: A block's gas used or transaction count tested with a verb between the block and the
#: threshold ("did block 1 use at least 1842180 gas", "does block 6 contain at least 2
#: transactions": outside round 50, declined; "did 0x<hash> use more than 50000 gas", round
#: 51): the fact said as a noun, then its test. Only a threshold with its number: "did block
#: 4 use more gas than block 5" stays unread.
_VERB_TEST = _p(rf"\b(?P<who>block\s+(?:\d+|latest-\d+)|(?:the\s+)?(?:latest|current|newest)\s+"
                rf"block|(?:(?:the\s+)?(?:transaction|tx)\s+)?0x[0-9a-fA-F]{{64}}(?![0-9a-fA-F]))\s+"
                rf"(?:(?:uses|used|use|consumed|consumes|consume)\s+(?P<gas>(?:{OP_WORDS})\s*\d+)\s*gas\b|(?:contains|contained|contain|have|has|had|includes|included|"
                rf"include)\s+(?P<txs>(?:{OP_WORDS})\s*\d+)\s*(?:transactions|txs)\b)")


#: "Were there more than 2 transactions in block 4?" (outside round 60 declined it): the
#: block's transaction count tested, as "Does block 4 contain more than 2 transactions?".
_THERE_TEST = _p(rf"\b(?:were|are|was|is)\s+there\s+(?P<txs>(?:{OP_WORDS})\s*\d+)\s*(?:transactions|txs)\s+"
                 rf"in\s+(?P<who>block\s+(?:\d+|latest-\d+)|(?:the\s+)?(?:latest|current|newest)\s+block)\b")


def _verb_test(m: re.Match[str]) -> str:
    fact = "gas used" if m["gas"] else "transaction count"
    who = re.sub(r"\A(?:the\s+)?(?:transaction|tx)\s+", "", m["who"], flags=re.I)  # its hash
    return f"the {fact} of {who} {m['gas'] or m['txs']}"


#: "by how much do they differ" (outside round 50 declined "they"): their difference.
_DIFFER = _p(r"\b(?:by\s+)?how\s+much\s+(?:do|does|did)\s+(?:they|these|those|the\s+two|both)\s+"
             r"differ(?:\s+by)?\b|\b(?:what(?:['’]s|\s+is|\s+was)\s+)?the\s+difference\s+between\s+"
             r"(?:them|these|those|the\s+two|both)\b")


#: A total sent or received tested against a number ("Has 0xA sent more than 10 USDC?",
#: "Did 0xA receive at least 1 USDC from 0xB?": outside round 51 declined them); never a
#: count of transfers ("did 0xA send more than 3 USDC transfers").
_TOTAL_TEST = _p(rf"\b(?:has|have|did)\s+(?P<who>0x[0-9a-fA-F]{{40}}|it)\s+(?:in\s+total\s+)?"
                 rf"(?P<way>sent|send|spent|spend|received|receive|got|gotten|get)\s+(?:in\s+total\s+)?"
                 rf"(?P<test>(?:{OP_WORDS})\s*\d+(?:\.\d+)?\s*usdc)\b(?!\s*(?:transfers?|payments?)\b)")


def _total_test(m: re.Match[str]) -> str:
    """The total ``_TOTAL_TEST`` matched, said as a total; "it" is ``_nearest_holder``
    ("What is the balance of 0xA, and has it received more than 2 USDC?"), else unread."""
    way = "sent" if m["way"].lower() in ("sent", "send", "spent", "spend") else "received"
    who = m["who"] if m["who"].lower() != "it" else _nearest_holder(m.string[: m.start()])
    return f"is the total USDC {way} by {who} {m['test']}" if who else m.group(0)


#: Two addresses with "between": outside round 53 (Q50) listed every transfer of each for
#: "the transfers between 0xA and 0xB", at exit 0, and "how much USDC moved between 0xA and
#: 0xB" read their balances. A list of them is the transfers each way; anything else
#: between two addresses is declined by its words (``_scope_of``).
_BETWEEN_TWO = _p(r"\bbetween\s+(?P<a>0x[0-9a-fA-F]{40})\s+and\s+(?P<b>0x[0-9a-fA-F]{40})(?![0-9a-fA-F])")
_LIST_BETWEEN = _p(r"(?P<ask>\b(?:show|list|give|display|print|which|what)\b[^.?!;]*?\btransfers)\s+"
                   + _BETWEEN_TWO.pattern.removeprefix(r"\b"))


def _between_two(text: str) -> str:
    return _LIST_BETWEEN.sub(lambda m: f"{m['ask']} from {m['a']} to {m['b']} and the USDC "
                             f"transfers from {m['b']} to {m['a']}", text)


#: A fact "at the head" is the latest block's (outside round 53, Q05: "the gas limit at
#: block 5, and at the head" gave the head's block number, at exit 0); "what is the head"
#: stays the block number.
_AT_HEAD = _p(r"\b(at|of|for|in|on)\s+the\s+(?:chain(?:['’]s)?\s+)?(?:head|tip)(?:\s+block)?\b")


#: A threshold in cents ("is it more than 900 cents?", outside round 51 declined "cents"):
#: the same amount in USDC, exactly.
_CENTS_TEST = _p(rf"(?P<op>{OP_WORDS})\s*(?P<n>\d+(?:\.\d+)?)\s*cents\b")


#: "txs in latest block?", "transactions in block 4?": a sentence that opens with the noun
#: and "in" asks how many (outside round 60, N2, declined "txs"); "list the transactions in
#: block 4" asks a list nib does not read, and stays unread.
_TERSE_TX_COUNT = _p(r"(?:\A|(?<=[.?!]\s))\s*(?:txs|transactions)\s+(?=in\b)")


#: "For block 3, block 4 and block 5, give the transaction count and the base fee of each.":
#: the question asked of the list, as "... of block 3, block 4 and block 5" reads it
#: (outside round 60, A8, read block 3's alone and named the others as asking nothing).
_BLOCKS_FRAME = _p(r"\bfor\s+(?:each\s+of\s+)?(?P<blocks>blocks?\s+\d+(?:\s*,\s*(?:block\s+)?\d+)*\s*,?\s*(?:and|&)\s+"
                   r"(?:block\s+)?\d+)\s*[,:]\s*(?P<q>[^.?!;]+?)(?:\s+(?:of|for|in|at)\s+each(?:\s+of\s+them)?|"
                   r"\s+each)?(?=\s*(?:[.?!;]|\Z))")


#: "Go ahead and send ...": the order itself (outside round 62, P10, declined "go ahead").
_GO_AHEAD = _p(r"\bgo\s+ahead\s+and\s+(?=(?:send|transfer|pay|give)\b)")


def _said_plainly(text: str) -> str:
    """Misspellings mended; a transaction or an address named in other words ("the other
    one, 0x..", "the tx with hash 0x..") as itself; "right now" as now; "txs in block 4?" as
    how many; "respectively" and a
    count's "ever" taken out; two verbs of one question ("received and sent") as two
    questions; a transaction's gas said plainly (``_gas_of_a_transaction``); a block's or a
    transaction's fact tested with a verb said as a noun (``_VERB_TEST``), a total tested
    with its verb said as the total (``_TOTAL_TEST``), a threshold in cents said in USDC, "at
    the head" as the latest block, "how much do they differ" as "by how much", and a list
    between two addresses each way."""
    text = _OTHER_ONE.sub(_the_other_one, _MISSPELT.sub(lambda m: _SPELLINGS[m.group(0).lower()], text))
    text = _NAMED_HASH.sub("transaction ", _NOW_SAID.sub("now", _RESPECTIVELY.sub("", text)))
    text = _TERSE_TX_COUNT.sub("how many transactions ", _GO_AHEAD.sub("", text))
    text = _BLOCKS_FRAME.sub(lambda m: f"{m['q']} of {m['blocks']}", text)
    text = _VERB_PAIR.sub(lambda m: f"{m['q']} {m['v1']} and {m['q']} {m['v2']}", _EVER_COUNTED.sub(r"\1", text))
    text = _gas_of_a_transaction(text)
    text = _THERE_TEST.sub(lambda m: f"is the transaction count of {m['who']} {m['txs']}", text)
    text = _TOTAL_TEST.sub(_total_test, _VERB_TEST.sub(_verb_test, text))
    text = _CENTS_TEST.sub(lambda m: f"{m['op']} {Decimal(m['n']).scaleb(-2):f} usdc", text)
    return _between_two(_DIFFER.sub("by how much", _AT_HEAD.sub(r"\1 the latest block", text)))


#: Transfers named first, then asked to be shown ("the USDC transfers ...: show me them").
_FRONTED_LIST = _p(r"(?:\A|(?<=[.?!]\s))\s*(?:only\s+)?(?P<np>\b(?:the\s+)?(?:usdc\s+)?transfers\b[^:;,?.!]*)[:,;]\s*"
                   r"(?:please\s+)?(?:show|list|give|display)\s+(?:me\s+)?(?:them|those|these)\b")


def _since_then(text: str) -> str:
    """ "... received since block 6, and how much has it sent since then?": the block the
    task last said a window starts at (outside round 45, B7, declined "since"); with none
    said, left unread (declined)."""

    def expand(m: re.Match[str]) -> str:
        said = re.findall(r"\b(?:since|from|after|starting\s+at)\s+block\s+(\d+)\b", text[: m.start()], re.I)
        return f"since block {said[-1]}" if said else m.group(0)

    return re.sub(r"\bsince\s+then\b", expand, text, flags=re.I)


#: "... And what is the ETH balance of the same address?": the one address said before it.
_SAME_ADDRESS = _p(r"\b(?:the\s+same|that|this)\s+(?:address|account|wallet|holder)\b")


def _same_address(text: str) -> str:
    """ "the same address", "that account": the one address the task said before it (outside
    round 44, R13, declined it); with none or several said, left unread (declined)."""

    def expand(m: re.Match[str]) -> str:
        said = {a.lower(): a for a in ADDRESS.findall(text[: m.start()])}
        return next(iter(said.values())) if len(said) == 1 else m.group(0)

    return _SAME_ADDRESS.sub(expand, text)


#: "How much USDC did 0xA and 0xB (each) receive?": one total each (the first was read as
#: 0xA's balance, outside-found).
#: A list of two or more addresses ("0xA and 0xB", "each of 0xA, 0xB and 0xC"), whole.
_ADDRESS_LIST = (r"(?:each\s+of\s+|all\s+of\s+|both\s+)?(?P<list>0x[0-9a-fA-F]{40}(?:\s*,\s*0x[0-9a-fA-F]{40})*\s*,?\s*(?:and|&)\s+"
                 r"0x[0-9a-fA-F]{40})(?![0-9a-fA-F])")
_EACH_AMOUNT = _p(r"(?P<q>\bhow\s+much\s+usdc\s+)(?P<aux>did|have|has)\s+" + _ADDRESS_LIST + r"\s+"
                  r"(?:each\s+|both\s+|all\s+)?(?P<verb>sent|send|received|receive|got|gotten|get)\b")


def _each_asked(m: re.Match[str], ask: str) -> str:
    """The question ``ask`` (with ``{a}`` for the address) once per address of ``m``'s list
    (outside round 59: "How much USDC have 0xA, 0xB and 0xC each sent?" read three balances
    at exit 0; only a list of two was read)."""
    return " and ".join(ask.format(a=a) for a in ADDRESS.findall(m["list"]))


def _nearest_holders(before: str) -> list[str]:
    """The addresses of the nearest sentence (this one, or one before) naming any, in order."""
    for sentence in reversed(re.split(r"(?<=[.?!;])\s+", before)):
        said = {a.lower(): a for a in ADDRESS.findall(sentence)}
        if said:
            return list(said.values())
    return []


def _nearest_holder(before: str) -> str | None:
    """What "it" is as a holder: the one address of the nearest sentence naming any; None
    when that sentence names several, or none is said."""
    said = _nearest_holders(before)
    return said[0] if len(said) == 1 else None


def _they_counted(m: re.Match[str], before: str) -> str:
    """ "... how many transfers did each send": the list of the nearest sentence naming two
    or more addresses, each asked (``_EACH_DID``); else as said (declined)."""
    said = _nearest_holders(before)
    if len(said) < 2:
        return m.group(0)
    return f"{m['q']}{', '.join(said[:-1])} and {said[-1]} each"


def _elided_amount(text: str) -> str:
    """ "How much USDC has 0xA received in total, and how much has it sent?": the second
    total is of USDC too when USDC is the last asset said before it, and "it" is the one
    address of the nearest sentence naming any (outside round 44, B6, dropped it at exit
    0; round 47, C16, declined it after a sentence of two addresses); else left unread
    (declined)."""

    def expand(m: re.Match[str]) -> str:
        before = text[: m.start()]
        assets = re.findall(r"\b(usdc|eth|ether)\b", before, re.I)
        who = m["who"] if m["who"].lower() != "it" else _nearest_holder(before)  # "each": as said
        if who is None or not m["usdc"] and (not assets or assets[-1].lower() != "usdc"):
            return m.group(0)  # "how much usdc has it sent": USDC said (outside round 54)
        return f"how much USDC {m['aux']} {who} {m['verb']}"

    text = _EACH_AMOUNT.sub(lambda m: _each_asked(m, f"{m['q']}{m['aux']} {{a}} {m['verb']}"), text)
    return _ELIDED_AMOUNT.sub(expand, text)


#: "How many USDC transfers did 0xA and 0xB (each) send?": one count each.
_EACH_DID = _p(r"(?P<q>" + _HOW_MANY_TRANSFERS + r")did\s+" + _ADDRESS_LIST +
               r"\s+(?:each\s+|both\s+|all\s+)?(?P<verb>send|receive|make|get)\b")


#: "Did 0xA send any USDC (to 0xB)?", "Has 0xA received USDC since block 2?", "Did 0xA pay
#: 0xB?": a yes or no answered by the transfers themselves (none, or each one), asked as
#: "did 0xA send any USDC transfers (to 0xB)". Only USDC, transfers or payments are read so:
#: "what did 0xA send" may ask ETH too, which the planner does not read.
_DID_ANY = _p(r"\b(?P<aux>did|has|have)\s+(?P<who>" + _HOLDERS + r")\s+(?:ever\s+)?(?P<each>(?:each|both)\s+)?"
              r"(?P<verb>send|sent|receive|received|get|got|gotten|make|made)\s+(?:any\s+)?"
              r"(?:usdc\s+)?(?:transfers?|payments?|usdc)\b")
_DID_PAY = _p(r"\b(?P<aux>did|has|have)\s+(?P<who>" + _HOLDERS + r")\s+(?:pay|paid)\s+"
              r"(?P<to>0x[0-9a-fA-F]{40})(?:\s+any)?(?:\s+usdc)?\b")


#: "the USDC transfers (that) 0xA and 0xB sent / received": from (to) each, said so.
_THEY_DID = _p(r"\b(?P<n>(?:usdc\s+)?transfers|ones)\s+(?:that\s+|which\s+)?(?P<who>0x[0-9a-fA-F]{40}"
               r"(?:\s*,?\s*(?:and|or|&)\s*0x[0-9a-fA-F]{40})+)\s+(?:each\s+|both\s+)?"
               r"(?:has\s+|have\s+|had\s+)?(?P<verb>received|got|gotten|sent|made|paid)\b")


def _any_transfers(text: str) -> str:
    """The yes-or-no transfer questions said as the transfers they ask (see _DID_ANY), and
    the transfers a list of holders "sent" or "received" as from or to each of them
    (outside-found: read as each one's transfers either way, at exit 0)."""
    text = _THEY_DID.sub(lambda m: f"{m['n']} {'to' if m['verb'].lower() in _RECEIVING else 'from'} "
                         f"{m['who']}", text)
    text = _DID_ANY.sub(lambda m: f"{m['aux']} {m['who']} {m['each'] or ''}{m['verb']} any USDC "
                        "transfers", text)
    return _DID_PAY.sub(lambda m: f"{m['aux']} {m['who']} "
                        f"{'send' if m['aux'].lower() == 'did' else 'sent'} any USDC transfers "
                        f"to {m['to']}", text)


def _normalize(task: str) -> tuple[str, list[tuple[int, str]]]:
    """Spellings of one parameter made one ("block #5" -> "block 5", "the previous block"
    -> "block latest-1"), and presentation phrases ("expressed in gwei") taken out: (the
    text, the units and formats they named)."""
    text = re.sub(r"\bblock\s+(?:number\s+|#\s*|no\.?\s*)(\d+)", r"block \1", task, flags=re.I)
    text = normalize_thresholds(text)  # "10 USDC or more" -> "at least 10 USDC"
    text = _versus(text)
    text = spell_out_orders(text)  # "send 0.01 USDC to 0xA and 0.02 USDC to 0xB": two orders
    text = _GENESIS.sub("block 0", text)
    # "my wallet's USDC balance": the agent's wallet, as "my wallet USDC balance" reads it.
    text = re.sub(r"\b((?:my|our)\s+(?:own\s+)?(?:wallet|account|address))['’]s\b", r"\1", text,
                  flags=re.I)  # fmt: skip
    text = _IN_OUT.sub(lambda m: f"{m.group(2)}transfers "
                       f"{'to' if m.group(1).lower() in ('incoming', 'inbound') else 'from'} ", text)
    text = _said_plainly(text)
    # "Only the USDC transfers sent from 0xA in the last 10 blocks: show me them.": the
    # transfers named first, listed (outside round 49, Q15, gave their count at exit 0).
    text = _FRONTED_LIST.sub(lambda m: f"show me {m['np'].strip()}", text)
    # "How many USDC transfers in the last 10?": blocks, the only span counted back (the
    # window was dropped: the whole chain's count was given, at exit 0; outside round 48).
    text = re.sub(r"\b((?:last|past|previous|latest)\s+\d+)(?!\s*\w)(?![\d.])", r"\1 blocks", text, flags=re.I)
    text = _elided_amount(_elided_transfers(_any_transfers(_same_address(_since_then(_payments(text))))))
    # "transferred in the last 20 blocks" is a window, not the received total "transferred
    # in": the window's "in" is no direction, so "transferred" is left for the reading.
    text = _IN_WINDOW.sub(r"\1 over ", text)
    for regex, rewrite in _RELATIVE:
        text = regex.sub(rewrite, text)
    for regex, range_rewrite in _RANGES:
        text = regex.sub(range_rewrite, text)
    text = _DESCRIBED_SELLER.sub(_url_names_the_seller, text)
    # "the local (x402) paywall" is the paywall: a seller, named as such; "local" asks
    # nothing, and "x402" there is no protocol's name.
    text = re.sub(r"\b(?:local\s+)?(?:x402\s+)?(?=paywall\b)", "", text, flags=re.I)
    text = re.sub(r"\bx402\s+(?=(?:data\s+)?(?:market|marketplace|sellers?)\b)", "", text, flags=re.I)
    # "via the marketplace", "one of the market's sellers": where to buy, said otherwise.
    text = re.sub(r"\b(?:via|through)\s+(?=(?:the\s+|a\s+)?(?:data\s+)?market)", "from ", text,
                  flags=re.I)  # fmt: skip
    text = re.sub(r"\b(market(?:place)?)['’]s\b", r"\1", text, flags=re.I)
    # "the timestamps of blocks 5 and 9": one block reference each ("block 5 and block 9").
    text = _BLOCK_LIST.sub(lambda m: " and ".join(
        f"block {b}" for b in re.findall(r"\d+|latest-\d+", m.group(0))), text)
    # "how much USDC and ETH does 0xA hold", "the USDC and ETH balances of 0xA": one
    # balance each (outside round 20: the second asset was read as a unit, and dropped).
    text = _ASSET_PAIR_AMOUNT.sub(r"\g<q> \g<a> and \g<q> \g<b>", text)
    text = _ASSET_PAIR_BALANCES.sub(r"\g<a> balance and the \g<b> balance", text)
    text = _ASSET_OF_HOLDER.sub(r"\g<w> \g<a> held by ", text)
    text = _THEIR_ASSET.sub(r"\g<p> \g<a> balance", text)
    # "Tell me when 0x<hash> was mined": the time asked, never a condition ("... when").
    text = _ASKS_WHEN.sub(r"\1 what time", text)
    # "the same block's base fee" after a transaction: that block (its block, below).
    text = re.sub(r"\bthe\s+same\s+block\b", "that block", text, flags=re.I)
    # "... in that range": the blocks said before it ("that" refers back).
    text = re.sub(r"\b(?:in|over|across|within)\s+(?:that|this|the\s+same)\s+(?:block\s+)?"
                  r"(?:range|window|span|interval|stretch)\b", "in that", text, flags=re.I)
    # "What block and time was 0x<hash> mined at?": its block, and when.
    text = _BLOCK_AND_TIME.sub(r"\g<w> block \g<v> \g<x> \g<m> in, and when", text)
    units: list[str] = []

    def unit_first(m: re.Match[str]) -> str:  # "how many cents of USDC": "how much USDC" in cents
        unit = m["unit"].lower().split()[-1].replace("units", "atomic")
        units.append(unit)
        if m["be"] and not m["asset"]:  # "how many wei is the base fee": what is it, in wei
            return f" what {chr(_MARK + len(units) - 1)} "
        asset = (m["asset"] or UNIT_ASSETS[unit]).lower()
        return f" how much {asset} {chr(_MARK + len(units) - 1)} "

    text = UNIT_FIRST.sub(unit_first, text)
    for shape, unit in PRESENTATION:

        def mark(m: re.Match[str], unit: str = unit) -> str:
            named = m.expand(unit).lower() if unit else ""
            if not named:
                return " "
            units.append(named)  # where it was said: a marker, read off below
            return f" {chr(_MARK + len(units) - 1)} "

        text = re.sub(shape, mark, text, flags=re.I)
    return _unmark(text, units)


#: Presentation phrases are replaced by one private-use character each while the task is
#: normalized, so the place each unit was said in is known (a unit belongs to its part).
_MARK = 0xE000


def _unmark(text: str, units: list[str]) -> tuple[str, list[tuple[int, str]]]:
    """``text`` with its unit markers taken out and spaces collapsed, and each unit with
    its place in that text, in the order said."""
    out: list[str] = []
    at: list[tuple[int, str]] = []
    for ch in text.strip():
        code = ord(ch)
        if _MARK <= code < _MARK + len(units):
            at.append((len("".join(out)), units[code - _MARK]))
            ch = " "
        if ch.isspace():
            if out and out[-1] != " ":
                out.append(" ")
            continue
        out.append(ch)
    joined = "".join(out).rstrip()
    return joined, [(min(pos, len(joined)), unit) for pos, unit in at]


@dataclass
class _Part:
    """One clause of the task, with what was read from it."""

    text: str
    start: int
    sentence: int
    condition: bool = False
    hits: list[tuple[int, FactPattern, str]] = field(default_factory=list)
    subjects: list[str] = field(default_factory=list)
    #: Where it names the agent's own wallet as a holder (``_OWN_WALLET``).
    mine: list[int] = field(default_factory=list)
    leftover: set[str] = field(default_factory=set)
    modifier: str | None = None
    #: The words left once its phrases and parameters are taken out, and the questions
    #: no fact kind holds it names (read again when an aggregate joins it).
    rest: str = ""
    other: set[str] = field(default_factory=set)
    #: An aggregate over several addresses' values it may ask, and the one it asks.
    candidate: _Aggregate | None = None
    aggregate: _Aggregate | None = None
    #: A part asking the fact of the part before it again at another block ("the base fee
    #: at block 3, and at block 12", "... and what was it at block 5?"): no block of the
    #: sentence's other parts.
    again: bool = False
    #: A question of its own naming addresses but no fact ("..., and how much does 0xC
    #: hold?"): it asks the facts of the part before it for its own addresses. ``alone``:
    #: its addresses belong to no part with a fact, and it is named as not read.
    borrow: bool = False
    alone: bool = False
    #: Where a borrowing part's question ends (its list tails joined): its aggregate's text.
    until: int = 0
    #: An aside in brackets (``_ASIDE``): a scope word in it ("(I'll pay 0x.. next week)")
    #: is its own, never its sentence's.
    aside: bool = False
    #: Only names the block of a transaction for the block facts of its sentence ("For
    #: the block where 0x<hash> was included, what were ..."): nothing of its own to read.
    frame: bool = False


#: "0x<hash> and 0x<hash>", "0x<hash>, 0x<hash>": a list of transactions, one subject of
#: one question, never two parts (outside round 28: "Did 0xA and 0xB succeed?" read 0xB's
#: status alone and declined "Did 0xA").
_HASH_BEFORE = re.compile(r"(?<![0-9a-fA-Fx])0x[0-9a-fA-F]{64}\s*\Z")
_HASH_AFTER = re.compile(r"\s*(?:(?:the\s+)?(?:transaction|tx)\s+)?0x[0-9a-fA-F]{64}(?![0-9a-fA-F])", re.I)


def _joins_hashes(task: str, m: re.Match[str]) -> bool:
    return (m.group(0).strip(" ,").lower() in ("", "and")
            and _HASH_BEFORE.search(task, 0, m.start()) is not None
            and _HASH_AFTER.match(task, m.end()) is not None)  # fmt: skip


#: A dash between two numbers ("blocks 5 - 10"): a range, never the end of a clause.
_NUMBER_RANGE = re.compile(r"(?<![\w.])\d+(?:\.\d+)?\s+[-–—]+\s+\d\Z")


def _parts(task: str) -> list[_Part]:
    parts: list[_Part] = []
    sentence, pos = 0, 0
    pieces = []
    for m in _SPLIT.finditer(task):
        if _joins_hashes(task, m) or _NUMBER_RANGE.search(task, 0, m.end() + 1):
            continue
        pieces.append((task[pos : m.start()], pos, m.group(0)))
        pos = m.end()
    pieces.append((task[pos:], pos, ""))
    for text, start, sep, aside in [a for p in pieces for a in _asides(*p)]:
        for sub, sub_start, cond in _split_conditions(text, start):
            # Its start is its first word's, as its text is stripped; so is a bracket that
            # opens or closes a sentence in brackets ("(gas limit of block 5 and of the
            # latest block)": round 64 read "of the latest block)" as the block number).
            bare = _unpaired(sub)
            if bare.strip():
                parts.append(_Part(bare.strip(), sub_start + len(bare) - len(bare.lstrip()), sentence,
                                   cond, aside=aside))
        if sep.strip() and sep.strip()[0] in "?;!.":
            sentence += 1
    return parts


#: An aside in brackets ending or opening a clause, with a clause of its own ("... of 0xA (I might
#: send 0.1 USDC to 0x.. later)?", "(we paid it yesterday)"): a part of its own, never words
#: of the question before it (outside rounds 62 and 63 lost the balance asked before such
#: an aside). One inside a clause leaves the clause declined whole: it splits its words.
_ASIDE_BODY = (r"\((?=[^()]*\b(?:i|we|you|he|she|they|someone|somebody|send|sent|pay|paid|"
               r"transfer(?:red)?|tip)\b)[^()]*\)")
_ASIDE = _p(rf"^\s*{_ASIDE_BODY}|\s*{_ASIDE_BODY}\s*\Z")


def _unpaired(text: str) -> str:
    """``text`` with a bracket at its edge whose pair is in another part blanked out."""
    bare = text.strip()
    if bare.startswith("(") and text.count("(") > text.count(")"):
        text = text.replace("(", " ", 1)
    if bare.endswith(")") and text.count(")") > text.count("("):
        cut = text.rindex(")")
        text = text[:cut] + " " + text[cut + 1 :]
    return text


def _asides(text: str, start: int, sep: str) -> list[tuple[str, int, str, bool]]:
    """``text`` (at ``start``, ended by ``sep``) with each aside (``_ASIDE``) a piece of its
    own, in the same sentence: (piece, offset, separator, is an aside)."""
    out, pos = [], 0
    for m in _ASIDE.finditer(text):
        out.append((text[pos : m.start()], start + pos, "", False))
        inner = m.group(0).strip()[1:-1]
        out.append((inner, start + m.end() - 1 - len(inner), "", True))
        pos = m.end()
    out.append((text[pos:], start + pos, sep, False))
    return out


def _split_conditions(text: str, start: int) -> list[tuple[str, int, bool]]:
    """``text`` split before "if"/"when"/"until": (piece, offset, is a condition)."""
    out: list[tuple[str, int, bool]] = []
    pos, cond = 0, False
    for m in _CONNECTOR.finditer(text):
        word = m.group(1).lower()
        if m.start() == 0 and word in ("whenever", "until"):
            continue  # a standing watch, declined by its scope word
        if m.start() == 0 and word == "when" and not _CONDITION.search(text):
            continue  # "When was block 2 mined?" asks a time; it is no condition
        out.append((text[pos : m.start()], start + pos, cond))
        pos, cond = m.end(), True
    out.append((text[pos:], start + pos, cond))
    return [o for o in out if o[0].strip()]


def _read_part(part: _Part, has_hash: bool) -> None:
    text = part.text
    claimed: list[tuple[int, int]] = []
    other: set[str] = set()
    for m in _SEND.finditer(text):
        claimed.append(m.span())
    for word, regex in _OTHER_QUESTIONS:
        for m in regex.finditer(text):
            claimed.append(m.span())
            other.add(word)
    other.update(m.group(0) for m in GLUED_NUMBER.finditer(text))  # "more than 2x": unread
    sends = len(claimed)
    if label := _LABELLED.match(text):
        claimed.append(label.span())  # "Step 2: tell me ...": the user's own label
    gaps: list[str] = []
    for fp in FACT_PATTERNS:
        if fp.needs_hash and not has_hash:
            continue
        for m in fp.pattern.finditer(text):
            s, e = m.span()
            if any(s < ce and cs < e for cs, ce in claimed):
                continue
            if fp.kind in BLOCK_KINDS and (TX_HASH.search(m.group(0)) or ADDRESS.search(m.group(0))):
                # "gas used by 0x<hash> in block 5": the gap holds the transaction asked about.
                continue
            if fp.kind == "tx_time" and (_NAMES_A_BLOCK.search(m.group(0)) or not (
                    TX_HASH.search(m.group(0)) or _TX_WORD.search(m.group(0)))):  # fmt: skip
                continue  # "When was block 5 mined?" beside a hash: the block's time
            claimed.append((s, e))
            part.hits.append((s, fp, m.group(0)))
            gaps.extend(_restated(fp.kind, g) for g in m.groups() if g)
    part.hits.sort(key=lambda h: h[0])
    if any(not _names_tx(fp) for _s, fp, _w in part.hits):
        # "the gas used by transaction 0x<hash>": the word names what the hash is; only a
        # part asking nothing else asks its status ("What is transaction 0x<hash>?").
        part.hits = [h for h in part.hits if not _names_tx(h[1])]
    part.subjects = [m.group(0) for m in ADDRESS.finditer(text)]
    part.mine = [part.start + m.start() for m in _OWN_WALLET.finditer(text)][:1]
    # The words in a phrase's gap are the task's own ("who has sent the most USDC" is no
    # "has … usdc" balance): read like the rest, never swallowed by the phrase.
    rest = _blanked(text, claimed) + " " + _blanked(" ".join(gaps), [])
    if part.mine and part.subjects:  # "than mine", "than us": the agent's wallet, a holder
        rest = _OWN_WALLET.sub(" ", rest)
    # An aggregate's words may sit inside a value's phrase ("holds the most USDC" is
    # "holds … usdc"): they are looked for with only the other phrases taken out.
    agg_text = _blanked(text, [(s, s + len(w)) for s, fp, w in part.hits
                               if fp.kind not in _AGGREGATED] + claimed[:sends])  # fmt: skip
    if any(h[1].kind in WINDOW_KINDS for h in part.hits):
        # "in total", "altogether": a total's own scope; "to date", "so far", "ever" beside a
        # count, a list or the largest transfer: the whole chain (outside round 59 declined them).
        rest = _TOTAL_WORDS.sub(" ", rest)
    if (_TO_FROM.search(text) or _DID_SEND.search(text) or _BY_ONE.search(text)
            or _IT_DID.search(text)) and any(
            h[1].kind in ONE_WAY_KINDS for h in part.hits):  # fmt: skip
        rest = _ONE_WAY_VERBS.sub(" ", rest)  # "which transfers went to 0xB": its recipient
    if _names_tx_block(text) and any(h[1].kind in BLOCK_KINDS | {"tx_gas_used"} for h in part.hits):
        rest = _BLOCK_OF_TX_WORDS.sub(" ", rest)  # "the block that included 0x<hash>": which
    part.leftover, part.modifier = _words_left(rest, other)
    if part.hits and all(_names_tx(h[1]) for h in part.hits):
        part.leftover |= _asked_of_tx(text)  # "Which block has transaction 0x<hash>?"
    part.rest, part.other = rest, other
    if not any(h[1].kind in TOTAL_KINDS for h in part.hits):
        found = _aggregate_words(agg_text)
        if found:
            # Taken only over two or more addresses (_Task._settle_aggregates): with one,
            # the part is read as before ("the total number of transfers", "holds more").
            part.candidate = _as_aggregate(found, rest, other)


def _names_tx(fp: FactPattern) -> bool:
    """Whether ``fp`` is the bare word "transaction" ("tx") beside a hash: a status asked only
    when nothing else is (vocabulary.py)."""
    return fp.kind == "tx_status" and fp.needs_hash


#: The words a part naming only a transaction may hold and still ask its status ("What is
#: transaction 0x<hash>?", "Tell me about tx 0x<hash>", "Check transaction 0x<hash>").
_DESCRIBES_TX = frozenset(
    """a about also and can check could describe details find for get give i info information is
    know look me of on please see show tell the this to transaction transactions tx txs up
    want was what what's whats you""".split()
)


def _asked_of_tx(text: str) -> set[str]:
    """The words of a part naming only a transaction that ask something other than its
    status: "Which block has transaction 0x<hash>?", "When did transaction 0x<hash> happen?",
    "How many tokens moved in tx 0x<hash>?" were answered with its status alone, at exit 0;
    they are named as not read."""
    said = ADDRESS.sub(" ", TX_HASH.sub(" ", text)).lower().replace("’", "'")
    return {w for w in _WORD.findall(said) if w not in _DESCRIBES_TX}


def _restated(kind: str, gap: str) -> str:
    """A phrase's gap without the phrases of its own kind ("USDC balance held by": the
    gap's "balance" restates the balance)."""
    for fp in FACT_PATTERNS:
        if fp.kind == kind:
            gap = fp.pattern.sub(" ", gap)
    return gap


def _as_aggregate(found: list[tuple[AggregateOp, str]], rest: str, other: set[str]) -> _Aggregate:
    """The aggregate ``found`` names, with the words of ``rest`` left when it is taken:
    its own words, the addresses it is over ("among"), a count's test ("any") are read."""
    rest = _OVER_WORDS.sub(" ", _AGGREGATE_WORDS.sub(" ", rest))
    if [op for op, _w in found] == ["count"]:
        rest = _COUNT_WORDS.sub(" ", rest)  # "how many of ... hold any USDC": above 0
    left, mod = _words_left(rest, other)
    if len(found) > 1:  # "which holds more in total": two questions, both named
        left |= {w for _op, w in found}
    return _Aggregate(found[0][0], found[0][1], left, mod)


@dataclass(frozen=True)
class _Aggregate:
    """An aggregate a part may ask (the operation and its word), with the part's words
    left over and its modifier when it is taken as one."""

    op: AggregateOp
    word: str
    leftover: frozenset[str] | set[str]
    modifier: str | None


def _words_left(rest: str, other: set[str]) -> tuple[set[str], str | None]:
    """(the words of ``rest`` no table accounts for, the first modifier no kind takes)."""
    mod = _MODIFIER.search(rest)
    symbols, protocols = datasets()
    names = {n.lower() for n in (*symbols, *protocols)}
    left = other | {
        w for w in _WORD.findall(rest.lower().replace("’", "'"))
        if w not in _FILLER and w not in names and len(w) > 1
    }  # fmt: skip
    return left, mod.group(0) if mod else None


def _aggregate_words(text: str) -> list[tuple[AggregateOp, str]]:
    """The aggregates ``text`` names ("combined", "which holds the most", "how many of ...
    hold any"), in the vocabulary's priority order, each with its first word; a threshold
    ("holds more than 10 USDC") compares with a number, so it is none."""
    text = _CONDITION.sub(" ", text)
    found: list[tuple[AggregateOp, str]] = []
    for op, regex in _AGGREGATES:  # priority order: "how much more" is no "more"
        m = regex.search(text)
        if m is not None:
            found.append((op, " ".join(m.group(0).lower().split())))
            text = regex.sub(" ", text)
    return found


def _blanked(text: str, spans: Iterable[tuple[int, int]]) -> str:
    """``text`` with ``spans`` and its parameters (hashes, addresses, URLs, blocks, a
    threshold) taken out: the words left to account for."""
    for s, e in sorted(spans, reverse=True):
        text = text[:s] + " " + text[e:]
    for regex in (TX_HASH, ADDRESS, URL, _RANGE, _WINDOW, _BLOCK, _CONDITION):
        text = regex.sub(" ", text)
    return text


def _block_params(text: str) -> dict[str, str]:
    if m := _RANGE.search(text):
        return {"from_block": m.group(1), "to_block": m.group(2)}
    if m := _WINDOW.search(text):
        return {"blocks": m.group(1)}
    if m := _BLOCK.search(text):
        return {"block": m.group(1)}
    return {}


def _span_text(params: dict[str, str]) -> str:
    if "block" in params:
        return f" at block {params['block']}"
    if "from_block" in params:
        return f" in blocks {params['from_block']} to {params['to_block']}"
    if "blocks" in params:
        return f" in the last {params['blocks']} blocks"
    return ""


_Ref = dict[str, int]
"""Another item of the task, by its place (``{"ref": n}``): a checklist id at the end."""
_Param = str | _Ref | list[_Ref]


class _Draft(TypedDict, total=False):
    """An item while the task is read: its parameters may still refer to other items."""

    text: str
    kind: str | None
    params: Mapping[str, _Param]
    unanswerable: str


class ChecklistRow(TypedDict, total=False):
    """One checklist item as the offline planner replies it (references made ids)."""

    text: str
    kind: str | None
    params: dict[str, str]
    unanswerable: str


class _Builder:
    """Items with local references (``ref``) resolved to checklist ids at the end."""

    def __init__(self) -> None:
        self.items: list[_Draft] = []
        #: Where in the task each fact item was asked (its phrase, address or block): the
        #: unit said nearest after it is its own when two units are asked for one kind.
        self.at: dict[int, int] = {}

    def add(self, item: _Draft) -> int:
        bad = _unusable_address(item)
        if bad is not None:
            # The task's own typo: no tool could read it, so it is declined here in the
            # address rule's words, not proposed until the run stops on skips.
            item = {"text": _clip(item.get("text", "")), "kind": None, "unanswerable": bad}
        key = (item.get("kind"), json.dumps(item.get("params", {}), sort_keys=True))
        for n, old in enumerate(self.items):
            if (
                item.get("kind")
                and (old.get("kind"), json.dumps(old.get("params", {}), sort_keys=True)) == key
            ):
                return n
        self.items.append(item)
        return len(self.items) - 1

    def cannot(self, text: str, reason: str) -> int:
        return self.add({"text": _clip(text), "kind": None, "unanswerable": reason})


#: The item params that hold an address the task wrote.
_ADDRESS_PARAMS = ("address", "counterparty", "token")


def _unusable_address(item: _Draft) -> str | None:
    """Why an address ``item`` asks about cannot be read (a mixed-case address whose
    EIP-55 checksum fails, :func:`agent.tools.address.checked_address`), else None."""
    params = item.get("params") or {}
    for key in _ADDRESS_PARAMS:
        value = params.get(key)
        if isinstance(value, str) and value.startswith("0x"):
            try:
                checked_address(value)
            except ValueError as exc:
                return str(exc)
    return None


def _unread(items: list[_Draft], made: list[int]) -> str | None:
    """Why an aggregate over ``made`` cannot be read: one of its values cannot be."""
    unread = [items[m].get("text", "") for m in made if "unanswerable" in items[m]]
    return f"it needs every value it is read over, and the {unread[0]} cannot be read" if unread else None


def _clip(text: str) -> str:
    return one_line(" ".join(text.split()).strip(" ,.;:"), 120)


def _nearest(found: list[tuple[int, str]], start: int, end: int) -> str | None:
    """The first subject inside or after the phrase, else the last one before it."""
    after = [v for pos, v in found if pos >= start]
    if after:
        return after[0]
    before = [v for pos, v in found if pos < start]
    return before[-1] if before else None


#: A label the user gives its own question or order ("Task:", "Step 2:", "Q3:"), or a note
#: ("Note:", "FYI:"): for the planner only; before an order the judge reads "Note:" as speech.
_LABELLED = re.compile(rf"\s*(?:label\s+)?(?:{LABEL.pattern}|note|fyi|context)\s*:", re.IGNORECASE)


def _not_an_order(task: str, part: _Part, m: re.Match[str]) -> tuple[bool, str]:
    """(a mention, why) the payment ``m`` of ``part`` is made by no one ("" when it is an
    order): a mention, an order whose clause names another recipient or amount or an aside
    (judge.mandates.crowded), or one asked more than once."""
    if mentioned_only(task, part.start + m.start()):
        return True, ("the task mentions this payment without ordering it, so nothing is paid: nib "
                f"pays only what the task orders in its own words ('Send {m.group(1)} USDC to "
                "0x...'), never a payment it asks about, plans or says someone else makes")
    if crowded(task, part.start + m.end()):
        return False, ("the task names another recipient or amount, or an aside, in the clause of "
                "this payment ('or 0x...', 'rather than ...', '(...)'); nib never picks or "
                "guesses: order one payment in its own words")
    if again := _REPEATED.search(part.text):
        return False, (f"the task asks for this payment {again.group(0).lower()!r}, and nib makes an "
                "ordered payment once; order each payment in its own words ('Send ... to "
                "0x..., then send ... to 0x...')")
    return False, ""


def _versus(text: str) -> str:
    """ "gas used by block 6 vs block 5?": both values, as with "and" (outside round 64);
    never in a sentence that pays, which the judge reads as written."""
    text = re.sub(r"\bvs\.(?=\s)", "vs", text, flags=re.I)
    return _by_sentence(text, lambda t: t if _PAY_WORD.search(t)
                        else re.sub(r"\s+(?:vs|versus)\s+", " and ", t, flags=re.I))  # fmt: skip


def _token_of(t: _Task, part: _Part, start: int, end: int) -> str | None:
    """The token address a token fact of ``part`` asks (None: the run's USDC): one the part
    names, never one paid; else, for "... and its decimals", the token the task named
    elsewhere, and for "the token" only an address the task calls a token ("the token at
    0x.."). A part naming USDC asks the run's USDC (outside round 68: "the token" beside a
    bracketed order read the order's recipient)."""
    paid = _not_paid_to(t.task, [(part.start + m.start(), m.group(0)) for m in ADDRESS.finditer(part.text)])
    if paid:
        return paid[0][1]
    if re.search(r"\busdc\b", t.sentence(part.sentence), re.I):
        return None
    found = _not_paid_to(t.task, t.addresses)
    if re.search(r"\bthe\s+token\b", part.text, re.I):
        found = [(pos, a) for pos, a in found
                 if re.search(r"\btoken(?:\s+contract)?(?:\s+(?:at|is|address))?\s*:?\s*\Z", t.task[max(0, pos - 30) : pos], re.I)]  # fmt: skip
    return _nearest(found, start, end)


def _not_paid_to(task: str, found: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """``found`` without the addresses named as a payment's recipient ("send 0.1 USDC to
    0x.."): an account, never the token a part about "the token" means (outside round 62:
    "I'll pay 0.1 USDC to 0xA. What is the ticker symbol of the token?" read 0xA's)."""
    paid = {m.start(2) for m in _SEND.finditer(task)}
    return [(pos, v) for pos, v in found if pos not in paid]


#: A 0x number, whole: an address (40 hex digits) or a transaction hash (64) when complete.
_HEX = re.compile(r"(?<![0-9A-Za-z])0x[0-9a-fA-F]+(?![0-9A-Za-z])")


def _misfit_hex(text: str) -> str | None:
    """Why a part naming a 0x number that is neither an address nor a transaction hash is
    not read (outside round 56: a hash one digit short was declined naming fragments of it
    as words, an address one digit long as "no address"), or None."""
    bad = next((m.group(0) for m in _HEX.finditer(text) if len(m.group(0)) - 2 not in (40, 64)), None)
    if bad is None:
        return None
    shown, n = (bad[:14] + "…" if len(bad) > 14 else bad), len(bad) - 2
    return (f"{shown!r} has {n} hex digit{'s' if n != 1 else ''}; an address has 40 and a "
            "transaction hash 64: copy it whole")


def _scope_of(text: str, network: str) -> str | None:
    """Why ``text`` names a scope the planner cannot honour (a standing or future watch,
    another chain), or None."""
    word = next((w for w, regex in _STANDING if regex.search(text)), None)
    if word:
        return (f"{word!r} asks for a standing or future watch; nib answers once, from the "
                "chain as it is at run start")  # fmt: skip
    word = next((w for w, regex in _CHAINS if regex.search(text)), None)
    if word:
        own = f" ({network})" if network else ""
        return f"{word!r} names another chain; this run reads only its own network{own}"
    if (m := _BETWEEN_TWO.search(text)) and m["a"].lower() != m["b"].lower():  # a list: each way (_between_two)
        return (f"'between {m['a']} and {m['b']}' asks what moved both ways between two "
                "addresses; the offline planner reads transfers one way at a time: ask "
                f"'from {m['a']} to {m['b']}' and 'from {m['b']} to {m['a']}'")
    return None


def _scope_words(task: str, parts: list[_Part], network: str) -> dict[int, str]:
    """Per sentence, the first scope word the planner cannot honour, with why."""
    found: dict[int, str] = {}
    for sentence in sorted({p.sentence for p in parts}):
        mine = [p for p in parts if p.sentence == sentence and not p.aside]
        why = mine and _scope_of(task[mine[0].start : mine[-1].start + len(mine[-1].text)], network)
        if why:
            found[sentence] = why
    return found


#: Fact nouns a word one letter off is read as (a letter dropped, added or changed, or two
#: swapped: "usdc balnce", "transacton"): outside round 64 declined "balnce". Never a word
#: that orders, forbids or conditions a payment, and never an English word of its own.
_SPELLED = ("balance", "balances", "transaction", "transactions", "timestamp", "timestamps",
            "receipt", "receipts", "transfer", "transfers", "decimals", "symbol", "symbols",
            "supply", "latest", "number", "numbers", "status")
_NOT_TYPOS = frozenset({"valance", "valances", "latent", "statue", "statues", "stratus",
                        "supple", "lumber", "lumbers", "numbed"})


@lru_cache(maxsize=1)
def _known_words() -> frozenset[str]:
    """Every word the planner reads ("stats", "decimal"): never respelled as another."""
    texts = [kw.label for kw in KIND_WORDS] + [ph.text for kw in KIND_WORDS for ph in kw.phrases]
    texts += [str(x) for group in (PRESENTATION, STANDING, OTHER_QUESTIONS, TOTAL_WORDS,
                                   OVER_WORDS, OTHER_CHAINS) for x in group]  # fmt: skip
    texts += [w for _op, words in AGGREGATES for w in words]
    return frozenset(re.findall(r"[a-z]+", " ".join(texts).lower())) | _FILLER


def _one_off(word: str, known: str) -> bool:
    """Whether ``word`` is ``known`` with one letter dropped, added or changed, or two
    neighbours swapped."""
    if len(word) == len(known):
        diff = [i for i, (a, b) in enumerate(zip(word, known, strict=True)) if a != b]
        return len(diff) == 1 or (len(diff) == 2 and diff[1] == diff[0] + 1
                                  and word[diff[0]] == known[diff[1]] and word[diff[1]] == known[diff[0]])  # fmt: skip
    short, longer = sorted((word, known), key=len)
    return len(longer) - len(short) == 1 and any(
        longer[:i] + longer[i + 1 :] == short for i in range(len(longer)))  # fmt: skip


def _respelled(task: str) -> str:
    """``task`` with each word one letter off exactly one fact noun (``_SPELLED``) read as it."""

    def fix(m: re.Match[str]) -> str:
        word = m.group(0).lower()
        if word in _SPELLED or word in _NOT_TYPOS or word in _known_words():
            return m.group(0)
        near = [known for known in _SPELLED if _one_off(word, known)]
        return near[0] if len(near) == 1 else m.group(0)

    return re.sub(r"(?<![0-9A-Za-z/.])[A-Za-z]{5,}(?![0-9A-Za-z/])", fix, task)


#: An aside in brackets that only describes what it follows ("0x.. (the test account)",
#: "block 6 (the one with two txs)", "(my friend's wallet)"): it asks nothing, orders
#: nothing and names no value, so it is read as nothing (outside round 65 declined three
#: questions on one). One with a number, an address or hash, a unit, a payment or
#: negation word, a condition or a question word is read as any words are, and so is any
#: aside in a sentence that pays (``_descriptions_blanked``).
_DESCRIPTION = _p(
    r"\s*\((?:the|my|our|his|her|their|a|an|that['’]s|that\s+is|it['’]s|this\s+is|aka)\s+"
    r"(?![^()]*(?:(?<![#\d])\d|\b(?:usdc|eth|ether|g?wei|cents|"
    r"atomic|utc|unix|hex|decimals?|seconds?|minutes?|hours?|days?|send|sent|pay|paid|payments?|"
    r"transfer\w*|order\w*|buy|bought|purchase\w*|"
    r"tip|give|not|no|never|don['’]?t|if|unless|when|until|what|which|how|who|is|are|was|were|"
    r"does|do|did)\b))[^()]{1,60}\)")


#: Where a sentence ends: a stop followed by a space or the end, never a decimal point.
_SENTENCE_END = re.compile(r"[?!;]|\.(?=\s|$)")


def _by_sentence(text: str, rewrite: Callable[[str], str]) -> str:
    """``text`` with ``rewrite`` applied to each sentence (its stop kept)."""
    out, pos = [], 0
    for m in [*_SENTENCE_END.finditer(text), None]:
        end = m.end() if m else len(text)
        out.append(rewrite(text[pos:end]))
        pos = end
    return "".join(out)


def _descriptions_blanked(task: str) -> str:
    """``task`` with each description (``_DESCRIPTION``) blanked, except in a sentence with a
    payment word: "Send 0.1 USDC to 0xA (the compromised one)" stays declined, never paid."""
    return _by_sentence(task, lambda t: t if _PAY_WORD.search(t) else _DESCRIPTION.sub(
        lambda m: " " * len(m.group(0)), t))  # fmt: skip


class _Task:
    """The task's text as read: its parts (clauses) with their fact phrases, the
    subjects and parameters it names, the shopping request and the scope words it holds."""

    def __init__(self, task: str, network: str = "") -> None:
        self.network = network.lower().replace("-", " ").replace("_", " ").strip()
        # Square brackets are brackets ("[plan: pay ... next week] What is ...?", round 66).
        task = _descriptions_blanked(_respelled(task.replace("[", "(").replace("]", ")")))
        if self.network:  # the run's own network named in the task is no scope to decline
            own = compile_phrase(self.network)
            task = re.sub(rf"\b(?:on|in|at)\s+(?:the\s+)?{own.pattern}", " ", task, flags=re.I)
            task = own.sub(" ", task)
        task = _OWN_CHAIN.sub(" ", task)  # "on this chain", "here": the run's own network
        if self.network in LOCAL_NETWORKS:  # "on the local devnet" names the local chain
            task = _LOCAL_CHAIN.sub(" ", task)
        self.task, self.units_at = _normalize(drop_pleasantries(task))
        self.units = [unit for _pos, unit in self.units_at]
        #: The task asks for something sold (a sheet, a seller, a purchase): a fact a free
        #: read also answers may then come from what is bought.
        self.asks_paid = bool(_ASKS_PAID.search(self.task))
        symbols, protocols = datasets()
        self.shopping = read_shopping(self.task, symbols, protocols)
        if self.shopping:  # read as one item; blanked so its words are no other part
            s, e = self.shopping.start, self.shopping.end
            self.task = self.task[:s] + " " * (e - s) + self.task[e:]
        #: The bound the task sets on its spending ("don't spend more than 0.20 USDC"): read,
        #: and blanked (in place: the units' places stand) so its words are no other part.
        self.bound = spend_bound(self.task)
        self.task = blank_spend_bounds(self.task)
        self.addresses = [(m.start(), m.group(0)) for m in ADDRESS.finditer(self.task)]
        self.hashes = [(m.start(), m.group(0)) for m in TX_HASH.finditer(self.task)]
        self.symbols = word_positions(self.task, symbols)
        self.protocols = word_positions(self.task, protocols)
        self.urls = [m.group(0).rstrip(".,;:?") for m in URL.finditer(self.task)]
        # A URL's query is the question the task puts to that seller ("?symbol=USDC"), not
        # a part of its own: blanked before the parts are read (its subject still counts).
        self.parts = _parts(URL.sub(_blank_query, self.task))
        for part in self.parts:
            _read_part(part, bool(self.hashes))
        self._read_bare_facts()
        self._read_block_frames()
        _read_shaping_parts(self)
        self._merge_subject_only_parts()
        _pronoun_holders(self)
        self._settle_aggregates()
        self._continue_conditions()
        self._mark_again()
        self.scope = _scope_words(self.task, self.parts, self.network)

    def sentence(self, n: int) -> str:
        """The text of sentence ``n`` (its parts joined)."""
        return " ".join(p.text for p in self.parts if p.sentence == n)

    def _read_bare_facts(self) -> None:
        """A part of a list that is only a bare noun ("the number" in "the number and the
        timestamp of the latest block") shares its sentence's parameters: "number" or
        "height" of a block is the block number; any other is named as not read."""
        for part in self.parts:
            if part.hits or part.leftover or part.condition or _SEND.search(part.text):
                continue
            bare = [m for m in _BARE_FACT.finditer(part.text)]
            if not bare:
                continue
            sentence = self.sentence(part.sentence)
            about_block = any(
                h[1].kind in BLOCK_KINDS for p in self.parts if p.sentence == part.sentence
                for h in p.hits
            ) or bool(_block_params(sentence))
            m = bare[0]
            if len(bare) == 1 and m.group(1).lower() in ("number", "height") and about_block:
                part.hits.append((m.start(), _BLOCK_NUMBER, m.group(0)))
            else:
                part.leftover.update(b.group(1).lower() for b in bare)

    def _read_block_frames(self) -> None:
        """A part only naming a transaction's block ("For the block where 0x<hash> was
        included", "In the block that 0x<hash> landed in") frames the block facts of its
        sentence, which are that block's (``_transaction_block``): not a question of its own
        (outside round 32 declined it, with the facts read right)."""
        for part in self.parts:
            named = _BLOCK_OF_TX.search(part.text)
            kinds = {h[1].kind for h in part.hits}
            if (named is None or kinds - {"tx_block"} or part.subjects or part.condition
                    or _SEND.search(part.text)):  # fmt: skip
                continue
            if kinds and not _FRAME_START.match(part.text):
                continue  # "Which block contains 0x<hash>, ...": the block is asked
            frame_words = _FRAME_LEADS | {w.lower() for w in re.findall(r"[A-Za-z]+", named.group(0))}
            if part.leftover - frame_words:
                continue
            # Its sentence's block facts ("how much gas was used" of that block is its own).
            if any(h[1].kind in BLOCK_KINDS | {"tx_gas_used"} and not _NOW.search(p.text)
                   for p in self.parts if p.sentence == part.sentence and p is not part
                   for h in p.hits):  # fmt: skip
                part.frame, part.leftover, part.hits = True, set(), []

    def _mark_again(self) -> None:
        """A part naming a block but no fact, joined by "and"/"also"/"then" or referring
        back ("what was it at block 5"), asks the fact before it again at that block; a
        bare trailing ", at block 5" is the block of its whole sentence, as before."""
        for n, part in enumerate(self.parts):
            prev = self.parts[n - 1] if n else None
            asked = next((p for p in reversed(self.parts[:n]) if p.hits), None)
            if asked is not None and _head_again(asked, part):
                part.hits, part.leftover = [], set()  # "... of block 10 and of the latest block"
            # "How many transfers has 0xA sent since block 4? And since block 2?": a span.
            span = _window_again(asked, part)
            named = span or _BLOCK.search(part.text) or _LATEST.search(part.text)
            if _RANGE.search(part.text) and not span:
                continue
            if prev is None or part.hits or part.condition or _SEND.search(part.text) or not named:
                continue
            between = self.task[prev.start + len(prev.text) : part.start]
            lead = ADDRESS.match(part.text)
            if lead and not _block_params(prev.text) and lead.group(0).lower() in {
                    s.lower() for s in prev.subjects}:  # fmt: skip
                # "the transfers from 0xA and 0xB in block 4": a list's tail, whose block is
                # the whole list's (outside-found: read as each one's transfers over the
                # whole chain and again at block 4 either way, at exit 0).
                continue
            # "block 3, block 4 and block 5": a bare block after a part naming its own.
            listed = re.fullmatch(r"(?:(?:at|of|for|in)\s+)?(?:the\s+)?block\s+\S+", part.text,
                                  re.I) and any(_BLOCK.search(p.text) for p in self.parts[:n]
                                                if p.sentence == part.sentence)  # fmt: skip
            part.again = bool(re.search(r"\b(?:and|also|then|plus)\b", between, re.I)
                              or re.match(r"(?:and|also|then|what|how)\b", part.text, re.I)
                              or _REFERS_BACK.search(part.text) or listed)  # fmt: skip
            if part.again:  # "..., and what are they now?": the facts before it, again
                part.leftover -= _THEY | {"those", "these"}

    def raw_sentence(self, n: int) -> str:
        """Sentence ``n`` as the task says it (with the words between its parts)."""
        mine = [p for p in self.parts if p.sentence == n]
        return self.task[mine[0].start : mine[-1].start + len(mine[-1].text)]

    def block_sentence(self, n: int) -> str:
        """The text of sentence ``n`` whose block is every part's: without the parts that
        ask again at a block of their own."""
        return " ".join(p.text for p in self.parts if p.sentence == n and not p.again)

    def _continue_conditions(self) -> None:
        """ "If 0xA holds over 5 USDC and the base fee is under 100 gwei, send ...": a
        threshold part after a condition, before the order, is a condition too."""
        for n, part in enumerate(self.parts):
            prev = self.parts[n - 1] if n else None
            if (prev is not None and prev.condition and prev.sentence == part.sentence
                    and not part.condition and _CONDITION.search(part.text)
                    and not _SEND.search(part.text)):  # fmt: skip
                part.condition = True

    def _merge_subject_only_parts(self) -> None:
        """ "balances of 0xA and 0xB": a part holding only addresses joins its neighbour,
        with the aggregate it names ("... and 0xB combined")."""
        for n, part in enumerate(self.parts):
            left = part.candidate.leftover if part.candidate and not part.hits else part.leftover
            if part.mine:  # "..., and mine?": the agent's wallet is its holder
                left = left - {"mine", "ours", "us"}
            if part.hits or left or not (part.subjects or part.mine) or _SEND.search(part.text):
                continue
            prev = self.parts[n - 1] if n else None
            if (prev is not None and (prev.alone or prev.borrow) and prev.sentence == part.sentence
                    and not _ASKS_OWN.search(part.text)):  # fmt: skip
                # The list tail of a part asking on its own: that part's address ("...,
                # and how much do 0xB and 0xC hold?"); with an aggregate of its own, both
                # are named ("..., and how much do 0xB and 0xC hold together?").
                if prev.borrow and (part.candidate is None or prev.aggregate is None):
                    # "..., and how much do 0xA and 0xB hold together?": its own aggregate.
                    prev.subjects.extend(part.subjects)
                    prev.mine, part.mine = (prev.mine or part.mine), []
                    prev.aggregate = prev.aggregate or part.candidate
                    prev.until = part.start + len(part.text)
                    part.subjects, part.candidate, part.leftover = [], None, set()
                else:
                    prev.borrow, prev.alone, part.alone = False, True, True
                continue
            same = [p for p in self.parts if p.sentence == part.sentence and p.hits]
            before = [p for p in same if p.start < part.start]
            target = before[-1] if before else (same[0] if same else None)
            asks = bool(_ASKS_OWN.search(part.text))
            after = self.parts[n + 1] if n + 1 < len(self.parts) else None
            if (asks and before and after is not None and after.sentence == part.sentence
                    and after.hits and not _ASKS_OWN.search(after.text)):  # fmt: skip
                # "..., and which of 0xA and 0xB holds the most ETH?": its own question.
                target, before = after, []
            # "How much USDC does 0xC hold, and how much do 0xA and 0xB hold together?":
            # a question of its own whose list tail names an aggregate is no tail of 0xC's.
            own_aggregate = asks and part.candidate is None and self._tail_aggregates(n)
            if (target is None or own_aggregate) and part.candidate is None and not _after_an_order(
                    self, n) and (asks or (
                    _SAME_FOR.fullmatch(_ADDRESS_OR_MINE.sub(" ", part.text).strip(" ?.!,"))
                    and not _corrects(self, part))):  # fmt: skip
                part.borrow = True  # "... together? How much does 0xC hold?", "... ? And for 0xF?"
                continue
            if target is not None and before and asks and (target.candidate or target.aggregate):
                # "How much do 0xA and 0xB hold together, and how much does 0xC hold?":
                # 0xC is no address of the sum before it.
                part.borrow = part.candidate is None
                part.alone = not part.borrow
                continue
            if target is not None and not before and part.candidate is not None and (any(
                _ASKS_OWN.search(p.text) for p in self.parts
                if part.start < p.start <= target.start
            ) or _VALUE_WORD.search(part.text)):
                # "What is the combined ETH of 0xA and 0xB, and what is the USDC balance
                # of 0xC?": a later question's fact is not this part's.
                part.alone = True
                continue
            unread = self.parts[n - 1] if n else None
            if (target is not None and not before and unread is not None
                    and unread.sentence == part.sentence and not unread.hits and unread.leftover):  # fmt: skip
                # "What is the combined wealth of 0xA and 0xB, and what is the USDC balance
                # of 0xC?": the list tail of a question not read, never a later one's.
                part.alone = True
                continue
            if target is not None and (_repeats_one_way(target, part) or _own_block_tail(target, part)):
                continue
            if target is not None:
                target.subjects.extend(part.subjects)
                target.subjects.sort(key=self.task.find)
                target.mine, part.mine = (target.mine or part.mine), []
                part.subjects, part.leftover = [], set()  # its words are the target's now
                mine, theirs = part.candidate, target.candidate
                if mine is not None and theirs is None:
                    target.candidate = _as_aggregate([(mine.op, mine.word)], target.rest,
                                                     target.other)  # fmt: skip
                elif mine is not None and theirs is not None and mine.op != theirs.op:
                    target.candidate = replace(theirs, leftover={*theirs.leftover, mine.word})
                part.candidate = None

    def _tail_aggregates(self, n: int) -> bool:
        """True when a list tail right after part ``n`` (same sentence, no fact phrase, no
        question word of its own) names an aggregate ("... and 0xB hold together")."""
        for tail in self.parts[n + 1 :]:
            if tail.sentence != self.parts[n].sentence or tail.hits or _ASKS_OWN.search(tail.text):
                return False
            if tail.candidate is not None:
                return True
        return False

    def _settle_aggregates(self) -> None:
        """A part's aggregate words are an aggregate over two or more addresses ("the
        combined balance of 0xA and 0xB"), or over the values its sentence asked ("...,
        which holds more?"); with one address the part is read without it ("the total
        USDC balance of 0xA" is its balance). A count of addresses is always one: "how many
        addresses made transfers" is no count of transfers."""
        for part in self.parts:
            found = part.candidate
            if found is None:
                continue
            # The agent's own wallet beside an address is a second holder ("Does my wallet
            # hold more USDC than 0xB?").
            holders = len(set(part.subjects)) + bool(part.mine and part.subjects)
            many = holders >= 2 or (not part.hits and not part.subjects)
            # "how many addresses ..." counts addresses whatever follows; "how many of"
            # counts what it is of: the holders of a balance, or "the USDC transfers".
            of_holders = found.word != "how many of" or any(
                h[1].kind in AGGREGATE_KINDS["count"] for h in part.hits)
            if many or (found.op == "count" and part.hits and of_holders):
                part.aggregate = found
                part.leftover, part.modifier = set(found.leftover), found.modifier


#: The words of a part that only says how to present an answer ("Give me the UTC time",
#: "Show it in USDC", "Gwei please"), and the unit or format each bare unit word names.
_SHAPE_WORDS = frozenset(
    """give show express display convert format formatted put write state return report
    answer me us it its them that this these those the a an please kindly just only also
    too then and so in as to into using with instead i i'd id we would like want prefer
    need could can you time date datetime value values result results figure figures
    number numbers output reply response unit units form""".split()
)
_SHAPE_UNITS = {"gwei": "gwei", "wei": "wei", "ether": "ether", "eth": "eth", "cents": "cents",
                "usdc": "usdc", "utc": "utc", "iso": "utc", "unix": "unix"}


def _read_shaping_parts(t: _Task) -> None:
    """A part that only says how to present what another part asks ("When was block 10
    mined? Give me the UTC time.", "What is the base fee? Wei please.") is no question of
    its own: its unit shapes the values that take it (a unit no asked value takes is
    declined by name, as any), never a part left not answered or a unit dropped. A run
    of such parts in one sentence is one ("Give me the date and time in UTC")."""
    if not any(p.hits for p in t.parts):
        return  # nothing asked to present: "Give me the UTC time." alone is declined
    runs: list[list[int]] = []
    for n, part in enumerate(t.parts):
        words = _WORD.findall(part.text.lower())
        if (part.hits or part.subjects or part.condition or not words or _SEND.search(part.text)
                or re.search(r"\d", part.text) or _asks_an_asset(t, part)
                or not set(words) <= _SHAPE_WORDS | set(_SHAPE_UNITS)):  # fmt: skip
            continue
        if runs and runs[-1][-1] == n - 1 and t.parts[n - 1].sentence == part.sentence:
            runs[-1].append(n)
        else:
            runs.append([n])
    for run in runs:
        first, last = t.parts[run[0]], run[-1] + 1
        end = t.parts[last].start if last < len(t.parts) else len(t.task) + 1
        bare = [(p.start + m.start(), _SHAPE_UNITS[m.group(0).lower()])
                for p in (t.parts[n] for n in run) for m in re.finditer(r"[a-z]+", p.text, re.I)
                if m.group(0).lower() in _SHAPE_UNITS]  # fmt: skip
        if not bare and not any(first.start <= pos < end for pos, _u in t.units_at):
            continue  # no unit or format said: "Give me the time" is declined as before
        for n in run:
            t.parts[n].leftover, t.parts[n].modifier, t.parts[n].candidate = set(), None, None
        t.units_at = sorted([*t.units_at, *bare])
    t.units = [unit for _pos, unit in t.units_at]


def _count_test(text: str, kind: str) -> dict[str, str] | str:
    """A count's test: above 0 ("hold any USDC"), or the threshold the part names
    ("how many of ... hold more than 5 USDC"), in the unit of ``kind``; or why not."""
    m = _CONDITION.search(text)
    if m is None:
        named = {_COUNT_TEST[" ".join(w.lower().replace("-", " ").split())]
                 for w in _COUNT_WORDS.findall(text)}  # fmt: skip
        # The vocabulary's priority: "hold no USDC at all" holds none.
        cmp, than = next((t[:2] for t in COUNT_TESTS if t[:2] in named), (">", "0"))
        return {"cmp": cmp, "than": than}
    want = VALUE_UNITS.get(kind, "")
    unit = (m.group(3) or want).lower().replace("ether", "eth")
    if unit != want:
        return f"{unit} is not the unit of a {kind.replace('_', ' ')} ({want or 'a count'})"
    return {"cmp": threshold_op(m.group(1)), "than": str(Decimal(m.group(2)))}


def _compare_words(part: _Part) -> str | None:
    """"max"/"min" when the part asks which of two is larger/smaller. The words of a
    condition's threshold ("holds more than 10 USDC") compare with a number, not
    between subjects."""
    if any(h[1].kind == "transfer_max" for h in part.hits):
        return None
    text = _CONDITION.sub(" ", part.text)  # "more than 10 USDC" compares with a number
    if _COMPARE_MAX.search(text):
        return "max"
    if _COMPARE_MIN.search(text):
        return "min"
    return None


def _paid_gas_price(
    t: _Task, part: _Part, fp: FactPattern, holders: list[str]
) -> tuple[str, str] | None:
    """Why a gas price asked as paid but of no transaction is declined ("What gas price did
    0xA pay?"), else None: a transaction's is its own kind (``tx_gas_price``, from its
    receipt), and the node's gas price is never what anyone paid (outside round 33 got the
    node's current price for a transaction, at exit 0)."""
    if fp.kind != "gas_price_gwei" or not (
            holders or _PAID_PER_GAS.search(part.text) or (t.hashes and _TX_PRONOUN.search(part.text))):  # fmt: skip
        return None
    whose = holders[0] if holders else "a transaction"
    return (f"{fp.label} of {whose}", f"the task asks the gas price {whose} paid: nib reads "
            "the gas price a transaction paid ('what gas price did 0x<hash> pay') or the "
            "node's current one ('the current gas price'), never an account's")  # fmt: skip


def _own_transfers(part: _Part, fp: FactPattern) -> tuple[str, str] | None:
    """Why transfers (a list, count, largest or total) of the agent's own wallet are
    declined ("How many USDC transfers has my wallet made?", "List my wallet's USDC
    transfers"), else None: they are read of an address, and the wallet's was dropped (the
    whole chain's count was given, at exit 0; a sweep after round 46)."""
    if fp.kind not in WINDOW_KINDS or not (part.mine or _OWN_WALLET.search(part.text)):
        return None
    return (f"{fp.label} of the agent's wallet", "the offline planner reads transfers of an "
            "address it is given, and this names the agent's own wallet; ask with its address "
            "(`nib wallet address` prints it)")


#: "the last 3 transfers", "the 5 most recent transactions": a number of the latest ones.
_LATEST_N = _p(r"\b(?:last|latest|most\s+recent|recent|newest|first|earliest)\s+(?:\d+|few|several|"
               r"couple(?:\s+of)?)\s+(?:usdc\s+)?(?:transfers?|transactions?|txs?)\b|\b(?:\d+|few)\s+"
               r"(?:most\s+recent|latest|last|newest)\s+(?:usdc\s+)?(?:transfers?|transactions?)\b")


#: Transfers filtered by their amount ("larger than 1 USDC"), not a count ("more than 5
#: USDC transfers" counts them).
_AMOUNT_FILTER = _p(rf"(?:{OP_WORDS}|\bexceeding\b|\bworth\b)\s*\$?\d+(?:\.\d+)?\s*usdc\b"
                    r"(?!\s*(?:transfers?|payments?)\b)")
#: A window's fact asked by a smaller unit ("per block", "each day", "block by block").
_PER_BLOCK = _p(r"\b(?:per|each|every|a|one|any|a\s+single)\s+(?:block|day|hour|minute|week|transaction|tx)\b|"
                r"\bblock\s+by\s+block\b|\bon\s+average\b|\baverage\b")


def _latest_transfers(part: _Part, fp: FactPattern) -> tuple[str, str] | None:
    """Why "the last 3 transfers" is declined, else None: transfers are read over blocks,
    never a number of the latest ones ("List the last 3 transfers" gave the whole chain's
    count, at exit 0; a sweep after outside round 48)."""
    m = _LATEST_N.search(part.text)
    amount = _AMOUNT_FILTER.search(part.text)
    if fp.kind in ("transfer_list", "transfer_count") and amount is not None:
        # "List the USDC transfers larger than 1 USDC": every transfer was listed, at exit 0.
        return (f"{fp.label} ({' '.join(amount.group(0).split())})", "transfers are read whole, "
                "never filtered by their amount; ask for them all, or the largest one")
    if fp.kind in WINDOW_KINDS and (per := _PER_BLOCK.search(part.text)) is not None:
        # "How many USDC transfers per block in the last 20 blocks?" gave the 20 blocks' count.
        return (f"{fp.label} ({' '.join(per.group(0).split())})", "a window's transfers are "
                "read as one list, count or total over the whole span, never per block or per "
                "day; ask one block at a time ('how many USDC transfers were in block 5?')")
    if fp.kind not in WINDOW_KINDS or m is None:
        return None
    return (f"{fp.label} ({' '.join(m.group(0).split())})", "transfers are read over a span of "
            "blocks, never as a number of the latest ones; ask over blocks ('the USDC transfers "
            "in the last 20 blocks')")


def _one_way_item(out: _Builder, part: _Part, fp: FactPattern, params: dict[str, str],
                  where: str, ends: dict[str, str] | str) -> int:
    """The item of transfers read one way ("USDC transfers from 0xA to 0xB in the last 20
    blocks"; ``params`` holds its window and ``where`` says it), or its decline."""
    if isinstance(ends, str):
        return out.cannot(part.text, ends)
    said = "".join(f" {w} {ends[k]}" for k, w in (("sender", "from"), ("recipient", "to"))
                   if k in ends)  # fmt: skip
    return out.add({"text": f"{fp.label}{said}{where}", "kind": fp.kind, "params": {**params, **ends}})


def _one_way(text: str, subjects: list[str]) -> dict[str, str] | str | None:
    """The one sender and/or recipient of the transfers a part asks (:func:`_one_ways`), or
    why it cannot be read when it says several (a part referring back to them)."""
    ways = _one_ways(text, subjects)
    if isinstance(ways, list) and len(ways) > 1:
        return "it refers back to transfers of more than one address said one way"
    return ways[0] if isinstance(ways, list) else ways


def _one_ways(text: str, subjects: list[str], context: str | None = None
              ) -> list[dict[str, str]] | str | None:
    """The sender and/or recipient of each read of the transfers a part asks ("the
    transfers to 0xB", "from 0xA to 0xB", "how many transfers did 0xA make to 0xB"; "from
    0xA and 0xB", "to 0xA or to 0xC": one read per address listed), None when it names no
    direction (transfers touching each address), or why it cannot be read. Outside round
    33: "the USDC transfers to 0xB" listed the ones 0xB sent too, at exit 0; round 37 read
    "to 0xA and to 0xC" as from 0xC to 0xA, at exit 0. ``context`` (the sentence, where a
    list split into parts is whole) is where addresses are seen listed."""
    context = context or text
    ends: dict[str, list[str]] = {"sender": [], "recipient": []}
    said = [(m.group(1), m.group(2), m.group(0)) for m in _TO_FROM.finditer(text)]
    said += [(m.group(2), a, m.group(0)) for m in _DID_SEND.finditer(text)
             for a in ADDRESS.findall(m.group(1))]  # fmt: skip
    said += [(m.group(1), m.group(2), m.group(0)) for m in _BY_ONE.finditer(text)]
    said += [(m.group(2), m.group(1), m.group(0)) for m in _IT_DID.finditer(text)]
    for word, address, _phrase in said:
        role = "recipient" if word.lower() in _RECEIVING else "sender"
        if address.lower() not in {a.lower() for a in ends[role]}:
            ends[role].append(address)
    if not ends["sender"] and not ends["recipient"]:
        return None
    if _THAN_ADDRESS.search(text):
        # "How many more transfers did 0xA send than 0xB?": two counts compared, each one
        # way; read as one count from 0xA to 0xB at exit 0 in outside round 35.
        return ("a comparison of transfers said one way is not read; ask each count in its "
                "own words ('how many USDC transfers did 0xA send?')")  # fmt: skip
    named = {a.lower() for v in ends.values() for a in v}
    for address in (a for a in dict.fromkeys(subjects) if a.lower() not in named):
        # "from 0xA and 0xB": a plain address listed after one said one way is that way too
        way = next((r for r, v in ends.items() if v and _listed_after(context, v[-1], address)), None)
        if way is None and (len(named) > 1 or all(ends.values())):
            return ("more addresses than one sender and one recipient are said of the same "
                    "transfers; ask of each pair in its own words")  # fmt: skip
        # else "the transfers 0xA made to 0xB": the other end is the one said plainly
        ends[way or ("recipient" if ends["sender"] else "sender")].append(address)
        named.add(address.lower())
    for role, listed in ends.items():
        if any(not _listed_after(context, a, b) for a, b in zip(listed, listed[1:], strict=False)):
            return (f"two addresses are said as the {role} of the same transfers; the offline "
                    "planner reads one sender and one recipient at a time")  # fmt: skip
    if len(ends["sender"]) > 1 and len(ends["recipient"]) > 1:
        return ("several senders and several recipients are said of the same transfers; ask "
                "of each pair in its own words")  # fmt: skip
    return [{k: v for k, v in (("sender", s), ("recipient", r)) if v}
            for s in ends["sender"] or [""] for r in ends["recipient"] or [""]]


def _either(ways: list[dict[str, str]] | str, fp: FactPattern, sentence: str
            ) -> list[dict[str, str] | str]:
    """Each read of ``ways``, or why not: a count or a largest of the transfers to 0xA "or"
    to 0xB asks one number over both, which no read states (two lists are both listed)."""
    if isinstance(ways, str):
        return [ways]
    if len(ways) > 1 and fp.kind != "transfer_list" and _EITHER.search(sentence):
        return [f"the {fp.label} of transfers to (or from) one address or another is one "
                "number over both, which the offline planner does not read; ask of each address "
                "in its own words"]
    return list(ways)


_EITHER = re.compile(r"0x[0-9a-fA-F]{40}\s*,?\s+or\s+", re.I)
_RECEIVING = frozenset({"to", "into", "receive", "get", "received", "got", "gotten"})


def _listed_after(text: str, first: str, then: str) -> bool:
    """Whether ``then`` is listed right after ``first`` in ``text`` ("0xA and 0xB", "0xA,
    0xB", "0xA or to 0xB")."""
    return re.search(re.escape(first) + r"\s*(?:,\s*(?:(?:and|or|&)\s+)?|\s+(?:and|or|&)\s+)"
                     r"(?:(?:to|from|into|by)\s+)?(?:the\s+)?(?:address\s+|account\s+|wallet\s+)?"
                     + re.escape(then), text, re.I) is not None


def _listed_again(t: _Task, part: _Part, fp: FactPattern, phrase: str) -> FactPattern:
    """ "Show me the USDC transfers from 0xA to 0xB and the USDC transfers from 0xB to 0xA":
    a bare "transfers" after transfers listed in its sentence is listed too (outside round
    37 gave its count alone, at exit 0); a count asked in words ("how many") stays one."""
    if fp.kind != "transfer_count" or not re.fullmatch(r"(?:usdc\s+)?transfers", phrase.strip(), re.I):
        return fp
    listed = any(p.sentence == part.sentence and p.start < part.start
                 and any(h[1].kind == "transfer_list" for h in p.hits) for p in t.parts)  # fmt: skip
    return _TRANSFER_LIST if listed else fp


def _repeats_one_way(target: _Part, part: _Part) -> bool:
    """ "the USDC transfers to 0xA and to 0xC", "... from 0xA to 0xB and from 0xB to 0xA": a
    part of only addresses, each said with its way, asks its target's transfers again for
    its own ends (it takes the target's fact; outside round 37 read "to 0xA and to 0xC" as
    from 0xC to 0xA, and dropped "and from 0xB to 0xA", at exit 0). A plain address beside
    them ("0xB to 0xC") leaves the part a list tail of the target, read there."""
    way = [h for h in target.hits if h[1].kind in ONE_WAY_KINDS]
    directed = [m.group(2) for m in _TO_FROM.finditer(part.text)]
    if not way or not directed or len(directed) != len(ADDRESS.findall(part.text)):
        return False
    part.hits = [(0, way[0][1], way[0][2])]
    return True


def _window_holder(t: _Task, part: _Part) -> _Part | str | None:
    """The nearest earlier part of the task asking transfers of addresses, when this part
    refers back to those transfers and names no address of its own ("How many USDC transfers
    touched 0xA ..., and what is the largest one?": 0xA's largest, never the whole chain's;
    "List the transfers from 0xA. Which of them was the largest?": the largest 0xA sent),
    else None; why it cannot be read when the task asked transfers of more than one
    holder or way before it ("the transfers from 0xA and the transfers to 0xB. Which of
    them was the largest?")."""
    if not (_ONE_OF_THOSE.search(part.text) or _WHICH_LARGEST.fullmatch(part.text.strip(" ?!.,"))
            ) or ADDRESS.search(part.text):  # fmt: skip
        return None
    read = [p.start for p in t.parts if p.start < part.start and not p.leftover
            and any(h[1].kind in WINDOW_KINDS for h in p.hits)]  # fmt: skip
    if any(max(read, default=-1) < p.start < part.start and (not p.hits or p.leftover)
           and (_TRANSFERS_WORD.search(p.text) or (not p.hits and p.leftover)) for p in t.parts):
        # "How many transfers did my wallet send, and which of them was the largest?": not
        # the whole chain's largest (outside round 37, T16) when "them" was not read; nor
        # after any other part not read ("What did 0xA send in block 4? Which of them ...?").
        return "it refers back to what a part the offline planner did not read asks"
    earlier = [p for p in t.parts if p.start < part.start
               and p.subjects and any(h[1].kind in WINDOW_KINDS for h in p.hits)]  # fmt: skip
    asked = {(tuple(a.lower() for a in p.subjects), repr(_one_way(p.text, p.subjects)))
             for p in earlier}  # fmt: skip
    if len(asked) > 1:
        return ("it refers back to transfers, and the task asks the transfers of more than one "
                "address or way before it; name the address and the way ('the largest "
                "transfer from 0xA')")  # fmt: skip
    return earlier[-1] if earlier else None


def _window_before(t: _Task, part: _Part) -> dict[str, str]:
    """The block parameters said in the task up to ``part``'s sentence: a later sentence's
    window is its own (outside round 39, B7, took it for the question before it)."""
    return _block_params(" ".join(p.text for p in t.parts if not p.again and p.sentence <= part.sentence))


#: A part asking the largest of what was asked before ("... and which was the largest"), and
#: a window said again by reference ("in those blocks").
_WHICH_LARGEST = _p(r"(?:(?:and|also|then|so)\s+)?(?:which|what)\s+(?:one\s+)?(?:was|is)\s+(?:the\s+)?"
                    r"(?:largest|biggest)(?:\s+one)?")
_THOSE_BLOCKS = _p(r"\b(?:those|these|that|the\s+same)\s+blocks?\b|\bin\s+that\b")


def _refers_back(part: _Part) -> bool:
    """Whether ``part`` refers back to what was asked before it ("which one", "of them",
    "which was the largest", "in those blocks", "its")."""
    return bool(_REFERS_BACK.search(part.text) or _ONE_OF_THOSE.search(part.text)
                or _THOSE_BLOCKS.search(part.text)
                or _WHICH_LARGEST.fullmatch(part.text.strip(" ?!.,")))  # fmt: skip


def _shares_window(t: _Task, part: _Part, fp: FactPattern) -> bool:
    """Whether a window fact naming no window takes the one another part names, as a block
    fact takes another part's block (:func:`_shares_block`): a bare list tail
    ("..., and the transfers from 0xB"), a part referring back ("which one was the largest",
    "in that range"), a question asking the same fact again ("How many transfers did 0xA
    send in the last 20 blocks, and how many did 0xB send?") or beside a bare trailing
    window (", since block 0") does; a question of its own asking another fact ("What were
    the transfers from 0xA in the last 20 blocks, and how many transfers did 0xB send?") is
    unclear (outside round 38 read it over the other part's window, at exit 0)."""
    if fp.kind not in WINDOW_KINDS or _refers_back(part):
        return True
    if not _OWN_QUESTION.search(part.text) or _ABOUT.search(part.text):
        return True
    holders = [p for p in t.parts if p is not part and not p.again and p.sentence <= part.sentence
               and _block_params(p.text)]  # fmt: skip
    return any(not p.hits or any(h[1].kind == fp.kind for h in p.hits) for p in holders)


#: The head block named as one block ("in the latest block", "at the head", "of the most
#: recent block", "the last block"): transfers in it are that block's.
#: The words before "latest block" that make it the block a fact is of, no question of its
#: number ("the base fee of the latest block", "sent over the latest block").
_NAMES_THE_BLOCK = _p(r"\b(?:of|at|in|for|over|during|within|from)\s+(?:the\s+)?\Z")
_ONE_HEAD_BLOCK = _p(r"\b(?:in|at|of|for|over|from|during|within|inside)\s+(?:the\s+)?(?:very\s+)?(?:latest|current|"
                     r"newest|most\s+recent|last|head|tip)\s+block\b(?!\s*(?:number|height)\b)")


def _head_block(text: str, fp: FactPattern) -> dict[str, str]:
    """The head block as a block parameter when ``text`` names it as one block and ``fp``
    is read over a span of blocks: "How many USDC transfers were there in the latest
    block?" counted the whole chain, at exit 0 (outside round 58, Q52); a fact of one block
    (a balance, a base fee) is at the head anyway, so it keeps no parameter."""
    return {"block": "latest-0"} if fp.kind in WINDOW_KINDS and _ONE_HEAD_BLOCK.search(text) else {}


_HEAD_BLOCK = _p(r"(?:(?:and|also|then|plus)\s+)?(?:how\s+many\s+(?:are|were|does|did)\s+(?:there\s+)?|"
                r"(?:what|how\s+much|how\s+many)\s+(?:is|was|are|were)\s+(?:it|they|that|those)\s+)?"
                r"(?:(?:at|of|for|in)\s+)?(?:the\s+)?(?:latest|current|newest|most\s+recent|head)\s+block"
                r"(?:\s+(?:contain|have|hold|include))?")


def _head_again(prev: _Part, part: _Part) -> bool:
    """ "What is the gas limit of block 10 and of the latest block?": a part naming only the
    head after a block fact asks that fact again at the head, not the head's number (outside
    round 39 answered "block number: 38" for it, at exit 0, in five wordings); so does "And
    the latest block?" in the sentence after it."""
    return (part.sentence - prev.sentence in (0, 1) and bool(_HEAD_BLOCK.fullmatch(part.text.strip(" ?.!,")))
            and all(h[1].kind == "block_number" for h in part.hits)
            and (any(h[1].kind in BLOCK_KINDS - {"block_number"} for h in prev.hits)
                 # Any fact said at a block, asked "at" the head after it ("the ETH balance
                 # of 0xA at block 4, and at the head": outside round 55 read the head's
                 # number; the balance there is read, the one at block 4 declined).
                 or bool(_BLOCK.search(prev.text) and re.match(
                     r"(?:(?:and|also|then|plus)\s+)?(?:at|in|of|for)\b", part.text.strip(), re.I))))  # fmt: skip


def _no_tx_but_a_block(t: _Task, part: _Part) -> bool:
    """Whether the task names no transaction and ``part``'s sentence names a block, or
    ``part`` refers back ("it") after one ("How many transactions are in block 10? And how
    much gas did it use?": the block's gas used; outside round 41, F8, declined it)."""
    said = t.task[: part.start + len(part.text)] if _REFERS_BACK.search(part.text) else t.sentence(part.sentence)
    return not t.hashes and bool(re.search(r"\bblocks?\b", said, re.I))


def _window_only(t: _Task, part: _Part) -> bool:
    """Whether ``part`` is only the span of blocks of the window facts its sentence's other
    parts ask (", since block 0"): read with them, nothing of its own."""
    return bool(_ONLY_SPAN.fullmatch(part.text.strip(" ,.;:?!"))) and any(
        p.sentence == part.sentence and p is not part
        and any(h[1].kind in WINDOW_KINDS for h in p.hits) for p in t.parts)  # fmt: skip


def _referring_back(out: _Builder, t: _Task, part: _Part, fp: FactPattern,
                    window: tuple[dict[str, str], str], subjects: list[str]
                    ) -> tuple[list[str], int | None]:
    """The holders of a window fact that refers back to the transfers asked before it
    (:func:`_window_holder`), and its item when it is one of them read their way ("...
    transfers from 0xA ..., and which one (which of them) was the largest?": from 0xA too;
    outside rounds 34 and 36 gave the largest either way, at exit 0) or declined."""
    asked = [p for p in t.parts if p.start < part.start and p.hits]
    if (fp.kind == "transfer_max" and not _TRANSFERS_WORD.search(part.text) and asked
            and not any(h[1].kind in WINDOW_KINDS for h in asked[-1].hits)):  # fmt: skip
        # "How much USDC do 0xA and 0xB hold? Which of them was the largest?": the largest of
        # those values, not each one's largest transfer (read so at exit 0 before).
        return subjects, out.cannot(part.text, "it asks which of the values before it is the "
                                    "largest, and the offline planner compares values only in "
                                    "one question ('which of 0xA and 0xB holds the most USDC?')")
    earlier = _window_holder(t, part) if fp.kind in WINDOW_KINDS else None
    if isinstance(earlier, str):
        return subjects, out.cannot(part.text, earlier)
    if earlier is None:
        return subjects, None
    said = list(dict.fromkeys(earlier.subjects))
    subjects = subjects or said  # "which of them" took them already (_pronoun_holders)
    if (fp.kind in ONE_WAY_KINDS and subjects == said
            and (ends := _one_way(earlier.text, subjects)) is not None):  # fmt: skip
        return subjects, _one_way_item(out, part, fp, *window, ends)
    return subjects, None


def _list_head_of_a_block(t: _Task, part: _Part) -> bool:
    """ "the gas used and the gas limit of the block that 0x<hash> was in": a bare list
    item naming no transaction of its own ("it", a hash) in a sentence about a
    transaction's block is that block's (outside round 30 gave the transaction's gas)."""
    sentence = t.sentence(part.sentence)
    return not (TX_HASH.search(part.text) or _TX_WORD.search(part.text)) and _names_tx_block(sentence)


def _transaction_block(t: _Task, part: _Part, fp: FactPattern, scope: dict[str, str]) -> str | None:
    """The transaction whose block a block fact is asked of ("when was 0x<hash>
    mined", "the base fee when 0x<hash> was mined", "Did 0x<hash> succeed? When was
    it mined?"), or None. Such a fact is of the transaction's block, never the head's
    (outside round 20, Q11, answered the head's time for "which block was 0x<hash> mined
    in")."""
    if fp.kind not in BLOCK_KINDS or not t.hashes or _NOW.search(part.text):
        return None  # "..., and what is the current base fee?": the head's, as asked
    if (back := _its_block(t, part)) is not None:
        return back
    if scope:
        return None
    sentence = t.sentence(part.sentence)
    found = TX_HASH.search(part.text) or (
        TX_HASH.search(sentence) if _MINED.search(sentence) else None)
    if found is not None:
        return found.group(0)
    if _names_tx_block(sentence):
        # "the gas limit and the transaction count of the block it was in", "the block
        # containing 0x<hash>, and what was its base fee?": every block fact of the
        # sentence is of that block (outside round 29 read the first one at the head): the
        # first transaction said after the fact in its sentence, else the last before it.
        ends = [p.start + len(p.text) for p in t.parts if p.sentence == part.sentence]
        after = [h for at, h in t.hashes if part.start <= at < max(ends)]
        before = [h for at, h in t.hashes if at < part.start]
        # A transaction said only after the sentence ("... the block it ended up in?
        # 0x<hash>") is the task's one transaction, when it has one.
        only = t.hashes[0][1] if len(t.hashes) == 1 else None
        return after[0] if after else before[-1] if before else only
    if _TX_PRONOUN.search(part.text) and not _NAMES_A_BLOCK.search(part.text) and (
            fp.kind == "block_timestamp" or (fp.kind != "block_number"
                                             and not _NAMES_A_BLOCK.search(t.task[: part.start]))):  # fmt: skip
        # "Did 0x<hash> succeed? When was it mined?"; "How much gas did 0x<hash> use? How full
        # was it?" with no block said before: its block (a sweep found the head's read).
        earlier = [h for at, h in t.hashes if at < part.start]
        return earlier[-1] if earlier else t.hashes[0][1]
    return None


def _its_block(t: _Task, part: _Part) -> str | None:
    """The transaction whose block a part naming no block of its own refers back to: "that
    block" after a transaction ("Which block was 0x<hash> mined in? What was the base fee of
    that block?"; outside round 26 got the head's at exit 0, and round 42 another part's
    block), or "it" after the question asking that transaction's block ("... mined in? How
    full was it?"; round 42 read the head's, at exit 0)."""
    earlier = [h for at, h in t.hashes if at < part.start]
    if not earlier or _block_params(part.text):
        return None
    if _THAT_BLOCK.search(part.text):
        return earlier[-1]
    if not re.search(r"\b(?:it|its)\b", part.text, re.I) or _NAMES_A_BLOCK.search(part.text):
        return None
    # The question asking the block, before it or before the block facts asked of "it" since
    # ("... mined in? How full was it? And how many transactions are in it?": round 43).
    for asked in reversed([p for p in t.parts if p.start < part.start and p.hits]):
        if any(h[1].kind == "tx_block" for h in asked.hits):
            said = TX_HASH.findall(asked.text)
            return said[-1] if said else earlier[-1]
        if not all(h[1].kind in BLOCK_KINDS for h in asked.hits) or _block_params(asked.text):
            return None
    return None


def _share_test(part: _Part) -> str | None:
    """The words of a threshold on a block's fullness the part asks ("more than half
    full", "over 50% full", "at least 90% of its gas limit", "is block 3 full",
    "fullness above 50"), or None: a share said of a block, or a threshold said of
    its fullness."""
    kinds = {h[1].kind for h in part.hits}
    about = kinds & {"block_fullness", "block_gas_limit"} or re.search(
        r"\bblocks?\b", part.text, re.I)
    if about and (m := _FULL_TEST.search(part.text)):
        words = m.group("bare") or m.group(0)  # "is block 3 full": the word "full"
    elif "block_fullness" in kinds and (m := _SHARE_TEST.search(part.text)):
        words = m.group(0)
    else:
        return None
    return " ".join(words.split())


#: A follow-up naming only its subject ("What about ETH?", "and how about 0xB?").
_WHAT_ABOUT = re.compile(r"\b(?:what|how)\s+about\b", re.I)
_FOLLOW_UP = ("the offline planner reads no fact in a follow-up naming only what to ask about; "
              "ask it in full ('How much ETH does 0x... hold?')")
#: A follow-up asking the other asset of the balances the question before it asked
#: ("How much USDC does 0xA hold? What about ETH?", "..., and how about their ether
#: balances?"): the same holders' balances of that asset.
_ASSET_FOLLOW_UP = re.compile(
    r"(?P<lead>and\s+(?:(?:what|how)\s+about\s+)?|(?:what|how)\s+about\s+)?"
    r"(?P<whose>(?:its|their|his|her)\s+)?(?:(?:the|my|our)\s+)?"
    r"(?P<a>eth|ether|usdc)(?:\s+(?:balances?|holdings?))?(?:\s+(?:too|then|instead|as\s+well))?",
    re.I,
)
_BALANCE_KINDS = frozenset({"usdc_balance", "eth_balance"})
_LIST_JOIN = re.compile(r"\s*(?:,\s*)?(?:(?:and|or|&)\s+)?(?:of\s+|for\s+)?(?:(?:the\s+)?(?:transaction|tx)\s+)?", re.I)


def _after_an_order(t: _Task, n: int) -> bool:
    """Whether the nearest part before part ``n`` that asks or orders anything is an order
    ("Send 0.01 USDC to 0xA. And for 0xB?" may ask another payment: never read as a
    question, it is declined by name)."""
    before = [p for p in t.parts[:n] if p.hits or _SEND.search(p.text)]
    return bool(before and _SEND.search(before[-1].text))


def _corrects(t: _Task, part: _Part) -> bool:
    """Whether words between the last question and ``part`` correct it (``_CORRECTING``)."""
    before = [p for p in t.parts if p.start < part.start and p.hits]
    since = before[-1].start + len(before[-1].text) if before else 0
    return bool(_CORRECTING.search(t.task[since : part.start + len(part.text)]))


def _question_before(t: _Task, part: _Part) -> _Part | None:
    """The nearest part before ``part`` that asks facts (no condition, no order)."""
    before = [p for p in t.parts if p.start < part.start and p.hits
              and not p.condition and not _SEND.search(p.text)]  # fmt: skip
    return before[-1] if before else None


def _asked_before(t: _Task, part: _Part, prev: _Part) -> list[_Part]:
    """The parts whose facts ``part`` asks again: ``prev`` with the parts of its list before
    it that share its block ("What is the base fee and the gas limit at block 5, and at block
    7?": both at block 7, never the gas limit alone; "What were the timestamp and base fee of
    block 9, and what are they now?": both now)."""
    own = _block_params(prev.text)
    run = [prev]
    for p in reversed([p for p in t.parts if p.sentence == prev.sentence and p.start < prev.start]):
        if not p.hits or p.condition or _SEND.search(p.text) or _block_params(p.text) not in ({}, own):
            break
        run.insert(0, p)
    return run


def _own_block_tail(target: _Part, part: _Part) -> bool:
    """ "How many transfers did 0xA send in block 3 and 0xB in block 5?": a list tail naming
    a block other than its target's is not read with it (it was read as the transfers from
    0xA to 0xB, at exit 0); it is named as not read (``alone``)."""
    own = _block_params(part.text)
    if not own or _block_params(target.text) in ({}, own):
        return False
    part.alone, part.again = True, False
    return True


def _window_again(asked: _Part | None, part: _Part) -> bool:
    """Whether ``part`` only names a span of blocks ("And since block 2?", "and in the last 3
    blocks?") after a question whose facts are all read over a span: those facts again, over
    it (they were declined)."""
    return (asked is not None and not part.hits and not part.subjects
            and bool(_RANGE.search(part.text) or _WINDOW.search(part.text))
            and all(h[1].kind in WINDOW_KINDS for h in asked.hits))  # fmt: skip


def _again_text(asked: _Part, ref: str | None, part: _Part) -> str:
    """The words a fact asked again at block ``ref`` (None: now) is read from: the block (or
    the span of blocks ``part`` names, :func:`_window_again`), and the way of transfers read one
    way ("How many USDC transfers did 0xA send in block 3 and in block 5?": from 0xA at block 5
    too, not both ways). Transfers asked again "in the latest block" are the head block's,
    never the whole chain's (outside round 55)."""
    if ref is None and _HEAD_BLOCK.search(part.text) and any(h[1].kind in WINDOW_KINDS for h in asked.hits):
        ref = "latest-0"
    at = f"at block {ref}" if ref else "now"
    if _window_again(asked, part):
        at = _span_text(_block_params(part.text)).strip()
    if not any(h[1].kind in ONE_WAY_KINDS for h in asked.hits):
        return at
    ends = _one_way(asked.text, asked.subjects)
    if not isinstance(ends, dict):
        return at
    way = {"sender": "from", "recipient": "to"}
    return " ".join(f"{way[k]} {v}" for k, v in ends.items()) + " " + at


def _asked_again(facts: _FactItems, prev: _Part, kind: str, part: _Part) -> list[int]:
    """The items of fact ``kind`` asked of ``prev``'s subjects (its block, holders and
    aggregate), placed where ``part`` asks them."""
    pos, _fp, phrase = prev.hits[0]
    made = facts._fact_items(prev, next(fp for fp in FACT_PATTERNS if fp.kind == kind), pos, phrase)
    for n in made:
        facts.out.at.setdefault(n, part.start)
    return made


def _named_balance(part: _Part) -> str | None:
    """The balance kind of the one asset a part names outside a threshold, or None."""
    named = {m.group(0).lower().replace("ether", "eth")
             for m in re.finditer(r"\b(?:usdc|eth|ether)\b", _CONDITION.sub(" ", part.text), re.I)}  # fmt: skip
    return None if len(named) != 1 else "usdc_balance" if named == {"usdc"} else "eth_balance"


def _aggregate_of_asset(t: _Task, facts: _FactItems, part: _Part,
                        agg: _Aggregate) -> list[int] | None:
    """An aggregate asked back that names an asset other than the balances the question
    before it asked ("How much ETH do 0xA and 0xB hold? What is their combined USDC?"):
    that asset's balances of the same holders, and the aggregate over them. Outside round
    24 got the ETH sum for it at exit 0. None when the part names no other asset."""
    kind = _named_balance(part)
    prev = _question_before(t, part)
    if kind is None or prev is None or not prev.hits:
        return None
    kinds = {h[1].kind for h in prev.hits}
    if kinds == {kind} or not kinds <= _BALANCE_KINDS or not (prev.subjects or prev.mine):
        return None
    return _asked_again(facts, replace(prev, aggregate=agg, candidate=None), kind, part)


def _after_and(t: _Task, part: _Part) -> bool:
    """Whether ``part`` is said after an "and" the parts were split at ("... ? And ETH?")."""
    return bool(re.search(r"\band\s*\Z", t.task[: part.start], re.I))


def _asks_an_asset(t: _Task, part: _Part) -> bool:
    """ "What is my USDC balance? And ETH?": an asset after "and", following a question of
    balances, asks that asset's balances (``_asset_follow_up``); no unit to present."""
    m = _ASSET_FOLLOW_UP.fullmatch(part.text.strip(" ?!.,"))
    prev = _question_before(t, part)
    return bool(m and _after_and(t, part) and prev
                and {h[1].kind for h in prev.hits} <= _BALANCE_KINDS)  # fmt: skip


def _asset_follow_up(t: _Task, facts: _FactItems, part: _Part) -> list[int] | None:
    """The items of an asset follow-up (``_ASSET_FOLLOW_UP``): the balances of that asset
    of the holders the nearest question before it asked balances of, after those, in the
    same block and with the same combined, larger or difference; a follow-up after any
    other question, or asking what that question asked already, is declined by name.
    None when ``part`` is no asset follow-up."""
    m = _ASSET_FOLLOW_UP.fullmatch(part.text.strip(" ?!.,"))
    if m is None or part.condition or not (m["lead"] or m["whose"] or _asks_an_asset(t, part)):
        return None  # a bare "ETH." may say how to present a value: not read here
    kind = "usdc_balance" if m["a"].lower() == "usdc" else "eth_balance"
    prev = _question_before(t, part)
    kinds = {h[1].kind for h in prev.hits} if prev else set()
    why = None
    if prev is None or not kinds <= _BALANCE_KINDS:
        why = "no question before it asked a balance"
    elif prev.leftover or prev.modifier:
        why = f"the question before it ({_clip(prev.text)!r}) was not read in full"
    elif kinds == {kind}:
        why = f"the question before it asked the {_other_token(t, prev, kind) or m['a'].upper()} balance"
    if why is not None or prev is None:
        return [facts.out.cannot(part.text, "the offline planner reads a follow-up naming only "
                                 "an asset ('What about ETH?') as the balances of that asset "
                                 f"of the holders the question before it asked, and {why}; "
                                 "ask it in full ('How much ETH does 0x... hold?')")]  # fmt: skip
    # "... of 0xA and 0xB? What is their combined USDC? And what about ETH?": the
    # aggregate asked back after that question is the follow-up's too.
    asked_back = [p.aggregate for p in t.parts if prev.start < p.start < part.start
                  and not p.hits and p.aggregate is not None]  # fmt: skip
    at = replace(prev, aggregate=asked_back[-1]) if asked_back else prev
    return _asked_again(facts, at, kind, part)


#: A part asking only that the answer be yes or no ("Yes or no.", "Answer yes or no.",
#: "Just yes/no, please"), and one asking only for the transaction hash of what the part
#: before it asked ("with its transaction hash", "Include the tx hash."): each asks what
#: the answer to a question of the kinds beside it states already (a yes-or-no line first;
#: the transaction's hash whole).
_ONLY_YES_OR_NO = _p(
    r"(?:(?:and|so|but|please|just|only|answer|reply|respond|say|tell\s+me|give\s+me)\s+)*"
    r"(?:(?:with|in)\s+)?(?:a\s+)?(?:simple\s+)?yes\s*(?:or|/)\s*no(?:\s+(?:please|only|answer))?"
)
_ONLY_THE_HASH = _p(
    r"(?:(?:and|also|with|include|including|plus|give\s+me|show(?:\s+me)?|tell\s+me)\s+)*"
    r"(?:its|the|their)\s+(?:transaction\s+|tx\s+)?hash(?:es)?(?:\s+(?:too|please|as\s+well))?"
)
_SAID_ALREADY = (
    (_ONLY_YES_OR_NO, "yes or no", frozenset({"condition", "tx_status"}),
     "a yes-or-no question ('Does 0x... hold any USDC?', 'Did 0x<hash> succeed?')"),
    (_ONLY_THE_HASH, "a transaction hash", frozenset({"transfer_max", "tx_status", "tx_gas_used",
                                                      "tx_block"}),
     "the largest transfer or a transaction's facts"),
)  # fmt: skip


#: A part asking only "when" of the question before it ("Which block was 0x<hash> mined
#: in, and when?"): split off as a condition, it was dropped at exit 0.
_BARE_WHEN = _p(r"(?:and|also|but)?\s*when(?:\s+(?:was|is)\s+(?:it|that|this))?(?:\s+mined)?")


def _bare_when(t: _Task, facts: _FactItems, part: _Part) -> list[int] | None:
    """The items of a bare "when" (``_BARE_WHEN``): the time the transaction the question
    before it names was mined, or the timestamp of the block it names; declined by name
    after any other question. None when ``part`` is no bare "when"."""
    if not _BARE_WHEN.fullmatch(part.text.strip(" ?!.,")):
        return None
    prev = _question_before(t, part)
    kinds = {h[1].kind for h in prev.hits} if prev else set()
    subject = {fp.subject for fp in FACT_PATTERNS if fp.kind in kinds}
    want = "tx_time" if subject == {"tx"} else "block_timestamp" if kinds <= BLOCK_KINDS else None
    if prev is None or not kinds or want is None:
        return [facts.out.cannot(part.text, "the offline planner reads a bare 'when' as the "
                                 "time of the transaction or block the question before it "
                                 "names, and it names neither; ask it in full ('When was "
                                 "0x<hash> mined?')")]  # fmt: skip
    return _asked_again(facts, prev, want, part)


def _said_already(out: _Builder, made_by_part: list[tuple[_Part, list[int]]],
                  part: _Part) -> list[int] | None:
    """The items of a part asking only for what an answer the task asked before it states
    already (``_SAID_ALREADY``): none, since that answer states it ("Does 0xA hold any
    USDC? Yes or no." leads with its yes or no); declined naming what it asks when no
    question before it has such an answer. None when ``part`` asks anything else."""
    text = part.text.strip(" ?!.,")
    for regex, wants, kinds, which in _SAID_ALREADY:
        if not regex.fullmatch(text) or part.condition:
            continue
        if any(out.items[n].get("kind") in kinds for _p, made in made_by_part for n in made):
            return []
        return [out.cannot(part.text, f"{text!r} asks {wants} of the question before it, and "
                           f"the offline planner states it only in the answer to {which}")]  # fmt: skip
    return None


#: "Show me them.", "List those too", "What are they?" after a question: its values listed.
_SHOW_THEM = _p(r"(?:(?:and|also|then|so|now)\s+)?(?:(?:please|can\s+you|could\s+you)\s+)?(?:(?:show|list|"
                r"give|tell|display)\s+(?:me\s+|us\s+)?(?:all\s+)?(?:of\s+)?(?:them|those|these)|(?:what|which)"
                r"\s+(?:are|were)\s+(?:they|those|these))(?:\s+(?:all|each|too|as\s+well|please|then|"
                r"individually|one\s+by\s+one))*")


def _show_them(out: _Builder, made_by_part: list[tuple[_Part, list[int]]],
               part: _Part) -> list[int] | None:
    """ "How many USDC transfers did 0xA send and how many did it receive? Show me them.": the
    transfers counted before it, listed (outside round 40 dropped it, at exit 0); with no
    count of transfers before it, declined by name, never dropped. None when ``part`` asks
    anything else."""
    if not _SHOW_THEM.fullmatch(part.text.strip(" ?!.,")):
        return None
    counts = [out.items[n] for _p, made in made_by_part for n in made
              if out.items[n].get("kind") == "transfer_count"]  # fmt: skip
    if not counts:
        return [out.cannot(part.text, "it asks to list what the question before it read, and "
                           "the offline planner lists only USDC transfers it counted; ask for "
                           "them in their own words ('list the USDC transfers of 0xA')")]  # fmt: skip
    return [out.add({"text": str(c.get("text", "")).replace("USDC transfer count", "USDC transfers", 1),
                     "kind": "transfer_list", "params": dict(c.get("params") or {})})
            for c in counts]  # fmt: skip


_THEY = frozenset({"they", "them", "their", "theirs"})
_EACH = frozenset({"each", "both"})


def _pronoun_holders(t: _Task) -> None:
    """ "How much ETH do 0xA and 0xB hold? Do they hold any USDC?": an account fact asked of
    "they"/"them"/"their" is asked of the holders of the nearest question before it that
    named holders (outside round 23's follow-ups were declined on 'they'); so is one asked
    of "each" or "both" ("For 0xA and 0xB, how much USDC did each send and how much did
    each receive?": outside round 60, A2, declined the second). With no such question, the
    pronoun stays unread and the part is declined as before."""
    for n, part in enumerate(t.parts):
        said = re.search(r"\b(?:they|them|their|theirs|each|both)\b", part.text, re.I)
        if (said and part.hits and part.leftover and part.leftover <= _THEY
                and all(h[1].subject == "tx" for h in part.hits)
                and any(at < part.start + said.start() for at, _h in t.hashes)):  # fmt: skip
            part.leftover = set()  # "How much gas did they use?": the transactions before it
            continue
        own = set(part.candidate.word.split()) if part.candidate else set()
        if (not said or part.subjects or part.mine or not part.hits
                or part.leftover - _THEY - _EACH - own
                or any(h[1].subject != "account" for h in part.hits)):  # fmt: skip
            continue
        before = [p for p in t.parts[:n] if (p.subjects or p.mine) and p.hits
                  and all(h[1].subject == "account" for h in p.hits)]  # fmt: skip
        if said.group(0).lower() in _EACH:
            # Every holder asked before it in its sentence: "How much USDC did 0xA and 0xB
            # each send, and how much did each receive?" asked the list once per address.
            before = [p for p in before if p.sentence == part.sentence] or before[-1:]
            held = ([*dict.fromkeys(s for p in before for s in p.subjects)],
                    [*dict.fromkeys(s for p in before for s in p.mine)])
            if len(held[0]) + len(held[1]) >= 2:
                part.subjects, part.mine = held
                part.leftover -= _EACH
        elif before:
            part.subjects, part.mine = list(before[-1].subjects), list(before[-1].mine)
            part.leftover -= _THEY  # an aggregate's own word is its (settled next)


def _own_hashes(t: _Task, part: _Part, start: int, end: int) -> list[str]:
    """The transactions a part's fact is of: a hash of its own part first ("Did 0xA
    succeed? I mean 0xB." asks of 0xA there); with none, "each"/"both"/"they" are every
    one said before it ("When was 0xA mined? When was 0xB mined? How much gas did each
    use?": outside round 25 got 0xB's alone at exit 0), "it" the last one said before it;
    else the nearest."""
    own = [(at, h) for at, h in t.hashes if part.start <= at < part.start + len(part.text)]
    if own:
        found = _nearest(own, start, end)
        listed: list[list[str]] = []
        for n, (at, h) in enumerate(own):  # "0xA and 0xB", "0xA, 0xB or 0xC": each of them
            joined = n and _LIST_JOIN.fullmatch(t.task[own[n - 1][0] + len(own[n - 1][1]):at])
            listed[-1:] = [[*listed[-1], h]] if joined else [*listed[-1:], [h]]
        return list(dict.fromkeys(next((g for g in listed if found in g), [])))
    before = list(dict.fromkeys(h for at, h in t.hashes if at < part.start))
    if before and re.search(r"\b(?:each|both|all|they|them|their)\b", part.text, re.I):
        return before
    if before and _TX_PRONOUN.search(part.text):
        return before[-1:]
    return [found] if (found := _nearest(t.hashes, start, end)) else []


#: The clause after "when" naming a transaction's block ("... when 0x<hash> was mined").
_WHEN_MINED = _p(r"(?:the\s+)?(?:transaction\s+|tx\s+)?0x[0-9a-fA-F]{64}\s+(?:was|got|were)\s+"
                 r"(?:mined|included|confirmed)")


def _follow_up(t: _Task, facts: _FactItems, made_by_part: list[tuple[_Part, list[int]]],
               part: _Part) -> list[int] | None:
    """The items of a part that asks again of the question before it (an asset, "yes or
    no", its hash, "when"), or None when it is no such part."""
    if (part.condition and _WHEN_MINED.fullmatch(part.text.strip(" ?!.,"))
            and not _SEND.search(t.sentence(part.sentence))  # an order's condition gates it
            and any(p.sentence == part.sentence and p.start < part.start for p in t.parts)):  # fmt: skip
        return []  # "the base fee when 0x<hash> was mined": that fact's block, named there
    for found in (lambda: _asset_follow_up(t, facts, part),
                  lambda: _said_already(facts.out, made_by_part, part),
                  lambda: _show_them(facts.out, made_by_part, part),
                  lambda: _bare_when(t, facts, part),
                  lambda: _tx_named_again(facts, part)):  # fmt: skip
        made = found()
        if made is not None:
            return made
    return None


#: A condition on nothing ("Pay if needed.", "if possible", "if you can"): no what-if.
_AS_NEEDED = _p(r"\s*(?:needed|necessary|required|possible|so|you\s+(?:need|must|have|can|could|like|want|"
                r"wish|prefer)(?:\s+to)?|(?:it|that)\s*(?:is|['’]s)\s+(?:needed|necessary|required|possible|"
                r"ok(?:ay)?|fine|alright))\W*")


def _what_if(out: _Builder, part: _Part) -> None:
    """A condition on no fact nib reads ("if I sent it 1 USDC") asks about the chain as it
    would be: named as not read (the value now is not the answer), never dropped; one on
    nothing ("if needed") asks nothing."""
    if not _AS_NEEDED.fullmatch(part.text):
        out.cannot(f"condition: {part.text}", "it asks about the chain as it would be, and nib "
                   "reads it only as it is: the value now is not the answer; ask for the fact itself")


def _tx_named_again(facts: _FactItems, part: _Part) -> list[int] | None:
    """ "What was the gas used by 0x<h1>? And by transaction 0x<h2>?": a part whose only
    word read is "transaction" before a hash asks the transaction facts before it
    (:func:`_tx_follow_up`); else None (alone, it asks the status)."""
    if not part.hits or not all(_names_tx(h[1]) for h in part.hits):
        return None
    return _tx_follow_up(facts, part) or None


#: A part asking a question of its own with a question word ("and how much has it sent").
_WH_QUESTION = _p(_QUESTION_OPENS + r"|why)\b")


#: The words of a follow-up that only names how to present ("And ETH?", "In wei?").
_UNIT_ONLY = _p(r"\b(?:and|also|so|then|what|how|about|in|as|eth|ether|usdc|gwei|wei|cents|please)\b")


def _follow_up_elsewhere(facts: _FactItems, made_by_part: list[tuple[_Part, list[int]]],
                         part: _Part) -> list[int]:
    """A part no reading took that asks what another part's facts answer: another
    transaction's (:func:`_tx_follow_up`) or a comparison's winner (:func:`_winners_value`)."""
    return _tx_follow_up(facts, part) or _winners_value(facts.out, made_by_part, part)


#: "How much does it hold?" after "Which of 0xA and 0xB has the least USDC?".
_ITS_HOLDING = _p(r"(?:and\s+)?how\s+much\s+(?:usdc\s+|eth\s+|ether\s+)?(?:does|did)\s+(?:it|that\s+one|"
                  r"that\s+(?:address|account|wallet))\s+(?:hold|have|own)")


def _winners_value(out: _Builder, made_by_part: list[tuple[_Part, list[int]]], part: _Part) -> list[int]:
    """ "Which of 0xA, 0xB and 0xC has the least USDC? How much does it hold in cents?": the
    comparison's line names the winner with its value (in the unit asked), so the part is
    answered by it (round 47, C29, had it declined); else nothing."""
    if not _ITS_HOLDING.fullmatch(part.text.strip(" ?.!,")):
        return []
    before = [n for p, made in made_by_part if p.sentence == part.sentence - 1 for n in made]
    return [n for n in before if out.items[n].get("kind") == "comparison"
            and (out.items[n].get("params") or {}).get("op") in ("max", "min")][-1:]  # type: ignore[union-attr]


def _tx_follow_up(facts: _FactItems, part: _Part) -> list[int]:
    """ "Did 0x<hash> succeed? And 0x<other>?": a part naming only transactions asks the
    transaction facts of the question before it of them (round 47 had it declined); else
    nothing (the part is read as not read)."""
    prev = _question_before(facts.t, part)
    rest = TX_HASH.sub(" ", part.text)
    ends = [p.start + len(p.text) for p in facts.t.parts if p.start < part.start]
    said = facts.t.task[max(ends, default=0) : part.start] + " " + part.text
    if (prev is None or not TX_HASH.search(part.text) or part.subjects
            or not _ADDING.match(said.strip(" ?.!,;"))
            or any(h[1].subject != "tx" for h in prev.hits)
            or re.search(r"[a-z]{2,}", _TX_FOLLOW_WORDS.sub(" ", rest), re.I)):  # fmt: skip
        return []
    at = replace(prev, text=part.text, start=part.start, sentence=part.sentence, again=False,
                 leftover=set(), modifier=None, candidate=None, aggregate=None)  # fmt: skip
    return [n for _pos, fp, phrase in prev.hits for n in facts._fact(at, fp, 0, phrase)]


#: A follow-up adding a subject ("And 0x..?", "What about 0x..?"), never a correction ("I
#: mean 0x..", "Then 0x..": which one is asked is unclear, and declined).
_ADDING = _p(r"\s*(?:and|also|plus|(?:and\s+)?(?:what|how)\s+about)\b")
#: The words of a follow-up naming only transactions ("And what about 0x<hash>?").
_TX_FOLLOW_WORDS = _p(r"\b(?:and|also|then|what|how|about|for|of|by|in|that|the|same|transactions?|"
                      r"txs?|hash|with|plus)\b")


#: A part asking to show or list what another part named, in words ``_SHOW_THEM`` does not
#: read ("show me every one of them"): named as not read (outside round 59 had "show me them
#: all" dropped with nothing said).
_SHOW_WHAT = _p(r"\b(?:show|list|display|print)\b[^.?!;]*\b(?:them|those|these|all|each|every)\b")


def _unread_part(out: _Builder, part: _Part, t: _Task) -> list[int]:
    """A part no reading took: named when it asks anything ("What about ETH?", a subject
    with no fact: "...? Also 0xF." was dropped at exit 0; a question of its own), else
    nothing."""
    if ADDRESS.search(part.text) and not part.subjects:
        return []  # "... of 0xS and what about 0xF?": its address was read with another part
    if _WHAT_ABOUT.search(part.text):
        return [out.cannot(part.text, _FOLLOW_UP)]
    if _SHOW_WHAT.search(part.text):  # "Show me every one of them.": never dropped (round 59)
        return [out.cannot(part.text, "the offline planner did not read what to show here; ask "
                           "for it in its own words ('list the USDC transfers in blocks 5 to 9')")]
    if part.subjects or TX_HASH.search(part.text):
        return [out.cannot(part.text, "the offline planner did not read which fact the task "
                           "asks of it here; name the fact in this part ('the ETH balance of "
                           "0xF', 'the status of 0x<hash>')")]  # fmt: skip
    # A follow-up question alone in its sentence ("And from it?", "And since block 1?").
    asked = (part.sentence > 0 and t.task[part.start + len(part.text):].lstrip().startswith("?")
             and [p for p in t.parts if p.sentence == part.sentence] == [part] and not part.mine)
    if ((m := _WH_QUESTION.search(part.text)) and re.search(r"[a-z]{2,}", _OWN_WALLET.sub(
            " ", part.text[m.end():]), re.I)) or (asked and re.search(r"[a-z]{2,}", _UNIT_ONLY.sub(
            " ", part.text), re.I)):  # fmt: skip
        # "Do my wallet" (and 0xB ...) is a list's head; "And from it?", "And since block
        # 1?" are questions (a sweep of follow-ups found them dropped at exit 0).
        # "..., and how much has it sent?": a question of its own, never dropped (outside
        # round 44, B6: the run said every part was covered, at exit 0).
        return [out.cannot(part.text, "the offline planner did not read what this question "
                           "asks; name the fact and what it is of ('how much USDC has 0xA "
                           "sent?')")]  # fmt: skip
    return []


def _asks_any(t: _Task, part: _Part) -> bool:
    """Whether ``part`` asks yes or no whether a value is above 0 ("Does 0xA hold any
    USDC?"), also as the tail of a list the question's verb opens ("Do 0xA and 0xB hold
    any USDC?", split after "0xA"); a part asking its own question does not inherit it."""
    if _ANY_QUESTION.search(part.text):
        return True
    if not re.search(r"\bany\b", part.text, re.I) or _OWN_QUESTION.search(part.text):
        return False
    first = next(p for p in t.parts if p.sentence == part.sentence)
    return bool(_ANY_QUESTION.search(t.task[first.start : part.start + len(part.text)]))


def _holder_spans(t: _Task) -> list[tuple[int, int, str]]:
    """Every holder the task names, in order, with where it starts and ends: its addresses,
    and the agent's own wallet ("my wallet", "mine") as ""."""
    return sorted([*((at, at + len(a), a) for at, a in t.addresses),
                   *((m.start(), m.end(), "") for m in _OWN_WALLET.finditer(t.task))])


def _holders(t: _Task) -> list[tuple[int, str]]:
    """(where, holder) of every holder the task names (``_holder_spans``)."""
    return [(at, holder) for at, _end, holder in _holder_spans(t)]


def _listed_with(t: _Task, near: str) -> list[str]:
    """``near`` with the holders listed beside it ("0xA and 0xB", "0xA, 0xB and 0xC", "my
    wallet and 0xB"; the agent's own wallet is ""): a part naming no address borrows the
    whole list of the part it refers to. Before, "How much USDC and how much ETH do 0xA and
    0xB hold?" asked the USDC of 0xA only, at exit 0."""
    groups: list[list[str]] = []
    end = -1
    for at, stop, holder in _holder_spans(t):
        if groups and _LIST_JOIN.fullmatch(t.task[end:at]):
            groups[-1].append(holder)
        else:
            groups.append([holder])
        end = stop
    group = next((g for g in groups if near in g), [near])
    return list(dict.fromkeys(group))


#: Kinds read of USDC only: a part naming another token's symbol asks something else.
_USDC_ONLY = frozenset({"usdc_balance", "transfer_count", "transfer_list",
                        "transfer_max"}) | TOTAL_KINDS


def _other_token(t: _Task, part: _Part, kind: str) -> str | None:
    """The symbol of another token than USDC the part names for a USDC-only kind ("my DAI
    balance": outside round 21 got the USDC balance at exit 0), or None."""
    stop = part.start + len(part.text)
    named = [s for at, s in t.symbols if part.start <= at < stop and s.upper() != "USDC"]
    return named[0] if named and kind in _USDC_ONLY else None


def _shares_block(t: _Task, part: _Part) -> bool | None:
    """Whether a part naming no block takes the block another part of its sentence
    names: a bare list item sharing one tail ("the base fee and the timestamp at block
    5", "the base fee at block 5, and the timestamp") does; a question of its own in
    the present tense ("What is the base fee, and what was the timestamp 3 blocks
    ago?", "What was the timestamp 3 blocks ago, and what is the base fee?") is at the
    head (False); a past-tense question of its own, a present-tense one after a
    present-tense block ("What is X at block 5, and what is Y?"), or a present-tense
    question followed by ", and" a bare part with the block, is ambiguous (None)."""
    holders = [p for p in t.parts if p.sentence == part.sentence and not p.again
               and p is not part and _block_params(p.text)]  # fmt: skip
    if _REFERS_BACK.search(part.text):
        return True
    own_q = bool(_OWN_QUESTION.search(part.text)) and not _ABOUT.search(part.text)
    past = bool(_PAST.search(part.text))
    verdicts: set[bool | None] = set()
    later = [q for q in holders if q.start > part.start]
    # Of the parts after it, the nearest is its list's tail ("the gas limit and gas used
    # of block 4, and the gas used of block 5": outside round 60, A3, held it ambiguous).
    for q in [q for q in holders if q.start < part.start] + later[:1]:
        if not q.hits:  # a bare trailing ", at block 5": the whole sentence's block
            verdicts.add(True)
        elif q.start > part.start:
            q_own = bool(_OWN_QUESTION.search(q.text)) and not _ABOUT.search(q.text)
            if q_own:
                verdicts.add(None if past else False)
                continue
            between = t.task[part.start + len(part.text) : q.start]
            if re.search(r",\s*(?:and|&)\b", between) and own_q and _PRESENT.search(part.text):
                verdicts.add(None)
            else:
                verdicts.add(True)
        elif own_q:  # "What was X at block 5, and what is Y?": the tenses differ
            contrast = _PAST.search(q.text) and not _PRESENT.search(q.text)
            verdicts.add(False if contrast and _PRESENT.search(part.text) and not past
                         else None)  # fmt: skip
        else:
            verdicts.add(True)
    if not verdicts:
        return True
    return verdicts.pop() if len(verdicts) == 1 else None


class _FactItems:
    """The items of the parts that ask for facts: one per fact phrase, with the block,
    address, token, transaction or sheet subject the task gives it, or why not."""

    def __init__(self, task: _Task, out: _Builder) -> None:
        self.t = task
        self.out = out

    def facts(self, part: _Part) -> list[int]:
        if part.leftover:
            words = ", ".join(repr(w) for w in sorted(part.leftover)[:4])
            return [self.out.cannot(part.text, f"the offline planner does not know {words} "
                                    "here; it answers only a question it reads in full")]  # fmt: skip
        if part.modifier:
            label = ", ".join(h[2] for h in part.hits)
            return [self.out.cannot(part.text, f"the offline planner cannot read "
                                    f"{label!r} with {part.modifier!r}")]  # fmt: skip
        agg = part.aggregate
        kinds = [h[1].kind for h in part.hits]
        if agg is not None and (len(set(kinds)) != 1 or kinds[0] not in AGGREGATE_KINDS[agg.op]):
            label = ", ".join(h[2] for h in part.hits)
            takes = ", ".join(sorted(AGGREGATE_KINDS[agg.op]))
            return [self.out.cannot(part.text, f"the offline planner cannot read {label!r} "
                                    f"with {agg.word!r}: it takes {agg.word!r} over the "
                                    f"values of one of {takes} read for several addresses")]  # fmt: skip
        made: list[int] = []
        for pos, fp, phrase in part.hits:
            if (
                fp.kind == "block_number"
                and len(kinds) > 1
                and (_NAMES_THE_BLOCK.search(part.text[:pos])
                     or re.match(r"['’]s\b", part.text[pos + len(phrase) :]))
            ):
                # "the base fee of the latest block", "the latest block's gas limit": the
                # block whose fact is asked, a parameter, not a question.
                continue
            made.extend(self._fact(part, fp, pos, phrase))
        return made

    def _block_scope(self, part: _Part, fp: FactPattern) -> dict[str, str]:
        own = _block_params(part.text) or _head_block(part.text, fp)
        if own or _LATEST.search(part.text) or (fp.subject == "tx" and TX_HASH.search(part.text)):
            return own  # a transaction named by its hash is in its own block, whatever is said
        sentence = self.t.block_sentence(part.sentence)
        found = _block_params(sentence) or _head_block(sentence, fp)
        # A block, or another part's window beside a one-block fact (rounds 34, 35 declined
        # "..., and what is the USDC balance of 0xC?" as a balance over the window).
        if "block" in found or (found and fp.kind not in WINDOW_KINDS):
            share = _shares_block(self.t, part)
            if share is None and "block" not in found:
                return {}  # no one-block fact is read over a window: its own, at the head
            if share is None:  # its own question or another part's: ambiguous
                return {"ambiguous": _span_text(found).strip()}
            if not share:  # a question of its own, present tense: at the head
                return {}
        if not found and (fp.kind in WINDOW_KINDS or _REFERS_BACK.search(part.text)):
            found = _window_before(self.t, part)
        if found and "block" not in found and not _shares_window(self.t, part, fp):
            return {"ambiguous": _span_text(found).strip()}
        return found

    def _fact(self, part: _Part, fp: FactPattern, pos: int, phrase: str) -> list[int]:
        made = self._fact_items(part, fp, pos, phrase)
        for n in made:
            item = self.out.items[n]
            address = str((item.get("params") or {}).get("address", ""))
            at = self.t.task.find(address, part.start) if address else -1
            self.out.at.setdefault(n, at if at >= 0 else part.start + pos)
        return made

    def _fact_items(self, part: _Part, fp: FactPattern, pos: int, phrase: str) -> list[int]:
        fp = _listed_again(self.t, part, fp, phrase)
        if fp.kind == "tx_gas_used" and (
                _no_tx_but_a_block(self.t, part) or _names_tx_block(part.text)
                or re.search(r"\b(?:by|of|in)\s+(?:the|that|its|this)\s+block\b", part.text, re.I)
                or _list_head_of_a_block(self.t, part)):  # fmt: skip
            # "the gas used and the gas limit of block 2": a block is named and no
            # transaction, so the bare "gas used" of the list is the block's; so is "the gas
            # used by the block containing 0x<hash>" (outside round 29 got the transaction's).
            fp = _BLOCK_GAS_USED
        scope = self._block_scope(part, fp)
        if "ambiguous" in scope:
            ref = scope["ambiguous"]
            at = "over the whole chain" if fp.kind in WINDOW_KINDS else "at the latest block"
            return [self.out.cannot(fp.label, f"'{ref}' is said in another part of the "
                                    f"task: ask the {fp.label} {at} or {ref} in its own words")]  # fmt: skip
        where = _span_text(scope)
        holders = part.subjects or [m.group(0) for m in TX_HASH.finditer(part.text)]
        if fp.kind in BLOCK_ONLY_KINDS and holders and (part.subjects or not _names_tx_block(part.text)):
            return [self.out.cannot(f"{fp.label} of {holders[0]}", f"the task asks the "
                                    f"{fp.label} of {holders[0]}, and it is a block's: no tool "
                                    "reads it for an account or a transaction; ask it of a "
                                    f"block ('the {fp.label} of the latest block')")]  # fmt: skip
        if (paid := _paid_gas_price(self.t, part, fp, holders) or _own_transfers(part, fp)
                or _latest_transfers(part, fp)) is not None:
            return [self.out.cannot(*paid)]
        tx = _transaction_block(self.t, part, fp, scope)
        if tx is not None and fp.kind == "block_timestamp":  # its block's time: when mined
            return [self.out.add({"text": f"mining time of {tx}", "kind": "tx_time",
                                  "params": {"tx_hash": tx}})]  # fmt: skip
        if tx is not None:  # "the base fee of that block": of the block it was mined in
            return [self.out.add({"text": f"{fp.label} of the block {tx} was mined in",
                                  "kind": fp.kind, "params": {"of_tx": tx}})]  # fmt: skip
        if scope and fp.kind not in BLOCK_KINDS | WINDOW_KINDS:
            return [self.out.cannot(f"{fp.label}{where}", f"no tool reads {fp.label}{where}")]
        if "block" in scope and fp.kind in WINDOW_KINDS:
            scope = {"from_block": scope["block"], "to_block": scope["block"]}
        elif scope and "block" not in scope and fp.kind in BLOCK_KINDS:
            return [self.out.cannot(f"{fp.label}{where}", f"no tool reads {fp.label} over a "
                                    "range of blocks")]  # fmt: skip
        params = dict(scope)
        if fp.field:
            params["field"] = fp.field
        start = part.start + pos
        end = start + len(phrase)
        if fp.subject == "account":
            return self._accounts(part, fp, params, where, start, end)
        if fp.subject == "token":
            token = _token_of(self.t, part, start, end)
            other = [s for _, s in self.t.symbols if s.upper() != "USDC"]
            if token:
                params["token"] = token
            elif other or not re.search(r"\busdc\b|\bthe\s+token\b|\btoken['’]s\b", self.t.task, re.I):
                named = other[0] if other else "no token"
                return [self.out.cannot(f"{fp.label} of {named}", "the task names no token "
                                        "address the chain reads can use")]  # fmt: skip
            label = f"{fp.label} of {token}" if token else f"{fp.label} of USDC"
            return [self.out.add({"text": label, "kind": fp.kind, "params": params})]
        if fp.subject == "tx":
            txs = _own_hashes(self.t, part, start, end)
            if not txs:
                return [self.out.cannot(fp.label, "the task gives no transaction hash")]
            return [self.out.add({"text": f"{fp.label} of {tx}", "kind": fp.kind,
                                  "params": {**params, "tx_hash": tx}}) for tx in txs]  # fmt: skip
        free = _FREE_FIELDS.get((fp.kind, fp.field or ""))
        if free and not self.t.asks_paid and "company" not in phrase.lower():  # a name
            made = self._free_field(free, start, end)
            if made is not None:
                return [made]
        if fp.subject in ("symbol", "protocol"):
            return [self._sheet(fp, params, start, end)]
        label = f"{' '.join(phrase.lower().split())} ({fp.label})" if fp.field else fp.label
        return [self.out.add({"text": f"{label}{where}", "kind": fp.kind, "params": params})]

    def _free_field(self, free: tuple[str, str], start: int, end: int) -> int | None:
        """The free read of a sheet field the chain also holds, for the run's USDC or a
        token address the task names; None (the sheet is what it needs) for another
        symbol the chain reads cannot find."""
        kind, label = free
        token = _nearest(self.t.addresses, start, end)
        sym = _nearest(self.t.symbols, start, end)
        if token is None and (sym or "").upper() != "USDC":
            return None
        params = {"token": token} if token else {}
        text = f"{label} {token or 'USDC'} on this chain"
        return self.out.add({"text": text, "kind": kind, "params": params})

    def _sheet(self, fp: FactPattern, params: dict[str, str], start: int, end: int) -> int:
        kind, label = fp.kind, fp.label
        sym = _nearest(self.t.symbols, start, end)
        proto = _nearest(self.t.protocols, start, end)
        if kind == "token_factsheet" and proto and (not sym or _closer(self.t.task, proto, sym, end)):
            kind, label = "protocol_factsheet", "protocol fact sheet"
        name = sym if kind == "token_factsheet" else proto
        shop = self.t.shopping
        if name is None and params.get("field") and shop is not None and shop.kind == kind:
            name = shop.subject  # "buy the USDC sheet ... and tell me who the issuer is"
        if name is None:
            what = "token symbol" if kind == "token_factsheet" else "protocol"
            return self.out.cannot(label, f"the task names no {what} the paywall has a sheet for")
        params[("symbol" if kind == "token_factsheet" else "name")] = name
        if self.t.urls:
            params["url"] = self.t.urls[0]
        if params.get("field"):
            label = f"{params['field']} from the {label}"
        return self.out.add({"text": f"{label} of {name}", "kind": kind, "params": params})

    def _accounts(
        self, part: _Part, fp: FactPattern, params: dict[str, str], where: str, start: int, end: int
    ) -> list[int]:
        subjects = list(dict.fromkeys(part.subjects))
        if other := _other_token(self.t, part, str(fp.kind)):
            return [self.out.cannot(part.text, f"the task asks of {other}; {fp.label} is read of "
                                    "USDC only (ETH and USDC balances, USDC transfers)")]
        if fp.kind in TOTAL_KINDS:
            return self._totals(part, fp, params, where, subjects)
        sentence = self.t.raw_sentence(part.sentence)
        if fp.kind in ONE_WAY_KINDS and (ways := _one_ways(part.text, subjects, sentence)) is not None:
            return [_one_way_item(self.out, part, fp, params, where, ends)
                    for ends in _either(ways, fp, sentence)]
        subjects, back = _referring_back(self.out, self.t, part, fp, (params, where), subjects)
        if back is not None:
            return [back]
        if not subjects and fp.kind in WINDOW_KINDS:
            return [self.out.add({"text": f"{fp.label}{where}", "kind": fp.kind,
                                  "params": params})]  # fmt: skip
        if not subjects and _MINE.search(part.text):
            # "my balance": the agent's own wallet, named by the task. No address param:
            # absent means the agent's wallet (agent/loop/checklist.py KIND_PARAMS).
            text = f"{fp.label} of the agent's wallet{where}"
            return [
                self.out.add(
                    {"text": text, "kind": fp.kind, "params": {**params, "wallet": "self"}}
                )
            ]
        if not subjects:
            # A condition's balance is never borrowed from another part (the recipient of
            # the payment it gates is no subject of it).
            near = None if part.condition else _nearest(_holders(self.t), start, end)
            if near is None:
                return [self.out.cannot(fp.label, f"the task names no address for the {fp.label}")]
            subjects = _listed_with(self.t, near)
        made = []
        for address in _with_own_wallet(self.t.task, part, subjects):
            item: _Draft = {"text": f"{fp.label} of {address}{where}", "kind": fp.kind,
                    "params": {**params, "address": address}}  # fmt: skip
            if not address:  # the agent's own wallet, beside the addresses
                item = {"text": f"{fp.label} of the agent's wallet{where}", "kind": fp.kind,
                        "params": {**params, "wallet": "self"}}  # fmt: skip
            made.append(self.out.add(item))
        if part.aggregate is not None:
            made.append(_aggregate_item(self.out, part.text, part.aggregate, str(fp.kind), fp.label, made))
        elif _compare_words(part) and fp.kind in VALUE_UNITS:
            made.append(self.out.cannot(part.text, "a comparison needs two or more addresses"))
        return made

    def _totals(
        self, part: _Part, fp: FactPattern, params: dict[str, str], where: str,
        subjects: list[str],
    ) -> list[int]:
        """A total sent or received: of each address the part names (or the agent's own
        wallet, "I"/"my"), with the address after "to"/"from" as its counterparty, over
        every block from the first unless the task names a range (the answer states it)."""
        # The address after "to"/"from", and every one after it ("to 0xB or 0xC").
        first = _TO_FROM.search(part.text)
        others = [] if first is None else [
            a for a in subjects if part.text.find(a) < 0 or part.text.find(a) >= first.start(2)
        ]  # fmt: skip
        if len(others) > 1:
            return [self.out.cannot(part.text, f"a {fp.label} is read with one counterparty "
                                    "(to or from one address)")]  # fmt: skip
        whose = [a for a in subjects if a not in others]
        if others:
            params = {**params, "counterparty": others[0]}
        span = where or " since block 0"
        whom = f" {'to' if fp.kind == 'usdc_sent_total' else 'from'} {others[0]}" if others else ""
        if not whose and _MINE.search(part.text):
            text = f"{fp.label} by the agent's wallet{whom}{span}"
            return [self.out.add({"text": text, "kind": fp.kind,
                                  "params": {**params, "wallet": "self"}})]  # fmt: skip
        if not whose:
            return [self.out.cannot(fp.label, f"the task names no address for the {fp.label}")]
        return [
            self.out.add({"text": f"{fp.label} by {address}{whom}{span}", "kind": fp.kind,
                          "params": {**params, "address": address}})  # fmt: skip
            for address in whose
        ]


def _with_own_wallet(task: str, part: _Part, subjects: list[str]) -> list[str]:
    """``subjects`` with the agent's own wallet ("") where the part names it as a holder
    beside them ("my wallet or 0xB"), in the order said (a difference is the first minus
    the second)."""
    if not part.mine:
        return subjects

    def said_at(address: str) -> int:  # a merged part's addresses may be said before it
        found = task.find(address, part.start)
        return found if found >= 0 else task.find(address)

    placed = [(said_at(a), n, a) for n, a in enumerate(subjects)]
    return [a for *_order, a in sorted([*placed, (part.mine[0], -1, "")])]


def _holder_of(item: Mapping[str, object]) -> str:
    """The address (or the agent's wallet) a value item is of."""
    params = item.get("params")
    got = params if isinstance(params, Mapping) else {}
    return str(next((got[k] for k in ("address", "sender", "recipient", "wallet") if got.get(k)), "")).lower()


def _aggregate_item(out: _Builder, text: str, agg: _Aggregate, kind: str, label: str,
                    made: list[int]) -> int:
    """The item computing ``agg`` over the values ``made`` (one ``kind``, one address
    each), or why not: a difference takes two, any other aggregate two or more."""
    n = len(made)
    if n < 2 or (agg.op == "diff" and n != 2):
        want = "exactly two" if agg.op == "diff" else "two or more"
        return out.cannot(text, f"{agg.word!r} is read over {want} addresses' "
                               f"values; this asks it over {n}")  # fmt: skip
    if kind not in AGGREGATE_KINDS[agg.op]:
        return out.cannot(text, f"{agg.word!r} is not read over {label} values")
    if len({_holder_of(out.items[m]) for m in made}) != n:
        # "How many transfers did 0xA receive, and how many did it send? Which is larger?":
        # one address's two values, not answered as which address holds more (round 47).
        return out.cannot(text, f"{agg.word!r} is read over different addresses' values, "
                                "and these are one address's")  # fmt: skip
    refs: list[_Ref] = [{"ref": m} for m in made]
    params: dict[str, _Param] = {"of": refs, "op": agg.op}
    if agg.op in ("max", "min"):
        word = {("max", 2): "more", ("min", 2): "less"}.get((agg.op, n))
        word = word or ("the most" if agg.op == "max" else "the least")
        what = f"which holds {word} ({label})"
    elif agg.op == "sum":
        what = f"combined {label}"
    elif agg.op == "diff":
        # The size first, then which holds more (round 35, Q47: "the first minus the
        # second" beside a size read as the wrong sign).
        what = f"difference of the {label}s (its size, and which holds more)"
    else:
        test = _count_test(text, kind)
        if isinstance(test, str):
            return out.cannot(text, test)
        params.update(test)
        unit = VALUE_UNITS.get(kind, "").upper()
        what = f"how many of the addresses have a {label} {test['cmp']} {test['than']} {unit}"
    unread = _unread(out.items, made)
    if unread:
        return out.cannot(what, unread)
    return out.add({"text": what.strip(), "kind": "comparison", "params": params})


#: Where a sentence ends (a unit said after it is no unit of a value before it).
_SENTENCE_END = _p(r"[?!;]|\.(?:\s|$)")


def _unit_claims(t: _Task, out: _Builder) -> dict[int, int]:
    """The value each unit is said right after, by the unit's place: the nearest value
    asked before it in its sentence, with no other value between, when its kind takes the
    unit ("its base fee in gwei, and my ETH balance in ether": gwei is the base fee's,
    ether the balance's). A unit said before every value, or after one that cannot take
    it, claims none and is placed as before."""
    placed = sorted((a, n) for n, a in out.at.items()
                    if out.items[n].get("kind") and not out.items[n].get("unanswerable"))  # fmt: skip
    claims: dict[int, int] = {}
    for pos, unit in t.units_at:
        before = [(a, n) for a, n in placed if a <= pos]
        if not before or _SENTENCE_END.search(t.task[before[-1][0] : pos]):
            continue
        n = before[-1][1]
        if out.items[n].get("kind") in UNIT_KINDS.get(unit, ()):
            claims[pos] = n
    return claims


class _ReaderChecks:
    """The checks a read ends with, and its checklist ids: windows and blocks read by some
    item, units placed and computed, ordered payments and conditions, ids resolved (the
    second half of :class:`_Reader`, which holds the state these use)."""

    t: _Task
    out: _Builder
    facts: _FactItems
    by_sentence: dict[int, list[int]]
    made_by_part: list[tuple[_Part, list[int]]]

    def _decline(self, n: int, reason: str) -> None:
        self.out.items[n] = {"text": self.out.items[n]["text"], "kind": None,
                             "unanswerable": reason}  # fmt: skip

    def _windows_read(self) -> None:
        """Two windows named ("the last 3 and 5 blocks", "the last 3 blocks and the last 5
        blocks") and one no item reads: every window fact is declined naming them, never
        read over one window (or the default one) as if it answered both."""
        said = [m.group(1) for m in _WINDOW.finditer(self.t.task)]
        said += [n for m in _WINDOW_LIST.finditer(self.t.task) for n in m.groups()]
        read = {str((i.get("params") or {}).get("blocks")) for i in self.out.items
                if i.get("kind") in WINDOW_KINDS}  # fmt: skip
        if len(set(said)) < 2 or set(said) <= read:
            return  # one window, or each named window read by its own item
        named = " and ".join(f"the last {n} blocks" for n in dict.fromkeys(said))
        for n, item in enumerate(self.out.items):
            if item.get("kind") in WINDOW_KINDS and not item.get("unanswerable"):
                self._decline(n, f"the task names {named}; the offline planner reads one "
                              "window of blocks per task (ask each window in its own task)")  # fmt: skip

    def _blocks_read(self) -> None:
        """Every block the task names is read by an item (or an item declines it): one no
        item took is declined by name, and so is every value of a block kind read at no
        block (the head) in a part that does not ask for the head, as it may be the named
        block's: never a value for another block than asked."""
        refs = [m.group(1) for m in _BLOCK.finditer(_RANGE.sub(" ", self.t.task))]
        refs += [m.group(1) for m in _BLOCKS_N.finditer(self.t.task)]
        taken = {str(v) for i in self.out.items for k, v in (i.get("params") or {}).items()
                 if k in ("block", "from_block", "to_block")}  # fmt: skip
        said = " ".join(str(i["text"]) for i in self.out.items if i.get("unanswerable"))
        missed = [r for r in dict.fromkeys(refs)
                  if r not in taken and not re.search(rf"\bblocks?\s+{re.escape(r)}(?![\w-])", said)]  # fmt: skip
        if not missed:
            return
        named = ", ".join(f"block {r}" for r in missed)
        for n, item in enumerate(self.out.items):
            params = item.get("params") or {}
            if (item.get("kind") in BLOCK_KINDS and not item.get("unanswerable")
                    and not any(k in params for k in ("block", "from_block", "to_block"))
                    and not self._asks_head(n)):  # fmt: skip
                self._decline(n, f"the task names {named}, and the offline planner did not "
                              "read which block this value is asked at")  # fmt: skip
        self.out.cannot(named, f"the offline planner did not read which fact the task asks "
                        f"at {named}; ask for each block's fact in its own words "
                        "('the base fee at block 3 and the base fee at block 4')")  # fmt: skip

    def _asks_head(self, n: int) -> bool:
        """True when the part item ``n`` was read from names the head ("now", "latest")."""
        return any(n in made and _LATEST.search(part.text) for part, made in self.made_by_part)

    def _compare_back(self, part: _Part, agg: _Aggregate) -> list[int]:
        """ "the balances of 0xA and 0xB, which holds more?" (or "..., combined?"): the
        aggregate of the values of one kind its sentence asked (else the sentence before
        it: "... of 0xA and 0xB? Which is larger?"), or why not. One naming another asset
        ("How much ETH do 0xA and 0xB hold? What is their combined USDC?") is over that
        asset's balances of the same holders (``_aggregate_of_asset``)."""
        other = _aggregate_of_asset(self.t, self.facts, part, agg)
        if other is not None:
            return other
        # An asset it names is the values' kind, wherever they were asked ("... ETH of 0xA
        # and 0xB? ... combined USDC? And their combined ETH?": the ETH, not the USDC).
        named = _named_balance(part)
        values: list[int] = []
        for at in range(part.sentence, -1, -1):
            made = self.by_sentence.get(at, ())
            values = [n for n in made if self.out.items[n].get("kind") in VALUE_UNITS
                      and named in (None, self.out.items[n].get("kind"))]  # fmt: skip
            # Unnamed, the values are this sentence's or the one before, past sentences that
            # only compared them ("... hold? Which has more? By how much?", outside round 44).
            if values or (named is None and at < part.sentence and any(
                    self.out.items[n].get("kind") != "comparison" for n in made)):  # fmt: skip
                break
        values = _chained_values(self.out, self.by_sentence, at, values) if len(values) == 1 else values
        kinds = {str(self.out.items[n]["kind"]) for n in values}
        if len(values) < 2 or len(kinds) != 1:
            return [self.out.cannot(part.text, f"{agg.word!r} is read over two or more values "
                                    "of one kind asked in its sentence")]  # fmt: skip
        label = self.out.items[values[0]]["text"].split(" of ")[0]
        return [_aggregate_item(self.out, part.text, agg, kinds.pop(), label, values)]

    def _units_taken(self) -> None:
        """A unit the task asks for ("in wei") that no asked fact can be given in is
        declined by name, never dropped while the value is given in another unit."""
        asked = [i for i in self.out.items if i.get("kind")]
        for unit in dict.fromkeys(self.t.units):
            if asked and not any(i["kind"] in UNIT_KINDS.get(unit, ()) for i in asked):
                facts = ", ".join(str(i["text"]) for i in asked)
                self.out.cannot(f"in {unit}", f"{unit!r} is not a unit {facts} can be given in")

    def _units_placed(self) -> None:
        """Two units asked for one kind are paired with values by place, each said after
        the values it is for; a unit said before every value of its kind ("In cents, 0xA's
        balance, and in atomic units, 0xB's"), or one no value takes, leaves the pairing
        unread: those values are declined, never given in another part's unit."""
        unread: list[tuple[int, str]] = []
        claims = _unit_claims(self.t, self.out)
        for n, item in enumerate(self.out.items):
            kind = item.get("kind")
            # A unit another kind's value claims is that value's, no conflict of this kind's.
            said = [(pos, u) for pos, u in self.t.units_at if kind in UNIT_KINDS.get(u, ())
                    and self.out.items[claims.get(pos, n)].get("kind") == kind]  # fmt: skip
            names = {u.replace("ether", "eth") for _pos, u in said}
            if len(names) <= 1 or item.get("unanswerable"):
                continue
            mine = [m for m, other in enumerate(self.out.items)
                    if other.get("kind") == kind and m in self.out.at]  # fmt: skip
            first = min((self.out.at[m] for m in mine), default=0)
            taken = {str(self._unit_of(m, self.out.items[m])).replace("ether", "eth") for m in mine}
            if said[0][0] < first or taken != names:
                units = " and ".join(repr(u) for u in dict.fromkeys(u for _p, u in said))
                unread.append((n, f"{units} are both asked for a {str(kind).replace('_', ' ')} "
                               "and the offline planner pairs a unit only with the values "
                               "said before it; say each unit after its value ('0xA in "
                               "cents and 0xB in atomic units')"))  # fmt: skip
        for n, why in unread:
            self._decline(n, why)

    def _unit_of(self, n: int, item: _Draft) -> str | None:
        """The unit the task asks ``item`` (item ``n``) in, if its kind can be given in one.
        Two units asked for one kind ("0xA in cents and 0xB in atomic units") are each the
        unit of the values asked before it: the first said after the item's own place and
        before the next item's, else the first after it, else the last before it."""
        kind = item.get("kind")
        claims = _unit_claims(self.t, self.out)
        own = [u for pos, u in self.t.units_at if claims.get(pos) == n]
        if own:  # "its base fee in gwei": said right after its own phrase
            return own[0]
        at = self.out.at.get(n)
        # A unit said right after another kind's value, before this one, is that value's
        # ("its base fee in gwei, and my ETH balance"): never this one's.
        said = [(pos, u) for pos, u in self.t.units_at if kind in UNIT_KINDS.get(u, ())
                and not (pos in claims and at is not None and pos < at
                         and self.out.items[claims[pos]].get("kind") != kind)]  # fmt: skip
        if len({u.replace("ether", "eth") for _pos, u in said}) <= 1:
            return said[0][1] if said else None
        if at is None:
            return None
        takes = {u for _pos, u in said}
        later = [a for m, a in self.out.at.items() if a > at and m != n
                 and any(self.out.items[m].get("kind") in UNIT_KINDS.get(u, ()) for u in takes)]  # fmt: skip
        end = min(later, default=len(self.t.task) + 1)
        mine = [u for pos, u in said if at <= pos < end] or [u for pos, u in said if pos >= at]
        return mine[0] if mine else next((u for pos, u in reversed(said) if pos < at), None)

    def _computed_units(self) -> None:
        """A value asked in a unit its tool does not state ("in cents", a fee "in ether")
        gets a derived item converting it, exactly: the observed line keeps the value the
        tool stated. An aggregate's inputs need none: it states its value in the unit."""
        inputs = {
            ref["ref"]
            for item in self.out.items if item.get("kind") == "comparison"
            for ref in _refs((item.get("params") or {}).get("of"))
        }  # fmt: skip
        for n, item in enumerate(list(self.out.items)):
            unit = self._unit_of(n, item)
            if unit and n not in inputs and computed_unit(str(item.get("kind")), unit):
                named = {"atomic": "atomic units"}.get(unit, unit)
                self.out.add({"text": f"{item['text']} in {named}", "kind": "comparison",
                              "params": {"of": {"ref": n}, "op": "unit", "unit": unit}})  # fmt: skip

    def _sends(self, part: _Part, actions: list[int]) -> list[int]:
        """Payments into ``actions``; the part's facts are read beside mentions only."""
        made, mentions = [], 0
        for m in _SEND.finditer(part.text):
            mention, why = _not_an_order(self.t.task, part, m)
            if why:
                mentions += mention
                made.append(self.out.cannot(m.group(0), why))
                continue
            try:
                atomic = Decimal(m.group(1)).scaleb(6)
            except InvalidOperation:  # pragma: no cover - the regex admits only digits
                continue
            if atomic != atomic.to_integral_value() or atomic <= 0:
                made.append(self.out.cannot(m.group(0), "USDC amounts have at most 6 decimals"))
                continue
            made.append(self.out.add({
                "text": f"send {m.group(1)} USDC to {m.group(2)}", "kind": "transfer_receipt",
                "params": {"to": m.group(2), "amount": str(int(atomic))},
            }))  # fmt: skip
        actions.extend(made)
        if part.hits and mentions == len(made):
            return self.facts.facts(part)
        if part.hits:  # "Send 0.1 USDC to 0xB after checking 0xA's balance": never dropped
            self.out.cannot(part.text, "the offline planner reads a fact and a payment in one "
                            "clause only apart; ask the fact in its own sentence")  # fmt: skip
        return []

    def _condition(self, part: _Part, made: list[int] | None = None) -> int:
        made = made if made is not None else self.facts.facts(part) if part.hits else []
        values = [n for n in made if self.out.items[n].get("kind") in VALUE_UNITS]
        m = _CONDITION.search(part.text)
        if len(values) != 1 or m is None:
            return self.out.cannot(
                f"condition: {part.text}",
                "the offline planner evaluates only a condition comparing one fact with a number",
            )
        source = self.out.items[values[0]]
        unit = (m.group(3) or "").lower().replace("ether", "eth")
        threshold = Decimal(m.group(2))
        want = VALUE_UNITS[str(source["kind"])]
        if unit == "usdc" and source["kind"] == "transfer_count" and re.match(
                r"\s*transfers?\b", part.text[m.end():], re.I):  # fmt: skip
            unit = ""  # "were there more than 5 USDC transfers": a count (outside round 50)
        if unit == "wei" and want == "gwei":
            threshold, unit = threshold.scaleb(-9), "gwei"
        if unit and unit != want:
            return self.out.cannot(f"condition: {part.text}", f"{unit} is not the unit of "
                                   f"{source['text']} ({want or 'a count'})")  # fmt: skip
        op = threshold_op(m.group(1))
        return self.out.add({
            "text": f"{source['text']} {op} {threshold} {want}".strip(), "kind": "condition",
            "params": {"of": {"ref": values[0]}, "op": op, "than": str(threshold)},
        })  # fmt: skip

    def _test_back(self, part: _Part) -> list[int]:
        """ "Is it above 5 USDC?": the yes or no of the one value asked just before it
        (``_value_before``), else named as not read."""
        back = _value_before(self.out, self.made_by_part, part)
        if back is not None:
            return [self._condition(part, [back])]
        self.out.cannot(part.text, "the offline planner compares a number only with one value, "
                        "named in the question or asked just before it; ask it with its fact "
                        "('is the USDC balance of 0x... above 5 USDC?')")  # fmt: skip
        return []

    def _any(self, part: _Part) -> list[int]:
        """The values a yes/no "any" question asks of, and for each the condition that it
        is above 0 (the answer says yes or no first; outside test 21, Q3, gave the balance
        alone; round 22 got no yes or no for "Do 0xA and 0xB hold any USDC?"). A part
        reading other than values reads its facts, as before; so do values whose yes or no
        would not fit in the checklist beside what is asked already (the balances alone
        answer it)."""
        made = self.facts.facts(part)
        if not made or len(self.out.items) + len(made) > MAX_ITEMS or any(
                self.out.items[n].get("kind") not in VALUE_UNITS for n in made):  # fmt: skip
            return made
        return [*made, *(self.out.add({
            "text": f"{source['text']} > 0 {VALUE_UNITS[str(source['kind'])]}".strip(),
            "kind": "condition", "params": {"of": {"ref": n}, "op": ">", "than": "0"},
        }) for n, source in ((n, self.out.items[n]) for n in made))]  # fmt: skip

    def _resolve(self, max_items: int) -> list[ChecklistRow]:
        items = self.out.items
        if len(items) > max_items:
            rest = "; ".join(str(i["text"]) for i in items[max_items - 1 :])
            why = f"the checklist holds at most {max_items} items"
            cut = [i for i in items[max_items - 1 :] if i.get("kind") == "comparison"]
            if cut:  # "the total USDC of five addresses": each value and the total are items
                n = len(_refs((cut[0].get("params") or {}).get("of")))
                why += (f"; {cut[0]['text']!r} over {n} values needs {n + 1} items (each value "
                        "and the result): " + (f"ask it over at most {max_items - 1} addresses"
                        if n + 1 > max_items else "ask it in a question of its own (this "
                        f"task asks {len(items)} items)"))  # fmt: skip
            items = items[: max_items - 1] + [{
                "text": _clip(rest), "kind": None, "unanswerable": why,
            }]  # fmt: skip

        def ref(value: _Param) -> str:
            if isinstance(value, list):
                return ",".join(ref(v) for v in value)
            if isinstance(value, dict) and "ref" in value:
                n = int(value["ref"])
                return f"c{n + 1}" if n < len(items) else "dropped"
            return str(value)

        out: list[ChecklistRow] = []
        for n, item in enumerate(items):
            params = {k: ref(v) for k, v in (item.get("params") or {}).items()}
            unit = self._unit_of(n, item)
            if unit:
                params["unit"] = unit
            row: ChecklistRow = {"text": item["text"], "kind": item.get("kind")}
            if params:
                row["params"] = params
            if item.get("unanswerable"):
                row["unanswerable"] = item["unanswerable"]
            out.append(row)
        return out


class _Reader(_ReaderChecks):
    """Reads one task into checklist items (see the module docstring): the parts of the
    read task (:class:`_Task`) become fact items (:class:`_FactItems`), conditions and
    ordered payments, then checklist ids."""

    def __init__(self, task: str, network: str = "") -> None:
        self.raw = task
        # A branch the chain decides ("if C, do not send anything; otherwise send ...") is
        # read as the judge reads it: the order on the opposite of C.
        self.t = _Task(resolve_branches(task), network)
        self.out = _Builder()
        self.facts = _FactItems(self.t, self.out)
        #: The items each sentence made (what a comparison asked back compares).
        self.by_sentence: dict[int, list[int]] = {}
        self.made_by_part: list[tuple[_Part, list[int]]] = []

    def _shop(self, shop: Shopping) -> int:
        """The shopping request's one item: the offer it picks of a sold kind about its
        subject, or (no subject, a named seller) the pick the loop resolves against that
        seller's catalog; or why not."""
        scope = _scope_of(shop.text, self.t.network)
        if scope:
            return self.out.cannot(shop.text, scope)
        if shop.unknown:
            words = ", ".join(repr(w) for w in shop.unknown[:4])
            return self.out.cannot(shop.text, f"the offline planner does not know {words} in a "
                                   "request to buy; it buys only what it reads in full")  # fmt: skip
        bound = {"under": str(shop.under)} if shop.under else {}
        if shop.subject and shop.seller and re.fullmatch(r"https?://[^/]+/?", shop.seller):
            # "Buy the lido sheet from http://host": that seller's offer about lido, read
            # from its catalog (the bare URL sells nothing itself).
            return self._shop_at_seller(replace(shop, about=shop.subject.lower()), bound)
        if shop.kind is None or shop.subject is None:
            return self._shop_at_seller(shop, bound)
        label = "token fact sheet" if shop.kind == "token_factsheet" else "protocol fact sheet"
        key = "symbol" if shop.kind == "token_factsheet" else "name"
        params = {key: shop.subject, "pick": shop.pick, **bound}
        if shop.under:
            params["max_price"] = str(shop.under)
        if shop.seller and "://" in shop.seller:
            params["url"] = shop.seller
        pick = f"the {shop.pick}" if shop.pick in ("cheapest", "priciest") else "the"
        return self.out.add({"text": f"{pick} {label} of {shop.subject} on offer",
                             "kind": shop.kind, "params": params})  # fmt: skip

    def _shop_at_seller(self, shop: Shopping, bound: dict[str, str]) -> int:
        """A request to buy naming no subject: its pick among the named seller's offers
        (resolved at run start, agent/loop/offerpick.py), or why it cannot be read."""
        if shop.pick == "value":
            return self.out.cannot(shop.text, "nib has no measure of an offer's value (what a "
                                   "dataset is worth to you is in no listing, and sellers' "
                                   "words are no evidence): ask for the cheapest, the most "
                                   "expensive, or what it should be about")  # fmt: skip
        if shop.seller is None:
            symbols, protocols = datasets()
            return self.out.cannot(shop.text, "a request to buy that names no subject picks "
                                   "from the offers of a seller or the market: name the seller "
                                   "(the local paywall, its URL, or the market), or what the "
                                   f"sheet is about: a token symbol ({', '.join(symbols[:4])}"
                                   f"...) or a protocol ({', '.join(protocols[:3])}...)")  # fmt: skip
        where = {"paywall": "the local paywall", "market": "the market"}.get(
            str(shop.seller), str(shop.seller))
        pick = {"only": "the", "any": "an"}.get(shop.pick, f"the {shop.pick}")
        about = f" about {shop.about}" if shop.about else ""
        under = f" under {format_usdc(shop.under)}" if shop.under else ""
        params = {"pick": shop.pick, "seller": str(shop.seller), **bound}
        if shop.about:
            params["about"] = shop.about
        return self.out.add({"text": f"{pick} offer{about}{under} of {where}", "kind": None,
                             "params": params})  # fmt: skip

    def items(self, max_items: int) -> list[ChecklistRow]:
        gates: dict[int, list[int]] = {}
        actions: dict[int, list[int]] = {}
        declined: set[int] = set()
        if self.t.shopping:
            self._shop_in_sentence(self.t.shopping, actions)
        for part in self.t.parts:
            if part.sentence in self.t.scope:
                if part.sentence not in declined:
                    declined.add(part.sentence)
                    sentence = self.t.sentence(part.sentence)
                    self.out.cannot(sentence, self.t.scope[part.sentence])
                continue
            why = _misfit_hex(part.text) or (part.aside and _scope_of(part.text, self.t.network))
            made = [self.out.cannot(part.text, why)] if why else self._part_items(
                part, gates.setdefault(part.sentence, []), actions.setdefault(part.sentence, []))
            self.by_sentence.setdefault(part.sentence, []).extend(made)
            self.made_by_part.append((part, made))
        for at, orders in actions.items():
            self._gate(orders, gates.get(at) or [])
        self._withhold(actions)
        self._blocks_read()
        self._windows_read()
        self._units_placed()
        self._units_taken()
        self._computed_units()
        self._bounded()
        return self._resolve(max_items)

    def _bounded(self) -> None:
        """Every purchase of a task that bounds its spending ("don't spend more than 0.20
        USDC") bids at most that bound: its ``max_price`` (and a pick's ``under``) is the
        least of the bound and its own, never raised. The loop holds the run's spend to the
        bound too (agent/loop/limits.py ``within_task_bound``), whatever the planner."""
        bound = self.t.bound
        if bound is None:
            return
        for item in self.out.items:
            params = dict(item.get("params") or {})
            bought = item.get("kind") in PAID_FACT_KINDS or (item.get("kind") is None and "pick" in params)
            if item.get("unanswerable") or not bought:
                continue
            for key in ("max_price", "under") if "pick" in params else ("max_price",):
                own = str(params.get(key, ""))
                params[key] = str(min(int(own), bound.atomic) if own.isdigit() else bound.atomic)
            item["params"] = params

    def _shop_in_sentence(self, shop: Shopping, actions: dict[int, list[int]]) -> None:
        """The shopping request's item, an action of its sentence: a condition there gates
        it, and a future or standing scope there ("Tomorrow morning, buy ...") declines it
        before anything is bought."""
        n = self._shop(shop)
        at = sum(1 for m in _SPLIT.finditer(self.t.task[: shop.start])
                 if m.group(0).strip()[:1] in ("?", ";", "!", "."))  # fmt: skip
        if at in self.t.scope and not self.out.items[n].get("unanswerable"):
            self._decline(n, self.t.scope[at])
        actions.setdefault(at, []).append(n)

    def _withhold(self, actions: dict[int, list[int]]) -> None:
        """Every payment and purchase of a task that also says not to pay, takes an order
        back or branches one ("Do not send ...", "Actually, never mind", "otherwise send")
        is declined, before anything is paid: which order such words negate is not read,
        so none is made (the judge holds no mandate for such a task either)."""
        word = withheld_by(self.raw)
        if word is None:
            return
        for n in sorted({n for orders in actions.values() for n in orders}):
            if not self.out.items[n].get("unanswerable"):
                self._decline(n, f"the task also says {word!r}: nib pays nothing on a task "
                              "that says not to pay, takes an order back, branches one or puts it off; "
                              "ask again with only the payment or purchase you want")  # fmt: skip

    def _gate(self, orders: list[int], gates: list[int]) -> None:
        """The orders of a sentence wait for its condition (the judge reads a mandate's
        condition from the same sentence). An order on several conditions is named as not
        read: never made on one of them alone."""
        for n in orders:
            item = self.out.items[n]
            if item.get("unanswerable"):
                continue
            if len(gates) == 1:
                item["params"] = {**item.get("params", {}), "if": {"ref": gates[0]}}
            elif gates:
                self._decline(n, "an order on several conditions is not read; order on one "
                              "condition per sentence")  # fmt: skip

    def _part_items(self, part: _Part, gates: list[int], actions: list[int]) -> list[int]:
        """The items of one part: a condition (a gate of the orders), orders, facts, a
        comparison asked back, or why it cannot be read. Nothing is dropped."""
        if part.frame:
            return []  # "For the block where 0x<hash> was included, ...": its facts' block
        if (test := _share_test(part)) is not None:
            # "Is the latest block more than half full?", "if block 3 is over 50% full, ...":
            # declined by its words, never a comparison with another fact's number.
            n = self.out.cannot(part.text, f"{test!r} compares a block's fullness with a "
                                "threshold, and the offline planner compares a fact with a "
                                "number only in gwei, wei, ETH, USDC or a count (a block's "
                                "fullness is a percentage rounded to 2 places); ask how full "
                                "the block is ('how full is the latest block?')")  # fmt: skip
            if part.condition:
                gates.append(n)  # an order it gates waits on it: never made
                return []
            return [n]
        if (follow := _follow_up(self.t, self.facts, self.made_by_part, part)) is not None:
            return follow  # "... What about ETH?", "... Yes or no.", "... and when?"
        if part.condition and (part.hits or part.leftover or _THRESHOLD.search(part.text)):
            # A threshold no fact was read for is named: else its payment would go unconditional.
            gates.append(self._condition(part))
        elif part.condition:  # "What would 0xA's balance be if I sent it 1 USDC?" (round 61, M02)
            _what_if(self.out, part)
        elif _SEND.search(part.text):
            return self._sends(part, actions)
        elif m := _RATIO.search(part.text):
            self.out.cannot(part.text, f"{' '.join(m.group(0).lower().split())!r} asks a ratio "
                            "of two values; the offline planner states their difference "
                            "('by how much'), never a ratio")  # fmt: skip
        elif (grouped := self._grouped(part)) is not None:
            self.out.cannot(self.t.raw_sentence(part.sentence), f"{grouped!r} groups addresses "
                            "inside a comparison; the offline planner compares single "
                            "addresses' values only (ask for the combined value and compare "
                            "in a second question)")  # fmt: skip
        elif not part.subjects and not part.leftover and _BY_HOW_MUCH.search(part.text):
            # "Which holds more, 0xA or 0xB, and by how much?": their difference.
            word = " ".join(_BY_HOW_MUCH.search(part.text).group(0).lower().split())  # type: ignore[union-attr]
            return self._compare_back(part, _Aggregate("diff", word, set(), None))
        elif part.hits and part.aggregate is not None and part.aggregate.op == "count":
            return self.facts.facts(part)  # "how many of 0xA, 0xB hold more than 5 USDC"
        elif part.hits and _CONDITION.search(part.text) and not part.leftover:
            return [self._condition(part)]  # "Is the base fee above 1 gwei?": yes or no
        elif (part.hits and _asks_any(self.t, part) and not part.leftover
              and part.aggregate is None):
            return self._any(part)  # "Does 0xA hold any USDC?": yes or no, then the value
        elif part.hits and (why := _compared_across_blocks(part)):
            return [self.out.cannot(part.text, why)]  # never one block's value for both
        elif part.hits:
            return self.facts.facts(part)
        elif part.alone and not part.leftover:
            what = f"which value {part.candidate.word!r} is over" if part.candidate else (
                "which fact the task asks of " + ", ".join(part.subjects))
            return [self.out.cannot(part.text, f"the offline planner did not read {what} here; "
                                    "ask for each value in its own words ('the combined ETH "
                                    "balance of 0xA and 0xB')")]  # fmt: skip
        elif part.borrow and not part.leftover:
            return self._borrow(part)
        elif part.leftover:
            self.out.cannot(part.text, "the offline planner has no tool or pattern for this "
                            f"({', '.join(sorted(part.leftover)[:4])})")  # fmt: skip
        elif _CONDITION.search(part.text):
            return self._test_back(part)  # "How much has 0xA sent? Is it over 8 USDC?"
        elif part.again and part.aggregate is None:
            return self._again(part)  # "the base fee at block 3, and at block 12"
        elif part.aggregate is not None:
            return self._compare_back(part, part.aggregate)  # "..., which holds more?"
        elif _window_only(self.t, part):
            return []  # "How many transfers did 0xA send, since block 0?": its window, read there
        elif (part.subjects or _AMOUNT.search(part.text) or _BARE_AMOUNT.search(part.text)) and (
            _PAY_WORD.search(part.text) or _SEND.search(self.t.task)  # an order's task only
        ):
            # A payment in another word order ("pay the seller 0x.. 0.10 USDC"), or a part
            # of an ordering task with a recipient or an amount but no order read ("... and
            # 0xB", "Also 0.02 USDC to 0xB.") is named as not done, never dropped.
            self.out.cannot(part.text, "the offline planner reads a payment only as "
                            "'send N USDC to 0x...'")  # fmt: skip
        else:
            return _follow_up_elsewhere(self.facts, self.made_by_part, part) or _unread_part(self.out, part, self.t)
        return []

    def _grouped(self, part: _Part) -> str | None:
        """The grouping word ("plus", "together with") of a comparison's sentence that
        compares an address with a group ("0xA, or 0xB plus 0xC"), or None."""
        agg = part.aggregate or part.candidate
        if agg is None or agg.op not in ("max", "min", "diff"):
            return None
        m = _GROUPED.search(self.t.raw_sentence(part.sentence))
        return " ".join(m.group(0).lower().split()) if m else None

    def _again(self, part: _Part) -> list[int]:
        """The facts of the nearest part before ``part`` that read any (with the list it ends,
        :func:`_asked_before`), asked again at each block ``part`` names: one item per block (answered there, or declined as a fact no
        tool reads at a past block), never the other part's block."""
        prev = _question_before(self.t, part)
        # "... and what is it now?": the head (no block) when the part names no block.
        refs: list[str | None] = [m.group(1) for m in _BLOCK.finditer(part.text)] or [None]
        if prev is None:
            where = f"block {refs[0]}" if refs[0] else "the head"
            return [self.out.cannot(part.text, f"it names {where} but no fact to read there")]
        made: list[int] = []
        for ref, asked in ((r, p) for r in refs for p in _asked_before(self.t, part, prev)):
            kinds = [h[1].kind for h in asked.hits]
            at = replace(asked, text=_again_text(asked, ref, part), start=part.start, aggregate=None,
                         candidate=None, again=False)  # fmt: skip
            for pos, fp, phrase in asked.hits:
                if (fp.kind == "block_number" and len(kinds) > 1
                        and _NAMES_THE_BLOCK.search(asked.text[:pos])):  # fmt: skip
                    continue  # "the base fee of the latest block": a parameter
                made.extend(self.facts._fact(at, fp, 0, phrase))
        # "Did 0xA send USDC in block 5 and in block 7?": yes or no at each (round 45, B2).
        return made + _borrowed_tests(self.out, self.made_by_part, prev, made)

    def _borrow(self, part: _Part) -> list[int]:
        """ "..., and how much does 0xC hold?": the account facts of the nearest part
        before it that read any, for its own addresses only (never the other part's)."""
        prev = _question_before(self.t, part)
        if prev is None or any(h[1].subject != "account" for h in prev.hits):
            held = ", ".join(part.subjects) or "the agent's wallet"  # "does my wallet have"
            return [self.out.cannot(part.text, "the offline planner did not read which fact "
                                    f"the task asks of {held}; name the fact in this part "
                                    "('the USDC balance of 0xC')")]  # fmt: skip
        agg = part.aggregate if len(set(part.subjects)) + bool(part.mine) >= 2 else None
        if part.aggregate is not None and (agg is None or any(
                h[1].kind not in AGGREGATE_KINDS[agg.op] for h in prev.hits)):  # fmt: skip
            return [self.out.cannot(part.text, f"the offline planner did not read which value "
                                    f"{part.aggregate.word!r} is over here; name the fact in "
                                    "this part ('the combined USDC balance of 0xA and 0xB')")]  # fmt: skip
        text = _borrowed_way(prev, part, self.t.task[part.start : max(part.until, part.start + len(part.text))])
        if text is None:
            return [self.out.cannot(part.text, "the transfers before it are said between two "
                                    "addresses, and which one it replaces is not said; ask "
                                    "in full ('how many USDC transfers did 0xC send to 0xB?')")]  # fmt: skip
        at = replace(prev, text=text, start=part.start, sentence=part.sentence,
                     subjects=list(part.subjects), mine=list(part.mine), aggregate=agg, candidate=None,
                     again=False, leftover=set(), modifier=None)  # fmt: skip
        made: list[int] = []
        for _pos, fp, phrase in [*prev.hits, *_followed_assets(self.t, prev, part)]:
            made.extend(self.facts._fact(at, fp, 0, phrase))
        return made + _borrowed_tests(self.out, self.made_by_part, prev, made)


def _chained_values(out: _Builder, by_sentence: Mapping[int, Sequence[int]], at: int,
                    values: list[int]) -> list[int]:
    """The one value sentence ``at`` asked, with those of the sentences before it that
    asked only values of its kind ("How much USDC does 0xA hold? And 0xB? Which of them has
    more?": both balances; it was declined, needing two in one sentence)."""
    kind = out.items[values[0]].get("kind")
    chained = list(values)
    for before in range(at - 1, -1, -1):
        made = list(by_sentence.get(before, ()))
        if not made or any(out.items[n].get("kind") != kind for n in made):
            break
        chained = made + chained
    return chained


def _borrowed_way(prev: _Part, part: _Part, text: str) -> str | None:
    """The words a part borrowing ``prev``'s facts is read from: transfers ``prev`` read one
    way are read that way for the part's holders too ("How many USDC transfers did 0xA send
    in the last 10 blocks? And 0xB?": from 0xB; they were read either way, at exit 0); None
    when ``prev`` named both ends (which one the part replaces is not said)."""
    ends = _one_way(prev.text, prev.subjects) if any(
        h[1].kind in ONE_WAY_KINDS for h in prev.hits) else None  # fmt: skip
    if not isinstance(ends, dict) or not part.subjects or _TO_FROM.search(text):
        return text  # "And to 0xC?" after the transfers from 0xA: its own way
    if len(ends) > 1:
        return None
    first = part.subjects[0]
    return text.replace(first, f"{'from' if 'sender' in ends else 'to'} {first}", 1)


def _followed_assets(t: _Task, prev: _Part, part: _Part) -> list[tuple[int, FactPattern, str]]:
    """The balances asset follow-ups between ``prev`` and ``part`` added to ``prev``'s
    ("What is the USDC balance of 0xA? And ETH? And for 0xB?": 0xB's ETH too; outside
    round 28 gave its USDC alone at exit 0), as hits of the balance kind each named."""
    asked = {h[1].kind for h in prev.hits}
    found: list[tuple[int, FactPattern, str]] = []
    for p in t.parts:
        m = _ASSET_FOLLOW_UP.fullmatch(p.text.strip(" ?!.,"))
        if not (prev.start < p.start < part.start and m and not p.condition and not p.hits
                and (m["lead"] or m["whose"] or _asks_an_asset(t, p))):  # fmt: skip
            continue
        kind = "usdc_balance" if m["a"].lower() == "usdc" else "eth_balance"
        if kind not in asked and asked <= _BALANCE_KINDS:
            asked.add(kind)
            found.append((0, next(fp for fp in FACT_PATTERNS if fp.kind == kind), p.text))
    return found


#: Another block beside a named one: the head ("the latest block", "now", "currently").
_OTHER_BLOCK = _p(r"\b(?:latest|current|newest|last|head|now|currently|today|at\s+present)\b|"
                  r"\bblock\s+(?:\d+|latest-\d+)(?![\w-])")


def _compared_across_blocks(part: _Part) -> str | None:
    """Why a chain fact compared between blocks in one part is not read ("Is the gas limit
    of the latest block lower than the gas limit of block 10?": outside round 51 got block
    10's value alone, at exit 0); None when the part is no such comparison."""
    if not (_compare_words(part) and part.hits and all(h[1].subject == "none" for h in part.hits)):
        return None
    named = _BLOCK.search(part.text)
    if named is None or not _OTHER_BLOCK.search(part.text[: named.start()] + " " + part.text[named.end():]):
        return None
    return ("the offline planner compares values of addresses only, never one fact between "
            "blocks; ask each block's value ('the gas limit of the latest block and of block "
            "10') and compare them")


#: A threshold asked of the value before it ("Is it more than 8 USDC?", "and was that over 3?").
_TESTS_BACK = _p(r"\A\W*(?:(?:and|but|so)\s+)?(?:is|was|are|were|does|did|has)\s+(?:it|that|this|"
                 r"that\s+(?:amount|total|value|number|figure|count))\s+(?:still\s+)?(?:"
                 + _CONDITION.pattern + r")\s*\W*\Z")


def _value_before(out: _Builder, made_by_part: list[tuple[_Part, list[int]]], part: _Part) -> int | None:
    """The one value the part before ``part`` asked, when ``part`` asks only whether it is
    over a number ("How much USDC has 0xA sent? Is it more than 8 USDC?": outside round 50
    declined it); None when the part says more, or the part before asked no value or more
    than one (then "it" is not read)."""
    if not _TESTS_BACK.search(part.text):
        return None
    # The values of the nearest sentence that asked any, up to this part: "What is the
    # largest transfer and the balance of 0xA? Is it above 3 USDC?" asks of either.
    said = [(p.sentence, n) for p, made in made_by_part for n in made
            if out.items[n].get("kind") in VALUE_UNITS]  # fmt: skip
    values = [n for at, n in said if at == said[-1][0]] if said else []
    return values[0] if len(values) == 1 else None


def _borrowed_tests(out: _Builder, made_by_part: list[tuple[_Part, list[int]]], prev: _Part,
                    made: list[int]) -> list[int]:
    """The yes-or-no test of the question a borrowing part borrows, for its own values ("Is
    0xF's USDC balance above 3 USDC? What about 0xS?": 0xS's is tested too; outside round
    25 gave its balance with no yes or no)."""
    tests = [out.items[n] for p, ns in made_by_part if p is prev for n in ns
             if out.items[n].get("kind") == "condition"]  # fmt: skip
    if len(tests) != 1:
        return []
    params = tests[0].get("params") or {}
    op, than = str(params.get("op", "")), str(params.get("than", ""))
    return [out.add({"text": f"{out.items[n]['text']} {op} {than} "
                             f"{VALUE_UNITS[str(out.items[n]['kind'])]}".strip(),
                     "kind": "condition", "params": {"of": {"ref": n}, "op": op, "than": than}})
            for n in made if out.items[n].get("kind") in VALUE_UNITS]  # fmt: skip


def _refs(value: _Param | None) -> list[_Ref]:
    """The references to other items in a parameter (``{"ref": n}`` or a list of them)."""
    if isinstance(value, list):
        return value
    return [value] if isinstance(value, dict) else []


def _closer(task: str, a: str, b: str, end: int) -> bool:
    """True when ``a`` occurs at or after ``end`` before ``b`` does (or ``b`` never does)."""
    lower = task.lower()
    pa, pb = lower.find(a.lower(), end), lower.find(b.lower(), end)
    if pa < 0:
        return pb < 0 and lower.rfind(a.lower(), 0, end) > lower.rfind(b.lower(), 0, end)
    return pb < 0 or pa < pb


def extract_checklist(
    task: str, *, max_items: int = MAX_ITEMS, network: str = ""
) -> list[ChecklistRow]:
    """Checklist items ``{"text", "kind", "params"?, "unanswerable"?}`` for ``task``, in the
    order the task asks; derived items reference others by checklist id (``c1``...).
    ``network`` is the run's network name: a chain the task names is declined unless it
    is this one."""
    if not task.strip():
        return []
    return _Reader(task, network).items(max_items)


def infer_kind(text: str) -> str | None:
    """The fact kind a bare item text asks for (first match of the pattern table)."""
    for fp in FACT_PATTERNS:
        if not fp.needs_hash and fp.pattern.search(text):
            return fp.kind
    return None
