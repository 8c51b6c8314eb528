"""Confinement of an agent process (``nib run``, ``nib worker``) with Linux Landlock.

The agent process parses untrusted data, so once its task is registered and before the
first model call it takes away from itself what a compromised agent could misuse on
disk, for its whole life and its children's:

- **denied** (neither read nor written): the services' own directory (their database,
  the judge's admin token, their logs), the wallet's keystore and the judge's key file;
- **read-only**: everything else, in particular the code and the interpreter the
  services run on their next start (the source tree, ``sys.prefix`` and friends, the
  user site and PYTHONPATH): the agent cannot plant code in them;
- **writable**: its own database (the SQLite file and its ``-wal``/``-shm``), a temp
  directory and the few devices a program uses (``/dev/null``, ``/dev/urandom``, the
  terminal, ``/dev/shm``); the rest of ``/dev`` is denied (a raw disk would give root
  every file back).

Landlock is an allow-list: rights granted on a directory reach everything beneath it,
and nothing can be taken back below. So a directory that holds a denied path is never
granted itself; each of its entries is, except the denied ones (``rules``). One
consequence: no new file can be made directly in such a directory (NIB_HOME), which is
why the agent's SQLite file is opened, and its ``-wal``/``-shm`` made, before the rules
apply, and one connection stays open so SQLite never deletes and re-makes them.

Connecting to the wallet's Unix socket is not a file-system right in Landlock ABI <= 7
(only making a socket file is), so the agent still reaches the wallet. Landlock also
refuses ``ptrace`` (and so ``/proc/PID/mem``) of a process outside the domain, even for
root. Beyond files (where the kernel has them): the agent may **listen on no TCP port**
(ABI 4) and may **signal no process outside its domain** nor connect to an abstract Unix
socket outside it (ABI 6). Otherwise it could kill the judge service and answer the
wallet's re-checks on the judge's loopback port itself, confirming verdicts the judge
revoked, and so pay past its task's cap. And a seccomp filter refuses it
``ioctl(TIOCSTI)`` (and ``TIOCLINUX``): the terminal it was started from is still its
stdin, and keystrokes pushed into it run in the user's shell, unconfined, once nib
exits. ``PR_SET_NO_NEW_PRIVS`` comes first (Landlock requires it, and no setuid program
run later regains anything). Landlock restricts the calling thread and its future
children: the process must still have one thread when it confines itself.
"""

from __future__ import annotations

import ctypes
import os
import sqlite3
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agent.errors import AgentConfigError

__all__ = ["FULL_ABI", "Confinement", "ConfinementError", "Policy", "confine", "landlock_abi",
           "rules"]

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446  # every arch
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
#: landlock_ruleset_attr.handled_access_net (ABI 4): binding a TCP port. Connecting is
#: left alone (the agent reaches the judge, the chain and sellers over TCP).
NET_BIND_TCP = 1 << 0
#: The first ABI that confines signals too (below it, files and perhaps ports only).
FULL_ABI = 6
#: landlock_ruleset_attr.scoped (ABI 6): abstract Unix sockets and signals.
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1
_PR_SET_NO_NEW_PRIVS = 38

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
#: ABI 1's rights: execute, write, read, read dir, remove dir/file, make char/dir/reg/
#: sock/fifo/block/sym.
_ABI1 = (1 << 13) - 1
READ = EXECUTE | READ_FILE | READ_DIR
#: The rights a rule on a file (not a directory) may carry.
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV

#: SQLite keeps these next to a database in WAL mode.
SQLITE_SIDE_FILES = ("-wal", "-shm")


class ConfinementError(AgentConfigError):
    """The agent process could not confine itself as asked (the CLI says why and the
    fix on one line, as for any configuration error)."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


def _ruleset_attr(abi: int) -> tuple[_RulesetAttr, int]:
    """The ruleset for ``abi``, and the size to pass: only the fields the kernel knows
    (an older kernel refuses a larger struct whose extra fields are not zero)."""
    attr = _RulesetAttr(handled_rights(abi), 0, 0)
    size = 8
    if abi >= 4:
        attr.handled_access_net, size = NET_BIND_TCP, 16
    if abi >= 6:
        attr.scoped, size = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL, 24
    return attr, size


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


@dataclass(frozen=True)
class Confinement:
    """Whether this process is confined, and how (for the run's first line)."""

    abi: int = 0
    why: str = ""
    rules: int = 0

    @property
    def confined(self) -> bool:
        return self.abi > 0

    @property
    def complete(self) -> bool:
        """Files, ports and signals all confined: ABI 6 or newer (see the module doc)."""
        return self.abi >= FULL_ABI

    @property
    def gap(self) -> str:
        """What a confined process still may do on this kernel ("" when nothing)."""
        if not self.confined or self.complete:
            return ""
        left = "signal the judge and the wallet services" + (
            "" if self.abi >= 4 else " and listen on a TCP port")
        return (f"Landlock ABI {self.abi} confines files only; the agent may still {left}, "
                f"so it could stop the judge and answer the wallet's re-checks on the judge's "
                f"port itself (ABI {FULL_ABI}, Linux 6.12+, closes this)")

    def line(self) -> str:
        if self.complete:
            return f"agent process confined (Landlock ABI {self.abi})"
        if self.confined:
            return f"agent process PARTLY confined: {self.gap}"
        return f"agent process NOT confined: {self.why}"


@dataclass(frozen=True)
class Policy:
    """What the agent process keeps: ``deny`` nothing of, ``read_only`` reading, and
    ``writable`` reading and writing (directories or files). Everything else is read-only."""

    deny: tuple[Path, ...]
    read_only: tuple[Path, ...]
    writable: tuple[Path, ...]
    #: SQLite files to open before the rules apply, and keep open (see the module doc).
    sqlite: tuple[Path, ...] = field(default=())
    #: Device files (or directories of them) to read and write even where ``deny`` holds
    #: their directory (/dev: root could read a raw disk through it).
    devices: tuple[Path, ...] = field(default=())


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def landlock_abi() -> tuple[int, str]:
    """The kernel's Landlock ABI version, or ``(0, why)`` when it has none."""
    if not sys.platform.startswith("linux"):
        return 0, f"Landlock is Linux-only; this is {sys.platform}"
    abi = _libc().syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), _CREATE_RULESET_VERSION)
    if abi > 0:
        return int(abi), ""
    err = ctypes.get_errno()
    why = {
        38: "this kernel has no Landlock system calls (ENOSYS: older than Linux 5.13)",
        95: "Landlock is built but not enabled (EOPNOTSUPP: add landlock to the lsm= boot "
        "parameter or CONFIG_LSM)",
    }.get(err, f"landlock_create_ruleset failed: {os.strerror(err)}")
    return 0, why


def handled_rights(abi: int) -> int:
    """Every file-system right the ABI knows (all of them are handled: none is left open)."""
    rights = _ABI1
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


def _within(path: Path, other: Path) -> bool:
    """``path`` is ``other`` or beneath it."""
    return path == other or other in path.parents


def rules(policy: Policy, handled: int) -> list[tuple[Path, int]]:
    """The Landlock rules that implement ``policy``: read everywhere but ``deny``, and
    write in ``writable`` but not in ``deny`` or ``read_only``. A directory with an
    excluded path beneath it is split into its entries (symlinks skipped: a path through
    one is checked at its target)."""
    out: list[tuple[Path, int]] = []
    deny = tuple(_real(p) for p in policy.deny)
    read_only = tuple(_real(p) for p in policy.read_only)
    _grant(Path("/"), READ & handled, deny, deny, out)
    for root in policy.writable:
        root = _real(root)
        if any(root == p for p in read_only):
            continue
        _grant(root, handled, deny, deny + read_only, out)
    for device in policy.devices:
        if device.exists() and not device.is_symlink():
            out.append((device, handled if device.is_dir() else handled & FILE_RIGHTS))
    return out


def _grant(
    root: Path, rights: int, deny: Sequence[Path], exclude: Sequence[Path],
    out: list[tuple[Path, int]],
) -> None:
    if any(_within(root, d) for d in deny) or root in exclude:
        return
    if not any(root in e.parents for e in exclude):
        if root.is_dir():
            out.append((root, rights))
        elif root.exists():
            out.append((root, rights & FILE_RIGHTS))
        return
    try:
        entries = sorted(root.iterdir())
    except OSError:
        return
    for entry in entries:
        if not entry.is_symlink():
            _grant(entry, rights, deny, exclude, out)


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


_PINNED: list[sqlite3.Connection] = []


def _pin_sqlite(path: Path) -> None:
    """Open ``path`` in WAL mode and read it, so its ``-wal`` and ``-shm`` exist, and keep
    that connection for the process's life: SQLite deletes them only when the last
    connection closes, and the confined process could not make them again."""
    conn = sqlite3.connect(str(path), timeout=30, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    _PINNED.append(conn)


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


def confine(policy: Policy) -> Confinement:
    """Confine this process (and its future children) to ``policy``; a Confinement that
    says why not when the kernel has no Landlock. Raises ConfinementError when Landlock
    is there but the process cannot be confined as asked."""
    abi, why = landlock_abi()
    if not abi:
        return Confinement(0, why)
    threads = _threads()
    if threads != 1:
        raise ConfinementError(
            f"found {threads} threads in this process; expected one, as Landlock confines "
            "only the calling thread and the threads it starts later. Fix: confine before "
            "starting any thread (a bug in nib: report it)."
        )
    _refuse_second_names(policy.deny)
    for db in policy.sqlite:
        _pin_sqlite(db)
    handled = handled_rights(abi)
    found = rules(policy, handled)
    libc = _libc()
    attr, size = _ruleset_attr(abi)
    ruleset = libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0)
    if ruleset < 0:
        raise _failed("landlock_create_ruleset", ctypes.get_errno())
    try:
        for path, rights in found:
            _add_rule(libc, ruleset, path, rights)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise _failed("prctl(PR_SET_NO_NEW_PRIVS)", ctypes.get_errno())
        if libc.syscall(_SYS_RESTRICT_SELF, ruleset, 0) != 0:
            raise _failed("landlock_restrict_self", ctypes.get_errno())
        _refuse_terminal_input(libc)
    finally:
        os.close(ruleset)
    return Confinement(abi, "", len(found))


#: seccomp: (AUDIT_ARCH, ioctl's number) per machine; the filter knows these two.
_IOCTL = {"x86_64": (0xC000003E, 16), "aarch64": (0xC00000B7, 29)}
#: ioctls that push input into a terminal (as if typed) or drive the console.
TIOCSTI, TIOCLINUX = 0x5412, 0x541C
_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2
_RET_ALLOW, _RET_EPERM = 0x7FFF0000, 0x00050000 | 1
_LD_ABS, _JEQ, _JGE, _RET = 0x20, 0x15, 0x35, 0x06


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8),
                ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_SockFilter))]


def _refuse_terminal_input(libc: ctypes.CDLL) -> None:
    """A seccomp filter refusing ``ioctl(TIOCSTI)`` and ``ioctl(TIOCLINUX)`` (EPERM), and
    every system call of another ABI (32-bit, x32), which could name them otherwise.

    Landlock checks device ioctls only on files opened after it applies; the terminal
    nib was started from is the process's stdin and stdout from before. Through it,
    TIOCSTI pushes keystrokes into the user's shell, which runs them unconfined once nib
    exits (as root, even with dev.tty.legacy_tiocsti=0). No-op on other machines."""
    import platform

    known = _IOCTL.get(platform.machine())
    if known is None:
        return
    arch, ioctl = known
    prog = [
        (_LD_ABS, 0, 0, 4),  # seccomp_data.arch
        (_JEQ, 1, 0, arch),
        (_RET, 0, 0, _RET_EPERM),
        (_LD_ABS, 0, 0, 0),  # seccomp_data.nr
        (_JGE, 0, 1, 0x40000000),  # x32's numbers
        (_RET, 0, 0, _RET_EPERM),
        (_JEQ, 0, 4, ioctl),
        (_LD_ABS, 0, 0, 24),  # low half of seccomp_data.args[1]: the request
        (_JEQ, 1, 0, TIOCSTI),
        (_JEQ, 0, 1, TIOCLINUX),
        (_RET, 0, 0, _RET_EPERM),
        (_RET, 0, 0, _RET_ALLOW),
    ]
    filters = (_SockFilter * len(prog))(*(_SockFilter(*f) for f in prog))
    fprog = _SockFprog(len(prog), filters)
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        raise _failed("prctl(PR_SET_SECCOMP)", ctypes.get_errno())


def _refuse_second_names(deny: Iterable[Path]) -> None:
    """Landlock rules follow paths: a hard link to a denied file from a place the agent
    may write (made earlier by an unconfined process, e.g. a run with ``--unconfined``)
    would open it under the link's rights. Refuse to run while one exists (a confined
    process cannot make one: Landlock refuses the link)."""
    found: list[str] = []
    for root in deny:
        if root == Path("/dev") or not root.exists():
            continue
        files = [root] if not root.is_dir() else [p for p in root.rglob("*") if not p.is_symlink()]
        for path in files:
            st = path.lstat()
            if path.is_file() and st.st_nlink > 1:
                found.append(f"{path} ({st.st_nlink} names)")
    if found:
        raise ConfinementError(
            f"found a file the agent must not open with another name too: {', '.join(found)}; "
            "expected one name each, as a second one escapes the confinement. Fix: find the "
            f"other names with `find / -xdev -samefile {found[0].split(' (')[0]}`, delete "
            "them, and then run again."
        )


def _add_rule(libc: ctypes.CDLL, ruleset: int, path: Path, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # gone since it was listed: nothing there to grant
    try:
        beneath = _PathBeneathAttr(rights, fd)
        if libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(beneath), 0) != 0:
            raise _failed(f"landlock_add_rule({path})", ctypes.get_errno())
    finally:
        os.close(fd)


def _failed(call: str, err: int) -> ConfinementError:
    return ConfinementError(
        f"{call} failed ({os.strerror(err)}); expected the kernel's Landlock to take the "
        "agent process's rules. Fix: report it with `uname -r`; on a kernel without "
        "Landlock nib says `NOT confined` instead."
    )


def code_paths() -> list[Path]:
    """Where the code the services run comes from: nib's source tree, the interpreter's
    prefixes, the user site and PYTHONPATH (read-only for a confined agent)."""
    import site

    import agent

    found = [Path(agent.__file__).resolve().parent.parent]
    found += [Path(p) for p in {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}]
    user_site = site.getusersitepackages()
    if isinstance(user_site, str):
        found.append(Path(user_site))
    found += [Path(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return [p for p in found if p.exists()]


def temp_dir(exclude: Iterable[Path], fallback: Path) -> Path:
    """A temp directory the confined process may write in: the system's, unless a path it
    must not write is beneath it (tests keep NIB_HOME there); then ``fallback`` (made,
    0700), which becomes the process's TMPDIR."""
    system = _real(Path(tempfile.gettempdir()))
    if not any(system in _real(p).parents or system == _real(p) for p in exclude):
        return system
    fallback.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.environ["TMPDIR"] = str(fallback)
    tempfile.tempdir = str(fallback)
    return fallback


def sqlite_files(db: Path) -> list[Path]:
    """A SQLite database and the side files WAL mode keeps next to it."""
    return [db, *(Path(f"{db}{suffix}") for suffix in SQLITE_SIDE_FILES)]
