"""The committed TestUSDC artifact is current, reproducible, and exposes what x402 calls."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from eth_utils import function_signature_to_4byte_selector

from chain.usdc import ARTIFACT_PATH, load_artifact

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "contracts" / "src" / "TestUSDC.sol"
BUILD = REPO / "contracts" / "build.mjs"


def _selectors(abi: list[dict]) -> set[bytes]:
    def canonical(item: dict) -> str:
        if item["type"].startswith("tuple"):
            inner = ",".join(canonical(c) for c in item["components"])
            return f"({inner}){item['type'][5:]}"
        return str(item["type"])

    return {
        function_signature_to_4byte_selector(
            f"{f['name']}({','.join(canonical(i) for i in f['inputs'])})"
        )
        for f in abi
        if f.get("type", "function") == "function"
    }


def test_artifact_matches_current_source() -> None:
    artifact = load_artifact()
    expected = "sha256:" + hashlib.sha256(SOURCE.read_bytes()).hexdigest()
    assert artifact["sourceHash"] == expected, (
        f"contracts/out/TestUSDC.json was built from {artifact['sourceHash']}, but the source "
        f"is now {expected}; rebuild with `node contracts/build.mjs`."
    )


def test_artifact_is_complete() -> None:
    artifact = load_artifact()
    assert artifact["contractName"] == "TestUSDC"
    assert artifact["abi"], "empty ABI"
    for key in ("bytecode", "deployedBytecode"):
        code = artifact[key]
        assert code.startswith("0x") and len(code) > 2, key
        bytes.fromhex(code[2:])  # raises if not hex
    assert artifact["compiler"]["name"] == "solc-js"
    assert artifact["compiler"]["version"].startswith("0.8.")
    assert artifact["settings"]["optimizer"] == {"enabled": True, "runs": 200}
    # load_artifact hands out copies, so a caller cannot corrupt the cached one.
    artifact["abi"].clear()
    assert load_artifact()["abi"]


def test_abi_covers_every_token_call_of_the_x402_exact_facilitator() -> None:
    from x402.mechanisms.evm import constants as x402

    ours = _selectors(load_artifact()["abi"])
    required = [
        x402.TRANSFER_WITH_AUTHORIZATION_VRS_ABI,
        x402.TRANSFER_WITH_AUTHORIZATION_BYTES_ABI,
        x402.AUTHORIZATION_STATE_ABI,
        x402.BALANCE_OF_ABI,
        x402.NAME_ABI,
        x402.VERSION_ABI,
        x402.EIP2612_NONCES_ABI,
        x402.ERC20_ALLOWANCE_ABI,
        x402.ERC20_APPROVE_ABI,
    ]
    for abi in required:
        missing = _selectors(abi) - ours
        assert not missing, f"TestUSDC lacks {[f['name'] for f in abi]} as x402 calls it"


def test_rebuild_is_byte_identical(tmp_path: Path) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not on PATH; cannot rebuild contracts/out/TestUSDC.json to compare")
    result = subprocess.run(
        [node, str(BUILD), "--out", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, f"build.mjs failed:\n{result.stderr}"
    rebuilt = (tmp_path / "TestUSDC.json").read_bytes()
    committed = ARTIFACT_PATH.read_bytes()
    assert rebuilt == committed, (
        "rebuilding TestUSDC gives a different artifact; run `node contracts/build.mjs` and "
        "commit contracts/out/TestUSDC.json"
    )
    assert committed.endswith(b"}\n")
    assert json.loads(committed) == load_artifact()


def test_missing_artifact_names_the_fix(tmp_path: Path) -> None:
    from chain.errors import DevnetError

    missing = tmp_path / "TestUSDC.json"
    with pytest.raises(DevnetError) as info:
        load_artifact(missing)
    assert str(info.value) == (
        f"TestUSDC artifact not found at {missing}. Fix: rebuild it with "
        "`node contracts/build.mjs` from the repository root."
    )
