"""Benchmarks (not timed tests): each prints ours against a peer measured in the same run.

``python -m bench`` runs them all and writes ``bench/RESULTS.md``; each module also runs
alone (``python -m bench.x402_latency``). Shared helpers live in ``bench/_util.py``.
"""
