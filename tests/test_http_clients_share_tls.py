"""Every HTTP client nib's product code builds shares one TLS context.

An ``httpx`` client or transport built without ``verify=`` loads the certificate bundle
anew (17.5 ms on the bench machine, against 0.07 ms with a context made once). The
judge's seller-terms read opened one per purchase, which took the quiet round trip from
1.5x to 2.57x the bare x402 client before judge/tls.py. This scan fails on any client,
transport or one-shot request helper (``httpx.get`` builds a client too) in agent/,
wallet/, judge/ or chain/ that does not pass ``verify=tls_context()``: judge/tls.py for
agent, wallet and judge; chain/tls.py for chain, which imports nothing of nib's above it
(tests/test_architecture.py).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("agent", "wallet", "judge", "chain")
# Everything in httpx that builds a client (and so a transport and an SSL context).
BUILDERS = frozenset({
    "Client", "AsyncClient", "HTTPTransport", "AsyncHTTPTransport",
    "request", "stream", "get", "options", "head", "post", "put", "patch", "delete",
})


def _httpx_names(tree: ast.Module) -> tuple[set[str], dict[str, str]]:
    """The names the module binds to httpx itself, and to its builders (local -> builder)."""
    modules: set[str] = set()
    builders: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(a.asname or a.name for a in node.names if a.name == "httpx")
        elif isinstance(node, ast.ImportFrom) and node.module == "httpx":
            builders.update({a.asname or a.name: a.name for a in node.names if a.name in BUILDERS})
    return modules, builders


def _builder(call: ast.Call, modules: set[str], builders: dict[str, str]) -> str | None:
    func = call.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        if func.value.id in modules and func.attr in BUILDERS:
            return f"httpx.{func.attr}"
    if isinstance(func, ast.Name) and func.id in builders:
        return f"httpx.{builders[func.id]}"
    return None


def _shares_the_context(call: ast.Call) -> bool:
    for kw in call.keywords:
        if kw.arg == "verify":
            value = kw.value
            name = value.func if isinstance(value, ast.Call) else None
            return (isinstance(name, ast.Name) and name.id == "tls_context") or (
                isinstance(name, ast.Attribute) and name.attr == "tls_context")
    return False


def unshared_clients(source: str, where: str) -> list[str]:
    """``where:line httpx.X(...)`` for each client built without ``verify=tls_context()``."""
    tree = ast.parse(source)
    modules, builders = _httpx_names(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and (name := _builder(node, modules, builders)):
            if not _shares_the_context(node):
                found.append((node.lineno, f"{where}:{node.lineno} {name}(...)"))
    return [hit for _, hit in sorted(found)]


def test_every_http_client_in_product_code_shares_the_tls_context() -> None:
    found = [
        hit
        for pkg in PACKAGES
        for path in sorted((ROOT / pkg).rglob("*.py"))
        for hit in unshared_clients(path.read_text(encoding="utf-8"),
                                    str(path.relative_to(ROOT)))
    ]
    assert found == [], (
        f"found {len(found)} httpx client(s) built without the shared TLS context: {found}; "
        "expected every one to pass verify=tls_context(). Without it httpx loads the "
        "certificate bundle again for each client (17.5 ms, paid on every purchase when the "
        "client is per call). Fix: add verify=tls_context() (from judge.tls in agent, "
        "wallet and judge; from chain.tls in chain), or reuse a client that has it."
    )


def test_the_scan_names_each_way_of_building_a_client_without_the_context() -> None:
    # The scan itself must fail on what the code held before judge/tls.py: a bare client,
    # a transport, a one-shot helper, an aliased import, and a verify= that is not the
    # shared context (True, or a context built per call).
    bad = (
        "import httpx\n"
        "from httpx import AsyncClient as AC, get\n"
        "import ssl\n"
        "async def f(url):\n"
        "    async with httpx.AsyncClient(timeout=3) as c:\n"
        "        await c.get(url)\n"
        "    t = httpx.AsyncHTTPTransport(trust_env=False)\n"
        "    AC()\n"
        "    get(url)\n"
        "    httpx.post(url, verify=True)\n"
        "    httpx.Client(verify=ssl.create_default_context())\n"
    )
    assert [h.split(" ", 1)[1] for h in unshared_clients(bad, "m.py")] == [
        "httpx.AsyncClient(...)", "httpx.AsyncHTTPTransport(...)", "httpx.AsyncClient(...)",
        "httpx.get(...)", "httpx.post(...)", "httpx.Client(...)",
    ]
    good = (
        "import httpx\n"
        "from judge.tls import tls_context\n"
        "import judge.tls\n"
        "def f(url):\n"
        "    httpx.AsyncClient(timeout=3, verify=tls_context())\n"
        "    httpx.get(url, verify=judge.tls.tls_context())\n"
        "    httpx.URL(url)\n"
    )
    assert unshared_clients(good, "m.py") == []
