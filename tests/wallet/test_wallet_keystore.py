"""The encrypted keystore: file mode, passphrase sources, dev-key policy, opaque handles."""

from __future__ import annotations

import copy
import json
import pickle
import stat
from pathlib import Path

import pytest
from _wallet_support import FAST_SCRYPT_N

from chain.devkeys import AGENT, OUTSIDER, dev_account
from wallet.errors import (
    DevKeyRefused,
    InvalidKey,
    KeystoreCorrupt,
    KeystoreExists,
    KeystoreMissing,
    PassphraseMissing,
    WrongPassphrase,
)
from wallet.keystore import (
    DEVNET_PASSPHRASE,
    KeyHandle,
    Keystore,
    check_dev_key,
    default_keystore_path,
    ensure_devnet_wallet,
)

OUTSIDER_KEY = dev_account(OUTSIDER).key


def _store(tmp_path: Path) -> Keystore:
    return Keystore(tmp_path / "home" / "wallet.json", scrypt_n=FAST_SCRYPT_N)


def test_new_writes_an_encrypted_0600_keystore(tmp_path: Path) -> None:
    store = _store(tmp_path)
    address = store.new("pw")
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    blob = json.loads(store.path.read_text())
    assert blob["crypto"]["kdf"] == "scrypt"
    assert store.address() == address
    assert store.unlock("pw").address == address


@pytest.mark.parametrize("form", ["0x-hex", "bare-hex", "upper-hex", "bytes"])
def test_import_accepts_every_key_spelling(tmp_path: Path, form: str) -> None:
    raw = bytes(OUTSIDER_KEY)
    key: str | bytes = {
        "0x-hex": "0x" + raw.hex(),
        "bare-hex": raw.hex(),
        "upper-hex": "0x" + raw.hex().upper(),
        "bytes": raw,
    }[form]
    store = _store(tmp_path)
    assert store.import_key(key, "pw") == dev_account(OUTSIDER).address


def test_import_refuses_junk_without_echoing_it(tmp_path: Path) -> None:
    with pytest.raises(InvalidKey) as info:
        _store(tmp_path).import_key("0xdeadbeefcafe", "pw")
    assert "deadbeefcafe" not in str(info.value)
    assert "expected 32 bytes as 64 hex characters" in str(info.value)


def test_existing_keystore_is_not_overwritten(tmp_path: Path) -> None:
    store = _store(tmp_path)
    address = store.new("pw")
    with pytest.raises(KeystoreExists, match=f"address {address}"):
        store.new("pw")
    assert store.new("pw", overwrite=True) != address


def test_wrong_passphrase_and_missing_file(tmp_path: Path) -> None:
    store = _store(tmp_path)
    with pytest.raises(KeystoreMissing, match="nib wallet new"):
        store.unlock("pw")
    store.new("pw")
    with pytest.raises(WrongPassphrase, match="does not open"):
        store.unlock("nope")


def test_passphrase_from_env_else_refused_without_a_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(tmp_path)
    monkeypatch.delenv("NIB_WALLET_PASSWORD", raising=False)
    with pytest.raises(PassphraseMissing, match="export NIB_WALLET_PASSWORD"):
        store.new()
    monkeypatch.setenv("NIB_WALLET_PASSWORD", "from-env")
    address = store.new()
    assert store.unlock("from-env").address == address


def test_default_path_follows_nib_home(nib_home: Path) -> None:
    assert default_keystore_path() == nib_home / "wallet.json"
    assert Keystore().path == nib_home / "wallet.json"


def test_dev_keys_only_on_chain_31337(tmp_path: Path) -> None:
    dev = dev_account(AGENT).address
    check_dev_key(dev, 31337)
    with pytest.raises(DevKeyRefused) as info:
        check_dev_key(dev, 84532)
    assert info.value.code == "dev-key"
    assert "accepted only on chain 31337, got chain 84532" in str(info.value)
    store = _store(tmp_path)
    with pytest.raises(DevKeyRefused):
        store.import_key(dev_account(AGENT).key, "pw", chain_id=84532)
    store.import_key(dev_account(AGENT).key, "pw", chain_id=31337)
    with pytest.raises(DevKeyRefused):
        store.unlock("pw", chain_id=8453)
    handle = store.unlock("pw")
    with pytest.raises(DevKeyRefused):
        handle.check_chain(1)


def test_key_handle_shows_only_the_address_and_cannot_be_copied(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.import_key(OUTSIDER_KEY, "pw")
    handle = store.unlock("pw")
    secret = bytes(OUTSIDER_KEY).hex()
    assert repr(handle) == f"KeyHandle(address={dev_account(OUTSIDER).address!r})"
    assert secret not in repr(handle) + str(handle) + repr(store)
    assert not hasattr(handle, "__bytes__") and not hasattr(handle, "key")
    assert not hasattr(handle, "__dict__")
    for clone in (pickle.dumps, copy.copy, copy.deepcopy):
        with pytest.raises(TypeError, match="cannot be pickled or copied"):
            clone(handle)


def test_ensure_devnet_wallet_imports_the_agent_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NIB_WALLET_PASSWORD", raising=False)
    home = tmp_path / "home"
    assert ensure_devnet_wallet(home) == dev_account(AGENT).address
    assert stat.S_IMODE((home / "wallet.json").stat().st_mode) == 0o600
    assert Keystore(home / "wallet.json").unlock(DEVNET_PASSPHRASE).address == (
        dev_account(AGENT).address
    )
    before = (home / "wallet.json").read_bytes()
    assert ensure_devnet_wallet(home, "other") == dev_account(AGENT).address
    assert (home / "wallet.json").read_bytes() == before  # never overwritten


def test_ensure_devnet_wallet_keeps_an_existing_own_key(tmp_path: Path) -> None:
    home = tmp_path / "home"
    mine = Keystore(home / "wallet.json", scrypt_n=FAST_SCRYPT_N).new("pw")
    assert ensure_devnet_wallet(home, "pw") == mine


#: EIP-55's published test vectors (all caps, all lower, mixed case).
EIP55_VECTORS = (
    "0x52908400098527886E0F7030069857D2E4169EE7",
    "0xde709f2102306220921060314715629080e2fb77",
    "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
    "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359",
    "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB",
    "0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb",
)


@pytest.mark.parametrize("stored", ["bare-lower", "0x-lower", "bare-upper", "checksummed"])
@pytest.mark.parametrize("address", EIP55_VECTORS)
def test_the_stored_address_is_read_in_eip55_spelling_however_the_file_spells_it(
    tmp_path: Path, address: str, stored: str
) -> None:
    """``address()`` reads the file's clear address field (no passphrase, no eth-account:
    `nib wallet address` stays fast) and spells it as eth_utils' to_checksum_address would."""
    from eth_utils import to_checksum_address

    digits = address[2:]
    field = {"bare-lower": digits.lower(), "0x-lower": "0x" + digits.lower(),
             "bare-upper": digits.upper(), "checksummed": digits}[stored]
    store = _store(tmp_path)
    store.path.parent.mkdir(parents=True)
    store.path.write_text(json.dumps({"address": field, "crypto": {}, "version": 3}))
    assert store.address() == address == to_checksum_address(address)


@pytest.mark.parametrize("field", ["0xzz", "12" * 21, "0X" + "ab" * 20, ""])
def test_a_malformed_stored_address_is_a_corrupt_keystore_naming_it(tmp_path: Path, field: str) -> None:
    store = _store(tmp_path)
    store.path.parent.mkdir(parents=True)
    store.path.write_text(json.dumps({"address": field, "crypto": {}, "version": 3}))
    with pytest.raises(KeystoreCorrupt) as caught:
        store.address()
    assert str(caught.value) == (
        f"The keystore {store.path} has address {field!r}; expected 40 hex digits (an eth-account "
        "v3 keystore). Fix: re-create it with `nib wallet new` or `nib wallet import`.")


def test_a_digest_is_signed_as_eth_account_signs_it() -> None:
    """The handle signs with libsecp256k1 directly (the paid path's signature): byte for
    byte what eth-account's unsafe_sign_hash gives, r, s and v included, for any digest."""
    import os

    account = dev_account(AGENT)
    handle = KeyHandle(account)
    for _ in range(200):
        digest = os.urandom(32)
        ours, theirs = handle._unsafe_sign_digest(digest), account.unsafe_sign_hash(digest)
        assert (ours.signature, ours.r, ours.s, ours.v, ours.message_hash) == (
            theirs.signature, theirs.r, theirs.s, theirs.v, theirs.message_hash)
    with pytest.raises(ValueError, match="expected 32 bytes"):
        handle._unsafe_sign_digest(b"\x00" * 31)
