"""Who a wallet caller acts for, and who gets a connection slot (issue 22); the attacks
themselves, from a confined agent process, are in tests/test_redteam_isolation.py."""

from __future__ import annotations

import os
import socket

import pytest

from wallet.admission import Admission, Peer, process_state
from wallet.callers import Callers
from wallet.errors import NotYourTask


def test_a_confined_process_names_only_the_tasks_it_proved_and_a_reused_pid_inherits_nothing() -> None:
    callers = Callers({"token-a": "task-a"}.get)
    agent = Peer(pid=4242, uid=os.getuid(), started=100, confined=True)
    with pytest.raises(NotYourTask, match="task-a"):
        callers.check(agent, "task-a", "a read")
    with pytest.raises(NotYourTask):
        callers.prove(agent, "a guessed token")
    assert callers.prove(agent, "token-a") == "task-a"
    callers.check(agent, "task-a", "a read")
    with pytest.raises(NotYourTask, match="task-b"):
        callers.check(agent, "task-b", "a read")
    # The same pid, started later: another process, which proved nothing.
    with pytest.raises(NotYourTask):
        callers.check(Peer(4242, os.getuid(), started=101, confined=True), "task-a", "a read")
    # The user's own (unconfined) process names any row.
    callers.check(Peer(4243, os.getuid(), started=5, confined=False), "task-b", "a read")


def test_this_process_is_unconfined_and_a_gone_one_counts_as_confined() -> None:
    started, confined = process_state(os.getpid())
    assert started > 0 and not confined
    assert process_state(2**22 + 12345) == (0, True)


def test_at_the_total_cap_the_process_holding_most_gives_up_an_idle_slot() -> None:
    admission = Admission(total=4, per_peer=3)
    pairs = [socket.socketpair() for _ in range(6)]
    try:
        hog, small, newcomer = Peer(1, os.getuid()), Peer(2, os.getuid()), Peer(3, os.getuid())
        for a, _ in pairs[:3]:
            assert admission.admit(hog, a) is None
        assert admission.admit(small, pairs[3][0]) is None
        # Full: the newcomer takes the hog's oldest idle slot, which is closed.
        assert admission.admit(newcomer, pairs[4][0]) is None
        assert pairs[0][1].recv(1) == b""
        # The small process (1) and the newcomer (1) are never crowded out by each other:
        # the hog now holds 2, not more than a newcomer holding 1 would (2): refused.
        assert admission.admit(newcomer, pairs[5][0]) is not None
    finally:
        for a, b in pairs:
            a.close()
            b.close()


def test_at_the_total_cap_idle_unproven_connections_go_first_and_a_tasks_processes_count_as_one() -> None:
    callers = Callers({"token-a": "task-a"}.get)
    admission = Admission(total=4, per_peer=3, identity=callers.identity)
    pairs = [socket.socketpair() for _ in range(7)]
    try:
        forks = [Peer(10 + i, os.getuid(), started=1, confined=True) for i in range(4)]
        for fork in forks[:2]:
            callers.prove(fork, "token-a")  # two processes of one task: one identity
        for fork, (a, _) in zip(forks, pairs, strict=False):
            assert admission.admit(fork, a) is None
        user = Peer(20, os.getuid(), started=1, confined=False)
        # Full: the oldest idle connection of a process that proved nothing goes first
        # (each process holds one: a share per process would evict none of them).
        assert admission.admit(user, pairs[4][0]) is None
        assert pairs[2][1].recv(1) == b""
        assert admission.admit(Peer(21, os.getuid(), started=1, confined=False), pairs[5][0]) is None
        assert pairs[3][1].recv(1) == b""
        # No unproven one left: task-a's two processes (2) give way to a newcomer holding none.
        assert admission.admit(Peer(22, os.getuid(), started=1, confined=False), pairs[6][0]) is None
        assert pairs[0][1].recv(1) == b""
    finally:
        for a, b in pairs:
            a.close()
            b.close()
