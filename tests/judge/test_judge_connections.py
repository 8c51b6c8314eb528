"""The kept-alive connection pool the judge's and the wallet's clients and the judge's
402 reads share (judge.connections.ConnectionPool), against real sockets."""

from __future__ import annotations

import socket
import time

from judge.connections import ConnectionPool


def _pair_pool(idle_s: float | None) -> tuple[ConnectionPool[socket.socket], list[socket.socket]]:
    peers: list[socket.socket] = []

    def connect() -> socket.socket:
        ours, theirs = socket.socketpair()
        peers.append(theirs)
        return ours

    return ConnectionPool(connect, lambda s: s, idle_s=idle_s), peers


def test_an_idle_connection_is_reused_until_it_has_idled_too_long() -> None:
    pool, peers = _pair_pool(idle_s=0.2)
    first, reused = pool.take()
    assert not reused
    pool.give_back(first)
    again, reused = pool.take()
    assert reused and again is first
    pool.give_back(again)
    time.sleep(0.3)  # past idle_s: dropped (closed) rather than handed out
    fresh, reused = pool.take()
    assert not reused and fresh is not first
    assert first.fileno() == -1, "the connection idle too long was not closed"
    assert len(peers) == 2
    pool.close()


def test_a_connection_the_other_end_closed_is_dropped_and_without_idle_s_none_expire() -> None:
    pool, peers = _pair_pool(idle_s=None)
    a, _ = pool.take()
    pool.give_back(a)
    time.sleep(0.3)
    same, reused = pool.take()  # no idle bound: still handed out
    assert reused and same is a
    pool.give_back(same)
    peers[0].close()  # the service closed it while it idled
    fresh, reused = pool.take()
    assert not reused and fresh is not a
    pool.close()
