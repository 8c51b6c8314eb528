"""Sellers' terms, read for one decision before the judge takes its decision lock.

A decision on an x402 purchase needs what the seller's own 402 states now (judge.payto
over HTTP, judge.mcp_terms over MCP), and a seller answers when it likes: a read held
under the judge's decision lock would hold every other task's decisions with it. So the
judge reads first, outside the lock, running the same checks it rules with
(:meth:`SellerTerms.reading`: each read a decision's checks ask for is made now, bounded
in time and size by its reader), then rules under the lock on what was read
(:meth:`SellerTerms.sealed`: the same checks find their reads there and nothing more is
fetched). The terms are read for this decision, never kept from an earlier one nor
taken from the agent; a seller that stalls delays only the decision that names it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

from judge.mcp_terms import McpTermsUnread, McpTool, OfferedTerms

__all__ = ["SellerTerms"]

#: ``(url, method, body) -> the offers`` the seller's own 402 for that resource states.
_TermsOf = Callable[[str, str, object], tuple[OfferedTerms, ...]]


@dataclass
class SellerTerms:
    """The terms sellers stated for one decision's purchases (HTTP 402s by resource, MCP
    tools' 402s by tool); ``read`` reads a 402 not yet read, until :meth:`sealed`."""

    read: _TermsOf | None
    _http: dict[tuple[str, str, str], tuple[OfferedTerms, ...]] = field(default_factory=dict)
    _mcp: dict[tuple[str, ...], frozenset[OfferedTerms] | McpTermsUnread] = field(
        default_factory=dict)

    @classmethod
    def reading(cls, read: _TermsOf) -> SellerTerms:
        """Terms read as the checks ask for them (outside the decision lock)."""
        return cls(read)

    def sealed(self) -> SellerTerms:
        """These terms as read, and no further read (under the decision lock)."""
        return SellerTerms(None, dict(self._http), dict(self._mcp))

    def __call__(self, url: str, method: str, body: object) -> tuple[OfferedTerms, ...]:
        """What the 402 of ``url`` (``method``, ``body``) stated; empty when it was not read."""
        key = (url, method, _canonical(body))
        if key not in self._http and self.read is not None:
            self._http[key] = self.read(url, method, body)
        return self._http.get(key, ())

    def mcp(self, tool: McpTool) -> frozenset[OfferedTerms]:
        """What ``tool``'s own 402 stated; raises McpTermsUnread when it could not be read."""
        key = (tool.server, tool.tool, _canonical(dict(tool.arguments)), str(tool.transport))
        if key not in self._mcp and self.read is not None:
            try:
                self._mcp[key] = tool.offered_terms()
            except McpTermsUnread as exc:
                self._mcp[key] = exc
        found = self._mcp.get(key, McpTermsUnread("its terms were not read for this decision"))
        if isinstance(found, McpTermsUnread):
            raise found
        return found


def _canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, default=str)
