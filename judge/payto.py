"""What a seller asks to be paid, read by the judge itself from the seller's own 402.

Allowlisting a seller by its origin (``NIB_SELLER_ALLOWLIST``) admits the terms that seller
advertises, bound at quote time: the judge fetches the resource's 402 unpaid (the method
and JSON body of the purchase, no redirects) and approves only a payload paying exactly
one offer the 402 states: its payTo, its amount, its asset, on its network. The agent's
word is never taken for it: a compromised agent that names an allowlisted origin and its
own address gets a 402 that does not name that address, and one that pays the seller's
real payTo 1 atomic unit of a 0.01 USDC price gets a 402 that does not ask for 1 (a
purchase so cheap it costs nothing would otherwise be credited to that seller's
calibration as a real one). A payTo or price the seller changes after the verdict changes
the payload, which the wallet then refuses (``verdict-void``).
"""

from __future__ import annotations

import base64
import contextlib
import functools
import http.client
import json
import os
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator

import httpx

from judge.connections import STALE, ConnectionPool
from judge.http_proxy import proxy_for
from judge.mcp_terms import SELLER_READ_S, NoOffers, OfferedTerms
from judge.seller_terms import Stated402, StatedOffers
from judge.tls import tls_context

__all__ = ["TermsOf", "advertised_terms"]

_TIMEOUT_S = SELLER_READ_S
_MAX_BYTES = 64_000
#: An idle kept-alive connection to a seller is closed after this many seconds.
_IDLE_S = 2.0
#: How long a v2 402's body (terms in its header) is read for, for the connection's sake.
_BODY_GRACE_S = 0.5


#: ``(url, method, body) -> the offers`` the seller's own 402 for that resource states.
TermsOf = Callable[[str, str, object], tuple[OfferedTerms, ...]]


def advertised_terms(url: str, method: str = "GET", body: object = None) -> tuple[OfferedTerms, ...]:
    """The ``exact`` offers the x402 402 at ``url`` states; empty when the resource answers
    anything but a readable 402, or cannot be reached. The whole read (connect, headers,
    body) takes at most ``_TIMEOUT_S`` and reads at most ``_MAX_BYTES`` of the body: a
    seller that trickles or floods its answer is not read further."""
    try:
        status, header, content = _READER.read(url, method.upper(), body)
    except TimeoutError:
        return NoOffers(f"no whole answer within the judge's {_TIMEOUT_S:g} s read: the "
                        "seller stalled or trickled it", stalled=True)
    except (OSError, http.client.HTTPException, ValueError) as exc:
        return NoOffers(f"the judge's read failed: {type(exc).__name__}: {str(exc)[:160]}")
    if status != 402:
        return NoOffers(f"it answered the judge's unpaid read with HTTP {status}, not a 402",
                        status=status)
    offers = tuple(a for a in (_asked(o) for o in _offers(header, content)) if a is not None)
    if not offers:
        return NoOffers("its 402 states no exact offer on an EVM chain the judge can read",
                        status=402)
    return StatedOffers(offers, Stated402(header, content))


_Target = tuple[str, str, int]  # scheme, host, port


class _Reader:
    """The judge's unpaid reads of sellers' 402s, made on the calling thread over
    ``http.client`` connections every thread of the process shares, kept alive per origin.

    Synchronous on purpose: the judge's reads run on its own worker threads, and an
    ``httpx.AsyncClient`` on an event loop thread cost ~1.0 ms of CPU a read (the hop onto
    the loop, anyio's cancel scopes, httpx's async stack) against ~0.12 ms here, on the
    paid path of every purchase. The read keeps no cookies, follows no redirect, goes
    through the proxy :func:`judge.http_proxy.proxy_for` names (none to a loopback seller,
    as for the agent's own read), and has no connection limit, so a seller holding
    its reads cannot make another seller's read wait for a connection. An idle kept-alive
    connection is dropped after ``_IDLE_S``, before servers commonly drop theirs; one the
    seller closed just as it was reused fails before any answer, and that read is made
    once more on a new connection. Each read ends within ``_TIMEOUT_S`` in all, whatever
    the seller trickles: past it :class:`_Deadlines` shuts the socket down."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pools: dict[_Target, ConnectionPool[http.client.HTTPConnection]] = {}

    def read(self, url: str, method: str, body: object) -> tuple[int, str | None, bytes]:
        target, path = _split(url)
        pool = self._pool(target)
        data = None
        if method == "POST" and body is not None:
            data = json.dumps(body, separators=(",", ":")).encode()
        with _DEADLINES.bound(_TIMEOUT_S) as bound:
            for attempt in (1, 2):
                conn, reused = pool.take()
                bound.watch(conn)
                try:
                    status, header, content, done = _exchange(conn, method, path, data, bound)
                except (http.client.HTTPException, OSError) as exc:
                    conn.close()
                    if bound.expired():
                        raise TimeoutError(f"no whole answer within {_TIMEOUT_S:g} s") from exc
                    if reused and attempt == 1 and isinstance(exc, STALE):
                        continue  # the seller closed the kept-alive connection: once more
                    raise
                break
            else:
                raise AssertionError("unreachable")
        # Given back only once no deadline can shut it down under another read.
        if done and not bound.expired():
            pool.give_back(conn)
        else:
            conn.close()
        return status, header, content

    def _pool(self, target: _Target) -> ConnectionPool[http.client.HTTPConnection]:
        with self._lock:
            pool = self._pools.get(target)
            if pool is None:
                pool = self._pools[target] = ConnectionPool(
                    functools.partial(_connect, target), lambda c: c.sock, idle_s=_IDLE_S)
            return pool


def _connect(target: _Target) -> http.client.HTTPConnection:
    """A connection to the seller at ``target``: straight there, or through the proxy
    :func:`judge.http_proxy.proxy_for` names for it (to an https seller through a CONNECT
    tunnel; to an http one by asking the proxy for the whole URL)."""
    scheme, host, port = target
    netloc = f"[{host}]" if ":" in host else host
    default = 443 if scheme == "https" else 80
    origin = f"{scheme}://{netloc}" + ("" if port == default else f":{port}")
    proxy = proxy_for(origin)
    conn: http.client.HTTPConnection
    if proxy is None:
        if scheme == "https":
            conn = http.client.HTTPSConnection(host, port, timeout=_TIMEOUT_S,
                                               context=tls_context())
        else:
            conn = http.client.HTTPConnection(host, port, timeout=_TIMEOUT_S)
    else:
        (proxy_host, proxy_port), auth = _proxy_parts(proxy, origin)
        if scheme == "https":
            conn = http.client.HTTPSConnection(proxy_host, proxy_port, timeout=_TIMEOUT_S,
                                               context=tls_context())
            conn.set_tunnel(host, port, headers=auth)
        else:
            conn = _Forwarded(proxy_host, proxy_port, origin, auth)
    conn.response_class = _Response
    return conn


def _proxy_parts(proxy: str, origin: str) -> tuple[tuple[str, int], dict[str, str]]:
    """The proxy's (host, port) and the Proxy-Authorization header its URL's credentials
    make (none without); ValueError for a proxy the read cannot speak to."""
    parts = urllib.parse.urlsplit(proxy)
    if parts.scheme != "http" or not parts.hostname:
        shown = f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"
        raise ValueError(f"found the proxy {shown} for {origin}; expected an http:// proxy "
                         "(the judge's read speaks plain HTTP to a proxy). Fix: name an "
                         "http:// proxy in HTTP_PROXY/HTTPS_PROXY, or add the seller's host "
                         "to NO_PROXY")
    auth = {}
    if parts.username is not None:
        user = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
        auth["Proxy-Authorization"] = "Basic " + base64.b64encode(user.encode()).decode()
    return (parts.hostname, parts.port or 80), auth


class _Forwarded(http.client.HTTPConnection):
    """Plain http to a seller through an http proxy: each request line names the whole URL
    (absolute form), which is how a proxy is asked to forward a request."""

    def __init__(self, host: str, port: int, origin: str, auth: dict[str, str]) -> None:
        super().__init__(host, port, timeout=_TIMEOUT_S)
        self._origin = origin
        self._auth = auth

    def putrequest(self, method: str, url: str, skip_host: bool = False,
                   skip_accept_encoding: bool = False) -> None:
        super().putrequest(method, self._origin + url, skip_host, skip_accept_encoding)
        for name, value in self._auth.items():
            self.putheader(name, value)


def _split(url: str) -> tuple[_Target, str]:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"found {url!r}; expected an http(s) URL")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return (parts.scheme, parts.hostname, port), path


def _exchange(
    conn: http.client.HTTPConnection, method: str, path: str, data: bytes | None, bound: _Bound
) -> tuple[int, str | None, bytes, bool]:
    """One request on ``conn``: the status, PAYMENT-REQUIRED header, the first
    ``_MAX_BYTES`` of a 402's body, and whether the answer was read whole (the connection
    can then be reused).

    An x402 v2 402 states its terms in the header: its body is read only for the
    connection's sake, within ``_BODY_GRACE_S`` (a body promised and never sent, or
    trickled, does not hold the decision; the connection is then dropped). A v1 402's
    terms are its body, read within the whole bound or not at all."""
    headers = {"Accept": "*/*", "Accept-Encoding": "identity", "Connection": "keep-alive",
               "User-Agent": _USER_AGENT}
    if data is not None:
        headers["Content-Type"] = "application/json"
    conn.request(method, path, data, headers)
    resp = conn.getresponse()
    header = resp.getheader("payment-required")
    content = b""
    if resp.status == 402 and header:
        _DEADLINES.tighten(bound, _BODY_GRACE_S)
        try:
            resp.read(_MAX_BYTES)
        except (http.client.HTTPException, OSError):
            return resp.status, header, b"", False
    elif resp.status == 402:  # as sent: nothing inflated past the cap
        content = resp.read(_MAX_BYTES)
    done = resp.isclosed() and not resp.will_close
    if not done and resp.status != 402 and resp.length == 0:
        done = True
    return resp.status, header, content, done


class _Response(http.client.HTTPResponse):
    """An answer that passes over interim ``1xx`` answers (103 Early Hints, ...) to the
    final one, as HTTP/1.1 lets a server send them (http.client passes over 100 only)."""

    def _read_status(self) -> tuple[str, int, str]:
        while True:
            version, status, reason = super()._read_status()  # type: ignore[misc]
            if not 102 <= status < 200:  # 100: begin() passes it over; 101: a final answer
                return version, status, reason
            http.client._read_headers(self.fp)  # type: ignore[attr-defined]  # dropped


class _Deadlines:
    """One thread that ends reads past their deadline by shutting their socket down (the
    blocked receive then returns at once), so a seller that trickles a byte at a time
    cannot hold a read past its bound: per-receive timeouts alone would allow that."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._live: dict[int, _Bound] = {}
        self._thread: threading.Thread | None = None
        self._pid = 0

    @contextlib.contextmanager
    def bound(self, seconds: float) -> Iterator[_Bound]:
        bound = _Bound(time.monotonic() + seconds)
        with self._cond:
            if self._thread is None or self._pid != os.getpid():
                self._pid = os.getpid()
                self._thread = threading.Thread(target=self._run, name="judge-402-deadlines",
                                                daemon=True)
                self._thread.start()
            self._live[id(bound)] = bound
            self._cond.notify()
        try:
            yield bound
        finally:
            with self._cond:
                self._live.pop(id(bound), None)

    def tighten(self, bound: _Bound, seconds: float) -> None:
        """End ``bound``'s read within ``seconds`` from now, if that is sooner."""
        with self._cond:
            bound.deadline = min(bound.deadline, time.monotonic() + seconds)
            self._cond.notify()

    def _run(self) -> None:
        with self._cond:
            while True:
                now = time.monotonic()
                for key, bound in list(self._live.items()):
                    if bound.deadline <= now:
                        del self._live[key]
                        bound.end()
                soonest = min((b.deadline for b in self._live.values()), default=now + 60)
                self._cond.wait(max(soonest - now, 0.001))


class _Bound:
    """One read's deadline and the connection it is reading on."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self._conn: http.client.HTTPConnection | None = None
        self._ended = False

    def watch(self, conn: http.client.HTTPConnection) -> None:
        self._conn = conn
        conn.timeout = max(self.deadline - time.monotonic(), 0.001)
        if conn.sock is not None:
            conn.sock.settimeout(conn.timeout)
        if self._ended:
            self.end()

    def expired(self) -> bool:
        return self._ended or time.monotonic() >= self.deadline

    def end(self) -> None:
        self._ended = True
        sock = self._conn.sock if self._conn is not None else None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


_READER = _Reader()
_DEADLINES = _Deadlines()
_USER_AGENT = f"python-httpx/{httpx.__version__}"


def _offers(header: str | None, content: bytes) -> list[dict[str, object]]:
    """The 402's offers as plain dicts in v1 field names (payTo, maxAmountRequired)."""
    if header:  # x402 v2: base64 JSON in the PAYMENT-REQUIRED header
        from x402.http import decode_payment_required_header

        try:
            required = decode_payment_required_header(header)
        except ValueError:
            return []
        return [{"scheme": a.scheme, "network": a.network, "asset": a.asset,
                 "maxAmountRequired": a.get_amount(),
                 "payTo": a.pay_to} for a in required.accepts]  # fmt: skip
    try:  # x402 v1: the JSON body
        data = json.loads(content)
    except ValueError:
        return []
    accepts = data.get("accepts") if isinstance(data, dict) else None
    return [a for a in accepts or () if isinstance(a, dict)]


def _asked(offer: dict[str, object]) -> OfferedTerms | None:
    return OfferedTerms.stated(offer.get("scheme"), offer.get("network"),
                               offer.get("maxAmountRequired"), offer.get("payTo"),
                               offer.get("asset"))
