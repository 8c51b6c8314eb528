"""The offline planner's vocabulary: one table of phrases per fact kind, and the words
that scope, shape or rule out a question.

Every word of a task is accounted for by one of these tables (or is filler): a phrase
names a fact kind (and, for a bought sheet, the field asked for); a presentation phrase
shapes the answer (a unit or format, never an item); a scope word the planner cannot
honour (another chain, a standing or future request) declines its sentence, naming the
word. docs/planner.md prints these tables (``python -m agent.models.vocabulary``).

Phrase syntax: words separated by spaces (a space also matches a hyphen), ``[word]`` an
optional word, ``…`` a gap of up to 90 characters inside one clause (a transaction hash counts as one; a capturing group:
the words in it are read like any other), and ``>field`` at
the end the field of a bought sheet the phrase asks for.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

__all__ = [
    "AGGREGATES",
    "AGGREGATE_KINDS",
    "COUNT_TESTS",
    "KIND_WORDS",
    "OTHER_CHAINS",
    "OVER_WORDS",
    "PRESENTATION",
    "STANDING",
    "TOTAL_WORDS",
    "UNIT_ASSETS",
    "UNIT_FIRST",
    "UNSUPPORTED",
    "OTHER_QUESTIONS",
    "AggregateOp",
    "KindWords",
    "Phrase",
    "compile_phrase",
    "markdown_tables",
]

Subject = Literal["none", "account", "token", "tx", "symbol", "protocol"]
"""What a fact is about. ``none``: the chain itself. ``account``: a 0x address holding
funds. ``token``: a 0x token contract. ``tx``: a 0x transaction hash. ``symbol``: a token
symbol (USDC). ``protocol``: a protocol name (uniswap)."""

#: Room for a 0x transaction hash, and for a decimal number ("holds more than 0.15 usdc").
#: A transaction hash in a gap counts as one character, with its list comma ("did 0xA, 0xB
#: and 0xC use": outside round 28's lists of hashes overran the gap and were declined).
_GAP = r"(?:0x[0-9a-fA-F]{64}(?![0-9a-fA-F])(?:\s*,)?|[^?.,;:!]|(?<=\d)\.(?=\d)){0,90}?"


def compile_phrase(text: str) -> re.Pattern[str]:
    """The regex of one phrase of the table (see the module docstring for the syntax)."""
    out: list[str] = []
    for word in text.split():
        if word == "…":
            # The word after a gap starts a word: "has … ether" is not "has … altogether".
            # The gap is a group: its words are the task's, still to be accounted for.
            out.append("(" + _GAP + r")(?<![\w-])")
            continue
        optional = word.startswith("[") and word.endswith("]")
        core = re.escape(word.strip("[]"))
        out.append(rf"(?:{core}[\s-]+)?" if optional else rf"{core}[\s-]+")
    body = "".join(out)
    body = body.removesuffix(r"[\s-]+")
    # The last word may take a plural "s"; the phrase stands on word boundaries.
    return re.compile(rf"(?<![\w-])(?:{body})s?(?![\w-])", re.IGNORECASE)


@dataclass(frozen=True)
class Phrase:
    """One way a task names a fact kind; ``field`` is the field of a bought sheet it asks."""

    text: str
    field: str | None = None

    @cached_property
    def pattern(self) -> re.Pattern[str]:
        return compile_phrase(self.text)


@dataclass(frozen=True)
class KindWords:
    """The phrases that ask for one fact kind, its item label and what it is about."""

    kind: str
    label: str
    subject: Subject
    phrases: tuple[Phrase, ...]
    needs_hash: bool = False


def _kind(kind: str, label: str, subject: Subject, *phrases: str, needs_hash: bool = False) -> KindWords:
    rows = []
    for raw in phrases:
        text, _, field_ = raw.partition(">")
        rows.append(Phrase(text.strip(), field_.strip() or None))
    return KindWords(kind, label, subject, tuple(rows), needs_hash)


_HOLD_VERBS = ("hold", "holds", "holding", "has", "have", "own", "owns", "possess", "possesses",
               "keeps")
#: A block's fullness said as a share of its gas limit ("what share of the gas limit was
#: used", "how much of its gas limit did block 3 use") or as its utilization.
_SHARES = ("percentage", "percent", "share", "fraction", "proportion", "how much", "what %")
_USED = ("used", "use", "consumed")
_UTILIZATION = ("utilization", "utilisation")

KIND_WORDS: tuple[KindWords, ...] = (
    # Priority order: an earlier phrase claims its span, so "average base fee" is a gas
    # statistics field, not the base fee, and "ETH balance" is not a USDC "balance".
    _kind("premium_report", "premium report", "none", "premium report", "market report"),
    _kind("protocol_factsheet", "protocol fact sheet", "protocol",
          "protocol fact sheet", "protocol factsheet", "protocol",
          "governance token>governance_token", "mechanism>mechanism", "category>category"),
    _kind("token_factsheet", "token fact sheet", "symbol",
          "[token] fact sheet", "[token] factsheet", "issuer>issuer", "who issues>issuer",
          "issued by>issuer", "who is the issuer>issuer", "who is behind>issuer",
          "company [is] behind>issuer", "pegged to>peg", "peg>peg", "token standard>standard",
          "launched>launched", "launch year>launched"),
    _kind("gas_stats", "gas statistics", "none",
          "gas [usage] statistics", "gas [usage] stats", "gas analytics",
          "average base fee>base_fee_gwei_mean", "mean base fee>base_fee_gwei_mean",
          "minimum base fee>base_fee_gwei_min", "lowest base fee>base_fee_gwei_min",
          "maximum base fee>base_fee_gwei_max", "highest base fee>base_fee_gwei_max",
          "average gas used>gas_used_mean", "mean gas used>gas_used_mean",
          "average gas usage>gas_used_mean", "average block time>block_time_s_mean"),
    _kind("transfer_stats", "USDC transfer statistics", "none",
          "transfer statistics", "transfer stats", "transfer analytics",
          "transfer volume>volume_usdc", "volume>volume_usdc",
          "unique senders>unique_senders", "unique recipients>unique_recipients"),
    # Before the totals: "the largest amount … transferred in the last 20 blocks" is no
    # total "transferred in".
    _kind("transfer_max", "largest USDC transfer", "account",
          "largest [single] [usdc] transfer", "biggest [single] [usdc] transfer",
          "maximum [usdc] transfer", "max [usdc] transfer", "highest [usdc] transfer",
          "largest [usdc] payment", "biggest [usdc] payment", "top [usdc] transfer",
          "largest amount … transferred", "most usdc moved in one transfer",
          "largest one", "biggest one", "which one was the largest", "which was the largest",
          "which of them was the largest", "which of those was the largest",
          "which of these was the largest", "which of them was the biggest",
          "what was the largest", "which one was the biggest", "what was the biggest"),
    # Before the balance ("how much usdc … received" is no balance) and the transfer count.
    _kind("usdc_sent_total", "total USDC sent", "account",
          "how much usdc … sent", "how much usdc did … send", "how much usdc … spent",
          "how much usdc did … spend", "how much usdc … paid out", "how much usdc … sent out",
          "how much usdc … transferred out", "how much usdc … paid to",
          "total [amount] [of] [usdc] sent", "total [amount] [of] [usdc] spent",
          "total amount … sent", "total amount … spent", "total amount … transferred out",
          "total amount … paid out",
          "total outgoing", "total outflow", "[total] outgoing usdc", "usdc sent by",
          "usdc sent from", "all [the] usdc … sent", "usdc … ever sent", "sum of … outgoing",
          "transferred out", "sent out", "paid out"),
    _kind("usdc_received_total", "total USDC received", "account",
          "how much usdc … received", "how much usdc did … receive", "how much usdc … got",
          "how much usdc did … get", "how much usdc … gotten", "how much usdc … taken in",
          "how much usdc … been paid", "how much usdc … transferred in",
          "total [amount] [of] [usdc] received", "total amount … received",
          "total amount … gotten",
          "total amount … transferred in", "total incoming", "total inflow",
          "[total] incoming usdc", "usdc received by", "usdc received from",
          "all [the] usdc … received", "usdc … ever received", "sum of … incoming",
          "transferred in", "taken in"),
    # Before every block fact: "which block was 0x<hash> mined in" asks the transaction's
    # block (its receipt), never the latest block's time or number.
    _kind("tx_block", "block", "tx",
          *(f"{w} {b} … {v}" for w in ("which", "what") for b in ("block", "blocks") for v in (
              "mined in", "included in", "confirmed in", "ended up in", "landed in", "land in",
              "end up in", "in", "mined", "included", "confirmed")),
          *(f"{v} in {w} block" for v in ("mined", "included", "confirmed") for w in (
              "which", "what")),
          "in which block", "in what block", "block number of", "block of",
          "block number … contains", "block number … contained", needs_hash=True),
    # When a transaction was mined: its block's timestamp, read through its receipt (the
    # phrase's gap names the transaction, or "it" after one), never the head's time.
    _kind("tx_time", "mining time", "tx",
          *(f"{w} … {v}" for w in ("when was", "when were", "when did", "what time",
                                   "time at which")
            for v in ("mined", "included", "confirmed")),
          *(f"when … {w} {v}" for w in ("was", "were")
            for v in ("mined", "included", "confirmed")),
          "time … was mined", "timestamp of … transaction",
          "transaction's timestamp", "transaction timestamp", "tx timestamp",
          needs_hash=True),
    # A block asked by when it was mined, with no transaction: "which block was mined
    # most recently" is the head's number, not its time.
    _kind("block_number", "block number", "none",
          "which block … mined", "what block … mined", "which block … produced",
          "last mined block", "most recently mined block", "latest mined block"),
    # Before the block's gas used and gas limit: "how full is the latest block" and "what
    # share of its gas limit did block 3 use" ask the share (gasUsed / gasLimit), neither
    # amount. "how full" is a block's only with "block" (or "it") in its clause.
    _kind("block_fullness", "block fullness", "none",
          "[block] fullness", "how full … block", "how full is it", "how full was it",
          *(f"{w} {u}" for w in ("block [gas]", "block's [gas]", "gas [limit]")
            for u in _UTILIZATION),
          *(f"{u} … block" for u in _UTILIZATION), *(f"block … {u}" for u in _UTILIZATION),
          *(f"{share} of … gas limit … {verb}" for share in _SHARES for verb in _USED),
          *(f"gas used as a {share} of [the] gas limit" for share in _SHARES[:3])),
    # Before the transaction's gas used: "gas used by the latest block" and "how much gas
    # did block 3 use" ask a block's; "gas used by 0x<hash>" still asks a transaction's.
    _kind("block_gas_used", "block gas used", "none",
          "block gas used", "block gas usage", "block's gas used", "gas used … block",
          "gas usage … block", "gas consumed … block", "how much gas … block … use",
          "how much gas … block … consume", "how much gas … used … block",
          "what gas did … block … use",
          "how much gas … consumed … block"),
    _kind("block_gas_limit", "block gas limit", "none", "[block] gas limit"),
    # "how many transactions", never "how many transfers" (USDC Transfer logs, below).
    _kind("block_tx_count", "block transaction count", "none",
          "[block] transaction count", "[block] tx count",
          "number of transactions", "number of txs", "count of transactions",
          "how many transactions", "how many txs", "how many tx", "how many transactions … block",
          *(f"how many {t} … {v}" for t in ("transactions", "txs", "tx") for v in (
              "contain", "include", "included", "ended up in", "end up in", "landed in",
              "land in", "made it into", "went into", "go into", "got into"))),
    _kind("tx_gas_used", "transaction gas used", "tx",
          "gas used", "gas consumed", "how much gas … use", "how much gas … consume",
          "what gas did … use", "what gas did … consume",
          "how much gas … burn", "how much gas … used", "how much gas … consumed"),
    # Before the node's gas price: "what gas price did 0x<hash> pay" is what it paid (its
    # receipt), not the node's price now (outside round 33 got the node's, at exit 0).
    _kind("tx_gas_price", "effective gas price", "tx",
          "gas price … paid", "gas price … pay", "effective gas price", "price per gas … paid",
          "price per gas … pay", "gas price … used", needs_hash=True),
    # A label names no unit: the value line states its own ("400507877 wei (0.4 gwei)").
    _kind("base_fee_gwei", "base fee", "none", "base fee per gas", "base fee", "basefee"),
    _kind("gas_price_gwei", "gas price", "none", "gas price", "price of gas"),
    # After the base fee ("what base fee did 0x<hash> pay" is its block's base fee).
    _kind("tx_fee", "transaction fee", "tx",
          "transaction fee", "tx fee", "fee … paid", "fees … paid", "fee … pay", "fees … pay",
          "its fee", "its fees", "transaction's fee", "fee of", "fees of", "fee for", "fees for",
          "gas fee", "gas fees", "gas cost", "cost in gas", "how much … pay for gas",
          "how much … pay in gas", "how much … pay in fees", "how much … spend on gas",
          "how much … cost in gas", "how much … cost in fees", "what did … cost",
          "how much did … cost", needs_hash=True),
    _kind("block_timestamp", "block timestamp", "none",
          "[block] timestamp", "block time", "mined", "produced", "what time", "time … mined",
          "time … produced"),
    _kind("block_number", "block number", "none",
          "block number", "block height", "latest block", "current block", "newest block",
          "most recent block", "chain head", "head block", "head", "how many blocks", "height",
          *(f"{w} block {v}" for w in ("which", "what") for v in (
              "is the chain at", "is the chain on", "are we on", "are we at")),
          "how far along is the chain", "how far along the chain is", "how far is the chain",
          *(f"how far has the chain {v}" for v in ("gotten", "got", "come", "progressed"))),
    _kind("eth_balance", "ETH balance", "account",
          "eth balance", "ether balance", "how much eth", "how much ether", "amount of eth",
          "amount of ether", "eth holdings", "ether holdings", "how much more eth",
          "how much more ether", "how much less eth", "how much less ether",
          *(f"{v} … {u}" for v in _HOLD_VERBS for u in ("eth", "ether")),
          "eth … held by", "ether … held by",
          # The verb after its subject: "how much ether 0x.. possesses".
          *(f"{q} {u} … {v}" for q in ("how much", "amount of") for u in ("eth", "ether")
            for v in _HOLD_VERBS)),
    # Before the count: "show me the USDC transfers" asks each transfer, not how many
    # (outside round 32 got the count alone, at exit 0).
    _kind("transfer_list", "USDC transfers", "account",
          *(f"{v} [me] [all] [the] [usdc] transfers" for v in (
              "show", "list", "give", "tell", "display", "print")),
          "list of [the] [usdc] transfers", "which [usdc] transfers", "what [usdc] transfers",
          "what are [the] [usdc] transfers", "what were [the] [usdc] transfers",
          "details of [the] [usdc] transfers", "each [usdc] transfer", "every [usdc] transfer",
          "[the] [usdc] transfers themselves"),
    _kind("transfer_count", "USDC transfer count", "account",
          "transfer count", "number of [usdc] transfers", "how many [usdc] transfers",
          "[usdc] transfer events", "[usdc] transfer logs", "[usdc] transfers"),
    _kind("token_supply", "token total supply", "token",
          "total supply", "supply", "in circulation", "circulating",
          "how many usdc … in circulation", "how many usdc … exist", "how much usdc … exists"),
    _kind("usdc_balance", "USDC balance", "account",
          "usdc balance", "token balance", "balance of", "balance", "how much usdc",
          "how many usdc", "amount of usdc", "usdc holdings", "holdings", "usdc … held by",
          "how much more usdc", "how much less usdc", "how many more usdc",
          "usdc that … holds", "usdc that … has", *(f"{v} … usdc" for v in _HOLD_VERBS),
          # The verb after its subject: "what amount of USDC does 0x.. own".
          *(f"{q} usdc … {v}" for q in ("how much", "amount of") for v in _HOLD_VERBS)),
    _kind("token_name", "token name", "token",
          "[full] [official] [token] name", "what … called", "called"),
    _kind("token_symbol", "token symbol", "token", "ticker symbol", "symbol", "ticker"),
    _kind("token_decimals", "token decimals", "token", "decimals", "decimal places"),
    _kind("tx_status", "transaction status", "tx",
          "receipt", "status", "succeed", "succeeded", "successful", "a success", "fail",
          "failed", "revert", "reverted", "go through", "went through"),
    _kind("tx_status", "transaction status", "tx", "transaction", "tx", needs_hash=True),
    # Last: a block named by the transaction in it is the transaction's block only when no
    # other fact is asked of it ("how much gas did the block that included 0x<hash> use" asks
    # that block's gas used; outside round 29 had it declined).
    _kind("tx_block", "block", "tx", "block containing", "block that contains",
          "block that included", "block … contains", "block … contained", needs_hash=True),
)
"""The fact-kind vocabulary, in priority order; each kind is one of chain/facts.py."""

PRESENTATION: tuple[tuple[str, str], ...] = (
    # (phrase regex, unit or format). Taken out of the task before anything is read: it
    # shapes the answer's value, never adds an item.
    (r"(?:\s*,)?\s*(?:please\s+)?(?:expressed|denominated|given|shown|written|reported|"
     r"quoted|measured)\s+in\s+(gwei|wei|eth|ether|usdc)\b", r"\1"),
    (r"\b(?:answer\s+)?in\s+(gwei|wei|ether|eth)\b", r"\1"),
    # USDC in cents: 1 USDC = 100 cents, from the atomic amount (6 decimals), exactly.
    (r"(?:\s*,)?\s*(?:please\s+)?(?:(?:expressed|denominated|given|shown|written|reported|"
     r"quoted|measured|answer)\s+)?(?:in|as)\s+(?:usd\s+|us\s+|usdc\s+)?cents\b", "cents"),
    (r"\bin\s+whole\s+(?:usdc|units|tokens)\b", "usdc"),
    (r"\bin\s+(?:atomic\s+units|base\s+units)\b", "atomic"),
    (r"\b(?:a\s+)?unix\s+(?:time|timestamp|seconds)\s+is\s+(?:fine|ok|okay|enough)\b", "unix"),
    (r"\b(?:as|in)\s+(?:a\s+)?unix\s+(?:time|timestamp|seconds)\b", "unix"),
    (r"\b(?:as|in)\s+(?:utc|iso(?:\s*8601)?)(?:\s+time)?\b", "utc"),
    (r"\b(?:in\s+)?utc(?:\s+time)?\s+is\s+(?:fine|ok|okay|enough)\b", "utc"),
    (r"\b(?:pls|plz)\b", ""),
    (r"\b(?:so\s+far|right\s+now|at\s+the\s+moment|at\s+present)\b", ""),
    (r"\b(?:just\s+)?(?:the\s+)?(?:plain\s+)?number\s+is\s+(?:fine|enough)\b", ""),
    (r"\b(?:roughly|approximately|exactly|precisely|briefly|quickly)\b", ""),
)
"""Presentation phrases and the unit or format each names ("" when it only shapes tone)."""

OTHER_CHAINS: tuple[str, ...] = (
    "ethereum mainnet", "mainnet", "polygon", "matic", "arbitrum", "optimism", "base mainnet",
    "base chain", "base network", "bsc", "bnb chain", "binance smart chain", "avalanche",
    "solana", "gnosis", "zksync", "linea", "scroll", "sepolia", "goerli", "holesky",
    "fantom", "celo", "tron", "bitcoin", "layer 2", "l2",
)  # fmt: skip
"""Chains a task may name that the run is not on (unless the run's network is named so)."""

#: A unit said before its asset ("how many cents of USDC does 0x.. have", "how many wei of
#: ETH does 0x.. hold", "how many gwei does 0x.. have"): the same question as "how much
#: USDC ... in cents". With no asset named, before "does/do/did" (an address's holding) the
#: unit names the asset (UNIT_ASSETS); before "is/was" ("how many wei is the base fee") it
#: is the unit of the fact that follows.
UNIT_FIRST = re.compile(
    r"\bhow\s+many\s+(?P<unit>(?:usdc\s+|usd\s+|us\s+)?cents|gwei|wei|ether|eth|"
    r"(?:atomic|base)\s+units)(?:\s+(?:of|in)\s+(?P<asset>usdc|eth|ether)\b|"
    r"(?=\s+(?:does|do|did|(?P<be>is|are|was|were))\b))",
    re.IGNORECASE,
)
UNIT_ASSETS: dict[str, str] = {"cents": "usdc", "atomic": "usdc", "wei": "eth", "gwei": "eth",
                               "ether": "eth", "eth": "eth"}
"""The asset a unit said before it names, when no asset is said (see UNIT_FIRST)."""

STANDING: tuple[str, ...] = (
    "alert me", "ping me", "notify me", "message me", "email me", "text me", "remind me",
    "let me know when", "let me know if", "let me know as soon as", "as soon as", "whenever",
    "every day", "every hour", "every week", "every minute", "every block", "each day",
    "each hour", "daily", "hourly", "weekly", "monthly", "keep an eye", "keep watching",
    "keep track", "monitor", "watch", "from now on", "going forward", "in the future",
    "tomorrow", "next week", "next month", "next block", "will be", "will it", "forecast",
    "predict", "drops", "drop below", "falls", "rises", "goes above", "goes below",
)  # fmt: skip
"""Standing or future requests: nib answers once, from the chain as it is at run start."""

OTHER_QUESTIONS: tuple[str, ...] = (
    "who owns", "who controls", "who deployed", "who created", "owner", "deployer", "admin",
    "who made",
)
"""Questions that share words with a fact kind but ask something no fact kind holds
("who owns the USDC contract" is not a balance): the part is declined naming them."""

TOTAL_WORDS: tuple[str, ...] = (
    "in total", "altogether", "all together", "overall", "in all", "of all time", "all time",
    "all-time", "ever", "to date", "so far", "since genesis", "since the first block",
    "cumulatively", "cumulative", "total", "sum", "summed",
)  # fmt: skip
"""Words that ask for all of it: the scope of a total (sent or received), whose block range
is every block from the first unless the task names one; with any other fact kind they
change what it means ("USDC balance in total") and are declined as UNSUPPORTED."""

UNSUPPORTED: tuple[str, ...] = (
    "average", "mean", "median", "smallest", "minimum", "lowest", "sum", "cumulative",
    "yesterday", "last week", "last month", "ago", "history", "historical", "trend",
    "per day", "hours", "days", "weeks", "price", "usd value", "worth",
    "in total", "total sent", "total received", "sent", "received", "spent", "paid out",
)  # fmt: skip
"""Words that change what a recognised fact means in a way no fact kind here takes
("average" of a one-block fact, a time window in days, what an address has sent or
received in total, which is no balance): the part is declined naming it."""


AggregateOp = Literal["max", "min", "sum", "count", "diff"]
"""What an aggregate computes over the values of one fact kind read for several addresses.
``max``/``min``: which holds the most/least (two or more). ``sum``: the values added, exactly.
``count``: how many hold any (a value above 0, or above the threshold the task names).
``diff``: the first value minus the second (two only), with which holds more."""

AGGREGATES: tuple[tuple[AggregateOp, tuple[str, ...]], ...] = (
    # Priority order: "how much more" is a difference, not which holds more.
    ("diff", ("difference", "differ", "how much more", "how much less", "how many more",
              "how many fewer", "minus")),
    ("count", ("how many of", "how many addresses", "how many accounts", "how many wallets",
               "number of addresses", "number of accounts", "count of addresses")),
    ("sum", ("combined", "together", "in total", "altogether", "all together", "between them",
             "total", "sum", "summed", "sum up", "summing up", "added up", "add up", "adding up",
             "add them up", "add those up", "add these up", "adds up to", "add up to", "add",
             "in all", "put together")),
    ("max", ("more", "most", "larger", "largest", "bigger", "biggest", "higher", "highest",
             "greater", "greatest", "richer", "richest", "maximum", "compare")),
    ("min", ("less", "least", "fewer", "fewest", "smaller", "smallest", "lower", "lowest",
             "poorer", "poorest", "minimum")),
)  # fmt: skip
"""Words that ask for a value computed over several addresses' values of one fact kind
("the combined USDC balance of 0xA and 0xB", "which of 0xA, 0xB and 0xC holds the most
ETH"): the answer states the computed value and cites each value it came from. With one
address, or a fact kind the aggregate does not take, the word is declined by name."""

AGGREGATE_KINDS: dict[AggregateOp, frozenset[str]] = {
    "max": frozenset({"usdc_balance", "eth_balance", "transfer_count"}),
    "min": frozenset({"usdc_balance", "eth_balance", "transfer_count"}),
    # Balances add up exactly; transfer counts of two addresses would count a transfer
    # between them twice, so they are no sum.
    "sum": frozenset({"usdc_balance", "eth_balance"}),
    "count": frozenset({"usdc_balance", "eth_balance"}),
    "diff": frozenset({"usdc_balance", "eth_balance", "transfer_count"}),
}
"""The fact kinds each aggregate is computed over (values read per address)."""

OVER_WORDS: tuple[str, ...] = (
    "among", "amongst", "across", "between", "both", "their", "them", "each", "all of",
    "these", "those", "out of", "listed",
)  # fmt: skip
"""Words naming the addresses an aggregate is over ("among 0xA, 0xB and 0xC"): read only
with an aggregate taken."""

COUNT_TESTS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    # (comparison, threshold, words). Priority order: "hold no USDC at all" holds none.
    ("<=", "0", ("no", "zero", "none", "nothing", "empty", "an empty balance",
                 "a zero balance")),
    (">", "0", ("any", "some", "nonzero", "non zero", "positive", "a balance", "at all",
                "anything")),
)  # fmt: skip
"""Words of a count's test ("how many of 0xA, 0xB hold any USDC", "... hold no USDC"): the
comparison with 0 each value is counted by. A threshold the task names ("more than 3
USDC") is the test instead."""


def markdown_tables() -> str:
    """The vocabulary as Markdown tables (docs/planner.md is generated from this)."""
    lines = ["| fact kind | phrases (`…` a gap, `[w]` optional, `→` sheet field) |", "|---|---|"]
    for kw in KIND_WORDS:
        shown = ", ".join(
            f"`{p.text}`" + (f" → `{p.field}`" if p.field else "") for p in kw.phrases
        )
        note = " (only with a 0x transaction hash)" if kw.needs_hash else ""
        lines.append(f"| `{kw.kind}`{note} | {shown} |")
    lines += ["", "| presentation phrase (regex) | shapes the answer as |", "|---|---|"]
    for regex, unit in PRESENTATION:
        lines.append(f"| `{regex.replace('|', '&#124;')}` | {unit or 'tone only'} |")
    lines += ["", "| aggregate over several addresses | phrases | fact kinds |", "|---|---|---|"]
    for op, words in AGGREGATES:
        kinds = ", ".join(f"`{k}`" for k in sorted(AGGREGATE_KINDS[op]))
        lines.append(f"| `{op}` | " + ", ".join(f"`{w}`" for w in words) + f" | {kinds} |")
    lines.append("")
    for cmp, than, words in COUNT_TESTS:
        lines.append(f"A count's test `{cmp} {than}`: " + ", ".join(f"`{w}`" for w in words))
        lines.append("")
    lines.append("The addresses an aggregate is over: " + ", ".join(f"`{w}`" for w in OVER_WORDS))
    lines += ["", "Declined, naming the word:", ""]
    lines.append("- another chain: " + ", ".join(f"`{w}`" for w in OTHER_CHAINS))
    lines.append("- a standing or future request: " + ", ".join(f"`{w}`" for w in STANDING))
    lines.append("- a question no fact kind holds: " + ", ".join(f"`{w}`" for w in OTHER_QUESTIONS))
    lines.append("- words of a total (the scope of a total sent or received, and the whole chain "
                 "for a count, list or largest transfer; with any other fact kind declined as a "
                 "modifier): "
                 + ", ".join(f"`{w}`" for w in TOTAL_WORDS))
    lines.append("- a modifier no fact kind takes: " + ", ".join(f"`{w}`" for w in UNSUPPORTED))
    return "\n".join(lines)


def readme_summary() -> str:
    """The README's short form of the vocabulary: the fact kinds with each one's first
    phrase, the aggregates, and what is declined (README.md holds it; the whole table is in
    docs/planner.md)."""
    kinds = ", ".join(f"`{kw.kind}` ({kw.phrases[0].text})" for kw in KIND_WORDS
                      if not kw.needs_hash)
    aggregates = ", ".join(f"`{op}` ({words[0]})" for op, words in AGGREGATES)
    return "\n".join([
        f"- **Facts it reads** (a fact kind and one of its phrases): {kinds}.",
        f"- **Aggregates over several addresses**: {aggregates}.",
        "- **Units and formats** (shape the answer, never an item): gwei, wei, ether, USDC, "
        "cents, atomic units, unix time, UTC.",
        f"- **Declined, naming the word**: another chain ({OTHER_CHAINS[0]}, ...), a standing "
        f"or future request ({STANDING[0]}, ...), a block the chain contradicts, a word no "
        "fact kind takes.",
    ])


if __name__ == "__main__":  # pragma: no cover - prints the docs' tables
    import sys

    print(readme_summary() if sys.argv[1:] == ["--readme"] else markdown_tables())
