"""The wallet service's wire: frames on the socket and the records and refusals in them.

A frame is a 4-byte big-endian length, then that many bytes of UTF-8 JSON; one request
``{"route": "/v1/sign-typed-data", "body": {...}}`` is answered by ``{"status": 200,
"data": {...}}`` or ``{"status": 409|422|404, "error": {"type", "code", "message", ...}}``.
Both sides use these functions, so the framing and the codec of signed records, ledger
rows and refusals are written once.
"""

from __future__ import annotations

import json
import socket
import struct
import time
from collections.abc import Mapping
from dataclasses import asdict

from judge.wire import from_wire, wire_object
from wallet.errors import SpendRefused, WalletError
from wallet.ledger import SpendRow
from wallet.signed import SignedTx, SignedTypedData

__all__ = [
    "HEADER_BYTES",
    "MAX_FRAME_BYTES",
    "MAX_JSON_CONTAINERS",
    "STOPPING_STATUS",
    "FrameTooLarge",
    "frame",
    "frame_length",
    "parse_request",
    "read_answer",
    "rebuilt",
    "refusal",
    "row_from_wire",
    "row_to_wire",
    "signed_from_wire",
    "signed_to_wire",
]

#: The fields of a wallet error that cross the wire with its message and code (what the
#: agent's handlers read: SpendRefused's verdict and limits, SettlementUnproven's finding).
_ERROR_FIELDS = ("verdict_id", "limit", "observed", "finding", "tx_hash")
#: The largest frame either side reads; real requests and answers are a few KiB.
MAX_FRAME_BYTES = 1024 * 1024
_LENGTH = struct.Struct(">I")
#: The most JSON arrays and objects a request may open (it bounds their nesting). Real
#: requests open a few dozen; a frame of nested brackets parsed as it came overflowed the
#: C stack of the service's thread and killed the wallet (py_ecc, imported with
#: eth_account, raises the recursion limit to 100000, past what a thread's stack holds).
MAX_JSON_CONTAINERS = 10_000
#: The length header's size in bytes.
HEADER_BYTES = _LENGTH.size
#: The answer to a request that arrives while the service stops: not run, so nothing signed.
STOPPING_STATUS = 503


def signed_to_wire(signed: SignedTypedData | SignedTx) -> dict[str, object]:
    return {"kind": type(signed).__name__, **asdict(signed)}


def signed_from_wire(data: object) -> SignedTypedData | SignedTx:
    fields = dict(wire_object("signed", data))
    kind = fields.pop("kind", None)
    cls: type[SignedTypedData | SignedTx] = SignedTx if kind == "SignedTx" else SignedTypedData
    return from_wire(cls, fields)


class FrameTooLarge(ValueError):
    pass


def frame(message: Mapping[str, object]) -> bytes:
    data = json.dumps(message, separators=(",", ":")).encode()
    return _LENGTH.pack(len(data)) + data


def parse_request(data: bytes) -> object:
    """A request frame's JSON, refused (ValueError) before parsing when it opens more
    than MAX_JSON_CONTAINERS arrays and objects."""
    opened = data.count(b"[") + data.count(b"{")
    if opened > MAX_JSON_CONTAINERS:
        raise ValueError(
            f"found {opened} JSON arrays and objects in one request; expected at most "
            f"{MAX_JSON_CONTAINERS}; fix: send the fields WalletClient sends, nothing more."
        )
    return json.loads(data)


def frame_length(header: bytes) -> int:
    (size,) = _LENGTH.unpack(header)
    if size > MAX_FRAME_BYTES:
        raise FrameTooLarge(
            f"found a frame of {size} bytes; expected at most {MAX_FRAME_BYTES} bytes; "
            "fix: send the fields WalletClient sends, nothing more."
        )
    return int(size)


def read_answer(conn: socket.socket, deadline: float) -> object:
    """The framed answer to the request just sent on ``conn``, read by ``deadline``."""
    header = _read_exact(conn, HEADER_BYTES, deadline)
    return json.loads(_read_exact(conn, frame_length(header), deadline))


def _read_exact(conn: socket.socket, size: int, deadline: float) -> bytes:
    chunks: list[bytes] = []
    while size:
        conn.settimeout(max(deadline - time.monotonic(), 0.001))
        chunk = conn.recv(min(size, 1 << 20))
        if not chunk:
            raise ConnectionResetError("the wallet service closed the connection")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def refusal(exc: WalletError) -> dict[str, object]:
    """A refusal as it travels: its class, code, message, named fields and events."""
    body: dict[str, object] = {"type": type(exc).__name__, "code": exc.code, "message": str(exc)}
    for name in _ERROR_FIELDS:
        if getattr(exc, name, None) is not None:
            body[name] = getattr(exc, name)
    body["events"] = getattr(exc, "relayed_events", [])
    return {"status": 409 if isinstance(exc, SpendRefused) else 422, "error": body}


def row_to_wire(row: SpendRow) -> dict[str, object]:
    """A ledger row for the agent, with the stored payment header (the agent re-sends it
    to the same seller; it is the authorization the agent already handed over)."""
    return {**row.to_dict(), "x402_payment": row.x402_payment}


def row_from_wire(row: object) -> SpendRow:
    return SpendRow.from_row(dict(wire_object("row", row)))


def rebuilt(cls: type[WalletError], error: Mapping[str, object]) -> WalletError:
    """The service's refusal as the same class, without calling its constructor (some
    take fields only the service knows); message, code and the named fields survive."""
    exc = cls.__new__(cls)
    WalletError.__init__(exc, str(error.get("message")))
    if isinstance(exc, SpendRefused):
        exc.reason = exc.message
    for name in _ERROR_FIELDS:
        if name in error or isinstance(exc, SpendRefused) and name == "verdict_id":
            setattr(exc, name, error.get(name))
    return exc
