"""chain.aio_rpc: chain reads awaited on the event loop's thread give what the thread-bound
reads give, against a real Anvil, and meet a node's misbehaviour as those do: a kept-alive
connection the node closed is sent once more, a chunked answer is read whole, a node that
does not answer in time is RpcUnreachable, a JSON-RPC error is RpcError."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from chain import aio_rpc
from chain.client import ChainClient
from chain.devkeys import AGENT, dev_account
from chain.errors import RpcError, RpcUnreachable


def test_the_reads_are_the_chains(chain: Any) -> None:
    client = ChainClient(chain.rpc_url, chain.chain_id)
    agent = dev_account(AGENT).address

    async def both() -> tuple[int, int, int]:
        # Three in a row on one loop: the kept-alive connection is reused.
        return (await aio_rpc.block_timestamp(client), await aio_rpc.token_balance(client, chain.usdc, agent),
                await aio_rpc.block_timestamp(client, 0))  # fmt: skip

    head_time, balance, genesis = asyncio.run(both())
    assert head_time == client.block_timestamp("latest")
    assert balance == client.token_balance(chain.usdc, agent) > 0
    assert genesis == client.block_timestamp(0)


def test_a_reader_it_does_not_know_is_read_on_a_worker_thread() -> None:
    class Clock:
        def block_timestamp(self, block: int | str = "latest") -> int:
            return 1234

    assert asyncio.run(aio_rpc.block_timestamp(Clock())) == 1234


Reply = Callable[[int, bytes], Awaitable[tuple[bytes, bool]]]


def _node(reply: Reply) -> Callable[[], Awaitable[tuple[asyncio.Server, list[int]]]]:
    """A loopback HTTP/1.1 server answering each POST with ``reply(n, body)``: the raw
    answer and whether to close the connection after it; it also counts connections."""

    async def start() -> tuple[asyncio.Server, list[int]]:
        opened = [0]

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            opened[0] += 1
            _OPEN.append(writer)
            try:
                while True:
                    head = await reader.readuntil(b"\r\n\r\n")
                    length = next(int(h.split(b":")[1]) for h in head.split(b"\r\n")
                                  if h.lower().startswith(b"content-length"))  # fmt: skip
                    body = await reader.readexactly(length)
                    answer, close = await reply(opened[0], body)
                    writer.write(answer)
                    await writer.drain()
                    if close:
                        break
            except (asyncio.IncompleteReadError, ConnectionError):
                pass
            writer.close()

        return await asyncio.start_server(serve, "127.0.0.1", 0), opened

    return start


#: The fake node's connections, closed when its test's loop is done with them.
_OPEN: list[asyncio.StreamWriter] = []


async def _on_node(reply: Reply, use: Callable[[ChainClient], Awaitable[Any]], timeout_s: float = 5.0) -> tuple[Any, int]:
    """``use(client)`` against a fake node answering with ``reply``: what it returned and
    how many connections the node saw."""
    server, opened = await _node(reply)()
    try:
        async with server:
            return await use(_client(server, timeout_s)), opened[0]
    finally:
        for writer in _OPEN:
            writer.close()
        _OPEN.clear()
        await asyncio.sleep(0.01)


def _client(server: asyncio.Server, timeout_s: float = 5.0) -> ChainClient:
    port = server.sockets[0].getsockname()[1]
    return ChainClient(f"http://127.0.0.1:{port}", timeout_s=timeout_s)


def _block(timestamp: int) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"timestamp": hex(timestamp)}}).encode()


def _answer(body: bytes, *, chunked: bool = False, close: bool = False) -> bytes:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
    if close:
        head += b"Connection: close\r\n"
    if not chunked:
        return head + b"Content-Length: %d\r\n\r\n" % len(body) + body
    half = len(body) // 2
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in (body[:half], body[half:]))
    return head + b"Transfer-Encoding: chunked\r\n\r\n" + chunks + b"0\r\n\r\n"


@pytest.mark.parametrize(("chunked", "close", "expected"), [
    (True, False, ([101, 101, 101], 1)),  # chunked, kept alive: one connection
    (False, True, ([101, 102, 103], 3)),  # "Connection: close": a fresh one each time
])
def test_chunked_and_closing_answers_are_read_whole(
    chunked: bool, close: bool, expected: tuple[list[int], int]
) -> None:
    async def reply(conn: int, body: bytes) -> tuple[bytes, bool]:
        return _answer(_block(100 + conn), chunked=chunked, close=close), close

    async def use(client: ChainClient) -> list[int]:
        return [await aio_rpc.block_timestamp(client) for _ in range(3)]

    assert asyncio.run(_on_node(reply, use)) == expected


def test_a_kept_alive_connection_the_node_closed_is_tried_once_more_fresh() -> None:
    async def reply(conn: int, body: bytes) -> tuple[bytes, bool]:
        # Each connection answers once, then the node closes it without saying so.
        return _answer(_block(200 + conn)), True

    async def use(client: ChainClient) -> list[int]:
        first = await aio_rpc.block_timestamp(client)
        await asyncio.sleep(0.05)  # the close reaches us
        return [first, await aio_rpc.block_timestamp(client)]

    assert asyncio.run(_on_node(reply, use)) == ([201, 202], 2)


def test_a_node_that_does_not_answer_in_time_is_unreachable() -> None:
    async def reply(conn: int, body: bytes) -> tuple[bytes, bool]:
        await asyncio.sleep(5)
        return _answer(_block(1)), True

    with pytest.raises(RpcUnreachable):
        asyncio.run(_on_node(reply, aio_rpc.block_timestamp, timeout_s=0.2))


@pytest.mark.parametrize(("answer", "match"), [
    (_answer(json.dumps({"jsonrpc": "2.0", "id": 1, "error": {"code": -32000,
                                                             "message": "header not found"}}).encode()),
     "error -32000: header not found"),
    (b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 4\r\n\r\nnope", "HTTP 502"),
])
def test_a_node_refusing_is_an_rpc_error_naming_what_it_said(answer: bytes, match: str) -> None:
    async def reply(conn: int, body: bytes) -> tuple[bytes, bool]:
        return answer, False

    with pytest.raises(RpcError, match=match):
        asyncio.run(_on_node(reply, aio_rpc.block_timestamp))
