"""The ``nib`` command line (``app``) and its one composition root (``runtime``)."""

from __future__ import annotations

__all__ = ["entry"]


def entry() -> None:
    """Console-script entry point; imports the app lazily so ``agent.cli`` stays light."""
    from agent.cli.app import entry as _entry

    _entry()
