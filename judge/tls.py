"""One TLS context for every HTTP client nib opens.

An ``httpx`` client or transport built without ``verify=`` loads the certificate bundle
anew: 17.5 ms each on the bench machine, against 0.07 ms with a context made once. When
the judge's seller-terms read still opened a client per purchase, that load took the paid
round trip from 1.5x to 2.57x the bare x402 client. chain/tls.py is its twin for the chain
layer, which may not import the judge. The context is read-only once made; sharing it
between threads and clients is safe.
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
