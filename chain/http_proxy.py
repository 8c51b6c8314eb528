"""Which proxy an HTTP request nib sends goes through: never one to a loopback destination
(127.0.0.0/8, ::1, localhost), whatever the environment sets, since a proxy cannot reach
this machine's loopback (it answers 502), and one in the middle could show the agent and
the judge different answers; elsewhere the one the environment names (HTTP_PROXY,
HTTPS_PROXY, ALL_PROXY, less NO_PROXY), so a user behind a corporate proxy still reaches
remote RPC nodes and sellers.

Every HTTP client nib builds takes its proxy from :func:`proxy_for` and reads none from the
environment itself (tests/test_http_proxy.py holds them to it). judge/http_proxy.py and
chain/http_proxy.py are this one file in two places, since chain and judge import nothing
of each other; the same test keeps them byte for byte the same.
"""

from __future__ import annotations

import functools
import ipaddress
import urllib.parse

__all__ = ["is_loopback", "proxy_for"]


@functools.lru_cache(maxsize=256)
def is_loopback(host: str) -> bool:
    """Whether ``host`` (a URL's host, an IPv6 address with or without its brackets) is
    this machine's loopback: an address in 127.0.0.0/8, ``::1``, or the name localhost."""
    name = host.strip("[]").rstrip(".").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def proxy_for(url: str) -> str | None:
    """The proxy a request to ``url`` goes through, or None to go straight there.

    None for a loopback host, always. Otherwise the environment's proxy for the URL's
    scheme, else ALL_PROXY, unless NO_PROXY names the host (as the standard library reads
    them: ``urllib.request.getproxies`` and ``proxy_bypass``, which requests builds on). A
    proxy given without a scheme is an http:// one, as httpx and requests take it."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if is_loopback(host):
        return None
    # Deferred: urllib.request costs ~25 ms to import; chain.errors asks only is_loopback.
    from urllib.request import getproxies, proxy_bypass

    proxies = getproxies()
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if not proxy or proxy_bypass(host):
        return None
    return proxy if "://" in proxy else f"http://{proxy}"
