"""ChainClient against a real Anvil: reads, Transfer logs, and typed errors."""

from __future__ import annotations

import http.server
import threading
from decimal import Decimal

import pytest

from chain.client import ChainClient
from chain.devkeys import AGENT, DEPLOYER, OUTSIDER, dev_account
from chain.devnet import free_port
from chain.errors import RpcError, RpcUnreachable, WrongChain
from chain.networks import get_network
from chain.usdc import transfer
from tests._support import proxy_in_environment


def test_reads_match_the_node(chain):
    c = ChainClient(chain.rpc_url, 31337)
    assert c.chain_id() == 31337
    assert c.block_number() == chain.w3.eth.block_number
    assert c.block_timestamp() == chain.w3.eth.get_block("latest")["timestamp"]
    assert isinstance(c.base_fee_gwei(), Decimal)
    assert c.base_fee_wei() == chain.w3.eth.get_block("latest")["baseFeePerGas"]
    assert c.gas_price() > 0
    agent = dev_account(AGENT).address
    assert c.eth_balance(agent) == chain.w3.eth.get_balance(agent)
    assert c.token_balance(chain.usdc, agent) == 100_000_000
    assert c.token_decimals(chain.usdc) == 6
    assert c.token_symbol(chain.usdc) == "USDC"


def test_transfer_logs_and_receipt(chain):
    c = ChainClient(chain.rpc_url, 31337)
    start = c.block_number()
    outsider = dev_account(OUTSIDER).address
    tx = transfer(chain.w3, chain.usdc, dev_account(AGENT), outsider, 1_234_567)
    receipt = c.receipt(tx)
    assert receipt is not None and receipt.status == 1 and receipt.gas_used > 0
    out = c.transfer_logs(chain.usdc, start, "latest", dev_account(AGENT).address, direction="out")
    assert [(t.recipient, t.value) for t in out] == [(outsider, 1_234_567)]
    incoming = c.transfer_logs(chain.usdc, start, "latest", outsider, direction="in")
    assert incoming == out
    assert c.transfer_logs(chain.usdc, start, "latest", dev_account(DEPLOYER).address) == []
    assert c.receipt("0x" + "ab" * 32) is None


def test_wrong_chain_names_both_ids(anvil):
    with pytest.raises(WrongChain) as err:
        ChainClient(anvil.rpc_url, 84532)
    assert "on chain id 31337, expected 84532" in str(err.value)
    assert anvil.rpc_url in str(err.value)


def test_unreachable_names_url_and_fix():
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(RpcUnreachable) as err:
        ChainClient(url, 31337, timeout_s=1)
    assert url in str(err.value) and "nib devnet up" in str(err.value)


def test_rpc_error_carries_code(anvil):
    c = ChainClient(anvil.rpc_url)
    with pytest.raises(RpcError) as err:
        c.call("eth_call", lambda: c.w3.eth.call({"to": "0x" + "00" * 20, "data": "0x", "gas": 1}))  # type: ignore[typeddict-item]
    assert "eth_call" in str(err.value)


def test_network_registry():
    net = get_network("base-sepolia")
    assert net.chain_id == 84532 and net.caip2 == "eip155:84532"
    assert net.usdc_name == "USDC" and net.usdc_version == "2" and net.domain == ("USDC", "2")
    # Another token drops the table's pinned domain (the token's own is read instead);
    # configuration pins one explicitly.
    assert get_network("base-sepolia", usdc="0x" + "11" * 20).domain is None
    assert get_network("anvil", usdc_name="USD Coin", usdc_version="2").domain == ("USD Coin", "2")
    assert get_network("anvil").domain is None
    with pytest.raises(Exception, match="half a USDC EIP-712 domain"):
        _ = get_network("anvil", usdc_name="USD Coin").domain
    assert get_network("eip155:31337").name == "anvil"
    assert get_network("anvil", rpc_url="http://x").rpc_url == "http://x"
    with pytest.raises(Exception, match="not registered"):
        get_network("mainnet-of-nowhere")


class _Node(http.server.BaseHTTPRequestHandler):
    """A JSON-RPC node double for the raw transport's HTTP behaviour (the chain's answers
    are tested against Anvil above): it answers eth_getBlockByNumber, then drops the
    kept-alive connection (as a restarted node does), or answers HTTP 503."""

    protocol_version = "HTTP/1.1"
    status = 200

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        body = b'{"jsonrpc":"2.0","id":1,"result":{"timestamp":"0x2a"}}'
        self.send_response(self.status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True  # no "Connection: close": the client finds out later

    def log_message(self, *args: object) -> None:
        pass


def test_raw_reads_survive_a_dropped_connection_and_name_http_errors():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Node)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        c = ChainClient(f"http://127.0.0.1:{server.server_address[1]}")
        assert [c.block_timestamp() for _ in range(3)] == [42, 42, 42]  # re-sent on a fresh one
        _Node.status = 503
        with pytest.raises(RpcError) as err:
            c.block_timestamp()
        assert "HTTP 503" in str(err.value) and "eth_getBlockByNumber" in str(err.value)
    finally:
        _Node.status = 200
        server.shutdown()
        server.server_close()
    with pytest.raises(RpcUnreachable):
        c.block_timestamp()


def test_a_local_node_is_read_and_written_directly_whatever_proxy_the_environment_sets(
    chain, monkeypatch
):
    """An outside tester with HTTP_PROXY set and no NO_PROXY: web3's transport sent every
    RPC to a local Anvil through the proxy, which cannot reach it (502), and the raw reads
    fell back to it. A loopback node is never sent through a proxy, by either path (web3's
    transport: chain id, balances, a transfer; the raw reads: the block's clock)."""
    agent, outsider = dev_account(AGENT).address, dev_account(OUTSIDER).address
    before = ChainClient(chain.rpc_url).token_balance(chain.usdc, outsider)
    with proxy_in_environment(monkeypatch) as proxy:
        c = ChainClient(chain.rpc_url, 31337)
        assert c.block_timestamp() == c.block()["timestamp"]
        tx = transfer(c.w3, chain.usdc, dev_account(AGENT), outsider, 7)
        receipt = c.receipt(tx)
        assert receipt is not None and receipt.status == 1
        assert c.token_balance(chain.usdc, outsider) == before + 7
        assert c.eth_balance(agent) > 0
    assert proxy.seen == []


def test_a_remote_node_behind_a_proxy_that_fails_is_named_with_the_proxy_and_the_fix(monkeypatch):
    """A node off this machine still goes through the environment's proxy (a user behind a
    corporate proxy reaches a remote RPC); when that proxy fails, the one-line
    RpcUnreachable names the status, the proxy and NO_PROXY. A local node that is down is
    named without a proxy: its request never went through one."""
    remote = "http://rpc.node.invalid:8545"
    with proxy_in_environment(monkeypatch) as proxy:
        with pytest.raises(RpcUnreachable) as err:
            ChainClient(remote, expected_chain_id=84532)
        seen = list(proxy.seen)  # web3's transport retries: several of the one request
        assert seen and set(seen) == {f"POST {remote}/"}, seen
        local = f"http://127.0.0.1:{free_port()}"
        with pytest.raises(RpcUnreachable) as down:
            ChainClient(local, expected_chain_id=31337, timeout_s=1)
        assert proxy.seen == seen
    text = str(err.value)
    assert f"(HTTP 502, through the proxy at {proxy.url.removeprefix('http://')} " in text, text
    assert "add rpc.node.invalid to NO_PROXY" in text, text
    assert "ConnectionError" in str(down.value) and "proxy" not in str(down.value), down.value


def test_the_clock_and_the_balance_are_one_exchange_with_the_node(chain, monkeypatch):
    """The wallet reads the head's time and its balance before every signature: one
    batch, one exchange, the same values as the two reads on their own."""
    import chain.client as client_module

    c = ChainClient(chain.rpc_url, 31337)
    agent = dev_account(AGENT).address
    alone = (c.block_timestamp(), c.token_balance(chain.usdc, agent))
    exchanges: list[object] = []
    post = client_module._post_json

    def counted(target, timeout, body):
        exchanges.append(body)
        return post(target, timeout, body)

    monkeypatch.setattr(client_module, "_post_json", counted)
    assert c.clock_and_balance(chain.usdc, agent) == alone
    assert len(exchanges) == 1 and isinstance(exchanges[0], list) and len(exchanges[0]) == 2


def test_a_read_of_the_batch_that_fails_is_that_reads_alone(chain):
    # No token at this address: balanceOf answers no word; the clock still reads.
    c = ChainClient(chain.rpc_url, 31337)
    clock, balance = c.clock_and_balance(dev_account(OUTSIDER).address, dev_account(AGENT).address)
    assert clock == c.block_timestamp()
    assert isinstance(balance, RpcError) and "expected one 32-byte word" in str(balance)


class _NoBatches(http.server.BaseHTTPRequestHandler):
    """A node in front of Anvil that refuses batches (as some public RPCs do: one error
    object for the whole array) and passes single requests on."""

    upstream = ""
    seen: list[str] = []

    def do_POST(self) -> None:
        import json
        import urllib.request

        body = self.rfile.read(int(self.headers["Content-Length"]))
        asked = json.loads(body)
        if isinstance(asked, list):
            self.seen.append("batch")
            out = json.dumps({"jsonrpc": "2.0", "id": None, "error": {
                "code": -32600, "message": "batch requests are not supported"}}).encode()
        else:
            self.seen.append(asked["method"])
            forwarded = urllib.request.Request(self.upstream, body, {"Content-Type": "application/json"})
            with urllib.request.urlopen(forwarded, timeout=10) as resp:
                out = resp.read()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args: object) -> None:
        pass


def test_a_node_that_refuses_batches_is_asked_one_request_at_a_time(chain):
    _NoBatches.upstream, _NoBatches.seen = chain.rpc_url, []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NoBatches)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        c = ChainClient(f"http://127.0.0.1:{server.server_address[1]}")
        agent = dev_account(AGENT).address
        assert c.clock_and_balance(chain.usdc, agent) == (
            c.block_timestamp(), c.token_balance(chain.usdc, agent))
    finally:
        server.shutdown()
        server.server_close()
    assert _NoBatches.seen[:3] == ["batch", "eth_getBlockByNumber", "eth_call"]
