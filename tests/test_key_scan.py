"""The suite-wide key scan (tests/conftest.py) finds a planted key, so a clean scan means something."""

from __future__ import annotations

from tests._keyscan import scan_files, scan_secrets


def test_scan_finds_a_planted_key_in_hex_and_raw_bytes(tmp_path):
    secrets = scan_secrets()
    hexkey = secrets["dev key 1"]
    (tmp_path / "events.json").write_text(f'{{"note": "0x{hexkey.upper()}"}}')
    (tmp_path / "blob.db").write_bytes(b"\x00head" + bytes.fromhex(hexkey) + b"tail")
    (tmp_path / "clean.txt").write_text("nothing to see")
    try:
        hits = scan_files(tmp_path, secrets)
        assert len(hits) == 2 and all("dev key 1" in h for h in hits)
    finally:
        # Remove the plants so the session-wide scan of the temp folders stays clean.
        for p in tmp_path.iterdir():
            p.unlink()
