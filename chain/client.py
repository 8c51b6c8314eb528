"""A small chain client over web3.py with typed errors.

It answers the questions a research agent asks of a chain (fees, blocks, balances,
receipts, token transfers) and is the one place where web3/requests errors are
translated into ``chain.errors`` types that name the URL and the fix.
"""

from __future__ import annotations

import functools
import http.client
import json
import threading
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import TypeVar

import requests
from eth_typing import ABI, ChecksumAddress
from eth_utils import to_checksum_address
from web3 import Web3
from web3.contract import Contract
from web3.exceptions import TransactionNotFound, Web3RPCError
from web3.types import BlockData, RPCEndpoint, TxReceipt

from chain.errors import RpcError, RpcUnreachable, WrongChain
from chain.http_proxy import proxy_for
from chain.networks import ANVIL_CHAIN_ID

T = TypeVar("T")

_ERC20_ABI: ABI = [
    {"name": "balanceOf", "type": "function", "stateMutability": "view",
     "inputs": [{"name": "a", "type": "address"}], "outputs": [{"name": "", "type": "uint256"}]},
    {"name": "decimals", "type": "function", "stateMutability": "view",
     "inputs": [], "outputs": [{"name": "", "type": "uint8"}]},
    {"name": "symbol", "type": "function", "stateMutability": "view",
     "inputs": [], "outputs": [{"name": "", "type": "string"}]},
    {"name": "name", "type": "function", "stateMutability": "view",
     "inputs": [], "outputs": [{"name": "", "type": "string"}]},
    {"name": "totalSupply", "type": "function", "stateMutability": "view",
     "inputs": [], "outputs": [{"name": "", "type": "uint256"}]},
]
TRANSFER_TOPIC = "0x" + Web3.keccak(text="Transfer(address,address,uint256)").hex().removeprefix("0x")
GWEI = Decimal(10) ** 9


@dataclass(frozen=True)
class TransferLog:
    """One ERC-20 Transfer event."""

    tx_hash: str
    block_number: int
    log_index: int
    sender: str
    recipient: str
    value: int


@dataclass(frozen=True)
class Receipt:
    """The parts of a transaction receipt the agent reports."""

    tx_hash: str
    status: int
    block_number: int
    gas_used: int
    effective_gas_price: int
    sender: str
    to: str | None


def raw_rpc(w3: Web3, method: str, params: list[object], name: str | None = None) -> object:
    """The ``result`` of one read-only JSON-RPC request to ``w3``'s node.

    No middleware and no result formatters (hex stays hex), over a kept-alive
    ``http.client`` connection of this thread when the node is a plain http(s) URL reached
    without a proxy (:func:`chain.http_proxy.proxy_for`; web3's ``requests`` transport
    costs ~6x the CPU of the request itself; the paid path makes six reads per payment).
    Reads only: a request on a connection the node closed is sent once more on a fresh one.
    A node's error is raised as RpcError (named ``name``, default ``method``); transport
    errors as ConnectionError / TimeoutError, for the caller's translation
    (ChainClient.call).
    """
    provider = w3.provider
    url = _endpoint(w3)
    target = direct_target(url)
    if target is None:
        return rpc_result(url, name or method, provider.make_request(RPCEndpoint(method), params))
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return rpc_result(url, name or method, _exchange(w3, target, body, name or method))


def raw_rpc_batch(w3: Web3, calls: Sequence[tuple[str, list[object], str]]) -> list[object]:
    """The results of several read-only JSON-RPC requests (method, params, name) to
    ``w3``'s node: one batch, one exchange, when the node is a plain http(s) URL (else,
    or when the node answers a batch with anything but one answer per request, one
    request at a time). Each item is the ``result`` or the RpcError that request met;
    a transport error raises, as :func:`raw_rpc`'s."""
    url = _endpoint(w3)
    target = direct_target(url)
    if target is not None and len(calls) > 1:
        body = [{"jsonrpc": "2.0", "id": i, "method": method, "params": params}
                for i, (method, params, _) in enumerate(calls)]
        answers = _exchange(w3, target, body, "+".join(name for _, _, name in calls))
        by_id = {a.get("id"): a for a in answers if isinstance(a, dict)} if isinstance(
            answers, list) else {}
        if len(by_id) == len(calls) and all(i in by_id for i in range(len(calls))):
            return [_result_or_error(url, name, by_id[i]) for i, (_, _, name) in enumerate(calls)]
    found: list[object] = []
    for method, params, name in calls:
        try:
            found.append(raw_rpc(w3, method, params, name))
        except RpcError as exc:
            found.append(exc)
    return found


def _view_call(token: str, data: str, block: int | str = "latest") -> list[object]:
    """eth_call's params for calldata ``data`` to ``token`` at ``block`` (the latest)."""
    at = hex(block) if isinstance(block, int) else block
    return [{"to": checksum_address(token), "data": data}, at]


def _unless_error(item: object) -> object:
    """A batch's item, its RpcError raised."""
    if isinstance(item, RpcError):
        raise item
    return item


def direct_target(url: str) -> _Target | None:
    """Where :func:`_post_json` may reach ``url``'s node itself: a plain http(s) URL that
    goes through no proxy (chain.http_proxy.proxy_for); else None (web3's transport, which
    takes that proxy)."""
    target = _plain_http(url)
    return target if target is not None and proxy_for(url) is None else None


def _endpoint(w3: Web3) -> str:
    provider = w3.provider
    return str(getattr(provider, "endpoint_uri", None) or type(provider).__name__)


def _exchange(w3: Web3, target: _Target, body: object, name: str) -> object:
    """The decoded JSON answer to ``body`` POSTed on this thread's connection to ``target``
    (the provider's timeout); an answer that is not HTTP 200 with JSON is an RpcError."""
    kwargs = getattr(w3.provider, "_request_kwargs", None) or {}
    timeout = kwargs.get("timeout", 10.0) if isinstance(kwargs, dict) else 10.0
    status, raw = _post_json(target, timeout, body)
    try:
        resp: object = json.loads(raw) if status == 200 else None
    except ValueError:
        resp = None
    if resp is None:
        raise RpcError(_endpoint(w3), name, None, f"HTTP {status}, body {raw[:200]!r}; "
                       "expected HTTP 200 with a JSON-RPC response")
    return resp


def rpc_result(url: str, name: str, resp: object) -> object:
    """The ``result`` of one JSON-RPC response object, or its error as RpcError."""
    if not isinstance(resp, dict):
        raise RpcError(url, name, None, f"found {type(resp).__name__}; expected "
                       "a JSON-RPC response object")
    error = resp.get("error")
    if error is not None:
        err = error if isinstance(error, dict) else {"message": str(error)}
        code = err.get("code")
        raise RpcError(url, name, code if isinstance(code, int) else None, str(err.get("message")))
    return resp.get("result")


def _result_or_error(url: str, name: str, resp: object) -> object:
    try:
        return rpc_result(url, name, resp)
    except RpcError as exc:
        return exc


@functools.lru_cache(maxsize=4096)
def checksum_address(address: str) -> ChecksumAddress:
    """``address`` spelled with its EIP-55 checksum (eth_utils' ``to_checksum_address``,
    remembered: each spelling costs a keccak, and the paid path spells the same few
    addresses ~17 times a purchase). Raises ValueError for what is not an address."""
    return to_checksum_address(address)


_Target = tuple[str, str, int, str]  # scheme, host, port, path (with query)
_CONNECTIONS = threading.local()


@functools.lru_cache(maxsize=64)
def _plain_http(url: str) -> _Target | None:
    """``url`` as (scheme, host, port, path) when http.client can reach it exactly as
    requests would: http(s), no credentials in the URL (whether it goes through a proxy is
    the caller's to ask, each time: the environment may change)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.username:
        return None
    host = parts.hostname
    port = parts.port or (443 if parts.scheme == "https" else 80)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return parts.scheme, host, port, path


def _post_json(target: _Target, timeout: float, body: object) -> tuple[int, bytes]:
    """POST ``body`` as JSON on this thread's kept-alive connection to ``target``: the
    HTTP status and the body."""
    scheme, host, port, path = target
    data = json.dumps(body).encode()
    headers = {"Content-Type": "application/json", "User-Agent": "nib"}
    pool: dict[_Target, http.client.HTTPConnection] = _CONNECTIONS.__dict__.setdefault(
        "pool", {}
    )
    for attempt in (1, 2):
        conn = pool.get(target)
        fresh = conn is None
        if conn is None:
            cls = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
            conn = pool[target] = cls(host, port, timeout=timeout)
        try:
            conn.request("POST", path, data, headers)
            reply = conn.getresponse()
            raw = reply.read()
        except (ConnectionError, http.client.HTTPException) as exc:
            conn.close()
            pool.pop(target, None)
            if fresh or attempt == 2:
                raise ConnectionError(f"{type(exc).__name__}: {exc}") from exc
            continue  # the node closed the kept-alive connection: once more, fresh
        except OSError:  # timeouts and the rest: no retry
            conn.close()
            pool.pop(target, None)
            raise
        return reply.status, raw
    raise AssertionError("unreachable")


def _transport_failure(url: str, exc: BaseException) -> str:
    """What failed on the way to the node at ``url``: the error's name, an HTTP status
    (web3's transport raises on one), and, when the request went through a proxy (only ever
    to a node off this machine: :func:`chain.http_proxy.proxy_for`), that proxy and the fix."""
    detail = type(exc).__name__
    response = getattr(exc, "response", None)
    if isinstance(exc, requests.HTTPError) and response is not None:
        detail = f"HTTP {response.status_code}"
    proxy = proxy_for(url)
    if proxy is not None:
        where = urllib.parse.urlsplit(proxy).netloc.rpartition("@")[2]  # no credentials
        host = urllib.parse.urlsplit(url).hostname or ""
        detail += (f", through the proxy at {where} (HTTP_PROXY, HTTPS_PROXY or ALL_PROXY); "
                   f"expected it to reach {host}. Fix: if the node is reachable directly, "
                   f"add {host} to NO_PROXY (or unset the proxy)")
    return detail


#: The ERC-20 ``balanceOf(address)`` selector.
_BALANCE_OF = "0x70a08231"
#: ``authorizationState(address,bytes32)`` of an EIP-3009 token.
_AUTHORIZATION_STATE = "0xe94a0102"


class ChainClient:
    """Read-only access to one chain; checks the chain id on connect when one is expected."""

    def __init__(self, rpc_url: str, expected_chain_id: int | None = None, *, timeout_s: float = 10.0) -> None:
        self.rpc_url = rpc_url
        # requests reads proxies from the environment itself unless told each one: a None
        # sends straight to the node (requests drops it after its own environment merge).
        proxies = dict.fromkeys(("http", "https", "all"), proxy_for(rpc_url))
        self.w3 = Web3(Web3.HTTPProvider(
            rpc_url, request_kwargs={"timeout": timeout_s, "proxies": proxies}))
        self.timeout_s = timeout_s
        self._chain_id: int | None = None
        self.expected_chain_id = expected_chain_id
        if expected_chain_id is not None:
            found = self.chain_id()
            if found != expected_chain_id:
                raise WrongChain(rpc_url, expected_chain_id, found)

    def __repr__(self) -> str:
        return f"ChainClient({self.rpc_url!r})"

    def call(self, method: str, fn: Callable[[], T]) -> T:
        """Run one RPC-backed function, translating transport and node errors."""
        try:
            return fn()
        except (requests.ConnectionError, requests.Timeout, ConnectionError, TimeoutError,
                requests.HTTPError) as exc:
            raise self.unreachable(exc) from exc
        except Web3RPCError as exc:
            resp = exc.rpc_response or {}
            err = resp.get("error") if isinstance(resp, dict) else None
            code = err.get("code") if isinstance(err, dict) else None
            msg = err.get("message") if isinstance(err, dict) else str(exc)
            raise RpcError(self.rpc_url, method, code, str(msg)) from exc

    def unreachable(self, exc: BaseException) -> RpcUnreachable:
        """The node did not answer: ``exc`` (a transport error) as RpcUnreachable."""
        known = self.expected_chain_id or self._chain_id
        return RpcUnreachable(self.rpc_url, _transport_failure(self.rpc_url, exc), chain_id=known,
                              devnet=None if known is None else known == ANVIL_CHAIN_ID)

    def chain_id(self) -> int:
        if self._chain_id is None:
            self._chain_id = int(self.call("eth_chainId", lambda: self.w3.eth.chain_id))
        return self._chain_id

    def block_number(self) -> int:
        return int(self.call("eth_blockNumber", lambda: self.w3.eth.block_number))

    def block(self, block: int | str = "latest") -> BlockData:
        return self.call("eth_getBlockByNumber", lambda: self.w3.eth.get_block(block))  # type: ignore[arg-type]

    def block_timestamp(self, block: int | str = "latest") -> int:
        """The block's timestamp by one raw eth_getBlockByNumber (no transactions): the
        paid path reads the chain's clock up to three times per payment, and web3's
        typed block costs several times the request itself."""
        tag = hex(block) if isinstance(block, int) else block
        found = self.call(
            "eth_getBlockByNumber",
            lambda: raw_rpc(self.w3, "eth_getBlockByNumber", [tag, False]),
        )
        return self.timestamp_of(found, block)

    def clock_and_balance(self, token: str, holder: str) -> tuple[int | RpcError, int | RpcError]:
        """The latest block's time and ``holder``'s balance of ``token`` in one batch (one
        exchange with the node: the wallet reads both before every signature), each the
        value or the RpcError its read met; a node that cannot be reached raises
        RpcUnreachable for both."""
        params = self.balance_call(token, holder)
        found = self.call("eth_getBlockByNumber+balanceOf", lambda: raw_rpc_batch(self.w3, [
            ("eth_getBlockByNumber", ["latest", False], "eth_getBlockByNumber"),
            ("eth_call", params, "balanceOf"),
        ]))
        clock: int | RpcError
        balance: int | RpcError
        try:
            clock = self.timestamp_of(_unless_error(found[0]), "latest")
        except RpcError as exc:
            clock = exc
        try:
            balance = self.word_of(token, "balanceOf", _unless_error(found[1]))
        except RpcError as exc:
            balance = exc
        return clock, balance

    def timestamp_of(self, found: object, block: int | str) -> int:
        if not isinstance(found, dict) or "timestamp" not in found:
            raise RpcError(
                self.rpc_url,
                "eth_getBlockByNumber",
                None,
                f"found no block {block!r}; expected a mined block. Fix: ask for 'latest' or "
                "a block number the chain has reached.",
            )
        return int(str(found["timestamp"]), 16)

    def base_fee_wei(self) -> int:
        return int(self.block("latest").get("baseFeePerGas", 0))

    def base_fee_gwei(self) -> Decimal:
        return Decimal(self.base_fee_wei()) / GWEI

    def gas_price(self) -> int:
        return int(self.call("eth_gasPrice", lambda: self.w3.eth.gas_price))

    def eth_balance(self, address: str, block: int | str = "latest") -> int:
        """``address``'s ETH balance in wei at ``block`` (the latest)."""
        addr = checksum_address(address)
        return int(self.call("eth_getBalance",
                             lambda: self.w3.eth.get_balance(addr, block)))  # type: ignore[arg-type]

    def _erc20(self, token: str) -> Contract:
        return self.w3.eth.contract(address=checksum_address(token), abi=_ERC20_ABI)

    def token_balance(self, token: str, address: str, block: int | str = "latest") -> int:
        """``balanceOf(address)`` at ``block`` (the latest) by one raw eth_call with
        hand-encoded calldata: the wallet reads it before every signature, and web3's
        contract path costs ~10x the CPU of the request itself (contract, ABI encoding,
        middleware, formatters)."""
        params = self.balance_call(token, address, block)
        result = self.call("balanceOf", lambda: raw_rpc(self.w3, "eth_call", params, "balanceOf"))
        return self.word_of(token, "balanceOf", result)

    @staticmethod
    def balance_call(token: str, holder: str, block: int | str = "latest") -> list[object]:
        """eth_call's params for ``balanceOf(holder)`` of ``token`` at ``block``."""
        return _view_call(token, _BALANCE_OF + checksum_address(holder)[2:].lower().rjust(64, "0"),
                          block)

    def authorization_state(self, token: str, authorizer: str, nonce: str) -> bool:
        """``authorizationState(authorizer, nonce)`` of an EIP-3009 token (True: used or
        cancelled) by one raw eth_call: reconcile reads it for each settled authorization
        the range's logs do not show, so its cost is per ledger row."""
        holder = checksum_address(authorizer)[2:].lower().rjust(64, "0")
        word = nonce.lower().removeprefix("0x").rjust(64, "0")
        if len(word) != 64:
            raise ValueError(f"found a {len(word) // 2}-byte nonce {nonce!r}; expected 32 bytes")
        return bool(self._word(token, "authorizationState", _AUTHORIZATION_STATE + holder + word))

    def _word(self, token: str, name: str, data: str) -> int:
        """The one 32-byte word a view call ``name`` of ``token`` answers, as an int."""
        params = _view_call(token, data)
        result = self.call(name, lambda: raw_rpc(self.w3, "eth_call", params, name))
        return self.word_of(token, name, result)

    def word_of(self, token: str, name: str, result: object) -> int:
        raw = bytes.fromhex(str(result or "0x").removeprefix("0x"))
        if len(raw) != 32:
            raise RpcError(
                self.rpc_url,
                name,
                None,
                f"found a {len(raw)}-byte answer from {token}; expected one 32-byte word "
                "(is it the token contract on this chain?)",
            )
        return int.from_bytes(raw, "big")

    def token_decimals(self, token: str) -> int:
        return int(self.call("decimals", self._erc20(token).functions.decimals().call))

    def token_symbol(self, token: str) -> str:
        return str(self.call("symbol", self._erc20(token).functions.symbol().call))

    def token_name(self, token: str) -> str:
        return str(self.call("name", self._erc20(token).functions.name().call))

    def token_supply(self, token: str, block: int | str = "latest") -> int:
        """``totalSupply()`` of ``token`` at ``block`` (the latest)."""
        return int(self.call("totalSupply", lambda: self._erc20(token).functions.totalSupply()
                             .call(block_identifier=block)))  # type: ignore[arg-type]

    def knows_transaction(self, tx_hash: str) -> bool:
        """Whether the node knows ``tx_hash`` at all: mined, or waiting in its pool."""

        def fetch() -> bool:
            try:
                return self.w3.eth.get_transaction(tx_hash) is not None  # type: ignore[arg-type]
            except TransactionNotFound:
                return False

        return self.call("eth_getTransactionByHash", fetch)

    def receipt(self, tx_hash: str) -> Receipt | None:
        """The receipt of ``tx_hash``, or None while it is not mined."""

        def fetch() -> TxReceipt | None:
            try:
                return self.w3.eth.get_transaction_receipt(tx_hash)  # type: ignore[arg-type]
            except TransactionNotFound:
                return None

        r = self.call("eth_getTransactionReceipt", fetch)
        if r is None:
            return None
        return Receipt(
            tx_hash=_hex(r["transactionHash"]),
            status=int(r["status"]),
            block_number=int(r["blockNumber"]),
            gas_used=int(r["gasUsed"]),
            effective_gas_price=int(r.get("effectiveGasPrice", 0)),
            sender=str(r["from"]),
            to=str(r["to"]) if r.get("to") else None,
        )

    def transfer_logs(
        self,
        token: str,
        from_block: int = 0,
        to_block: int | str = "latest",
        address: str | None = None,
        *,
        direction: str = "any",
    ) -> list[TransferLog]:
        """Transfer events of ``token`` in a block range, optionally touching ``address``.

        ``direction`` is ``"out"`` (address is the sender), ``"in"`` or ``"any"``.
        """
        topic_addr = None if address is None else "0x" + address.lower().removeprefix("0x").rjust(64, "0")
        queries: list[list[str | None]] = []
        if topic_addr is None:
            queries.append([TRANSFER_TOPIC])
        else:
            if direction in ("out", "any"):
                queries.append([TRANSFER_TOPIC, topic_addr])
            if direction in ("in", "any"):
                queries.append([TRANSFER_TOPIC, None, topic_addr])
        seen: dict[tuple[str, int], TransferLog] = {}
        for topics in queries:
            params = {
                "address": checksum_address(token),
                "fromBlock": from_block,
                "toBlock": to_block,
                "topics": topics,
            }
            for log in self.call("eth_getLogs", lambda p=params: self.w3.eth.get_logs(p)):  # type: ignore[misc]
                entry = TransferLog(
                    tx_hash=_hex(log["transactionHash"]),
                    block_number=int(log["blockNumber"]),
                    log_index=int(log["logIndex"]),
                    sender=checksum_address("0x" + _hex(log["topics"][1])[-40:]),
                    recipient=checksum_address("0x" + _hex(log["topics"][2])[-40:]),
                    value=int(_hex(log["data"]), 16) if _hex(log["data"]) != "0x" else 0,
                )
                seen[(entry.tx_hash, entry.log_index)] = entry
        return sorted(seen.values(), key=lambda t: (t.block_number, t.log_index))


def _hex(value: object) -> str:
    if isinstance(value, bytes | bytearray):
        return "0x" + bytes(value).hex()
    text = str(value.hex()) if hasattr(value, "hex") and not isinstance(value, str) else str(value)
    return text if text.startswith("0x") else "0x" + text
