"""The cancel path on Circle's FiatTokenV2_2 (the Base Sepolia twin's token, deployed
from the pinned npm build): the same tests as test_wallet_cancel.py, on the session's
Circle devnet. The wallet speaks only EIP-3009 (the token's own domain,
``cancelAuthorization`` with v, r, s), so both tokens must behave alike."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from test_wallet_cancel import (  # noqa: F401 - collected here, on Circle's token
    test_a_cancel_already_sent_that_loses_the_race_reverts_and_the_row_is_settled,
    test_a_cancel_whose_record_was_lost_is_closed_by_reconcile,
    test_a_settlement_that_won_the_race_settles_the_row_as_paid_for_nothing,
    test_an_expired_authorization_is_failed_without_a_cancel,
    test_an_open_authorization_is_cancelled_on_chain_and_the_seller_cannot_settle_it,
)


@pytest.fixture(scope="module")
def anvil(circle_anvil: Any) -> Iterator[Any]:
    yield circle_anvil
