"""Red team: what was planted before the agent confined itself.

Landlock's rules follow paths, so a hard link to the services' database made earlier by
an unconfined process (a run with ``--unconfined``, or the in-process composition) in a
place the agent may write would reopen it with that place's rights. The agent refuses to
confine itself (and so to run) while such a second name exists.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = """
import sqlite3, sys
from pathlib import Path
from agent.cli.runtime import agent_policy
from agent.config import load_settings
from agent.confine import ConfinementError, confine
try:
    print(confine(agent_policy(load_settings())).line())
except ConfinementError as exc:
    print("refused", exc)
    sys.exit(0)
with sqlite3.connect(sys.argv[1]) as db:
    db.execute("UPDATE judge_tasks SET spend_cap = 1000000000000")
print("wrote")
"""


LEFTOVER = """
from pathlib import Path
import sys
from agent.cli.runtime import agent_policy
from agent.config import load_settings
from agent.confine import confine
print(confine(agent_policy(load_settings())).line())
try:
    print("read", Path(sys.argv[1]).read_text())
except OSError as exc:
    print("refused", type(exc).__name__)
"""


def test_a_keystore_left_half_written_is_denied_like_the_keystore(tmp_path: Path) -> None:
    """A crash inside Keystore.save leaves wallet.json.tmp: the same encrypted key."""
    from wallet.keystore import default_keystore_path, keystore_temp_path

    home = tmp_path / "home"
    (home / "services").mkdir(parents=True, mode=0o700)
    leftover = keystore_temp_path(default_keystore_path(home))
    leftover.write_text('{"crypto": "the encrypted key"}')
    env = {k: v for k, v in os.environ.items()
           if k not in ("NIB_DB_PATH", "NIB_DATABASE_URL", "NIB_CONFIG")}
    env.update(NIB_HOME=str(home), PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-c", LEFTOVER, str(leftover)], env=env,
                       capture_output=True, text=True, timeout=120, cwd=str(ROOT), check=False)
    assert r.stdout.splitlines()[1:] == ["refused PermissionError"], (r.stdout, r.stderr[-2000:])


def test_a_hard_link_to_the_services_database_planted_before_confinement_stops_the_run(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    (home / "services").mkdir(parents=True, mode=0o700)
    (home / "tmp").mkdir()
    db = home / "services" / "nib.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE judge_tasks (spend_cap INTEGER)")
        conn.execute("INSERT INTO judge_tasks VALUES (150000)")
    link = home / "tmp" / "innocent.db"  # where a confined agent may write
    os.link(db, link)
    env = {k: v for k, v in os.environ.items()
           if k not in ("NIB_DB_PATH", "NIB_DATABASE_URL", "NIB_CONFIG")}
    env.update(NIB_HOME=str(home), PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-c", CHILD, str(link)], env=env, capture_output=True,
                       text=True, timeout=120, cwd=str(ROOT))
    assert r.returncode == 0, r.stderr[-3000:]
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT spend_cap FROM judge_tasks").fetchall() == [(150000,)], r.stdout
    assert r.stdout.startswith(f"refused found a file the agent must not open with another name too: {db} (2 names)"), r.stdout


TYPE_INTO_TERMINAL = """
import fcntl, sys, termios
from agent.cli.runtime import agent_policy
from agent.config import load_settings
from agent.confine import confine
print(confine(agent_policy(load_settings())).line(), file=sys.stderr)
for ch in b"echo typed-by-the-agent\\n":
    try:
        fcntl.ioctl(0, termios.TIOCSTI, bytes([ch]))
    except OSError as exc:
        print("refused", exc, file=sys.stderr)
        break
"""


def test_a_confined_agent_cannot_type_into_the_terminal_it_was_started_from(
    tmp_path: Path,
) -> None:
    """``nib run`` in a terminal keeps it as stdin: TIOCSTI would queue a command for the
    user's shell, which runs it unconfined when nib exits."""
    import fcntl
    import termios

    home = tmp_path / "home"
    (home / "services").mkdir(parents=True, mode=0o700)
    master, terminal = os.openpty()

    def own_terminal() -> None:  # as a shell starts a command: the terminal is its own
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    env = {k: v for k, v in os.environ.items()
           if k not in ("NIB_DB_PATH", "NIB_DATABASE_URL", "NIB_CONFIG")}
    env.update(NIB_HOME=str(home), PYTHONPATH=str(ROOT))
    try:
        r = subprocess.run([sys.executable, "-c", TYPE_INTO_TERMINAL], stdin=terminal,
                           env=env, capture_output=True, text=True, timeout=120,
                           cwd=str(ROOT), preexec_fn=own_terminal, check=False)
        os.set_blocking(terminal, False)
        try:
            typed = os.read(terminal, 100)
        except BlockingIOError:
            typed = b""
    finally:
        os.close(master)
        os.close(terminal)
    assert r.stderr.startswith("agent process confined (Landlock ABI "), r.stderr
    assert typed == b"", typed
    assert "refused [Errno 1] Operation not permitted" in r.stderr, r.stderr


READ_OTHER_TERMINAL = """
import os, sys
from agent.cli.runtime import agent_policy
from agent.config import load_settings
from agent.confine import confine
print(confine(agent_policy(load_settings())).line(), flush=True)
try:
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_NOCTTY)
except OSError as exc:
    print("refused", exc, flush=True)
else:
    print("opened", flush=True)
    print("read", os.read(fd, 100), flush=True)
"""


def test_a_confined_agent_cannot_read_what_is_typed_in_another_terminal(tmp_path: Path) -> None:
    """Another terminal of the user's (where a passphrase may be typed at a prompt): the
    agent opening it by its /dev/pts path would read the keystrokes before the shell."""
    home = tmp_path / "home"
    (home / "services").mkdir(parents=True, mode=0o700)
    master, terminal = os.openpty()
    env = {k: v for k, v in os.environ.items()
           if k not in ("NIB_DB_PATH", "NIB_DATABASE_URL", "NIB_CONFIG")}
    env.update(NIB_HOME=str(home), PYTHONPATH=str(ROOT))
    agent = subprocess.Popen([sys.executable, "-c", READ_OTHER_TERMINAL, os.ttyname(terminal)],
                             env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, cwd=str(ROOT))
    try:
        assert agent.stdout is not None
        first, second = agent.stdout.readline(), agent.stdout.readline()
        if second.startswith("opened"):
            os.write(master, b"a-passphrase\n")  # the user types at the other prompt
        rest = agent.communicate(timeout=60)[0]
    finally:
        if agent.poll() is None:
            agent.kill()
        os.close(master)
        os.close(terminal)
    assert first.startswith("agent process confined (Landlock ABI "), first
    assert second.startswith("refused [Errno 13] Permission denied"), (second, rest)
