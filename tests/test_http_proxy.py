"""nib's one proxy rule (judge/http_proxy.py and its twin chain/http_proxy.py): a loopback
destination is never sent through a proxy; any other goes through the one the environment
names. An outside tester with HTTP_PROXY set saw `nib run` send its reads of local sellers
and of Anvil through the proxy (502s) while the judge's reads of the same sellers ignored
the proxy altogether. Here: the rule itself (no network), the twins being one file, and a
scan that fails on any HTTP client in product code that reads proxies from the
environment by itself instead of asking the rule."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from chain import http_proxy as chain_http_proxy
from judge.http_proxy import is_loopback, proxy_for

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("agent", "wallet", "judge", "chain")
_PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No proxy variable in either spelling, for the test to set its own."""
    for name in _PROXY_VARS:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    return monkeypatch


def test_a_loopback_destination_never_goes_through_the_environments_proxy(
    environment: pytest.MonkeyPatch,
) -> None:
    environment.setenv("HTTP_PROXY", "http://proxy.corp.example:3128")
    environment.setenv("HTTPS_PROXY", "http://proxy.corp.example:3128")
    environment.setenv("ALL_PROXY", "http://proxy.corp.example:3128")
    loopback = ["http://127.0.0.1:8545", "https://127.9.8.7/x", "http://[::1]:8080/",
                "http://localhost:4021/tokens", "http://LOCALHOST./"]
    assert {url: proxy_for(url) for url in loopback} == dict.fromkeys(loopback)
    assert [is_loopback(h) for h in ("127.0.0.1", "127.255.0.9", "::1", "[::1]", "localhost")] \
        == [True] * 5
    assert [is_loopback(h) for h in ("0.0.0.0", "10.0.0.1", "::", "127.0.0.1.nip.io",
                                     "localhost.example", "")] == [False] * 6


def test_any_other_destination_keeps_the_environments_proxy(
    environment: pytest.MonkeyPatch,
) -> None:
    environment.setenv("HTTP_PROXY", "http://user:pw@proxy.corp.example:3128")
    environment.setenv("HTTPS_PROXY", "proxy.corp.example:3129")  # no scheme: an http:// one
    environment.setenv("NO_PROXY", "internal.example")
    assert proxy_for("http://seller.example:8080/tokens") == "http://user:pw@proxy.corp.example:3128"
    assert proxy_for("https://sepolia.base.org") == "http://proxy.corp.example:3129"
    assert proxy_for("http://127.0.0.1.nip.io/") == "http://user:pw@proxy.corp.example:3128"
    assert proxy_for("https://api.internal.example/v1") is None  # NO_PROXY names it
    environment.delenv("HTTP_PROXY")
    environment.delenv("HTTPS_PROXY")
    environment.setenv("ALL_PROXY", "socks5://proxy.corp.example:1080")
    assert proxy_for("https://seller.example/") == "socks5://proxy.corp.example:1080"
    environment.delenv("ALL_PROXY")
    assert proxy_for("https://seller.example/") is None


def test_the_rule_is_one_file_in_the_judge_and_the_chain() -> None:
    # chain and judge import nothing of each other, so the rule lives in both; one edited
    # without the other would send the agent's and the judge's reads different ways.
    judge_file, chain_file = ROOT / "judge" / "http_proxy.py", ROOT / "chain" / "http_proxy.py"
    assert judge_file.read_bytes() == chain_file.read_bytes(), (
        "found judge/http_proxy.py and chain/http_proxy.py different; expected one file in "
        "two places. Fix: make the same edit in both (copy one over the other).")
    assert chain_http_proxy.proxy_for.__doc__ == proxy_for.__doc__


# Everything in httpx that builds a client, and so reads the environment's proxies unless
# told trust_env=False.
_HTTPX_BUILDERS = frozenset({
    "Client", "AsyncClient", "HTTPTransport", "AsyncHTTPTransport",
    "request", "stream", "get", "options", "head", "post", "put", "patch", "delete",
})
# Third-party helpers that build an httpx or requests client of their own unless handed
# one (or, web3's provider, its proxies): the keyword that hands it over.
_HANDED_OVER = {"sse_client": "httpx_client_factory",
                "streamablehttp_client": "httpx_client_factory",
                "FacilitatorConfig": "http_client", "HTTPProvider": "request_kwargs"}


def clients_reading_the_environment(source: str, where: str) -> list[str]:
    """``where:line name(...)`` for each HTTP client built so that it reads proxies from the
    environment itself: an httpx builder without ``trust_env=False``, a third-party helper
    not handed nib's client (:data:`_HANDED_OVER`)."""
    tree = ast.parse(source)
    modules = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.Import)
               for a in n.names if a.name == "httpx"}
    aliases = {a.asname or a.name: a.name for n in ast.walk(tree)
               if isinstance(n, ast.ImportFrom) and n.module == "httpx"
               for a in n.names if a.name in _HTTPX_BUILDERS}
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func, name = node.func, None
        if isinstance(func, ast.Attribute):
            if isinstance(func.value, ast.Name) and func.value.id in modules:
                name = f"httpx.{func.attr}" if func.attr in _HTTPX_BUILDERS else None
            elif func.attr in _HANDED_OVER:
                name = func.attr
        elif isinstance(func, ast.Name):
            name = f"httpx.{aliases[func.id]}" if func.id in aliases else (
                func.id if func.id in _HANDED_OVER else None)
        if name is None:
            continue
        keywords = {kw.arg: kw.value for kw in node.keywords}
        if name.startswith("httpx."):
            told = keywords.get("trust_env")
            ok = isinstance(told, ast.Constant) and told.value is False
        elif name == "HTTPProvider":  # requests then takes these, not the environment's
            given = keywords.get("request_kwargs")
            ok = isinstance(given, ast.Dict) and any(
                isinstance(k, ast.Constant) and k.value == "proxies" for k in given.keys)
        else:
            ok = _HANDED_OVER[name] in keywords
        if not ok:
            found.append((node.lineno, f"{where}:{node.lineno} {name}(...)"))
    return [hit for _, hit in sorted(found)]


def test_no_http_client_in_product_code_reads_proxies_from_the_environment_itself() -> None:
    found = [
        hit
        for pkg in PACKAGES
        for path in sorted((ROOT / pkg).rglob("*.py"))
        for hit in clients_reading_the_environment(path.read_text(encoding="utf-8"),
                                                   str(path.relative_to(ROOT)))
    ]
    assert found == [], (
        f"found {len(found)} HTTP client(s) that read proxies from the environment "
        f"themselves: {found}; expected each to take its proxy from proxy_for, which never "
        "proxies a loopback destination (httpx and requests would send a local seller or "
        "Anvil to the user's proxy, which answers 502). Fix: pass trust_env=False and "
        "proxy=proxy_for(url) (judge.http_proxy in agent, wallet and judge; chain.http_proxy "
        "in chain), or hand the helper a client built so.")


def test_the_scan_names_each_client_that_reads_the_environment() -> None:
    bad = (
        "import httpx\n"
        "from httpx import AsyncClient as AC, get\n"
        "from web3 import Web3\n"
        "def f(url):\n"
        "    httpx.AsyncClient(verify=ctx)\n"
        "    httpx.AsyncHTTPTransport(trust_env=True)\n"
        "    AC()\n"
        "    get(url, proxy=proxy_for(url))\n"
        "    sse_client(url, timeout=3)\n"
        "    x402.http.FacilitatorConfig(url=url)\n"
        "    Web3.HTTPProvider(url)\n"
        "    Web3.HTTPProvider(url, request_kwargs={'timeout': 10})\n"
    )
    assert [h.split(" ", 1)[1] for h in clients_reading_the_environment(bad, "m.py")] == [
        "httpx.AsyncClient(...)", "httpx.AsyncHTTPTransport(...)", "httpx.AsyncClient(...)",
        "httpx.get(...)", "sse_client(...)", "FacilitatorConfig(...)", "HTTPProvider(...)",
        "HTTPProvider(...)",
    ]
    good = (
        "import httpx\n"
        "def f(url):\n"
        "    httpx.get(url, trust_env=False, proxy=proxy_for(url))\n"
        "    streamablehttp_client(url, httpx_client_factory=client)\n"
        "    FacilitatorConfig(url=url, http_client=http)\n"
        "    Web3.HTTPProvider(url, request_kwargs={'proxies': proxies})\n"
        "    httpx.URL(url)\n"
    )
    assert clients_reading_the_environment(good, "m.py") == []
