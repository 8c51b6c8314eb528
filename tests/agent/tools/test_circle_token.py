"""The paid paths again on Circle's own USDC: FiatTokenV2_2 behind FiatTokenProxy, deployed
from the pinned npm build as ``nib devnet up --token circle`` does (tests/conftest.py
``circle_anvil``). The tests are the TestUSDC suite's own, collected here a second time with
``anvil`` and ``market`` pointing at Circle's token: paywall GET with reconcile, market GET
and POST, the paid MCP tool through the loop (SSE) and from an x402.mcp seller over
streamable HTTP, and a direct transfer, balances read back from the chain each time."""

from __future__ import annotations

from typing import Any

import _on_circle
from test_loop_market import (  # noqa: F401 - collected here on Circle's token
    test_pays_an_x402_mcp_tool_through_the_judge_and_the_wallet,
)
from test_mcp_transports import (  # noqa: F401
    streamable,
    test_buys_from_an_x402_mcp_seller_over_streamable_http,
)
from test_tools_pay_http import (  # noqa: F401
    paid_ctx,
    test_buys_from_the_local_paywall_and_settles_the_ledger,
)
from test_tools_pay_market import (  # noqa: F401
    test_buys_over_get_and_post_with_coverage_decided_on_our_side,
)
from test_tools_transfer import (  # noqa: F401
    ctx,
    test_transfer_end_to_end_with_the_jev_judge,
)

from chain.fiattoken import fiat_token_abi

#: This module's chain and market are the session's Circle devnet (tests/conftest.py).
anvil, market = _on_circle.anvil, _on_circle.market


def test_the_token_here_is_circles_fiattoken_v2_2(anvil: Any) -> None:
    """Not TestUSDC under another name: the proxy's implementation runs Circle's compiled
    FiatTokenV2_2 (its runtime code is the npm artifact's, library address linked in)."""
    token = anvil.w3.eth.contract(address=anvil.usdc, abi=fiat_token_abi())
    impl_slot = "0x7050c9e0f4ca769c69bd3a8ef740bc37934f8e2c036e5a723fd8ee048ed3f8c3"
    impl = "0x" + anvil.w3.eth.get_storage_at(anvil.usdc, impl_slot).hex()[-40:]
    code = anvil.w3.eth.get_code(anvil.w3.to_checksum_address(impl))
    assert len(code) > 20_000  # FiatTokenV2_2 is ~22 kB; TestUSDC has no proxy at all
    assert token.functions.version().call() == "2" and token.functions.name().call() == "USDC"
    assert token.functions.masterMinter().call() != "0x" + "0" * 40
