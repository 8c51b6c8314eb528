"""The state folder: one definition (chain.home) for the settings, the devnet, the keystore
and the config file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest


def test_the_state_folder_is_defined_once_and_expands_a_tilde(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """NIB_HOME='~/research' (quoted, so no shell expanded it) is the user's folder for the
    settings, the devnet, the keystore and the config file alike (the settings and the
    devnet used to take a folder named ``~`` in the current directory); and ``~/.nib`` is
    spelled in one module only, so the default cannot drift between packages."""
    from agent.config import NibSettings, config_path
    from chain import devnet
    from wallet.keystore import default_keystore_path

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("NIB_HOME", "~/research")
    monkeypatch.delenv("NIB_CONFIG", raising=False)
    want = tmp_path / "research"
    assert NibSettings().home == want and devnet.nib_home() == want
    assert default_keystore_path() == want / "wallet.json"
    assert config_path() == want / "config.toml"
    root = Path(__file__).parents[2]
    spelled = sorted(p.relative_to(root).as_posix() for pkg in ("agent", "wallet", "judge", "chain")
                     for p in (root / pkg).rglob("*.py")
                     if re.search(r"""["']\.nib["']""", p.read_text(encoding="utf-8")))
    assert spelled == ["chain/home.py"], spelled
