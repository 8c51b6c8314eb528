"""The nonce allocator shared through the database: managers on different connections
(standing in for worker processes) draw one sequence, and a dead holder's numbers come back.
Runs on SQLite and on PostgreSQL."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from _wallet_support import AGENT_ADDRESS

from wallet._store import Store
from wallet.nonces import NonceManager


def managers(chain: Any, location: str | Path, *holders: str) -> list[NonceManager]:
    return [
        NonceManager(chain.w3, AGENT_ADDRESS, store=Store(location), scope="31337:agent", holder=h)
        for h in holders
    ]


def test_four_connections_draw_one_gapless_sequence(chain: Any, store_location: str | Path) -> None:
    pending = chain.w3.eth.get_transaction_count(AGENT_ADDRESS, "pending")
    workers = managers(chain, store_location, "w1", "w2", "w3", "w4")
    got: list[int] = []
    mine: dict[str, list[int]] = {m.holder: [] for m in workers}
    barrier = threading.Barrier(4)

    def draw(m: NonceManager) -> None:
        barrier.wait()
        for _ in range(10):
            n = m.allocate()
            got.append(n)
            mine[m.holder].append(n)

    threads = [threading.Thread(target=draw, args=(m,)) for m in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got) == list(range(pending, pending + 40))
    workers[0].release(mine["w2"][0])  # a number another worker holds is not ours to release
    assert len(workers[0].snapshot()["in_flight"]) == 40


def test_a_dead_holders_numbers_are_handed_out_again(chain: Any, store_location: str | Path) -> None:
    pending = chain.w3.eth.get_transaction_count(AGENT_ADDRESS, "pending")
    alive, dead = managers(chain, store_location, "alive", "dead")
    mine = alive.allocate()
    lost = [dead.allocate(), dead.allocate()]
    assert (mine, lost) == (pending, [pending + 1, pending + 2])
    assert alive.recover("dead") == lost
    assert alive.snapshot() == {"next": pending + 1, "free": [], "in_flight": [pending]}
    assert alive.allocate() == pending + 1  # no gap left for the node to wait on
    # A fresh process (a restarted worker) keeps what live holders have in flight.
    [restarted] = managers(chain, store_location, "restarted")
    assert restarted.allocate() == pending + 2
    assert restarted.snapshot()["in_flight"] == [pending, pending + 1, pending + 2]


def test_a_number_held_past_its_lease_is_handed_out_again(
    chain: Any, store_location: str | Path, monkeypatch: Any
) -> None:
    """Issue 22: a holder that takes numbers and never sends them (a live process, so its
    death cannot free them) blocks other transfers for at most a lease."""
    import wallet.nonces as nonces

    pending = chain.w3.eth.get_transaction_count(AGENT_ADDRESS, "pending")
    squatter, honest = managers(chain, store_location, "squatter", "honest")
    assert squatter.allocate() == pending  # held for a lease, by a live holder
    assert honest.allocate() == pending + 1
    monkeypatch.setattr(nonces, "NONCE_LEASE_S", -1.0)  # this one's lease is over at once
    assert squatter.allocate() == pending + 2
    monkeypatch.setattr(nonces, "NONCE_LEASE_S", 120.0)
    assert honest.allocate() == pending + 2  # the expired number came back, no gap
    assert honest.snapshot()["in_flight"] == [pending, pending + 1, pending + 2]


def test_a_tasks_hold_is_bounded_over_its_whole_life_not_per_claim() -> None:
    """Giving a number back and claiming it again starts no new lease (an outside red
    team's C3r kept one number for 240 s that way): the time a task held numbers it did
    not send adds up over its life, to one lease; time ending in a send counts nothing."""
    from wallet.errors import NonceHoldRefused
    from wallet.nonces import NONCE_LEASE_S, _State, bounded_by

    st = _State(next=1)
    with bounded_by(("task-x",)):
        now = 0.0
        st.hold(0, "agent", now)
        while now + 5 < NONCE_LEASE_S:
            now += 5
            st.drop(0, unsent=True, now=now)
            st.hold(0, "agent", now)
            assert st.until[0] == NONCE_LEASE_S  # the lease of its first claim, never later
        st.drop(0, unsent=True, now=NONCE_LEASE_S)
        with pytest.raises(NonceHoldRefused, match="task-x"):
            st.hold(0, "agent", NONCE_LEASE_S + 1)
    with bounded_by(("task-y",)):  # numbers sent: a full lease each time
        st.hold(1, "agent", 0.0)
        st.drop(1, now=NONCE_LEASE_S - 1)
        st.hold(1, "agent", 10 * NONCE_LEASE_S)
        assert st.until[1] == 11 * NONCE_LEASE_S
