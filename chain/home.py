"""Where nib keeps its state, defined once for every package: ``NIB_HOME`` or ``~/.nib``,
with ``~`` expanded (a quoted ``NIB_HOME='~/research'`` means the user's folder, not a
folder named ``~`` in the current directory)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["HOME_ENV", "nib_home"]

HOME_ENV = "NIB_HOME"


def nib_home(env: Mapping[str, str] | None = None) -> Path:
    """The state folder named by ``env`` (default: this process's environment)."""
    value = (os.environ if env is None else env).get(HOME_ENV)
    return Path(value).expanduser() if value else Path.home() / ".nib"
