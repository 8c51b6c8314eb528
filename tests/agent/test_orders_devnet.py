"""The outside tester's fifth run, through the real nib command on its own devnet (issue 23).

P12: "Send 0.01 USDC to 0xA and also 0.01 USDC to 0xB." paid 0xA only and exited 0. Each
order of a list is paid once, exactly, or (an order it cannot read) nothing is paid and
the order is named. A08: "the biggest USDC transfer between block 1 and the latest block"
was answered "none: no USDC transfers in blocks 1..1" at exit 0; the range runs to the
head at run start. Balances and Transfer logs are read back from the chain."""

from __future__ import annotations

import pytest

from agent.tools.chain_reads import format_eth, format_gwei
from chain.client import ChainClient
from chain.money import format_usdc
from chain.paywall.market import seller_named
from tests.agent._nib_devnet import own_devnet, run_json, run_paying, settled_rows

A, B, C, D = ("0x" + c * 40 for c in "abcd")


@pytest.fixture(scope="module")
def devnet(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    yield from own_devnet(tmp_path_factory, "orders-home")


def test_each_ordered_payment_of_a_list_is_made_or_named(devnet) -> None:  # type: ignore[no-untyped-def]
    home, info = devnet
    chain = ChainClient(info["rpc_url"], 31337)
    usdc, wallet = info["usdc"], info["wallet"].lower()
    start = chain.block_number() + 1

    both = run_json(home, f"Send 0.01 USDC to {A} and also 0.02 USDC to {B}.")
    assert both["returncode"] == 0 and both["finished"], both["answer"]
    logs = chain.transfer_logs(usdc, start, "latest")
    assert sorted((t.sender.lower(), t.recipient.lower(), t.value) for t in logs) == [
        (wallet, A, 10_000), (wallet, B, 20_000)
    ]  # fmt: skip
    assert chain.token_balance(usdc, A) == 10_000 and chain.token_balance(usdc, B) == 20_000
    assert sorted(settled_rows(home, both["run_id"])) == [(10_000, "settled"), (20_000, "settled")]
    assert f"send 0.02 USDC to {B}" in both["answer"], both["answer"]

    # An order it cannot read in the list: nothing is paid, and that order is named.
    before = chain.token_balance(usdc, wallet)
    start = chain.block_number() + 1
    named = run_json(home, f"Send 0.01 USDC to {C}. Also 0.02 USDC to {D}.")
    assert named["returncode"] == 1 and not named["finished"], named["answer"]
    assert f"0.02 USDC to {D}" in named["answer"] and "not answered" in named["answer"]
    assert chain.block_number() < start or chain.transfer_logs(usdc, start, "latest") == []
    assert chain.token_balance(usdc, wallet) == before
    assert settled_rows(home, named["run_id"]) == []


def test_a_range_to_the_latest_block_is_read_to_the_head(devnet) -> None:  # type: ignore[no-untyped-def]
    home, info = devnet
    chain = ChainClient(info["rpc_url"], 31337)
    head = chain.block_number()
    largest = max(t.value for t in chain.transfer_logs(info["usdc"], 1, head))
    out = run_json(home, "What was the biggest USDC transfer between block 1 and the latest block?")
    assert out["returncode"] == 0 and out["finished"], out["answer"]
    assert f"largest USDC transfer in blocks 1 to {head}:" in out["answer"], out["answer"]
    assert format_usdc(largest).split()[0] in out["answer"], (largest, out["answer"])
    assert "block number" not in out["answer"], out["answer"]
    print(out["answer"])


def test_a_fact_of_the_latest_block_names_the_block_it_was_read_at(devnet) -> None:  # type: ignore[no-untyped-def]
    """The outside tester's round 19: "base fee: 0.89 gwei" named no block, and the chain
    moves on; a value asked at a named block keeps saying it once."""
    home, info = devnet
    chain = ChainClient(info["rpc_url"], 31337)
    out = run_json(home, "What is the base fee and the gas used by the latest block?")
    assert out["returncode"] == 0 and out["finished"], out["answer"]
    head = chain.block_number()  # nothing mines during a read-only run
    block = chain.block(head)
    fee = format_gwei(int(block["baseFeePerGas"]))
    assert f"base fee: {fee} gwei at block {head}, the latest" in out["answer"], out["answer"]
    assert f"{block['gasUsed']} gas at block {head}, the latest" in out["answer"], out["answer"]
    past = run_json(home, f"What was the base fee at block {head - 1}?")
    assert f"at block {head - 1}" in past["answer"] and "the latest" not in past["answer"], past
    number = run_json(home, "What is the latest block number?")
    assert f"block number: {head} (observed" in number["answer"], number["answer"]
    # A balance and a supply are a state of the block read too (round 20's rough edge 1);
    # a token's name is not.
    wallet = info["wallet"]
    usdc = chain.token_balance(info["usdc"], wallet, head)
    money = run_json(home, f"How much USDC does {wallet} hold, and how much ETH? What are "
                           "the total supply and the name of USDC?")
    assert money["returncode"] == 0 and money["finished"], money["answer"]
    assert f"{format_usdc(usdc)} at block {head}, the latest" in money["answer"], money
    assert money["answer"].count(f"at block {head}, the latest") == 3, money["answer"]
    gas = run_json(home, "What is the gas price right now?")
    assert f"gwei at block {head}, the latest" in gas["answer"], gas["answer"]


def test_the_block_a_transaction_was_mined_in_is_its_receipts(devnet) -> None:  # type: ignore[no-untyped-def]
    """The outside tester's round 20 (Q11): "Which block was transaction 0x<hash> mined
    in?" answered the latest block's timestamp at exit 0."""
    from web3 import Web3

    from chain.devkeys import AGENT, OUTSIDER, dev_account
    from chain.usdc import transfer

    home, info = devnet
    w3 = Web3(Web3.HTTPProvider(info["rpc_url"]))
    tx = transfer(w3, info["usdc"], dev_account(AGENT), dev_account(OUTSIDER).address, 1)
    mined = int(w3.eth.get_transaction_receipt(tx)["blockNumber"])
    w3.provider.make_request("evm_mine", [])  # the head moves past it  # type: ignore[arg-type]
    out = run_json(home, f"Did transaction {tx} succeed? Which block was it mined in?")
    assert out["returncode"] == 0 and out["finished"], out["answer"]
    assert f"block of {tx}: {mined} (observed" in out["answer"], (mined, out["answer"])
    assert "timestamp" not in out["answer"], out["answer"]
    # When it was mined is its block's time, read through the receipt, never the head's
    # (outside round 22, RE5, had it declined with a status line nobody asked).
    stamp = int(w3.eth.get_block(mined)["timestamp"])
    w3.provider.make_request("evm_mine", [stamp + 500])  # a later head  # type: ignore[arg-type]
    when = run_json(home, f"When was transaction {tx} mined?")
    assert when["returncode"] == 0 and when["finished"], when["answer"]
    assert f"mining time of {tx}: {stamp} (unix seconds; " in when["answer"], when["answer"]
    assert "status" not in when["answer"], when["answer"]
    both = run_json(home, f"Which block was {tx} mined in, and when?")
    assert both["returncode"] == 0 and f"block of {tx}: {mined} (observed" in both["answer"]
    assert f"mining time of {tx}: {stamp} (unix" in both["answer"], both["answer"]
    # Round 26 (P1, P14): "that block" after a transaction was read at the head, at exit 0.
    # Round 28 (A1-A11): then declined. It is the block the receipt names, read there.
    fee = run_json(home, f"Which block was {tx} mined in? What was the base fee of that block?")
    mined_fee = int(w3.eth.get_block(mined)["baseFeePerGas"])
    assert mined_fee != int(w3.eth.get_block("latest")["baseFeePerGas"])  # the head's differs
    assert fee["returncode"] == 0 and fee["finished"], fee["answer"]
    assert f"base fee of the block {tx} was mined in: {format_gwei(mined_fee)} gwei" in fee["answer"], (
        mined_fee, fee["answer"])
    assert "the latest" not in fee["answer"], fee["answer"]
    count = run_json(home, f"How many transactions are in the block that included {tx}, and what "
                     "was its gas limit?")  # fmt: skip
    block = w3.eth.get_block(mined)
    assert count["returncode"] == 0, count["answer"]
    assert (f"block transaction count of the block {tx} was mined in: {len(block['transactions'])}"
            in count["answer"]), count["answer"]  # fmt: skip
    ts = run_json(home, f"Which block was {tx} mined in? What was the timestamp of that block?")
    assert ts["returncode"] == 0 and f"mining time of {tx}: {stamp} (unix" in ts["answer"], ts
    # Round 29 (A11, D1-D3, D7): with two facts of its block asked, the first was read at
    # the head; "the gas used by the block containing" gave the transaction's own gas. Two
    # transactions in one block, and a head whose gas limit differs, tell them apart.
    w3.provider.make_request("evm_setAutomine", [False])  # type: ignore[arg-type]
    try:
        agent, outsider = dev_account(AGENT), dev_account(OUTSIDER)
        nonce = w3.eth.get_transaction_count(agent.address, "pending")
        pair = [w3.eth.send_raw_transaction(agent.sign_transaction({
            "to": outsider.address, "value": 1, "gas": 21_000, "nonce": nonce + n,
            "maxFeePerGas": 10**10, "maxPriorityFeePerGas": 1, "chainId": 31337}).raw_transaction).to_0x_hex()
            for n in range(2)]  # fmt: skip
        w3.provider.make_request("evm_mine", [])  # type: ignore[arg-type]
    finally:
        w3.provider.make_request("evm_setAutomine", [True])  # type: ignore[arg-type]
    shared = w3.eth.get_block(int(w3.eth.get_transaction_receipt(pair[0])["blockNumber"]))
    assert len(shared["transactions"]) == 2 and int(shared["gasUsed"]) == 42_000, shared
    limit = int(shared["gasLimit"])
    w3.provider.make_request("evm_setBlockGasLimit", [hex(limit - 5_000_000)])  # type: ignore[arg-type]
    try:
        w3.provider.make_request("evm_mine", [])  # type: ignore[arg-type]
        two = run_json(home, f"For transaction {pair[0]}, what were the gas limit and the "
                       "transaction count of the block it was in?")  # fmt: skip
        used = run_json(home, f"What was the gas used by the block containing {pair[1]}, and what "
                        "was its base fee?")  # fmt: skip
        # Round 31 (A7, C1): "the block in which 0x... was mined" gave the transaction's gas.
        where = run_json(home, f"For the block in which {pair[0]} was mined, what was the gas used?")
        # Round 30 (D04): the first fact, said before the transaction, was the head's.
        first = run_json(home, f"The gas limit and the transaction count of the block containing "
                         f"{pair[1]}, please.")  # fmt: skip
    finally:
        w3.provider.make_request("evm_setBlockGasLimit", [hex(limit)])  # type: ignore[arg-type]
    assert two["returncode"] == 0, two["answer"]
    assert f"block gas limit of the block {pair[0]} was mined in: {limit} gas" in two["answer"], two["answer"]
    assert f"block transaction count of the block {pair[0]} was mined in: 2" in two["answer"], two["answer"]
    assert used["returncode"] == 0 and "transaction gas used" not in used["answer"], used["answer"]
    assert f"block gas used of the block {pair[1]} was mined in: 42000" in used["answer"], used["answer"]
    fee_there = format_gwei(int(shared["baseFeePerGas"]))
    assert f"base fee of the block {pair[1]} was mined in: {fee_there} gwei" in used["answer"], used["answer"]
    assert "the latest" not in two["answer"] + used["answer"], (two["answer"], used["answer"])
    assert first["returncode"] == 0 and "the latest" not in first["answer"], first["answer"]
    assert where["returncode"] == 0 and "transaction gas used" not in where["answer"], where["answer"]
    assert f"block gas used of the block {pair[0]} was mined in: 42000" in where["answer"], where["answer"]
    assert f"block gas limit of the block {pair[1]} was mined in: {limit} gas" in first["answer"], first["answer"]
    # Round 25 (X16): "each" after two transactions asked the last one's gas alone.
    tx2 = transfer(w3, info["usdc"], dev_account(AGENT), dev_account(OUTSIDER).address, 2)
    each = run_json(home, f"Did {tx} succeed? Did {tx2} succeed? How much gas did each use?")
    assert each["returncode"] == 0, each["answer"]
    for h in (tx, tx2):
        used = int(w3.eth.get_transaction_receipt(h)["gasUsed"])
        assert f"transaction gas used of {h}: {used}" in each["answer"], each["answer"]


def test_the_outside_testers_round_21_answers_read_as_answers(devnet) -> None:  # type: ignore[no-untyped-def]
    """Round 21, the tester's commands: a tie read "equal (...) is smaller" (Q20), the
    largest transfer's hash was cut to "(tx…" (Q6), "in the last 20 blocks: 10" named no
    block (Q7), and "Does 0x... hold any USDC?" gave the balance with no yes or no (Q3)."""
    home, info = devnet
    chain = ChainClient(info["rpc_url"], 31337)
    head = chain.block_number()  # nothing mines during a read-only run
    empty, other = "0x" + "e" * 40, "0x" + "f" * 40

    tie = run_json(home, f"Which of these two has less ETH: {empty} or {other}?")
    assert tie["returncode"] == 0 and "neither: both hold 0 ETH" in tie["answer"], tie["answer"]
    assert "equal (" not in tie["answer"] and "a tie, neither is smaller)" in tie["answer"], tie["answer"]

    logs = chain.transfer_logs(info["usdc"], 1, head)
    largest = max(logs, key=lambda t: t.value)
    big = run_json(home, f"What was the largest single USDC transfer between blocks 1 and {head}?")
    assert big["returncode"] == 0 and f"(tx {largest.tx_hash})" in big["answer"], big["answer"]
    assert "…" not in big["answer"], big["answer"]

    first = max(0, head - 19)
    count = len(chain.transfer_logs(info["usdc"], first, head))
    window = run_json(home, "How many USDC transfers happened in the last 20 blocks?")
    said = f"in the last 20 blocks (blocks {first} to {head}): {count} (observed"
    assert window["returncode"] == 0 and said in window["answer"], window["answer"]

    for address, verdict in ((empty, "no"), (info["wallet"], "yes")):
        out = run_json(home, f"Does {address} hold any USDC?")
        lines = out["answer"].splitlines()
        assert out["returncode"] == 0 and f"> 0 usdc: {verdict} (derived" in lines[0], out["answer"]
        assert lines[1].startswith(f"USDC balance of {address}: "), out["answer"]


def test_the_outside_testers_round_22_clauses_read_as_asked(devnet) -> None:  # type: ignore[no-untyped-def]
    """Round 22: a right answer followed by a clause restating it ("I mean ...", RE2),
    asking it as yes or no (n5) or asking the hash its line already gives (n8) exited 1 on
    that clause; "What about ETH?" after a balance was declined (RE3). Each now answers
    at exit 0, with the values read back from the chain."""
    home, info = devnet
    chain = ChainClient(info["rpc_url"], 31337)
    head, wallet = chain.block_number(), info["wallet"]

    block = chain.block(head)
    used, limit = int(block["gasUsed"]), int(block["gasLimit"])
    full = run_json(home, f"How full is block {head}? I mean what share of its gas limit was used.")
    assert full["returncode"] == 0 and f"({used} of {limit} gas)" in full["answer"], full["answer"]

    yes = run_json(home, f"Does {wallet} hold any USDC at all? Yes or no.")
    assert yes["returncode"] == 0 and "> 0 usdc: yes (" in yes["answer"], yes["answer"]

    largest = max(chain.transfer_logs(info["usdc"], 1, head), key=lambda t: t.value)
    big = run_json(home, f"What was the largest USDC transfer between blocks 1 and {head}? "
                   "Include its transaction hash.")  # fmt: skip
    assert big["returncode"] == 0 and f"(tx {largest.tx_hash})" in big["answer"], big["answer"]

    both = run_json(home, f"How much USDC does {wallet} have? What about ETH?")
    usdc = format_usdc(chain.token_balance(info["usdc"], wallet, head))
    eth = format_eth(chain.eth_balance(wallet, head))
    assert both["returncode"] == 0 and "not answered" not in both["answer"], both["answer"]
    assert f"USDC balance of {wallet}: {usdc} at block {head}" in both["answer"], both["answer"]
    assert f"ETH balance of {wallet}: {eth} at block {head}" in both["answer"], both["answer"]


def test_a_correction_is_never_answered_of_the_first_subject(devnet) -> None:  # type: ignore[no-untyped-def]
    """Outside round 23: "What is the USDC balance of 0xS? I mean 0xF." answered 0xS's
    balance alone at exit 0 (and eleven like it). The correction is named, exit 1; the
    first subject's line names its own address."""
    home, info = devnet
    chain = ChainClient(info["rpc_url"], 31337)
    other = "0x1b06A865289756e73349De1149deD50DE0DC2316"
    out = run_json(home, f"What is the USDC balance of {info['wallet']}? I mean {other}.")
    assert out["returncode"] == 1 and not out["finished"], out["answer"]
    usdc = format_usdc(chain.token_balance(info["usdc"], info["wallet"]))
    assert f"USDC balance of {info['wallet']}: {usdc} at block" in out["answer"], out["answer"]
    assert f"I mean {other}: not answered" in out["answer"], out["answer"]
    both = run_json(home, f"What is the USDC balance of {info['wallet']} and what about {other}?")
    assert both["returncode"] == 0, both["answer"]
    assert f"USDC balance of {other}: 0.00 USDC at block" in both["answer"], both["answer"]
    # Round 24 (N13): an aggregate asked back of another asset summed the asset asked before.
    total = run_json(home, f"How much ETH do {info['wallet']} and {other} hold? What is their "
                     "combined USDC?")  # fmt: skip
    usdc_sum = format_usdc(chain.token_balance(info["usdc"], info["wallet"])
                           + chain.token_balance(info["usdc"], other))  # fmt: skip
    assert total["returncode"] == 0, total["answer"]
    assert f"combined USDC balance: {usdc_sum} (derived at block" in total["answer"], total["answer"]
    assert "combined ETH" not in total["answer"], total["answer"]


def test_the_outside_testers_round_28_lists_and_follow_ups_read_every_subject(devnet) -> None:  # type: ignore[no-untyped-def]
    """Round 28: "Did T1 and T3 succeed? How much gas did each use?" declined "Did T1" (B6),
    and "What is the USDC balance of A? And ETH? And for B?" gave B's USDC alone at exit 0
    (D5). Every transaction of a list and every fact asked before a holder is read."""
    from web3 import Web3

    from chain.devkeys import AGENT, OUTSIDER, dev_account
    from chain.usdc import transfer

    home, info = devnet
    w3 = Web3(Web3.HTTPProvider(info["rpc_url"]))
    txs = [transfer(w3, info["usdc"], dev_account(AGENT), dev_account(OUTSIDER).address, n) for n in (3, 4)]
    receipts = [w3.eth.get_transaction_receipt(tx) for tx in txs]
    each = run_json(home, f"Did {txs[0]} and {txs[1]} succeed? How much gas did each use?")
    assert each["returncode"] == 0 and each["finished"], each["answer"]
    for tx, receipt in zip(txs, receipts, strict=True):
        assert f"transaction status of {tx}: " in each["answer"], each["answer"]
        assert f"transaction gas used of {tx}: {int(receipt['gasUsed'])}" in each["answer"], each["answer"]
    blocks = run_json(home, f"Which blocks were {txs[0]} and {txs[1]} mined in?")
    assert blocks["returncode"] == 0, blocks["answer"]
    for tx, receipt in zip(txs, receipts, strict=True):
        assert f"block of {tx}: {int(receipt['blockNumber'])} (observed" in blocks["answer"], blocks["answer"]
    either = run_json(home, f"Did {txs[0]} or {txs[1]} fail?")
    assert either["returncode"] == 0 and all(f"transaction status of {tx}: " in either["answer"]
                                             for tx in txs), either["answer"]  # fmt: skip
    chain = ChainClient(info["rpc_url"], 31337)
    other = dev_account(OUTSIDER).address
    follow = run_json(home, f"What is the USDC balance of {info['wallet']}? And ETH? And for {other}?")
    assert follow["returncode"] == 0, follow["answer"]
    for holder in (info["wallet"], other):
        usdc, eth = chain.token_balance(info["usdc"], holder), chain.w3.eth.get_balance(holder)
        assert f"USDC balance of {holder}: {format_usdc(usdc)} at block" in follow["answer"], follow["answer"]
        assert f"ETH balance of {holder}: {format_eth(eth)}" in follow["answer"], follow["answer"]


def test_the_outside_testers_round_32_transfers_are_listed_and_a_block_frame_is_read(devnet) -> None:  # type: ignore[no-untyped-def]
    """Round 32: "Show me / List / Which USDC transfers ... in the last 10 blocks" gave their
    count alone at exit 0 (E22, S01, S02); "For the block where 0x... was included, what
    were ..." and "In the block that 0x... landed in, ..." declined the opening clause (B09,
    B16), and "Which block did 0x... land in" declined "land" (B07). Each transfer is
    listed as the chain's logs say; each block fact is the block's, read back here."""
    from web3 import Web3

    from chain.devkeys import AGENT, OUTSIDER, dev_account
    from chain.usdc import transfer

    home, info = devnet
    w3 = Web3(Web3.HTTPProvider(info["rpc_url"]))
    chain = ChainClient(info["rpc_url"], 31337)
    txs = [transfer(w3, info["usdc"], dev_account(AGENT), dev_account(OUTSIDER).address, n)
           for n in (3_250_000, 7_000_000)]  # fmt: skip
    head = w3.eth.block_number
    logs = chain.transfer_logs(info["usdc"], max(head - 9, 0), head)
    for question in ("Show me the USDC transfers in the last 10 blocks.",
                     "Which USDC transfers happened in the last 10 blocks?"):
        listed = run_json(home, question)
        assert listed["returncode"] == 0 and listed["finished"], listed["answer"]
        answer = " ".join(listed["answer"].split())
        assert f"{len(logs)} in blocks {max(head - 9, 0)}..{head}: " in answer, answer
        for log in logs:
            assert (f"block {log.block_number}: {format_usdc(log.value)} from {log.sender} to "
                    f"{log.recipient} (tx {log.tx_hash})") in answer, answer
    assert {tx.lower() for tx in txs} <= {log.tx_hash.lower() for log in logs}
    block = w3.eth.get_block(w3.eth.get_transaction_receipt(txs[0])["blockNumber"])
    framed = run_json(home, f"For the block where {txs[0]} was included, what were the gas "
                            "limit and the number of transactions?")  # fmt: skip
    assert framed["returncode"] == 0, framed["answer"]
    assert f"was mined in: {int(block['gasLimit'])} gas" in framed["answer"], framed["answer"]
    assert f"was mined in: {len(block['transactions'])} (observed" in framed["answer"], framed["answer"]
    fee = run_json(home, f"In the block that {txs[0]} landed in, what was the base fee?")
    assert fee["returncode"] == 0, fee["answer"]
    assert f"was mined in: {format_gwei(int(block['baseFeePerGas']))}" in fee["answer"], fee["answer"]
    landed = run_json(home, f"Which block did {txs[0]} land in, and how much gas did the block "
                            "it landed in use?")  # fmt: skip
    assert landed["returncode"] == 0, landed["answer"]
    assert f"block of {txs[0]}: {int(block['number'])} (observed" in landed["answer"], landed["answer"]
    assert f"was mined in: {int(block['gasUsed'])} gas" in landed["answer"], landed["answer"]


def test_the_outside_testers_round_33_transfers_one_way_and_a_paid_gas_price(devnet) -> None:  # type: ignore[no-untyped-def]
    """Round 33: "the USDC transfers to 0xB" and "... from 0xB" listed both ways, and "from
    0xA to 0xD" listed each address's, at exit 0 (T07, T08, T19); "What gas price did
    0x<hash> pay?" gave the node's current gas price at exit 0 (E21): it is the receipt's
    effective price, and its fee gas used times that price; "Regarding the block
    containing 0x<hash>, ..." declined its frame and "how much gas was used" (B03)."""
    from web3 import Web3

    from chain.devkeys import AGENT, OUTSIDER, SELLER, dev_account
    from chain.usdc import transfer

    home, info = devnet
    w3 = Web3(Web3.HTTPProvider(info["rpc_url"]))
    agent, outsider, seller = (dev_account(k) for k in (AGENT, OUTSIDER, SELLER))
    first = w3.eth.block_number + 1
    sent = {
        "in": transfer(w3, info["usdc"], agent, outsider.address, 2_000_000),
        "out": transfer(w3, info["usdc"], outsider, seller.address, 500_000),
        "other": transfer(w3, info["usdc"], agent, seller.address, 1_000_000),
    }
    span = f"between block {first} and block {w3.eth.block_number}"
    for ask, want in ((f"to {outsider.address}", {"in"}), (f"from {outsider.address}", {"out"}),
                      (f"from {agent.address} to {seller.address}", {"other"})):
        out = run_json(home, f"List the USDC transfers {ask} {span}.")
        assert out["returncode"] == 0, out["answer"]
        assert {k for k, tx in sent.items() if tx in out["answer"]} == want, (ask, out["answer"])
    # Round 34 (V3): the largest one keeps the direction of the transfers just asked.
    largest = run_json(home, f"What were the USDC transfers from {outsider.address} {span}, and "
                             "which one was the largest?")  # fmt: skip
    assert largest["returncode"] == 0, largest["answer"]
    assert f": 0.50 USDC from {outsider.address} to {seller.address}" in largest["answer"], largest["answer"]
    assert "2.00 USDC from" not in largest["answer"], largest["answer"]
    receipt = w3.eth.get_transaction_receipt(sent["in"])
    price, used = int(receipt["effectiveGasPrice"]), int(receipt["gasUsed"])
    paid = run_json(home, f"What gas price did {sent['in']} pay, and what was its fee?")
    assert paid["returncode"] == 0, paid["answer"]
    assert f"effective gas price of {sent['in']}: {format_gwei(price)} gwei" in paid["answer"], paid["answer"]
    assert (f"transaction fee of {sent['in']}: {format_eth(used * price)} ({used} gas at "
            f"{format_gwei(price)} gwei)") in paid["answer"], paid["answer"]
    block = w3.eth.get_block(receipt["blockNumber"])
    framed = run_json(home, f"Regarding the block containing {sent['in']}, what was the gas limit "
                            "and how much gas was used?")  # fmt: skip
    assert framed["returncode"] == 0, framed["answer"]
    assert f"was mined in: {int(block['gasLimit'])} gas" in framed["answer"], framed["answer"]
    assert f"was mined in: {int(block['gasUsed'])} gas" in framed["answer"], framed["answer"]


@pytest.fixture(scope="module")
def market_devnet(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    yield from own_devnet(tmp_path_factory, "paid-nothing-home")


def test_a_research_purchase_that_delivered_nothing_is_named_in_the_answer(market_devnet) -> None:  # type: ignore[no-untyped-def]
    """Not a request to buy ("Buy its ... sheet": the fact the question asks, on expected
    value): the fresh market's cheapest seller, bargain, is paid 0.005 USDC and delivers
    nothing, a second seller delivers. The answer says so (it was only in the evidence)."""
    home, info = market_devnet
    market = {s["name"]: s["url"] for s in info["market"]}
    bargain = seller_named("bargain").pay_to.lower()
    out, paid = run_paying(home, info, "Who issues USDC? Buy its token fact sheet from a seller in the market.")
    assert paid[0] == (bargain, 5_000) and len(paid) == 2, (paid, out["answer"])
    assert out["returncode"] == 0 and out["finished"], out["answer"]
    named = [line for line in out["lines"] if line["text"].startswith("a purchase that delivered nothing")]
    assert len(named) == 1 and named[0]["grade"] == "observed", out["lines"]
    assert f"paid 0.005 USDC for /tokens from {market['bargain']}: 0 facts" in named[0]["text"]
    assert "Circle" in out["answer"]


def test_a_request_to_buy_from_the_market_pays_one_seller_and_names_what_held_nothing(devnet) -> None:  # type: ignore[no-untyped-def]
    """S03: "buy the USDC factsheet from the market and tell me who the issuer is" paid
    bargain 0.005 (nothing delivered) and then atlas 0.01 at exit 0. A request naming its
    subject is a request to buy: one seller is paid, and a purchase that held nothing is
    named (exit 1). Once the judge has seen bargain fail, another phrasing of the request
    buys the cheapest offer it approves, once, and answers the question from it."""
    home, info = devnet
    market = {s["name"]: s["url"] for s in info["market"]}
    bargain = seller_named("bargain").pay_to.lower()
    out, paid = run_paying(home, info, "buy the USDC factsheet from the market and tell me who the issuer is")
    assert paid == [(bargain, 5_000)], (paid, out["answer"])
    assert out["returncode"] == 1 and not out["finished"], out["answer"]
    assert f"paid 0.005 USDC for /tokens from {market['bargain']}" in out["answer"], out["answer"]
    assert "a request to buy buys once" in out["answer"], out["answer"]
    assert settled_rows(home, out["run_id"]) == [(5_000, "settled")]

    again, paid = run_paying(home, info, "Get me the USDC fact sheet from the market and tell me its issuer.")
    assert len(paid) == 1 and paid[0][0] != bargain and paid[0][1] == 10_000, (paid, again["answer"])
    assert again["returncode"] == 0 and again["finished"], again["answer"]
    assert "issuer from the token fact sheet of USDC: Circle" in again["answer"], again["answer"]
    assert settled_rows(home, again["run_id"]) == [(10_000, "settled")]


def test_a_named_sheet_from_a_sellers_url_is_bought_once_from_its_catalog(devnet) -> None:  # type: ignore[no-untyped-def]
    """S11: "Buy the lido sheet from <paywall URL> and tell me its governance token." was
    declined ("names no protocol"); with the question read, the bare URL was paid at "/"
    (404). A named subject at a seller's bare URL is that seller's offer about it, read
    from its catalog: bought once, and the question answered from it."""
    home, info = devnet
    paywall = info["paywall_url"]
    task = f"Buy the lido sheet from {paywall} and tell me its governance token."
    out, paid = run_paying(home, info, task)
    assert paid == [(info["seller"].lower(), 250_000)], (paid, out["answer"])
    assert out["returncode"] == 0 and out["finished"], out["answer"]
    assert "governance_token from the protocol fact sheet of lido: LDO" in out["answer"], out["answer"]
    assert settled_rows(home, out["run_id"]) == [(250_000, "settled")]
