"""Each service's API is said once, in its operation table, and everything else agrees.

For the wallet (``wallet.operations``) and the judge (``judge.operations``): the server
serves exactly the table's routes; each operation's client attribute exists, calls that
operation and no other, and has the signature the agent's protocol declares for it
(``agent.seams.RuntimeWallet`` with ``SpendView`` and ``NonceView``; ``AgentJudge``); and
every member of those protocols is an operation's client attribute or a local one named
here. A route, a client method or a protocol member that drifts fails one of these.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Protocol, cast, get_type_hints

import pytest

import judge.gate as judge_gate
import judge.operations as judge_ops
import judge.server as judge_server
from agent.seams import AgentJudge, RuntimeWallet
from judge.client import JudgeClient
from judge.jev import Judge
from wallet import client as wallet_client
from wallet import operations as wallet_ops
from wallet import server as wallet_server
from wallet.client import WalletClient
from wallet.signer import Wallet

#: Protocol members that are the client's own, not a call to the service.
WALLET_LOCAL = {"clock", "meter", "nonces"}


def _owner_and_member(root: type, path: str) -> tuple[type, str]:
    """The class that declares the last part of ``path`` (``meter.usage``: the type of
    ``root.meter``, and ``usage``), following properties' return types."""
    *parents, last = path.split(".")
    owner = root
    for part in parents:
        prop = inspect.getattr_static(owner, part)
        hint = get_type_hints(prop.fget)["return"] if isinstance(prop, property) else None
        if hint is None:
            hint = get_type_hints(owner)[part]
        owner = hint
    return owner, last


def _shape(owner: type, name: str) -> tuple[object, ...]:
    """What a caller relies on: a property's type, or a method's parameters and result."""
    member = inspect.getattr_static(owner, name)
    if isinstance(member, property):
        return ("property", get_type_hints(member.fget)["return"])
    if not callable(member):
        return ("attribute", get_type_hints(owner).get(name))
    hints = get_type_hints(member)
    params = [
        (p.name, p.kind, p.default, hints.get(p.name))
        for p in inspect.signature(member).parameters.values()
        if p.name != "self"
    ]
    return ("method", params, hints.get("return"))


def _protocol_members(proto: type) -> set[str]:
    names: set[str] = set()
    for cls in proto.__mro__:
        if cls in (Protocol, object) or not getattr(cls, "_is_protocol", False):
            continue
        names |= {n for n in vars(cls) if not n.startswith("_")}
    return names


def _nested_members(proto: type, local: Iterable[str]) -> set[str]:
    """``proto``'s members as paths, through the local containers (``meter.usage``)."""
    paths = set()
    for name in _protocol_members(proto):
        if name in local and name not in ("clock",):
            owner, _ = _owner_and_member(proto, f"{name}.x")
            if getattr(owner, "_is_protocol", False):
                paths |= {f"{name}.{inner}" for inner in _protocol_members(owner)}
                continue
        paths.add(name)
    return paths


def _operations_called(cls: type, method: str) -> set[str]:
    """The operation constants (``ops.NAME``) a client method's source names."""
    member = inspect.getattr_static(cls, method)
    if isinstance(member, property):
        member = member.fget
    source = textwrap.dedent(inspect.getsource(member))
    tree = ast.parse(source)
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "ops"
        and node.attr.isupper()
    }


# ------------------------------------------------------------------------------- wallet


def test_wallet_server_serves_exactly_the_table() -> None:
    fake = cast(Wallet, SimpleNamespace(emit=None))
    routes = wallet_server.create_routes(fake)
    assert set(routes) == {op.route for op in wallet_ops.OPERATIONS}
    assert len(wallet_ops.OPERATIONS) == len(set(routes))


def test_wallet_server_refuses_a_table_it_does_not_serve(monkeypatch: pytest.MonkeyPatch) -> None:
    extra = wallet_ops.Operation("cancel", wallet_ops.Empty, wallet_ops.Ok, (), "cancel")
    monkeypatch.setattr(wallet_server, "OPERATIONS", (*wallet_ops.OPERATIONS, extra))
    with pytest.raises(TypeError, match=r"operations \['cancel'\] without a handler"):
        wallet_server.create_routes(cast(Wallet, SimpleNamespace(emit=None)))


def _wallet_client_owner(path: str) -> tuple[type, str]:
    parts = path.split(".")
    owner: type = WalletClient
    if parts[0] == "meter":
        owner = wallet_client._RemoteMeter
    elif parts[0] == "nonces":
        owner = wallet_client._RemoteNonces
    return owner, parts[-1]


def _agree(
    ops: Sequence[object],
    client_owner: Callable[[str], tuple[type, str]],
    protocol: type,
    local: set[str],
    module: object,
) -> None:
    covered: set[str] = set(local)
    for op in ops:
        path = str(op.client)
        owner, name = client_owner(path)
        assert hasattr(owner, name), f"{op}: the client has no {path}"
        called = _operations_called(owner, name)
        constant = next(n for n, v in vars(module).items() if v is op)
        assert constant in called, f"client {path} does not call {constant} (calls {called})"
        reads = (path, *op.also)
        for read in reads:
            covered.add(read)
            proto_paths = _nested_members(protocol, local)
            if read not in proto_paths:
                continue
            proto_owner, proto_name = _owner_and_member(protocol, read)
            client_owner_cls, client_name = client_owner(read)
            theirs = _shape(proto_owner, proto_name)
            ours = _shape(client_owner_cls, client_name)
            if theirs[-1] is object:  # the agent ignores what it returns
                ours = (*ours[:-1], object)
            assert ours == theirs, f"client {read} and {protocol.__name__}.{read} disagree"
    missing = _nested_members(protocol, local) - covered
    assert not missing, f"{protocol.__name__} declares {sorted(missing)}, which no operation serves"


def test_wallet_client_and_protocols_agree_with_the_table() -> None:
    _agree(wallet_ops.OPERATIONS, _wallet_client_owner, RuntimeWallet, WALLET_LOCAL, wallet_ops)


def test_the_agreement_check_catches_a_drifted_protocol() -> None:
    """The check above can fail: a protocol whose method takes another parameter."""

    class Drifted(RuntimeWallet, Protocol):
        def spend_row(self, spend_id: str, extra: int) -> object: ...

    with pytest.raises(AssertionError, match="spend_row"):
        _agree(wallet_ops.OPERATIONS, _wallet_client_owner, Drifted, WALLET_LOCAL, wallet_ops)


def test_wallet_modules_have_one_job_each() -> None:
    root = Path(wallet_ops.__file__).parent
    service = (root / "service.py").read_text()
    assert "def " not in service and "class " not in service, "service.py only names parts"


# -------------------------------------------------------------------------------- judge


def _judge_client_owner(path: str) -> tuple[type, str]:
    return JudgeClient, path


def test_judge_server_serves_exactly_the_table() -> None:
    app = judge_server.create_app(cast(Judge, SimpleNamespace(tasks=SimpleNamespace(token_scope=None))))
    routes = app.app.routes  # type: ignore[attr-defined]
    served = {(method, path) for method, table in routes.items() for path in table}
    assert served == {(op.method, op.route) for op in judge_ops.OPERATIONS}


def test_judge_server_refuses_a_table_it_does_not_serve(monkeypatch: pytest.MonkeyPatch) -> None:
    extra = judge_ops.Operation(
        "forget", "POST", "admin", judge_ops.Empty, judge_ops.Ok, (), "forget", "a forgetting"
    )
    monkeypatch.setattr(judge_server, "OPERATIONS", (*judge_ops.OPERATIONS, extra))
    fake = cast(Judge, SimpleNamespace(tasks=SimpleNamespace(token_scope=None)))
    with pytest.raises(TypeError, match=r"operations \['forget'\] without a handler"):
        judge_server.create_app(fake)


def test_judge_client_and_protocol_agree_with_the_table() -> None:
    _agree(judge_ops.OPERATIONS, _judge_client_owner, AgentJudge, set(), judge_ops)


def test_judge_gate_takes_access_from_the_table() -> None:
    """Who may call a route is the table's word: the admin routes the gate guards are the
    table's admin operations, the worker's one route its worker operation."""
    admin = {op.route for op in judge_ops.OPERATIONS if op.access == "admin"}
    assert set(judge_gate._ADMIN_PATHS) == admin
    assert judge_gate._CLAIMS == judge_ops.CLAIMS.route
    assert judge_gate._SERVICE_PATHS == (judge_ops.RECHECK.route,)
