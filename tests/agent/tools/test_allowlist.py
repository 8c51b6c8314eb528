"""NIB_SELLER_ALLOWLIST's one parser: every form of entry it accepts, and each entry no
request could reach or no payment could go to refused naming it, what an entry must be
and the fix. Whoever reads an allowlist refuses a bad entry; none skips it."""

from __future__ import annotations

from typing import Any

import pytest

from agent.cli.services import registered_limits
from agent.config import load_settings
from agent.errors import AgentConfigError
from agent.loop.limits import Limits
from agent.tools.allowlist import Allowlist, parse_allowlist
from agent.tools.base import ToolContext
from agent.tools.x402.offers import allowlisted_sellers

ADDRESS = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"


def test_every_accepted_form_of_entry() -> None:
    text = (f" http://127.0.0.1:8402 ,https://api.example.com, http://[::1]:8403,{ADDRESS}, "
            f"{ADDRESS.lower()},0x{'AB' * 20},, http://127.0.0.1:8402")
    parsed = parse_allowlist(text)
    assert parsed.sellers == ("http://127.0.0.1:8402", "https://api.example.com", "http://[::1]:8403")
    assert parsed.addresses == (ADDRESS.lower(), "0x" + "ab" * 20)  # one address, any case
    assert parse_allowlist(parsed.entries) == parsed  # the entries one by one: the same
    assert parse_allowlist("") == parse_allowlist(" , ") == Allowlist()


@pytest.mark.parametrize(
    ("entry", "found", "fix"),
    [
        ("http://127.0.0.1:99999", "found port 99999 in 'http://127.0.0.1:99999'; expected a "
         "port from 1 to 65535", "Fix: correct the port in the URL, e.g. http://127.0.0.1:8402"),
        ("http://127.0.0.1:0", "found port 0 in 'http://127.0.0.1:0'; expected a port from 1",
         "Fix: correct the port"),
        ("http://127.0.0.1:abc", "found 'http://127.0.0.1:abc', which is not a URL (Invalid "
         "port: 'abc'); expected scheme://host[:port]/path, the port a number from 1 to 65535",
         "Fix: give the seller origin in NIB_SELLER_ALLOWLIST as an absolute http(s) URL"),
        ("ftp://127.0.0.1:21", "found the scheme ftp:// in 'ftp://127.0.0.1:21'; expected an "
         "absolute http:// or https:// URL", "Fix: give the seller origin"),
        ("http://:8402", "found no host in 'http://:8402'; expected scheme://host[:port]/path",
         "Fix: give the seller origin"),
        ("127.0.0.1:8402", "found '127.0.0.1:8402', which is neither a seller origin nor a 0x "
         "address; expected http(s)://host[:port]", "Fix: write a seller's origin with its "
         "scheme (http://127.0.0.1:8402 if it is a host and port)"),
        ("0x1234", "found '0x1234'; expected a 0x-prefixed 20-byte hex address (0x + 40 hex "
         "digits)", "fix: copy the whole address"),
        (ADDRESS.replace("C51812dc", "C51812DC"), "whose mixed case is not a valid EIP-55 "
         "checksum (a typo?)", "fix: copy the address again"),
    ],
    ids=["port-too-high", "port-0", "port-not-a-number", "scheme", "no-host", "no-scheme",
         "short-address", "bad-checksum"],
)
def test_a_bad_entry_is_refused_naming_it_what_was_expected_and_the_fix(
    entry: str, found: str, fix: str
) -> None:
    with pytest.raises(AgentConfigError) as err:
        parse_allowlist(f"http://127.0.0.1:8402,{entry}")
    text = str(err.value)
    assert text.startswith("NIB_SELLER_ALLOWLIST: found ") and found in text and fix in text
    assert text.endswith("; or drop the entry (entries are comma-separated)")
    assert "\n" not in text


def test_the_settings_refuse_a_bad_entry_as_they_load(monkeypatch: pytest.MonkeyPatch,
                                                      tmp_path: Any) -> None:
    monkeypatch.setenv("NIB_HOME", str(tmp_path))
    monkeypatch.delenv("NIB_CONFIG", raising=False)
    monkeypatch.setenv("NIB_SELLER_ALLOWLIST", f"http://127.0.0.1:8402, {ADDRESS}")
    assert load_settings().allowlist == Allowlist(("http://127.0.0.1:8402",), (ADDRESS.lower(),))
    monkeypatch.setenv("NIB_SELLER_ALLOWLIST", "http://127.0.0.1:8402, http://127.0.0.1:99999")
    with pytest.raises(AgentConfigError, match=r"^NIB_SELLER_ALLOWLIST: found port 99999"):
        load_settings()


def test_whoever_reads_an_allowlist_refuses_a_bad_entry_instead_of_skipping_it() -> None:
    """Before, an entry they could not read allowlisted nothing, without a word: the
    seller check skipped it, the transfer check and the judge's registration dropped it."""
    with pytest.raises(AgentConfigError, match=r"Invalid port: 'abc'"):
        allowlisted_sellers(("http://127.0.0.1:8402", "http://127.0.0.1:abc"))
    ctx = ToolContext(run_id="r", chain=None, network=None, allowlist=(ADDRESS, "0x1234"))  # type: ignore[arg-type]
    with pytest.raises(AgentConfigError, match=r"found '0x1234'"):
        ctx.allowlisted_addresses()
    with pytest.raises(AgentConfigError, match=r"found the scheme ftp://"):
        registered_limits("run-1", "a task", Limits(), allowlist=("ftp://127.0.0.1:21",))
    good = ("http://127.0.0.1:8402", ADDRESS)
    assert allowlisted_sellers(good) == {"http://127.0.0.1:8402"}
    limits = registered_limits("run-1", "a task", Limits(), allowlist=good)
    assert limits.sellers == ("http://127.0.0.1:8402",) and limits.recipients == (ADDRESS.lower(),)
