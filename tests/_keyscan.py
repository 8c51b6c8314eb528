"""Find private keys where they must never be: outputs, events, databases, logs.

Used by the suite-wide scan in tests/conftest.py and tested in tests/test_key_scan.py.
"""

from __future__ import annotations

from pathlib import Path

from chain.devkeys import dev_account


def scan_secrets() -> dict[str, str]:
    keys = {f"dev key {i}": dev_account(i).key.hex().removeprefix("0x").lower() for i in range(10)}
    return keys


def scan_files(root: Path, secrets: dict[str, str]) -> list[str]:
    hits = []
    for path in root.rglob("*"):
        if not path.is_file() or path.stat().st_size > 50_000_000:
            continue
        try:
            data = path.read_bytes()
        except OSError:
            continue
        low = data.lower()
        for name, hexkey in secrets.items():
            if hexkey.encode() in low or bytes.fromhex(hexkey) in data:
                hits.append(f"{name} in file {path}")
    return hits


def memory_holds(pid: int, needles: list[bytes]) -> list[bytes]:
    """Which of ``needles`` are in process ``pid``'s readable memory (``/proc/PID/mem``).

    Raises PermissionError when the kernel refuses to open that memory to the caller.
    """
    found: list[bytes] = []
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
        for line in maps:
            span, perms = line.split()[:2]
            lo, hi = (int(x, 16) for x in span.split("-"))
            if "r" not in perms or hi - lo > 256 * 1024 * 1024:
                continue
            try:
                mem.seek(lo)
                chunk = mem.read(hi - lo)
            except (OSError, ValueError, OverflowError):
                continue
            found += [n for n in needles if n in chunk and n not in found]
    return found
