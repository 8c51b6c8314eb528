"""One TLS context for every HTTP client nib opens.

An ``httpx`` client or transport built without ``verify=`` loads the certificate bundle
anew: 17.5 ms each on the bench machine, against 0.07 ms with a context made once. The
judge's seller-terms read and the agent's seller fetches open a client per call, so that
load was most of a paid call's cost over the bare x402 client (2.57x -> see bench/RESULTS.md).
The context is read-only once made; sharing it between threads and clients is safe.
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
