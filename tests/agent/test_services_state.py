"""Where the judge and wallet services keep their records (agent.cli.services): their own
directory by default, their own PostgreSQL database when given one, the agents' when not
(said SHARED), and where the user's commands then find them."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.cli.services import (
    RECORDS_FILE,
    ServicesInfo,
    records_database,
    services_database,
    services_home,
)
from agent.config import NibSettings

PG = "postgresql://agents:secret@127.0.0.1/nib"
OWN = "postgresql://services:other@127.0.0.1/nib_services"


@pytest.fixture(autouse=True)
def _no_outside_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Only what each test passes: no database or config from the suite's environment."""
    for name in ("NIB_DATABASE_URL", "NIB_SERVICES_DATABASE_URL", "NIB_DB_PATH", "NIB_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NIB_HOME", str(tmp_path))


def test_the_services_records_are_their_own_unless_they_share_the_agents_postgresql(
    tmp_path: Path,
) -> None:
    alone = NibSettings(home=tmp_path)
    assert services_database(alone) == (tmp_path / "services" / "nib.db", False)
    assert services_database(NibSettings(home=tmp_path, database_url=PG)) == (PG, True)
    both = NibSettings(home=tmp_path, database_url=PG, services_database_url=OWN)
    assert services_database(both) == (OWN, False)


def test_the_users_commands_read_the_records_where_the_services_were_started(
    tmp_path: Path,
) -> None:
    settings = NibSettings(home=tmp_path)
    assert records_database(settings) == tmp_path / "nib.db"  # services never ran here
    services_home(tmp_path).mkdir()
    (services_home(tmp_path) / RECORDS_FILE).write_text(str(tmp_path / "services" / "nib.db"))
    assert records_database(settings) == tmp_path / "services" / "nib.db"
    (services_home(tmp_path) / RECORDS_FILE).write_text(OWN)
    assert records_database(settings) == OWN


def test_a_shared_database_is_said_in_the_first_line() -> None:
    info = ServicesInfo("http://127.0.0.1:1", "0xj", 1, "/s", 2, "anvil",
                        "postgresql://agents:***@127.0.0.1/nib", True)
    assert "SHARED: set NIB_SERVICES_DATABASE_URL" in info.describe()
    own = ServicesInfo("http://127.0.0.1:1", "0xj", 1, "/s", 2, "anvil", "/h/services/nib.db")
    assert own.describe().endswith("records in /h/services/nib.db")
