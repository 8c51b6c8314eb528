"""The paraphrase suite: questions generated from templates × a synonym table × scope
words × relative block references, with truths read from the chain (agent/eval/truth.py).

Its synonym table is the eval's own, written as users ask, not read from the planner's
vocabulary (agent/models/vocabulary.py): a planner fitted to its own phrases meets words
it does not know here, and must decline them rather than answer something else.
Categories: ``in-vocabulary`` kinds are answerable (``answer``); ``scope-chain``,
``scope-standing`` and ``unsupported`` must be declined (``cannot``: nothing claimed,
nothing spent, exit 1). A run that finishes (exit 0) with a wrong answer is counted per
category as ``wrong_exit0``.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

from agent.jsonvalues import JSONObject

__all__ = ["CATEGORIES", "paraphrase_tasks"]

_ADDRS = ("{wallet}", "{seller}")
#: The eval's synonyms per asked fact (its own words, not the planner's table).
_SYN: dict[str, tuple[str, ...]] = {
    "base_fee": ("base fee", "base fee per gas", "EIP-1559 base fee", "basefee"),
    "block_number": ("block number", "block height", "current block", "chain height"),
    "timestamp": ("timestamp of the latest block", "unix timestamp of the newest block",
                  "time the most recent block was mined", "latest block's timestamp"),
    "usdc": ("USDC balance of {a}", "amount of USDC held by {a}", "USDC holdings of {a}",
             "token balance of {a}", "USDC that {a} holds"),
    "eth": ("ETH balance of {a}", "ether balance of {a}", "amount of ether {a} has",
            "native ETH balance of {a}"),
    "supply": ("total supply of USDC", "circulating supply of USDC",
               "number of USDC in circulation", "total USDC supply"),
    "decimals": ("number of decimals USDC uses", "decimals of the token {usdc}",
                 "decimal places of USDC"),
    "symbol": ("ticker symbol of the token {usdc}", "symbol of the token at {usdc}",
               "ticker of {usdc}"),
    "count": ("number of USDC transfers in the last {n} blocks",
              "count of USDC transfer events over the past {n} blocks",
              "USDC transfer count for the last {n} blocks"),
    "gas_used": ("gas used by the latest block", "total gas used in the most recent block",
                 "gas used in the current block", "newest block's gas used"),
    "gas_limit": ("gas limit of the latest block", "block gas limit",
                  "current block's gas limit"),
    "tx_count": ("number of transactions in the latest block",
                 "transaction count of the newest block",
                 "count of transactions in the current block"),
    "fullness": ("fullness of the latest block", "gas utilization of the most recent block",
                 "current block's fullness"),
    "largest": ("largest USDC transfer in the last {n} blocks",
                "biggest single USDC transfer over the past {n} blocks",
                "maximum USDC transfer in the last {n} blocks"),
}  # fmt: skip
_ASK = ("What is the {x}?", "Tell me the {x}.", "Can you look up the {x}?",
        "I need the {x}, please.", "Give me the {x}.")  # fmt: skip
_HOW = ("How many USDC does {a} hold?", "How much USDC is in {a}?",
        "How much USDC does the account {a} have?")  # fmt: skip
_RELATIVE = (("the previous block", 1), ("the block before the latest one", 1),
             ("{k} blocks ago", None), ("{k} blocks before the latest block", None),
             ("{k} blocks back", None))  # fmt: skip
_PRESENTATION = (("base fee", ", expressed in gwei"), ("base fee", " (answer in gwei)"),
                 ("timestamp of the latest block", "; unix time is fine"),
                 ("timestamp of the latest block", ", as a unix timestamp"),
                 ("block number", ", exactly"), ("USDC balance of {a}", ", please"))  # fmt: skip
_CHAINS = ("Ethereum mainnet", "Polygon", "Arbitrum", "Optimism", "Base mainnet", "Solana",
           "BSC", "Avalanche", "Gnosis", "zkSync", "Sepolia", "mainnet")  # fmt: skip
_STANDING = ("Alert me when the {x} changes.", "Ping me as soon as the {x} drops under 50.",
             "Every day, tell me the {x}.", "Notify me whenever the {x} goes above 5.",
             "Keep an eye on the {x} and let me know if it moves.",
             "Tell me the {x} tomorrow.", "What will the {x} be next week?")  # fmt: skip
_UNSUPPORTED = ("What was the average gas price yesterday?", "What is the price of USDC in euros?",
                "Who owns the USDC contract {usdc}?", "What is the median USDC transfer size?",
                "What was the base fee 3 days ago?", "What is the smallest USDC transfer?",
                "Write a haiku about the base fee.", "What is the USD value of {wallet}'s ETH?",
                "How much USDC was sent in total?", "What is the USDC balance of {wallet} in total?",
                "Is the latest block more than half full?", "Was the previous block over 50% full?")  # fmt: skip

#: Written from outside the planner (an outside question writer's declined paraphrases,
#: 20:55 UTC before the planner was changed for them; the score before is in
#: docs/planner.md): where the chain is, a token's full name, transfers touching an
#: address, and an answer asked in another unit (the truth is in that unit).
_OUTSIDE: tuple[tuple[str, dict[str, object]], ...] = (
    ("Which block is the chain at right now?", {"probe": "block_number"}),
    ("How far along is the chain?", {"probe": "block_number"}),
    ("Which block are we on at the moment?", {"probe": "block_number"}),
    ("How far has the chain gotten so far?", {"probe": "block_number"}),
    ("What is the full name of the token {usdc}?", {"probe": "token_name"}),
    ("What is the full name of USDC?", {"probe": "token_name"}),
    ("What is the token {usdc} called?", {"probe": "token_name"}),
    ("What is the name of the token at {usdc}?", {"probe": "token_name"}),
    ("Count the transfers that involve {wallet}.", {"probe": "transfer_count", "address": "{wallet}"}),
    ("Count the USDC transfers involving {seller}.", {"probe": "transfer_count", "address": "{seller}"}),
    ("How many USDC transfers involve {wallet}?", {"probe": "transfer_count", "address": "{wallet}"}),
    ("How many transfers touched {seller}?", {"probe": "transfer_count", "address": "{seller}"}),
)  # fmt: skip
#: Totals sent or received (written before the planner read them; the outside writer's
#: N9/N10/T9/R25 were such questions): every block from the first unless a window is named.
_TOTALS: tuple[tuple[str, dict[str, object]], ...] = tuple(
    (text.format(a=a, b=b), {"probe": probe, "address": a, **extra})
    for a, b in (("{wallet}", "{seller}"), ("{seller}", "{wallet}"))
    for text, probe, extra in (
        ("How much USDC has {a} sent in total?", "usdc_sent_total", {}),
        ("How much USDC has {a} received altogether?", "usdc_received_total", {}),
        ("What is the total amount of USDC that {a} has transferred out so far?",
         "usdc_sent_total", {}),
        ("How much USDC did {a} receive overall?", "usdc_received_total", {}),
        ("What is the total USDC received by {a}?", "usdc_received_total", {}),
        ("How much USDC has {a} spent to date?", "usdc_sent_total", {}),
        ("What is the sum of all the USDC {a} has ever received?", "usdc_received_total", {}),
        ("How much USDC did {a} send to {b}?", "usdc_sent_total", {"counterparty": b}),
        ("How much USDC has {a} received from {b} in total?", "usdc_received_total",
         {"counterparty": b}),
        ("How much USDC did {a} receive in the last 20 blocks?", "usdc_received_total",
         {"blocks": 20}),
    )
)
_UNITS: tuple[tuple[str, dict[str, object]], ...] = (
    ("What is the base fee in gwei?", {"probe": "base_fee_gwei"}),
    ("What is the base fee in wei?", {"probe": "base_fee_gwei", "unit": "wei"}),
    ("Give me the base fee of the latest block, in wei.", {"probe": "base_fee_gwei", "unit": "wei"}),
    ("What is the ETH balance of {wallet} in ether?", {"probe": "eth_balance", "address": "{wallet}"}),
    ("What is the ETH balance of {wallet} in wei?", {"probe": "eth_balance", "address": "{wallet}", "unit": "wei"}),
    ("What is the ETH balance of {seller} in gwei?", {"probe": "eth_balance", "address": "{seller}", "unit": "gwei"}),
    ("How much ether does {seller} hold, in wei?", {"probe": "eth_balance", "address": "{seller}", "unit": "wei"}),
    ("What is the USDC balance of {wallet} in whole USDC?", {"probe": "usdc_balance", "address": "{wallet}"}),
    ("What is the USDC balance of {seller} in atomic units?", {"probe": "usdc_balance", "address": "{seller}", "unit": "atomic"}),
    ("What is the total supply of USDC in whole USDC?", {"probe": "token_supply"}),
    ("What is the total supply of USDC in atomic units?", {"probe": "token_supply", "unit": "atomic"}),
    ("How much USDC does {wallet} hold, in base units?", {"probe": "usdc_balance", "address": "{wallet}", "unit": "atomic"}),
)  # fmt: skip

#: USDC in cents (1 USDC = 100 cents, from the atomic amount), and units the outside
#: testers asked that were declined before (written before the planner read them).
_CENTS: tuple[tuple[str, dict[str, object]], ...] = (
    ("What is the USDC balance of {wallet} in cents?",
     {"probe": "usdc_balance", "address": "{wallet}", "unit": "cents"}),
    ("How much USDC does {seller} hold, in cents?",
     {"probe": "usdc_balance", "address": "{seller}", "unit": "cents"}),
    ("What is the USDC balance of {outsider} in USD cents?",
     {"probe": "usdc_balance", "address": "{outsider}", "unit": "cents"}),
    ("Give me the USDC balance of {seller}, expressed in cents.",
     {"probe": "usdc_balance", "address": "{seller}", "unit": "cents"}),
    ("How many USDC does {outsider} hold? Answer in cents.",
     {"probe": "usdc_balance", "address": "{outsider}", "unit": "cents"}),
    ("What is the total supply of USDC in cents?", {"probe": "token_supply", "unit": "cents"}),
    ("How much USDC has {seller} received in total, in cents?",
     {"probe": "usdc_received_total", "address": "{seller}", "unit": "cents"}),
    ("How much USDC has {outsider} sent altogether, in USD cents?",
     {"probe": "usdc_sent_total", "address": "{outsider}", "unit": "cents"}),
    ("What was the largest USDC transfer in the last 20 blocks, in cents?",
     {"probe": "transfer_max", "blocks": 20, "unit": "cents"}),
    ("What was the biggest USDC transfer over the past 20 blocks in atomic units?",
     {"probe": "transfer_max", "blocks": 20, "unit": "atomic"}),
    ("What is the base fee in ether?", {"probe": "base_fee_gwei", "unit": "ether"}),
    ("Give me the base fee of the latest block in ETH.", {"probe": "base_fee_gwei", "unit": "ether"}),
)  # fmt: skip

#: An address that holds nothing: a count of holders has one to leave out.
_EMPTY = "0x000000000000000000000000000000000000dEaD"
#: Aggregates over several addresses' balances (the outside testers' declined plain
#: questions, written before the planner read them): sums, the most or least of three,
#: how many hold any, a difference. Each pair of the eval's accounts holds different sums.
_AGGREGATE_FORMS: tuple[tuple[str, dict[str, object]], ...] = (
    ("What is the combined USDC balance of {a} and {b}?", {"probe": "sum", "of": "usdc_balance"}),
    ("How much USDC do {a} and {b} hold together?", {"probe": "sum", "of": "usdc_balance"}),
    ("What is the total USDC balance of {a}, {b} and {c}?",
     {"probe": "sum", "of": "usdc_balance", "n": 3}),
    ("What is the sum of the USDC balances of {a} and {b}?", {"probe": "sum", "of": "usdc_balance"}),
    ("What are the USDC balances of {a} and {b} combined, in cents?",
     {"probe": "sum", "of": "usdc_balance", "unit": "cents"}),
    ("How much ETH do {a} and {b} hold in total?", {"probe": "sum", "of": "eth_balance"}),
    ("Which of {a}, {b} and {c} holds the most USDC?",
     {"probe": "winner", "of": "usdc_balance", "op": "max", "n": 3}),
    ("What is the smallest USDC balance among {a}, {b} and {c}?",
     {"probe": "winner", "of": "usdc_balance", "op": "min", "n": 3}),
    ("Who has the least USDC: {a}, {b} or {c}?",
     {"probe": "winner", "of": "usdc_balance", "op": "min", "n": 3}),
    ("How many of {a}, {b} and {empty} hold any USDC?",
     {"probe": "count", "of": "usdc_balance", "n": 3}),
    ("How many of these addresses hold USDC: {a}, {b}, {empty}?",
     {"probe": "count", "of": "usdc_balance", "n": 3}),
    ("How many of {a}, {b} and {c} hold more than 3 USDC?",
     {"probe": "count", "of": "usdc_balance", "above": "3", "n": 3}),
    ("What is the difference between the USDC balances of {a} and {b}?",
     {"probe": "diff", "of": "usdc_balance"}),
    ("How much more USDC does {a} hold than {b}?", {"probe": "diff", "of": "usdc_balance"}),
    ("What are the USDC balances of {a} and {b}? Which is larger?",
     {"probe": "winner", "of": "usdc_balance", "op": "max"}),
    ("Compare the USDC balances of {a} and {b}.",
     {"probe": "winner", "of": "usdc_balance", "op": "max"}),
    ("What's the sum of ETH held by {a} and {b}?", {"probe": "sum", "of": "eth_balance"}),
    ("How many of {a}, {b} and {empty} hold no USDC?",
     {"probe": "count", "of": "usdc_balance", "n": 3, "at_most": "0"}),
    ("What is the USDC balance of {a} minus that of {b}?", {"probe": "diff", "of": "usdc_balance"}),
)  # fmt: skip
#: The same words an aggregate cannot take: one address, a mean, a word of time, two
#: aggregates at once, a count of addresses that is no balance; and questions whose words
#: a phrase's gap once swallowed (answered as a balance or a total received at exit 0).
_AGGREGATE_DECLINED = (
    "What is the combined USDC balance of {wallet}?",
    "What is the average USDC balance of {wallet} and {seller}?",
    "What is the combined USDC balance of {wallet} and {seller} yesterday?",
    "Which holds more USDC in total, {wallet} or {seller}?",
    "How many addresses made USDC transfers in the last 20 blocks?",
    "What is the total transfer count of {wallet} and {seller}?",
    "Who has sent more USDC, {wallet} or {outsider}?",
    "Has {outsider} lost any USDC?",
    "How much USDC has {outsider} transferred in the last 20 blocks?",
)  # fmt: skip

CATEGORIES = ("base_fee", "block_number", "timestamp", "usdc_balance", "eth_balance",
              "token", "transfers", "block_gas_and_txs", "comparison", "relative", "presentation",
              "scope-chain", "scope-standing", "unsupported", "outside-words", "units",
              "totals", "cents", "aggregates", "parts")  # fmt: skip


def _task(
    n: int, category: str, text: str, expect: str, truth: Sequence[Mapping[str, object]]
) -> JSONObject:
    return {"id": f"p-{category}-{n}", "category": category, "text": text, "expect": expect,
            "truth": truth}  # fmt: skip


def _free(rows: list[JSONObject]) -> None:
    plain = (("base_fee", "base_fee", [{"probe": "base_fee_gwei"}]),
             ("block_number", "block_number", [{"probe": "block_number"}]),
             ("timestamp", "timestamp", [{"probe": "block_timestamp"}]),
             ("token", "supply", [{"probe": "token_supply"}]),
             ("token", "decimals", [{"probe": "token_decimals"}]),
             ("token", "symbol", [{"probe": "token_symbol"}]))  # fmt: skip
    for cat, syn, truth in plain:
        for x, ask in itertools.product(_SYN[syn], _ASK):
            rows.append(_task(len(rows), cat, ask.format(x=x, usdc="{usdc}"), "answer", truth))
    for kind, syn, cat in (("usdc_balance", "usdc", "usdc_balance"), ("eth_balance", "eth", "eth_balance")):
        for x, ask, a in itertools.product(_SYN[syn], _ASK[:3], _ADDRS):
            truth = [{"probe": kind, "address": a}]
            rows.append(_task(len(rows), cat, ask.format(x=x.format(a=a)), "answer", truth))
    for how, a in itertools.product(_HOW, _ADDRS):
        truth = [{"probe": "usdc_balance", "address": a}]
        rows.append(_task(len(rows), "usdc_balance", how.format(a=a), "answer", truth))
    for syn, probe in (("count", "transfer_count"), ("largest", "transfer_max")):
        for x, ask, n in itertools.product(_SYN[syn], _ASK[:3], (5, 20)):
            truth = [{"probe": probe, "blocks": n}]
            rows.append(_task(len(rows), "transfers", ask.format(x=x.format(n=n)), "answer", truth))


#: A block's gas used, gas limit, transaction count and fullness asked as questions (the
#: outside tester's "What is the gas used by the latest block?" was read as a
#: transaction's), at the head, at a block, and at a block relative to the head.
_BLOCK_QUESTIONS: tuple[tuple[str, dict[str, object]], ...] = (
    ("How much gas did the latest block use?", {"probe": "block_gas_used"}),
    ("How much gas was used in block {head_minus_1}?", {"probe": "block_gas_used", "back": 1}),
    ("What was the gas used 2 blocks ago?", {"probe": "block_gas_used", "back": 2}),
    ("What was the gas limit of the block before the latest one?",
     {"probe": "block_gas_limit", "back": 1}),
    ("How many transactions does the newest block contain?", {"probe": "block_tx_count"}),
    ("How many transactions were in block {head_minus_2}?", {"probe": "block_tx_count", "back": 2}),
    ("How many transactions did the previous block have?", {"probe": "block_tx_count", "back": 1}),
    ("How full is the newest block?", {"probe": "block_fullness"}),
    ("How full was block {head_minus_1}?", {"probe": "block_fullness", "back": 1}),
    ("What percentage of the gas limit was used 2 blocks ago?",
     {"probe": "block_fullness", "back": 2}),
    ("How much of its gas limit did the previous block use?",
     {"probe": "block_fullness", "back": 1}),
)  # fmt: skip


def _block_facts(rows: list[JSONObject]) -> None:
    probes = (("gas_used", "block_gas_used"), ("gas_limit", "block_gas_limit"),
              ("tx_count", "block_tx_count"), ("fullness", "block_fullness"))  # fmt: skip
    for syn, probe in probes:
        for x, ask in itertools.product(_SYN[syn], _ASK):
            rows.append(_task(len(rows), "block_gas_and_txs", ask.format(x=x), "answer",
                              [{"probe": probe}]))  # fmt: skip
    for text, truth in _BLOCK_QUESTIONS:
        rows.append(_task(len(rows), "block_gas_and_txs", text, "answer", [truth]))


def _compare(rows: list[JSONObject]) -> None:
    forms = ("Who holds more USDC, {a} or {b}?", "Which account has more USDC: {a} or {b}?",
             "Does {a} or {b} hold less USDC?", "Which of {a} and {b} holds more ETH?")  # fmt: skip
    for form in forms:
        for a, b in (("{wallet}", "{seller}"), ("{seller}", "{outsider}")):
            of = "eth_balance" if "ETH" in form else "usdc_balance"
            op = "min" if "less" in form else "max"
            truth = [{"probe": "winner", "of": of, "op": op, "addresses": [a, b]}]
            rows.append(_task(len(rows), "comparison", form.format(a=a, b=b), "answer", truth))


def _relative(rows: list[JSONObject]) -> None:
    asks = (("What was the base fee in {r}?", "base_fee_gwei"),
            ("What was the base fee {r}?", "base_fee_gwei"),
            ("What is the timestamp of {r}?", "block_timestamp"))  # fmt: skip
    for (ask, probe), (ref, fixed), k in itertools.product(asks, _RELATIVE, (1, 2, 3)):
        if fixed is not None and k != 1:
            continue
        back = fixed or k
        text = ref.format(k=k).replace("1 blocks", "1 block")
        if "{r}?" in ask and ask.startswith("What was the base fee {r}") and ref.startswith("the"):
            continue  # "the base fee the previous block" is no question
        if ask.startswith("What was the base fee in") and not ref.startswith("the"):
            continue
        rows.append(_task(len(rows), "relative", ask.format(r=text), "answer",
                          [{"probe": probe, "back": back}]))  # fmt: skip
    for k in (1, 2):
        text = f"What was the base fee of the block before block {{head_minus_{k}}}?"
        rows.append(_task(len(rows), "relative", text, "answer",
                          [{"probe": "base_fee_gwei", "back": k + 1}]))  # fmt: skip


def _presentation(rows: list[JSONObject]) -> None:
    probes = {"base fee": {"probe": "base_fee_gwei"}, "block number": {"probe": "block_number"},
              "timestamp of the latest block": {"probe": "block_timestamp"}}  # fmt: skip
    for (x, clause), ask in itertools.product(_PRESENTATION, _ASK[:3]):
        a = "{wallet}"
        truth = [probes.get(x) or {"probe": "usdc_balance", "address": a}]
        text = ask.format(x=x.format(a=a) + clause).replace(".?", "?")
        rows.append(_task(len(rows), "presentation", text, "answer", truth))


def _declined(rows: list[JSONObject]) -> None:
    for chain, x in itertools.product(_CHAINS, ("USDC balance of {wallet}", "base fee",
                                                "total supply of USDC")):  # fmt: skip
        rows.append(_task(len(rows), "scope-chain", f"What is the {x} on {chain}?", "cannot", []))
    for form, x in itertools.product(_STANDING, ("USDC balance of {wallet}", "base fee")):
        rows.append(_task(len(rows), "scope-standing", form.format(x=x), "cannot", []))
    for text in _UNSUPPORTED:
        rows.append(_task(len(rows), "unsupported", text, "cannot", []))


#: A unit the asked fact is not given in: the fact is answered, the unit named as not
#: done (exit 1), never the value silently in another unit (written after the change).
_UNIT_MISMATCH: tuple[tuple[str, dict[str, object]], ...] = (
    ("What is the USDC balance of {wallet} in wei?", {"probe": "usdc_balance", "address": "{wallet}"}),
    ("What is the block number in gwei?", {"probe": "block_number"}),
    ("Give me the timestamp of the latest block in ether.", {"probe": "block_timestamp"}),
)  # fmt: skip


def _outside(rows: list[JSONObject]) -> None:
    for category, table in (("outside-words", _OUTSIDE), ("units", _UNITS), ("totals", _TOTALS)):
        for text, truth in table:
            rows.append(_task(len(rows), category, text, "answer", [truth]))
    for text, truth in _UNIT_MISMATCH:
        rows.append(_task(len(rows), "units", text, "partial", [truth]))


def _aggregates(rows: list[JSONObject]) -> None:
    for text, truth in _CENTS:
        rows.append(_task(len(rows), "cents", text, "answer", [truth]))
    orders = (("{wallet}", "{seller}", "{outsider}"), ("{outsider}", "{seller}", "{wallet}"))
    for (text, spec), (a, b, c) in itertools.product(_AGGREGATE_FORMS, orders):
        n = int(str(spec.get("n", 2)))
        addresses = [a, b, _EMPTY if "{empty}" in text else c][:n]
        probe = {k: v for k, v in spec.items() if k != "n"} | {"addresses": addresses}
        filled = text.format(a=a, b=b, c=c, empty=_EMPTY)
        rows.append(_task(len(rows), "aggregates", filled, "answer", [probe]))
    for text in _AGGREGATE_DECLINED:
        rows.append(_task(len(rows), "aggregates", text, "cannot", []))


#: Every part of a task is answered or named (outside test 6, written before the planner
#: read them): a second question about a comparison ("and by how much?"), the same fact at
#: two blocks (each answered at its block), a unit per part. Answered: every value.
_PARTS: tuple[tuple[str, list[dict[str, object]]], ...] = (
    ("Which address holds more USDC, {a} or {b}, and by how much?",
     [{"probe": "winner", "of": "usdc_balance", "op": "max"}, {"probe": "diff", "of": "usdc_balance"}]),
    ("Which has more USDC, {a} or {b}? By how much?",
     [{"probe": "winner", "of": "usdc_balance", "op": "max"}, {"probe": "diff", "of": "usdc_balance"}]),
    ("Who holds less ETH, {a} or {b}, and by how much?",
     [{"probe": "winner", "of": "eth_balance", "op": "min"}, {"probe": "diff", "of": "eth_balance"}]),
    ("What were the base fees of block {head_minus_1} and block {head_minus_2}?",
     [{"probe": "base_fee_gwei", "back": 1}, {"probe": "base_fee_gwei", "back": 2}]),
    ("What are the timestamps of blocks {head_minus_1} and {head_minus_3}?",
     [{"probe": "block_timestamp", "back": 1}, {"probe": "block_timestamp", "back": 3}]),
    ("What was the base fee at block {head_minus_3}, and at block {head_minus_1}?",
     [{"probe": "base_fee_gwei", "back": 3}, {"probe": "base_fee_gwei", "back": 1}]),
    ("What is the timestamp of the latest block and of block {head_minus_2}?",
     [{"probe": "block_timestamp"}, {"probe": "block_timestamp", "back": 2}]),
    ("What's the base fee now and what was it at block {head_minus_1}?",
     [{"probe": "base_fee_gwei"}, {"probe": "base_fee_gwei", "back": 1}]),
    ("What's the base fee of the latest block in gwei and what was it 2 blocks ago in wei?",
     [{"probe": "base_fee_gwei"}, {"probe": "base_fee_gwei", "back": 2, "unit": "wei"}]),
    ("How much USDC does {a} hold, in cents, and how much does {b} hold, in atomic units?",
     [{"probe": "usdc_balance", "address": "{a}", "unit": "cents"},
      {"probe": "usdc_balance", "address": "{b}", "unit": "atomic"}]),
    ("What's the USDC balance of {a} in atomic units and of {b} in cents?",
     [{"probe": "usdc_balance", "address": "{a}", "unit": "atomic"},
      {"probe": "usdc_balance", "address": "{b}", "unit": "cents"}]),
    # Two numbers sharing one relative reference (outside test 7): each at its own block.
    ("What were the base fees 1 and 3 blocks ago?",
     [{"probe": "base_fee_gwei", "back": 1}, {"probe": "base_fee_gwei", "back": 3}]),
    ("What were the timestamps two and three blocks before the latest block?",
     [{"probe": "block_timestamp", "back": 2}, {"probe": "block_timestamp", "back": 3}]),
    ("What were the base fees 1 and 2 blocks back, in wei?",
     [{"probe": "base_fee_gwei", "back": 1, "unit": "wei"},
      {"probe": "base_fee_gwei", "back": 2, "unit": "wei"}]),
    # An aggregate over two addresses, then a part about a third (outside test 7): the
    # aggregate is over its own part's addresses only.
    ("How much USDC do {a} and {b} hold together, and how much does {c} hold?",
     [{"probe": "sum", "of": "usdc_balance"}, {"probe": "usdc_balance", "address": "{c}"}]),
    ("How much ETH do {a} and {b} have between them, and how much does {c} have?",
     [{"probe": "sum", "of": "eth_balance"}, {"probe": "eth_balance", "address": "{c}"}]),
    ("How many of {a} and {b} hold any USDC? How much does {c} hold?",
     [{"probe": "count", "of": "usdc_balance"}, {"probe": "usdc_balance", "address": "{c}"}]),
    ("Which of {a} and {b} holds the most ETH, and how much ETH does {c} hold?",
     [{"probe": "winner", "of": "eth_balance", "op": "max"},
      {"probe": "eth_balance", "address": "{c}"}]),
    ("What is the combined ETH balance of {a} and {b}, and the USDC balance of {c}?",
     [{"probe": "sum", "of": "eth_balance"}, {"probe": "usdc_balance", "address": "{c}"}]),
    ("How much ETH does {c} hold, and how much do {a} and {b} hold together?",
     [{"probe": "eth_balance", "address": "{c}"}, {"probe": "sum", "of": "eth_balance"}]),
    # A block said in one part is not another part's (outside test 8): a present-tense
    # question of its own is at the head.
    ("What is the base fee, and what was the timestamp 2 blocks ago?",
     [{"probe": "base_fee_gwei"}, {"probe": "block_timestamp", "back": 2}]),
    ("What was the timestamp 3 blocks ago, and what is the base fee?",
     [{"probe": "block_timestamp", "back": 3}, {"probe": "base_fee_gwei"}]),
    ("What is the block number, and what was the base fee at block {head_minus_2}?",
     [{"probe": "block_number"}, {"probe": "base_fee_gwei", "back": 2}]),
    ("What is the base fee, and when was block {head_minus_1} mined?",
     [{"probe": "base_fee_gwei"}, {"probe": "block_timestamp", "back": 1}]),
    ("What is the USDC balance of {a}, and what was the base fee 3 blocks ago?",
     [{"probe": "usdc_balance", "address": "{a}"}, {"probe": "base_fee_gwei", "back": 3}]),
)  # fmt: skip
#: A part nib does not read, named while the rest is answered (``partial``): a ratio, a
#: balance at a past block.
_PARTS_PARTIAL: tuple[tuple[str, dict[str, object]], ...] = (
    ("Which holds more USDC, {a} or {b}, and how many times more?",
     {"probe": "winner", "of": "usdc_balance", "op": "max"}),
    ("How much USDC does {a} hold now, and how much did it hold at block {head_minus_1}?",
     {"probe": "usdc_balance", "address": "{a}"}),
    # An aggregate whose value no phrase names: named, never taken over the next part.
    ("What is the combined ETH of {a} and {b}, and what is the USDC balance of {c}?",
     {"probe": "usdc_balance", "address": "{c}"}),
    # "What is X, and the Y 2 blocks ago": whose block is unclear, X is declined naming it.
    ("What is the base fee, and the timestamp 2 blocks ago?",
     {"probe": "block_timestamp", "back": 2}),
)  # fmt: skip
_FOUR: tuple[tuple[str, dict[str, object]], ...] = (
    ("What is the combined USDC balance of {a}, {b}, {c} and {empty}?",
     {"probe": "sum", "of": "usdc_balance"}),
    ("How many of {a}, {b}, {c} and {empty} hold any USDC?",
     {"probe": "count", "of": "usdc_balance"}),
)  # fmt: skip
#: A comparison between an address and a group of addresses: declined by its word.
_PARTS_DECLINED = (
    "Which holds more USDC: {a}, or {b} plus {c}?",
    "Who has less USDC, {a} or {b} together with {c}?",
)


def _parts(rows: list[JSONObject]) -> None:
    orders = (("{wallet}", "{seller}", "{outsider}"), ("{outsider}", "{seller}", "{wallet}"))

    def filled(spec: Mapping[str, object], a: str, b: str, c: str = "") -> dict[str, object]:
        out = {k: (str(v).format(a=a, b=b, c=c) if k == "address" else v)
               for k, v in spec.items()}  # fmt: skip
        over = spec["probe"] in ("winner", "diff", "sum", "count")
        return out | ({"addresses": [a, b]} if over else {})

    for (text, specs), (a, b, c) in itertools.product(_PARTS, orders):
        truth = [filled(spec, a, b, c) for spec in specs]
        task = text.format(a=a, b=b, c=c, head_minus_1="{head_minus_1}",
                           head_minus_2="{head_minus_2}", head_minus_3="{head_minus_3}")  # fmt: skip
        rows.append(_task(len(rows), "parts", task, "answer", truth))
    for (text, spec), (a, b, c) in itertools.product(_PARTS_PARTIAL, orders):
        task = text.format(a=a, b=b, c=c, head_minus_1="{head_minus_1}")
        rows.append(_task(len(rows), "parts", task, "partial", [filled(spec, a, b, c)]))
    # Four addresses: every balance read (a sum or count is not stopped after three reads).
    for (text, spec), (a, b, c) in itertools.product(_FOUR, orders):
        probe = spec | {"addresses": [a, b, c, _EMPTY]}
        rows.append(_task(len(rows), "parts", text.format(a=a, b=b, c=c, empty=_EMPTY),
                          "answer", [probe]))  # fmt: skip
    for text, (a, b, c) in itertools.product(_PARTS_DECLINED, orders):
        rows.append(_task(len(rows), "parts", text.format(a=a, b=b, c=c), "cannot", []))


def paraphrase_tasks() -> list[JSONObject]:
    """The generated suite's task rows (the shape of agent/eval/*.json's tasks)."""
    rows: list[JSONObject] = []
    for make in (_free, _block_facts, _compare, _relative, _presentation, _declined, _outside, _aggregates,
                 _parts):
        make(rows)
    return rows
