"""Process hardening for the services that hold a key (the judge's, the wallet's)."""

from __future__ import annotations

import ctypes
import sys

__all__ = ["refuse_inspection"]


def refuse_inspection() -> bool:
    """Make this process non-dumpable (``prctl(PR_SET_DUMPABLE, 0)``, Linux).

    Other processes of the same OS user can then no longer read its memory
    (``/proc/PID/mem``) or environment, nor attach a debugger: only a process with
    CAP_SYS_PTRACE (root) can; and no core dump carries its key. The judge and the wallet
    services call it before they load a key. Returns whether it took effect.
    """
    if not sys.platform.startswith("linux"):
        return False
    pr_set_dumpable = 4
    libc = ctypes.CDLL(None, use_errno=True)
    return int(libc.prctl(pr_set_dumpable, 0, 0, 0, 0)) == 0
