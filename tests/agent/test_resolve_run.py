"""Naming a run by its id, or by a unique prefix of it, as every command that takes a run
does (`nib show`, `nib audit --run`, ...): answered from the ids' index. bench/scale.py
found `nib audit --run` 70 ms slower at 10M runs than at 1k: the prefix was a LIKE, which
SQLite cannot answer from an index (its LIKE ignores case), so it read every run."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.cli.common import BadInput, resolve_run
from agent.store import RunStore
from tests._plans import recording


def test_a_run_is_named_by_id_or_unique_prefix_from_the_index(store_location: str | Path) -> None:
    store = RunStore(store_location)
    for i in range(60):
        store.start_run(f"{i:02d}c{i:03x}", "task", "default")
    with recording(store.db) as [log]:
        assert resolve_run(store, "41c029") == "41c029"
        assert resolve_run(store, "41") == "41c029"
        assert resolve_run(store, "7", missing_ok=True) is None
        with pytest.raises(BadInput, match="ambiguous"):
            resolve_run(store, "4")
    assert log.touching("agent_runs") and log.full_scans() == []
    # The prefix is taken as given: a wildcard is no id, and case counts (as on PostgreSQL).
    with pytest.raises(BadInput, match="no such run"):
        resolve_run(store, "4_")
    assert resolve_run(store, "41C", missing_ok=True) is None
