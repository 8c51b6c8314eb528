"""``nib wallet``: the agent's keystore and balances."""

from __future__ import annotations

import os
import sys

import typer

from agent.cli.common import cli_settings, emit_json, err, fail, out, usdc

__all__ = ["wallet_app"]

wallet_app = typer.Typer(no_args_is_help=False, help="The agent's keystore and balances.")


@wallet_app.command("new")
def wallet_new(as_json: bool = typer.Option(False, "--json"), force: bool = typer.Option(False, "--force")) -> None:
    """Create a fresh encrypted keystore (passphrase from NIB_WALLET_PASSWORD or a prompt)."""
    from wallet.keystore import Keystore, default_keystore_path

    ks = Keystore(default_keystore_path(cli_settings().home))
    address = ks.new(overwrite=force)
    _facts({"address": address, "keystore": str(ks.path)}, as_json)


@wallet_app.command("import")
def wallet_import(as_json: bool = typer.Option(False, "--json"), force: bool = typer.Option(False, "--force"),
                  chain_id: int | None = typer.Option(None, "--chain-id", help="Refuse dev keys off 31337.")) -> None:
    """Import a private key read from stdin or NIB_IMPORT_KEY (never from an argument)."""
    import os

    from wallet.keystore import Keystore, default_keystore_path

    key = os.environ.get("NIB_IMPORT_KEY") or (sys.stdin.readline().strip() if not sys.stdin.isatty() else
                                               typer.prompt("Private key", hide_input=True))
    if not key:
        fail("no key given; expected it on stdin or in NIB_IMPORT_KEY. Fix: `nib wallet import < keyfile`.")
    ks = Keystore(default_keystore_path(cli_settings().home))
    address = ks.import_key(key, overwrite=force, chain_id=chain_id)
    _facts({"address": address, "keystore": str(ks.path)}, as_json)


@wallet_app.command("address")
def wallet_address(as_json: bool = typer.Option(False, "--json")) -> None:
    """The wallet's address (no passphrase needed)."""
    from wallet.keystore import Keystore, default_keystore_path

    ks = Keystore(default_keystore_path(cli_settings().home))
    if not ks.exists():
        fail(f"no keystore at {ks.path}; expected one. Fix: `nib wallet new` or `nib devnet up`.")
    _facts({"address": ks.address()}, as_json)


@wallet_app.command("balance")
def wallet_balance(as_json: bool = typer.Option(False, "--json")) -> None:
    """Live USDC and ETH balances of the wallet on the configured network."""
    from agent.cli.runtime import chain_view

    network, chain, address = chain_view(cli_settings())
    atomic = chain.token_balance(network.usdc or "", address)
    eth = chain.eth_balance(address)
    _facts({"address": address, "network": network.name, "chain_id": network.chain_id,
            "usdc_atomic": atomic, "usdc": usdc(atomic), "eth_wei": eth}, as_json)


def _facts(data: dict[str, object], as_json: bool) -> None:
    if as_json:
        emit_json(data)
    else:
        for k, v in data.items():
            out.print(f"{k:10} {v}", highlight=False)


@wallet_app.command("serve")
def wallet_serve() -> None:
    """Run the wallet as its own process on NIB_HOME/wallet.sock, holding the key."""
    from agent.cli.runtime import resolve_network
    from agent.cli.services import take_secrets
    from chain import devnet as _devnet
    from chain.client import ChainClient
    from judge.client import JudgeClient
    from judge.hardening import refuse_inspection
    from wallet.keystore import DEVNET_PASSPHRASE, Keystore, default_keystore_path
    from wallet.meter import SpendMeter
    from wallet.service import serve
    from wallet.signer import Wallet

    refuse_inspection()  # before the key is unlocked: no same-user process reads our memory
    take_secrets()  # from `nib services up`, on stdin: never in /proc/PID/environ
    settings = cli_settings()
    network = resolve_network(settings, _devnet.status(settings.home))
    judge_url, judge_address = os.environ.get("NIB_JUDGE_URL"), os.environ.get("NIB_JUDGE_ADDRESS")
    if not judge_url or not judge_address:
        fail("the wallet service re-checks every verdict with the judge; expected NIB_JUDGE_URL "
             "and NIB_JUDGE_ADDRESS. Fix: start both with `nib services up`.")
    ks = Keystore(default_keystore_path(settings.home))
    secret = os.environ.get("NIB_WALLET_PASSWORD") or (
        DEVNET_PASSPHRASE if network.is_devnet else None
    )
    key = ks.unlock(secret, chain_id=network.chain_id)
    judge = JudgeClient(judge_url, trusted_judge=judge_address,
                        token=os.environ.get("NIB_JUDGE_TOKEN"), timeout_s=10)
    # No audit events into the runs' table from here: its per-run sequence belongs to the
    # agent process (two writers collide); the service's record is the wallet's ledger.
    chain = ChainClient(network.rpc_url, network.chain_id)
    # The services' own database (NIB_HOME/services, or what `nib services up` set) and the
    # one treasury cap over all the workers.
    meter = SpendMeter(settings.database, chain, treasury_cap_atomic=settings.treasury_cap_atomic,
                       eth_price_usdc=settings.eth_price_usdc)
    wallet = Wallet(key, db_path=settings.database, chain=chain, meter=meter,
                    usdc=network.usdc or "", trusted_judge=judge_address, recheck=judge.recheck)
    err.print(f"wallet {wallet.address} serving on {settings.home}/wallet.sock", highlight=False)
    serve(wallet, settings.home)
