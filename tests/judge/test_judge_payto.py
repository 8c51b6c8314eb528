"""Allowlisting an outside seller by origin admits the payTo it advertises, bound at quote
time, from the attacker's position: the judge reads the seller's own 402 itself, so an agent
naming the allowlisted origin with its own address is refused, and a seller whose payTo
changed is paid only at the new one. Refusals name the setting."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi import FastAPI, Request, Response
from test_judge_tasks import ATTACKER, USDC, authorization, request
from x402.http import encode_payment_required_header
from x402.schemas import PaymentRequired, PaymentRequirements, ResourceInfo

from judge.fingerprint import call_fingerprint
from judge.jev import Judge
from judge.mcp_terms import SELLER_READ_S, NoOffers, OfferedTerms
from judge.payto import advertised_terms
from judge.tasks import TaskLimits
from judge.verdict import VerdictSigner
from tests._support import proxy_in_environment, serve

OUTSIDE_PAY_TO = "0x90F79bf6EB2c4f870365E785982E1f101E93b906"
NEW_PAY_TO = "0x15d34AAf54267DB7D7c367839AAf71A00a2C6A65"


@pytest.fixture(scope="module")
def seller() -> Iterator[dict[str, Any]]:
    """An outside x402 seller whose 402 (x402's own header) names ``state['pay_to']``."""
    state: dict[str, Any] = {"pay_to": OUTSIDE_PAY_TO}
    app = FastAPI()

    @app.get("/data")
    def data() -> Response:
        return _402(state["pay_to"])

    with serve(app) as url:
        state["url"] = url
        yield state


def _lying_app() -> FastAPI:
    """The attacker's own server: a 402 naming the attacker as payTo."""
    app = FastAPI()

    @app.get("/data")
    def data() -> Response:
        return _402(ATTACKER)

    return app


def _402(pay_to: str) -> Response:
    required = PaymentRequired(
        x402_version=2, resource=ResourceInfo(url="/data", description="data"),
        accepts=[PaymentRequirements(scheme="exact", network="eip155:31337", asset=USDC,
                                     amount="10000", pay_to=pay_to, max_timeout_seconds=300,
                                     extra={"name": "USDC", "version": "2"})],
    )
    return Response(status_code=402, headers={
        "PAYMENT-REQUIRED": encode_payment_required_header(required)})


@contextlib.contextmanager
def serving_402(pay_to: str) -> Iterator[str]:
    """An outside x402 seller whose 402 at /data asks 10 000 at ``pay_to``: its URL."""
    app = FastAPI()

    @app.get("/data")
    def data() -> Response:
        return _402(pay_to)

    with serve(app) as url:
        yield url


def _judge(signer: VerdictSigner, origin: str, *, binds: bool = True) -> Judge:
    judge = Judge(signer, allowed_assets={31337: [USDC]}, balance_of=lambda asset: 5_000_000,
                  require_task=True, terms_of=advertised_terms if binds else None)
    judge.register_task(TaskLimits(task_id="task-1", spend_cap_atomic=1_000_000, per_call_cap_atomic=500_000,
                                   approval_threshold_atomic=None, recipients=(), sellers=(origin,)))
    return judge


def _buy(seller: dict[str, Any], to: str, nonce: int = 1) -> Any:
    url = seller["url"] + "/data"
    return request(authorization(to, 10_000, nonce), args={"url": url}, seller=seller["url"],
                   call_fingerprint=call_fingerprint("pay_http", {"url": url}))


def test_an_origin_on_the_allowlist_admits_the_pay_to_its_402_advertises(
    seller: dict[str, Any], signer: VerdictSigner
) -> None:
    seller["pay_to"] = OUTSIDE_PAY_TO
    judge = _judge(signer, seller["url"])
    first = judge.decide(_buy(seller, OUTSIDE_PAY_TO))
    assert first.decision == "approve", first.reason
    # A compromised agent names the allowlisted origin and its own address: the seller's
    # own 402, read by the judge, does not name it.
    stolen = judge.decide(_buy(seller, ATTACKER, nonce=2))
    assert stolen.decision == "refuse"
    assert ATTACKER in stolen.reason and OUTSIDE_PAY_TO.lower() in stolen.reason, stolen.reason
    assert "asks to be paid at" in stolen.reason
    # The agent claims the allowlisted seller but sends a URL of its own, whose 402
    # advertises its own address: the judge fetches only URLs on the named seller's origin.
    with serve(_lying_app()) as elsewhere:
        forged = request(authorization(ATTACKER, 10_000, 5), args={"url": elsewhere + "/data"},
                         seller=seller["url"],
                         call_fingerprint=call_fingerprint("pay_http", {"url": elsewhere + "/data"}))
        lie = judge.decide(forged)
    assert lie.decision == "refuse" and "another origin" in lie.reason, lie.reason
    # The seller moves its payTo: the old address is no longer admitted, the new one is.
    seller["pay_to"] = NEW_PAY_TO
    assert judge.decide(_buy(seller, OUTSIDE_PAY_TO, nonce=3)).decision == "refuse"
    assert judge.decide(_buy(seller, NEW_PAY_TO, nonce=4)).decision == "approve"


def test_a_purchase_credited_to_a_seller_pays_that_sellers_pay_to_even_when_another_is_registered(
    seller: dict[str, Any], signer: VerdictSigner
) -> None:
    """Outcomes are credited to the seller a purchase names: a registered recipient that
    is not the payTo its 402 states is refused naming both, and so is a seller named for a
    resource on another origin or an MCP tool whose 402 the judge cannot read."""
    seller["pay_to"] = OUTSIDE_PAY_TO
    judge = Judge(signer, allowed_assets={31337: [USDC]}, balance_of=lambda asset: 5_000_000,
                  require_task=True, terms_of=advertised_terms)
    judge.register_task(TaskLimits(task_id="task-1", spend_cap_atomic=1_000_000, per_call_cap_atomic=500_000,
                                   approval_threshold_atomic=None, recipients=(ATTACKER,),
                                   sellers=(seller["url"], "http://127.0.0.1:9")))
    mine = judge.decide(_buy(seller, ATTACKER))
    assert mine.decision == "refuse", mine.reason
    assert ATTACKER in mine.reason and OUTSIDE_PAY_TO.lower() in mine.reason, mine.reason
    url = "http://127.0.0.1:9/data"
    elsewhere = judge.decide(request(authorization(OUTSIDE_PAY_TO, 10_000, 2), args={"url": url},
                                     seller=seller["url"], call_fingerprint=call_fingerprint("pay_http", {"url": url})))
    assert elsewhere.decision == "refuse" and "another origin" in elsewhere.reason, elsewhere.reason
    mcp = {"server": seller["url"], "tool": "sheet"}
    unread = judge.decide(request(authorization(OUTSIDE_PAY_TO, 10_000, 3), args=mcp, tool="pay_mcp",
                                  seller=seller["url"], call_fingerprint=call_fingerprint("pay_mcp", mcp)))
    # An MCP purchase at a server that answers no MCP 402 (this one speaks plain HTTP):
    # the judge reads the tool's terms over MCP itself (judge.mcp_terms) and refuses.
    assert unread.decision == "refuse", unread.reason
    assert "could not read the tool's payment terms" in unread.reason, unread.reason
    assert judge.decide(_buy(seller, OUTSIDE_PAY_TO, nonce=4)).decision == "approve"


def test_a_purchase_is_approved_only_for_the_amount_the_sellers_402_asks(
    seller: dict[str, Any], signer: VerdictSigner
) -> None:
    """Paying the seller's real payTo less (1 atomic unit) or more than its 402 asks is
    refused, naming what it asks: a purchase for almost nothing would otherwise be credited
    to the seller's calibration as a real one."""
    seller["pay_to"] = OUTSIDE_PAY_TO
    judge = _judge(signer, seller["url"])
    url = seller["url"] + "/data"
    for nonce, amount in ((1, 1), (2, 10_001)):
        cheap = judge.decide(request(authorization(OUTSIDE_PAY_TO, amount, nonce), args={"url": url},
                                     seller=seller["url"], call_fingerprint=call_fingerprint("pay_http", {"url": url})))
        assert cheap.decision == "refuse", cheap.reason
        assert f"pays payTo {OUTSIDE_PAY_TO.lower()} amount {amount} " in cheap.reason, cheap.reason
        assert "asks payTo" in cheap.reason and "amount 10000 " in cheap.reason, cheap.reason
    assert judge.decide(_buy(seller, OUTSIDE_PAY_TO, nonce=3)).decision == "approve"


def test_without_the_402_read_an_unregistered_pay_to_is_refused(
    seller: dict[str, Any], signer: VerdictSigner
) -> None:
    seller["pay_to"] = OUTSIDE_PAY_TO
    refused = _judge(signer, seller["url"], binds=False).decide(_buy(seller, OUTSIDE_PAY_TO))
    assert refused.decision == "refuse" and "NIB_SELLER_ALLOWLIST" in refused.reason
    elsewhere = _judge(signer, "http://127.0.0.1:9").decide(_buy(seller, OUTSIDE_PAY_TO))
    assert elsewhere.decision == "refuse" and "add its origin to NIB_SELLER_ALLOWLIST" in elsewhere.reason


def test_the_402_read_follows_no_redirect_and_reads_only_a_402(seller: dict[str, Any]) -> None:
    missing, closed = advertised_terms(seller["url"] + "/nothing"), advertised_terms(
        "http://127.0.0.1:9/data")
    assert missing == () and closed == ()
    # Each says why, and the judge's refusal names it (not as a wrong address).
    assert isinstance(missing, NoOffers) and "HTTP 404, not a 402" in missing.why
    assert isinstance(closed, NoOffers) and "ConnectionRefusedError" in closed.why
    seller["pay_to"] = OUTSIDE_PAY_TO
    assert advertised_terms(seller["url"] + "/data") == (
        OfferedTerms(OUTSIDE_PAY_TO.lower(), 10_000, USDC.lower(), 31337),)


def test_a_refusal_for_an_answer_that_is_no_payable_402_does_not_say_to_wait(
    seller: dict[str, Any], signer: VerdictSigner
) -> None:
    """Outside tester 13: a seller that promptly answered a 402 offering nothing on an EVM
    chain was refused with "expected a 402 within the judge's 10 s read; fix: retry once the
    seller answers". Only a stall is told to wait; any other answer is said as what it was."""
    judge = _judge(signer, seller["url"])
    url = seller["url"] + "/nothing"
    refused = judge.decide(request(authorization(OUTSIDE_PAY_TO, 10_000, 9), args={"url": url},
                                   seller=seller["url"],
                                   call_fingerprint=call_fingerprint("pay_http", {"url": url})))
    assert refused.decision == "refuse", refused.reason
    assert "HTTP 404, not a 402" in refused.reason, refused.reason
    assert "expected a 402 stating an exact offer on a chain and asset the judge allows" in (
        refused.reason), refused.reason
    assert "retry once the seller answers" not in refused.reason, refused.reason


def test_each_decision_is_ruled_on_the_terms_read_for_it_and_a_held_read_holds_no_other(
    signer: VerdictSigner,
) -> None:
    """The judge reads a seller's 402 for each decision before its decision lock
    (judge.seller_terms) and rules under the lock on that read: while one decision's read is
    held, another decision of the same judge is made on its own read, and the held decision
    is then ruled on what the seller answered it (here a payTo moved meanwhile), never on
    another decision's read nor on the agent's word."""
    import threading

    reading, release = threading.Event(), threading.Event()
    state: dict[str, Any] = {"pay_to": OUTSIDE_PAY_TO}
    app = FastAPI()

    @app.get("/data")
    def data() -> Response:
        if not reading.is_set():  # only the first read is held; a second answers at once
            reading.set()
            release.wait(30)
        answered = state["pay_to"]
        state["pay_to"] = NEW_PAY_TO  # the seller moves its payTo right after answering
        return _402(answered)

    with serve(app) as url:
        seller = {"url": url}
        judge = _judge(signer, url)
        verdicts: dict[str, Any] = {}
        first = threading.Thread(
            target=lambda: verdicts.setdefault("first", judge.decide(_buy(seller, OUTSIDE_PAY_TO)))
        )
        first.start()
        assert reading.wait(30)  # the judge is inside its read of the seller's 402
        # Another decision is made while the first read is held (the old judge read under
        # its decision lock, so this one waited), on the payTo the seller answered it.
        second = judge.decide(_buy(seller, OUTSIDE_PAY_TO, nonce=2))
        assert second.decision == "approve", second.reason
        assert first.is_alive() and verdicts == {}
        release.set()
        first.join(30)
    # The held decision is ruled on its own read: the seller answered it the moved payTo.
    held = verdicts["first"]
    assert held.decision == "refuse", held.reason
    assert NEW_PAY_TO.lower() in held.reason, held.reason
    assert second.issued_at <= held.issued_at


def test_each_read_is_made_anew_on_a_kept_alive_connection_that_carries_no_cookie() -> None:
    """The judge reads the seller's 402 for every decision (the seller's answer to one
    read is never another's), but over one kept-alive connection: a new client, event
    loop and TCP connection per read was ~3 ms of every purchase against ~1 ms. A cookie
    the seller sets is not sent back, so a seller cannot tie one decision's read to the
    next."""
    seen: list[tuple[int, str | None]] = []
    state = {"pay_to": OUTSIDE_PAY_TO}
    app = FastAPI()

    @app.get("/data")
    def data(request: Request) -> Response:
        assert request.client is not None
        seen.append((request.client.port, request.headers.get("cookie")))
        resp = _402(state["pay_to"])
        resp.set_cookie("seen", str(len(seen)))
        return resp

    with serve(app) as url:
        first = advertised_terms(url + "/data")
        state["pay_to"] = NEW_PAY_TO  # read for each decision: the next read sees the move
        second = advertised_terms(url + "/data")
        third = advertised_terms(url + "/data")
    assert [t.pay_to for t in (*first, *second, *third)] == [
        OUTSIDE_PAY_TO.lower(), NEW_PAY_TO.lower(), NEW_PAY_TO.lower()]
    assert len(seen) == 3
    assert {port for port, _ in seen} == {seen[0][0]}, f"expected one connection, got {seen}"
    assert [cookie for _, cookie in seen] == [None, None, None]


def test_an_answer_sent_ahead_on_a_kept_alive_connection_is_never_taken_for_a_later_read() -> None:
    """From a seller's position, with a raw socket: it answers the judge's first read with
    its 402 and, on the same kept-alive connection, a second 402 sent before it was asked
    (naming another payTo), hoping the judge's next read takes it as that read's answer.
    The judge drops a connection with bytes waiting while idle: the next read is made on a
    new connection and answered for itself."""
    connections: list[int] = []

    def answer(conn: socket.socket) -> None:
        connections.append(1)
        conn.sendall(_wire_402(OUTSIDE_PAY_TO))
        if len(connections) == 1:  # once the judge has put the connection by: sent ahead
            time.sleep(0.3)
            conn.sendall(_wire_402(NEW_PAY_TO))

    with _raw_seller(answer) as url:
        first = advertised_terms(url)
        time.sleep(0.6)  # the answer sent ahead waits on the idle connection
        second = advertised_terms(url)
    assert [t.pay_to for t in first] == [OUTSIDE_PAY_TO.lower()]
    assert [t.pay_to for t in second] == [OUTSIDE_PAY_TO.lower()], (
        "the judge took an answer the seller sent before it was asked")
    assert len(connections) == 2


def _wire_402(pay_to: str) -> bytes:
    """A whole HTTP/1.1 402 as bytes on the wire, with x402's own header."""
    header = _402(pay_to).headers["payment-required"]
    return (f"HTTP/1.1 402 Payment Required\r\npayment-required: {header}\r\n"
            "content-length: 0\r\n\r\n").encode()


@contextlib.contextmanager
def _raw_seller(answer: Callable[[socket.socket], None]) -> Iterator[str]:
    """A seller on a raw socket: ``answer`` writes what it likes to each connection after
    reading its request; yields the resource's URL."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve_one(conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            conn.recv(65536)
            answer(conn)
            conn.recv(65536)  # until the judge lets the connection go

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=serve_one, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/data"
    finally:
        listener.close()


def _head_402(pay_to: str, framing: str) -> bytes:
    header = _402(pay_to).headers["payment-required"]
    return f"HTTP/1.1 402 Payment Required\r\npayment-required: {header}\r\n{framing}\r\n".encode()


def test_interim_answers_before_the_402_are_passed_over_to_the_final_one() -> None:
    """A 103 Early Hints (even one carrying other terms) may come before the 402, as
    HTTP/1.1 allows: the judge rules on the final answer's terms (it used to refuse: an
    outside tester's seller, round 12)."""
    hint = _402(NEW_PAY_TO).headers["payment-required"]

    def answer(conn: socket.socket) -> None:
        conn.sendall(f"HTTP/1.1 103 Early Hints\r\npayment-required: {hint}\r\n\r\n".encode()
                     + _wire_402(OUTSIDE_PAY_TO))

    with _raw_seller(answer) as url:
        assert [t.pay_to for t in advertised_terms(url)] == [OUTSIDE_PAY_TO.lower()]


@pytest.mark.parametrize("framing", ["content-length: 100000000\r\n",
                                     "transfer-encoding: chunked\r\n"])
def test_a_402_stating_its_terms_in_the_header_is_not_held_by_its_body(framing: str) -> None:
    """x402 v2 states the terms in the header: a body promised and never sent (or a chunked
    one that never ends) neither holds the decision for the read's 10 s nor voids the
    terms; the read takes the header's terms within a second (the tester saw the first
    approved after 10 s and the second refused)."""
    def answer(conn: socket.socket) -> None:
        conn.sendall(_head_402(OUTSIDE_PAY_TO, framing))
        for _ in range(30):  # a chunk a second, or nothing of the promised body
            time.sleep(1)
            if "chunked" in framing:
                conn.sendall(b"400\r\n" + b" " * 1024 + b"\r\n")

    with _raw_seller(answer) as url:
        started = time.monotonic()
        terms = advertised_terms(url)
        took = time.monotonic() - started
    assert [t.pay_to for t in terms] == [OUTSIDE_PAY_TO.lower()]
    assert took < 3, f"the read waited {took:.1f} s for a body it does not need"


def test_a_v1_402_whose_body_never_arrives_states_no_terms_within_the_bound() -> None:
    """x402 v1 states the terms in the JSON body: one that never arrives whole is no terms
    (refused, saying so), and the read ends at its bound, not at the seller's pace."""
    def answer(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 402 Payment Required\r\ncontent-type: application/json\r\n"
                     b"content-length: 5000\r\n\r\n{\"x402Version\": 1, \"accepts\": [")
        for _ in range(30):
            time.sleep(1)
            conn.sendall(b" ")

    with _raw_seller(answer) as url:
        started = time.monotonic()
        terms = advertised_terms(url)
        took = time.monotonic() - started
    assert terms == () and isinstance(terms, NoOffers), terms
    assert took < SELLER_READ_S + 4, f"the read took {took:.1f} s"


def test_the_judge_reads_a_loopback_seller_directly_and_any_other_through_the_proxy(
    seller: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The judge's read follows nib's one proxy rule (judge.http_proxy), as the agent's
    read of the same 402 does: a loopback seller is read directly even with HTTP_PROXY set
    (the proxy never hears of it); a seller elsewhere through the environment's proxy,
    asked for the whole URL over http and through a CONNECT tunnel over https. Before, the
    judge ignored the environment's proxies altogether, so the agent and the judge could
    read one seller's terms by different ways."""
    seller["pay_to"] = OUTSIDE_PAY_TO
    header = _402(NEW_PAY_TO).headers["payment-required"]
    with proxy_in_environment(monkeypatch, status=402, headers={"PAYMENT-REQUIRED": header}) \
            as proxy:
        local = advertised_terms(seller["url"] + "/data")
        assert [t.pay_to for t in local] == [OUTSIDE_PAY_TO.lower()] and proxy.seen == []
        remote = advertised_terms("http://seller.invalid/data?symbol=USDC")
        assert [t.pay_to for t in remote] == [NEW_PAY_TO.lower()], remote
        assert proxy.seen == ["GET http://seller.invalid/data?symbol=USDC"]
        tunneled = advertised_terms("https://seller.invalid:8443/data")
        assert proxy.seen[1:] == ["CONNECT seller.invalid:8443"]
    assert isinstance(tunneled, NoOffers) and "Tunnel connection failed: 402" in tunneled.why, \
        tunneled.why
