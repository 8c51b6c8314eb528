"""What "a seller's address" must be (http or https, a host, a port a socket can take,
no credentials), in one home: the agent's paid tools check the URL they may request with
it, and the devnet facilitator the URL a seller asks to list, so a URL no request could
reach is refused naming the fault and the fix, before any request and before an HTTP
library's internal error can stand in for the reason."""

from __future__ import annotations

import functools

import httpx

__all__ = ["MAX_PORT", "parsed_url", "seller_origin", "seller_url"]

#: The highest TCP port; 0 is no port a request can connect to.
MAX_PORT = 65_535


@functools.lru_cache(maxsize=1024)
def parsed_url(text: str) -> httpx.URL:
    """``text`` as httpx parses it, once per distinct URL (an ``httpx.URL`` is immutable, so
    one parse serves every reader). One purchase reads its URL at each step (the tool's
    arguments, its resource, the catalog, the quote, the observation), at ~10 us a parse.
    Raises httpx.InvalidURL as httpx.URL does; a refused text is never cached."""
    return httpx.URL(text)


def seller_url(text: str, *, what: str, example: str) -> httpx.URL:
    """``text`` (stripped) as an ``httpx.URL`` a request can be sent to, else a ValueError
    that says what was found, what was expected and the fix. ``what`` names the URL in
    the message ("URL of the seller's resource"); ``example`` is a URL that would do."""
    text = text.strip()
    fix = f"Fix: give the {what} as an absolute http(s) URL, e.g. {example}"
    if not text:
        raise ValueError(f"found an empty {what}; expected an absolute http(s) URL. {fix}")
    try:
        u = parsed_url(text)
    except httpx.InvalidURL as exc:  # e.g. a port that is not a number
        raise ValueError(
            f"found {text!r}, which is not a URL ({exc}); expected scheme://host[:port]/path, "
            f"the port a number from 1 to {MAX_PORT}. {fix}"
        ) from exc
    if u.scheme not in ("http", "https"):
        found = f"the scheme {u.scheme}://" if u.scheme else "no scheme"
        raise ValueError(
            f"found {found} in {text!r}; expected an absolute http:// or https:// URL (nib "
            f"requests sellers over HTTP only). {fix}"
        )
    if not u.host:
        raise ValueError(f"found no host in {text!r}; expected scheme://host[:port]/path. {fix}")
    if u.port is not None and not 1 <= u.port <= MAX_PORT:
        raise ValueError(
            f"found port {u.port} in {text!r}; expected a port from 1 to {MAX_PORT}. Fix: "
            f"correct the port in the URL, e.g. {example}"
        )
    if u.userinfo:
        raise ValueError(
            f"found credentials (user:pass@) in the {what} "
            f"{str(u.copy_with(userinfo=b''))!r}; expected a URL without them (nib never "
            "sends credentials in a URL). Fix: drop the user:pass@ part"
        )
    return u


def seller_origin(url: str) -> str:
    """The seller a URL belongs to: ``scheme://host:port`` of it, lower case, the port
    written out (a seller is one origin, however its URLs spell the default port)."""
    u = parsed_url(url.split("#", 1)[0])
    port = u.port or {"http": 80, "https": 443}.get(u.scheme, 0)
    return f"{u.scheme.lower()}://{u.host.lower()}:{port}"
