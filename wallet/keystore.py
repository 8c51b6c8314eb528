"""The encrypted keystore (eth-account v3 JSON, scrypt) and the opaque key handle.

The keystore lives at ``$NIB_HOME/wallet.json`` (default ``~/.nib``) with mode 0600. The
passphrase comes from the caller, else ``NIB_WALLET_PASSWORD``, else a terminal prompt.
Unlocking yields a ``KeyHandle``: it shows only the address, cannot be pickled or
turned into bytes, and is used to sign only by the wallet package.
"""

from __future__ import annotations

import getpass
import json
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, cast

from sha3 import keccak_256

from chain.devkeys import AGENT, DEVNET_CHAIN_ID, dev_account, is_dev_address
from chain.home import HOME_ENV, nib_home
from wallet.errors import (
    DevKeyRefused,
    InvalidKey,
    KeystoreCorrupt,
    KeystoreExists,
    KeystoreMissing,
    PassphraseMissing,
    WrongPassphrase,
)

# eth-account (~0.6 s to import, py_ecc's BLS tables among it) loads in the methods that
# create, encrypt or decrypt a key, never to read the stored address (`nib wallet address`,
# the judge's owner, a twin's wallet): the file keeps it in clear, and _checksummed spells
# it without web3.
if TYPE_CHECKING:
    import coincurve
    from eth_account.datastructures import SignedMessage, SignedTransaction
    from eth_account.signers.local import LocalAccount
    from eth_account.types import TransactionDictType

PASSWORD_ENV = "NIB_WALLET_PASSWORD"
KEYSTORE_FILE = "wallet.json"
#: The devnet keystore's passphrase when NIB_WALLET_PASSWORD is unset. It guards a
#: published Anvil key that is worthless off chain 31337.
DEVNET_PASSPHRASE = "nib-devnet"
#: eth-account's default scrypt work factor (n = 2**18).
DEFAULT_SCRYPT_N = 2**18
#: A lighter work factor for the devnet keystore, whose key is public anyway.
DEVNET_SCRYPT_N = 2**14
#: The address field as eth-account writes it, after any 0x.
_HEX_ADDRESS = re.compile(r"[0-9a-fA-F]{40}")


def _checksummed(digits: str) -> str:
    """``0x`` and the 40 hex ``digits`` in EIP-55 mixed case, as eth_utils'
    ``to_checksum_address`` spells them, without importing it (0.15 s)."""
    lower = digits.lower()
    hashed = keccak_256(lower.encode()).hexdigest()
    return "0x" + "".join(c.upper() if int(h, 16) >= 8 else c
                          for c, h in zip(lower, hashed[:40], strict=True))


def keystore_temp_path(path: Path) -> Path:
    """Where a keystore is written before it replaces ``path`` (left behind by a crash in
    between, it holds the same encrypted key: the agent's confinement denies it too)."""
    return path.with_name(path.name + ".tmp")


def default_keystore_path(home: str | Path | None = None) -> Path:
    """Where the keystore lives: ``<home>/wallet.json``."""
    return (
        Path(home).expanduser() / KEYSTORE_FILE
        if home is not None
        else (nib_home() / KEYSTORE_FILE)
    )


def check_dev_key(address: str, chain_id: int) -> None:
    """Refuse an Anvil dev key on any chain but 31337 (its key is public knowledge)."""
    if is_dev_address(address) and int(chain_id) != DEVNET_CHAIN_ID:
        raise DevKeyRefused(
            f"The wallet {address} is one of Anvil's published dev accounts, whose private "
            f"key anyone can derive; it is accepted only on chain {DEVNET_CHAIN_ID}, got "
            f"chain {chain_id}. Fix: create a fresh key with `nib wallet new` (or import "
            "your own) for this network."
        )


class KeyHandle:
    """An unlocked key. Shows only its address; signs only for the wallet package.

    Warning: whoever holds this object can sign anything. Give it to ``wallet.Wallet``
    and nothing else; the wallet's methods are the only ones that check a verdict.
    """

    __slots__ = ("__account", "__secp", "_address")

    def __init__(self, account: LocalAccount) -> None:
        self.__account = account
        self.__secp: coincurve.PrivateKey | None = None
        self._address: str = account.address

    @property
    def address(self) -> str:
        """The checksummed address."""
        return self._address

    def __repr__(self) -> str:
        return f"KeyHandle(address={self._address!r})"

    __str__ = __repr__

    def __reduce__(self) -> NoReturn:
        raise TypeError("KeyHandle cannot be pickled or copied; unlock the keystore instead.")

    def __deepcopy__(self, memo: dict[int, object]) -> NoReturn:
        self.__reduce__()

    def __copy__(self) -> NoReturn:
        self.__reduce__()

    def check_chain(self, chain_id: int) -> None:
        """Raise DevKeyRefused if this is a published dev key and ``chain_id`` is not 31337."""
        check_dev_key(self._address, chain_id)

    # Called only by wallet.signer, after every verdict check has passed.
    def _unsafe_sign_digest(self, digest: bytes) -> SignedMessage:
        """Sign a 32-byte EIP-712 digest the signer recomputed from the exact payload (the
        signature eth-account's sign_typed_data gives that payload, without encoding and
        hashing it a second time)."""
        if len(digest) != 32:
            raise ValueError(f"found a {len(digest)}-byte digest; expected 32 bytes")
        # libsecp256k1 directly, the key parsed once: what eth-account's unsafe_sign_hash
        # computes through eth-keys' coincurve backend (RFC 6979 nonce, low s, v = 27 +
        # recovery id), at a sixth of its cost on the paid path (27 against 177 us).
        if self.__secp is None:
            import coincurve

            self.__secp = coincurve.PrivateKey(bytes(self.__account.key))
        raw = self.__secp.sign_recoverable(digest, hasher=None)
        from eth_account.datastructures import SignedMessage
        from hexbytes import HexBytes

        v = raw[64] + 27
        return SignedMessage(message_hash=HexBytes(digest), r=int.from_bytes(raw[:32], "big"),
                             s=int.from_bytes(raw[32:64], "big"), v=v,
                             signature=HexBytes(raw[:64] + bytes([v])))  # fmt: skip

    def _unsafe_sign_transaction(self, tx: dict[str, object]) -> SignedTransaction:
        # The signer's checks (terms, fingerprint, verdict) have read every field of tx.
        return self.__account.sign_transaction(cast("TransactionDictType", tx))


class Keystore:
    """One keystore file. ``new``/``import_key`` write it; ``unlock`` opens it."""

    def __init__(self, path: str | Path | None = None, *, scrypt_n: int = DEFAULT_SCRYPT_N) -> None:
        self.path = Path(path).expanduser() if path is not None else default_keystore_path()
        self.scrypt_n = scrypt_n

    def __repr__(self) -> str:
        return f"Keystore(path={str(self.path)!r})"

    def exists(self) -> bool:
        return self.path.is_file()

    def new(self, passphrase: str | None = None, *, overwrite: bool = False) -> str:
        """Create a fresh random key, store it encrypted; returns its address."""
        from eth_account import Account

        account = Account.create()
        return self._write(account, passphrase, overwrite=overwrite, confirm=True)

    def import_key(
        self,
        key: str | bytes,
        passphrase: str | None = None,
        *,
        overwrite: bool = False,
        chain_id: int | None = None,
    ) -> str:
        """Store ``key`` (hex with or without 0x, or 32 raw bytes) encrypted; returns address.

        With ``chain_id`` given, an Anvil dev key is refused unless it is 31337.
        """
        from eth_account import Account

        try:
            if isinstance(key, str):
                text = key.strip()
                text = text if text.startswith(("0x", "0X")) else "0x" + text
                account = Account.from_key(text)
            else:
                account = Account.from_key(bytes(key))
        except Exception:  # the parser's message may echo the input; never show it
            raise InvalidKey(
                "The value given is not a private key; expected 32 bytes as 64 hex "
                "characters (0x optional). Fix: check what you pasted."
            ) from None
        if chain_id is not None:
            check_dev_key(account.address, chain_id)
        return self._write(account, passphrase, overwrite=overwrite, confirm=True)

    def address(self) -> str:
        """The stored address (no passphrase needed)."""
        data = self._read()
        raw = data.get("address")
        if not isinstance(raw, str):
            raise KeystoreCorrupt(
                f"The keystore {self.path} has no address field; expected an eth-account v3 "
                "keystore. Fix: re-create it with `nib wallet new` or `nib wallet import`."
            )
        digits = raw.removeprefix("0x")
        if not _HEX_ADDRESS.fullmatch(digits):
            raise KeystoreCorrupt(
                f"The keystore {self.path} has address {raw!r}; expected 40 hex digits (an "
                "eth-account v3 keystore). Fix: re-create it with `nib wallet new` or `nib "
                "wallet import`."
            )
        return _checksummed(digits)

    def unlock(self, passphrase: str | None = None, *, chain_id: int | None = None) -> KeyHandle:
        """Decrypt the key into a KeyHandle (dev keys refused off 31337 when chain_id given)."""
        from eth_account import Account

        data = self._read()
        secret = resolve_passphrase(passphrase, confirm=False)
        try:
            account = Account.from_key(Account.decrypt(data, secret))
        except ValueError:
            raise WrongPassphrase(
                f"The passphrase does not open {self.path} (MAC mismatch). Fix: check "
                f"{PASSWORD_ENV} or the passphrase you typed."
            ) from None
        except Exception as exc:
            raise KeystoreCorrupt(
                f"The keystore {self.path} could not be decrypted ({type(exc).__name__}); "
                "expected an eth-account v3 keystore. Fix: re-create or re-import it."
            ) from None
        if chain_id is not None:
            check_dev_key(account.address, chain_id)
        return KeyHandle(account)

    # ------------------------------------------------------------------ private

    def _read(self) -> dict[str, object]:
        if not self.path.is_file():
            raise KeystoreMissing(
                f"No keystore at {self.path}. Fix: run `nib wallet new` or `nib wallet "
                f"import`, or point {HOME_ENV} at the directory holding {KEYSTORE_FILE}."
            )
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError) as exc:
            raise KeystoreCorrupt(
                f"The keystore {self.path} is not readable JSON ({type(exc).__name__}). "
                "Fix: restore it from a backup or re-create it."
            ) from None
        if not isinstance(data, dict) or ("crypto" not in data and "Crypto" not in data):
            raise KeystoreCorrupt(
                f"The keystore {self.path} is not an eth-account v3 keystore (no crypto "
                "section). Fix: restore it from a backup or re-create it."
            )
        return data

    def _write(
        self, account: LocalAccount, passphrase: str | None, *, overwrite: bool, confirm: bool
    ) -> str:
        if self.path.exists() and not overwrite:
            raise KeystoreExists(
                f"A keystore already exists at {self.path} (address {self._safe_address()}); "
                "refusing to overwrite it. Fix: move it away, or choose another NIB_HOME."
            )
        from eth_account import Account

        secret = resolve_passphrase(passphrase, confirm=confirm)
        blob = Account.encrypt(account.key, secret, kdf="scrypt", iterations=self.scrypt_n)
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = keystore_temp_path(self.path)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "w") as fh:
                json.dump(blob, fh)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        os.replace(tmp, self.path)
        return account.address

    def _safe_address(self) -> str:
        try:
            return self.address()
        except Exception:
            return "unreadable"


def resolve_passphrase(passphrase: str | None, *, confirm: bool) -> str:
    """The passphrase from the argument, else NIB_WALLET_PASSWORD, else a terminal prompt."""
    if passphrase is not None:
        return passphrase
    env = os.environ.get(PASSWORD_ENV)
    if env:
        return env
    if not sys.stdin.isatty():
        raise PassphraseMissing(
            f"No wallet passphrase: none was given, {PASSWORD_ENV} is unset and there is no "
            f"terminal to prompt on. Fix: export {PASSWORD_ENV} or run interactively."
        )
    first = getpass.getpass("Wallet passphrase: ")
    if confirm and getpass.getpass("Repeat passphrase: ") != first:
        raise PassphraseMissing(
            "The two passphrases differ; expected the same text twice. Fix: try again."
        )
    if not first:
        raise PassphraseMissing("The passphrase is empty; expected some text. Fix: type one.")
    return first


def ensure_devnet_wallet(home: str | Path, passphrase: str | None = None) -> str:
    """Make sure ``<home>/wallet.json`` exists for the devnet; returns the wallet address.

    Imports Anvil dev account 1 (the AGENT role) with ``passphrase``, else
    NIB_WALLET_PASSWORD, else "nib-devnet". An existing keystore is never overwritten:
    its address is returned as is, and the devnet must fund that address.
    """
    store = Keystore(default_keystore_path(home), scrypt_n=DEVNET_SCRYPT_N)
    if store.exists():
        return store.address()
    secret = passphrase or os.environ.get(PASSWORD_ENV) or DEVNET_PASSPHRASE
    return store.import_key(dev_account(AGENT).key, secret)
