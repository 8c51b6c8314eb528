"""One TLS context for the HTTP clients the chain layer opens (the devnet's health checks,
the sellers' registration and probes).

judge/tls.py holds the one the buyer's side shares; chain imports nothing of nib's above
it (tests/test_architecture.py), so it keeps its own, made once per process. An ``httpx``
client built without ``verify=`` loads the certificate bundle anew: 17.5 ms each on the
bench machine (tests/test_http_clients_share_tls.py holds every client to a shared one).
"""

from __future__ import annotations

import functools
import ssl

import httpx

__all__ = ["tls_context"]


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The default verifying context (certifi's bundle), made on first use."""
    return httpx.create_ssl_context()
