"""Chain reads awaited on the event loop's own thread, over its own kept-alive connection.

The paid path reads the chain's clock while the seller's 402 is read, and the run's
balance beside it. On a worker thread such a read costs more than the request: the hop to
the thread and back, and the threads' turns at the GIL while the 402 is parsed. Measured
on the bench devnet (2 cores): a quote took 1.9-2.6 ms with both reads on worker threads
and 1.1 ms with the clock read here; the request alone is ~0.2 ms. Here the request waits
on the node without holding the loop, and the client's timeout bounds it.

Reads only (a request on a kept-alive connection the node closed is sent once more on a
fresh one). A node behind a proxy, or a client this module does not know, is read on a
worker thread as before (``chain.client.raw_rpc``).
"""

from __future__ import annotations

import asyncio
import json
import weakref
from collections.abc import AsyncGenerator
from typing import Protocol

from chain.client import ChainClient, direct_target, rpc_result
from chain.errors import RpcError

__all__ = ["aio_raw_rpc", "block_timestamp", "token_balance"]

_Target = tuple[str, str, int, str]
_Conn = tuple[asyncio.StreamReader, asyncio.StreamWriter]
_Pool = dict[_Target, list[_Conn]]
#: Idle connections per event loop and node (each serves one request at a time), with the
#: async generator that closes them when the loop shuts down.
_IDLE: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, tuple[_Pool, AsyncGenerator[None, None]]
] = weakref.WeakKeyDictionary()
_HEAD_LIMIT = 64 * 1024


class _Clock(Protocol):
    def block_timestamp(self, block: int | str = ..., /) -> int: ...


class _Balances(Protocol):
    def token_balance(self, token: str, owner: str, /) -> int: ...


async def block_timestamp(chain: _Clock, block: int | str = "latest") -> int:
    """``chain.block_timestamp(block)``, awaited without a worker thread when it can be."""
    if not _direct(chain):
        return await asyncio.to_thread(chain.block_timestamp, block)
    assert isinstance(chain, ChainClient)
    tag = hex(block) if isinstance(block, int) else block
    found = await aio_raw_rpc(chain, "eth_getBlockByNumber", [tag, False])
    return chain.timestamp_of(found, block)


async def token_balance(chain: _Balances, token: str, holder: str) -> int:
    """``chain.token_balance(token, holder)`` at the latest block, likewise."""
    if not _direct(chain):
        return await asyncio.to_thread(chain.token_balance, token, holder)
    assert isinstance(chain, ChainClient)
    found = await aio_raw_rpc(chain, "eth_call", ChainClient.balance_call(token, holder), "balanceOf")
    return chain.word_of(token, "balanceOf", found)


def _direct(chain: object) -> bool:
    """Whether ``chain`` is a client whose node this module reaches itself."""
    return isinstance(chain, ChainClient) and direct_target(chain.rpc_url) is not None


async def aio_raw_rpc(
    chain: ChainClient, method: str, params: list[object], name: str | None = None
) -> object:
    """The ``result`` of one read-only JSON-RPC request to ``chain``'s node over this loop's
    connection (as ``chain.client.raw_rpc``, named ``name``, default ``method``): a node's
    error as RpcError, no answer within the client's timeout as RpcUnreachable."""
    target = direct_target(chain.rpc_url)
    assert target is not None, "aio_raw_rpc: a node reached through a proxy is read on a thread"
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    try:
        async with asyncio.timeout(chain.timeout_s):
            status, raw = await _post(target, body)
    except (ConnectionError, TimeoutError, OSError, asyncio.IncompleteReadError,
            asyncio.LimitOverrunError, ValueError) as exc:
        raise chain.unreachable(exc) from exc
    try:
        resp: object = json.loads(raw) if status == 200 else None
    except ValueError:
        resp = None
    if resp is None:
        raise RpcError(chain.rpc_url, name or method, None, f"HTTP {status}, body {raw[:200]!r}; "
                       "expected HTTP 200 with a JSON-RPC response")
    return rpc_result(chain.rpc_url, name or method, resp)


async def _post(target: _Target, body: bytes) -> tuple[int, bytes]:
    """POST ``body`` on an idle connection to ``target`` (a fresh one when none is idle,
    or when the reused one turns out closed): the HTTP status and the body."""
    scheme, host, port, path = target
    idle = (await _pool()).setdefault(target, [])
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"  # an IPv6 host in brackets
    request = (f"POST {path} HTTP/1.1\r\nHost: {where}\r\nUser-Agent: nib\r\n"
               f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
               ).encode() + body  # fmt: skip
    while True:
        reused = bool(idle)
        reader, writer = idle.pop() if reused else await asyncio.open_connection(
            host, port, ssl=scheme == "https", limit=_HEAD_LIMIT)
        try:
            writer.write(request)
            await writer.drain()
            status, raw, keep = await _response(reader)
        except (ConnectionError, asyncio.IncompleteReadError) as exc:
            writer.close()
            if reused and not getattr(exc, "partial", b""):
                continue  # the node closed the kept-alive connection: once more, fresh
            raise
        except BaseException:
            writer.close()
            raise
        if keep:
            idle.append((reader, writer))
        else:
            writer.close()
        return status, raw


async def _pool() -> _Pool:
    """This loop's idle connections. The first use starts an async generator that closes
    them: ``asyncio.run`` closes every async generator of its loop before the loop, so no
    kept-alive connection outlives the run that opened it."""
    loop = asyncio.get_running_loop()
    held = _IDLE.get(loop)
    if held is None:
        pool: _Pool = {}
        closer = _closes(pool)
        await closer.asend(None)
        held = _IDLE[loop] = (pool, closer)
    return held[0]


async def _closes(pool: _Pool) -> AsyncGenerator[None, None]:
    try:
        yield
    finally:
        for conns in pool.values():
            for _, writer in conns:
                writer.close()
        pool.clear()


async def _response(reader: asyncio.StreamReader) -> tuple[int, bytes, bool]:
    """One HTTP/1.1 response: its status, its body (by Content-Length or chunked), and
    whether the connection stays open."""
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
    version, _, rest = head[0].partition(" ")
    status = int(rest.split(" ", 1)[0])
    headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in head[1:] if h)}
    keep = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
    if "chunked" in headers.get("transfer-encoding", "").lower():
        parts = []
        while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
            parts.append(await reader.readexactly(size + 2))
        await reader.readuntil(b"\r\n")  # the empty trailer
        return status, b"".join(p[:-2] for p in parts), keep
    if "content-length" in headers:
        return status, await reader.readexactly(int(headers["content-length"])), keep
    return status, await reader.read(), False  # delimited by the close
