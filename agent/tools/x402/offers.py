"""The buyer's view of the x402 market: offers found through discovery, what each may cover
(decided on our side, never on the seller's word), and bounded excerpts of what was bought.

A seller's description is untrusted text. It is only ever matched against the fact kinds
nib knows (:data:`KIND_TERMS`), and a purchase counts as covering a fact kind only when the
response itself carries fields that back it (:data:`KIND_FIELDS`), so a seller that
declares a full fact sheet and returns nothing covers nothing and loses the judge's p.
"""

from __future__ import annotations

import functools
import json
import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Literal, Protocol, TypedDict

from agent.errors import PermanentToolError, ToolError
from agent.tools.allowlist import ALLOWLIST_SETTING, parse_allowlist
from chain.mcp_client import MCP_TRANSPORTS, split_endpoint
from chain.seller_url import seller_origin, seller_url


class SellerScope(Protocol):
    """What a paid tool's context says about whom it may pay (``ToolContext`` is one):
    the user's allowlist, the sellers the task itself names, and whether the task asks
    for a seller in the market."""

    @property
    def allowlist(self) -> tuple[str, ...]: ...

    @property
    def task_sellers(self) -> tuple[str, ...]: ...

    @property
    def market_only(self) -> bool: ...


__all__ = [
    "KIND_FIELDS",
    "KIND_MEANINGS",
    "KIND_TERMS",
    "MAX_EXCERPT_FIELDS",
    "Excerpt",
    "Offer",
    "OfferBook",
    "allowlisted_sellers",
    "check_market",
    "check_seller",
    "covered_words",
    "asks_for_market",
    "backed_kinds",
    "canonical_fields",
    "declared_kinds",
    "excerpt",
    "offer_call",
    "offer_from_discovery",
    "output_kinds",
    "purchase_facts",
    "resources_named_in",
    "seller_of",
    "sellers_named_in",
    "unrequestable_in",
]

#: Words in a seller's declaration that mean it offers a fact kind (lower case).
KIND_TERMS: dict[str, tuple[str, ...]] = {
    "token_factsheet": ("token fact sheet", "token factsheet", "issuer"),
    "protocol_factsheet": ("protocol fact sheet", "protocol factsheet"),
    "gas_stats": ("gas statistics", "base fee", "base-fee"),
    "transfer_stats": ("transfer statistics",),
}
FieldType = Literal["text", "year", "count", "address", "number"]
"""The type a field's value must have to count: ``text`` (a short phrase, not a bare
number), ``year`` (holds a year), ``count`` (a whole number), ``address`` (0x + 40 hex),
``number`` (a decimal)."""


@dataclass(frozen=True)
class FieldMeaning:
    """One field of a sold fact: nib's name for it, the names sellers use, and its type."""

    name: str
    aliases: tuple[str, ...]
    type: FieldType


def _m(name: str, type_: FieldType, *aliases: str) -> FieldMeaning:
    return FieldMeaning(name, aliases, type_)


#: What the fields of each sold fact kind mean, and how many must be present, typed, for a
#: response to deliver the fact. A seller's own field names are mapped here by name or by
#: its declared output schema (the property's description only as a hint).
KIND_MEANINGS: dict[str, tuple[int, tuple[FieldMeaning, ...]]] = {
    "token_factsheet": (2, (
        _m("issuer", "text", "issued_by", "issuing_company", "issuing_entity", "token_issuer",
           "issuer_name", "company", "organisation", "organization"),
        _m("name", "text", "token_name", "asset_name", "full_name"),
        _m("launched", "year", "launch", "launch_year", "launch_date", "first_issued",
           "inception", "year_launched", "since"),
        _m("decimals", "count", "precision", "decimal_places", "token_decimals"),
        _m("standard", "text", "token_standard", "interface"),
        _m("mainnet_address", "address", "contract", "contract_address", "ethereum_address"),
    )),
    "protocol_factsheet": (2, (
        _m("category", "text", "type", "sector", "kind"),
        _m("launched", "year", "launch", "launch_year", "founded", "since"),
        _m("mechanism", "text", "design", "how_it_works"),
        _m("governance_token", "text", "gov_token", "governance"),
        _m("chains", "text", "networks", "deployments"),
    )),
    "gas_stats": (1, (
        _m("base_fee_gwei", "number", "current_base_fee_gwei", "latest_base_fee_gwei"),
        _m("base_fee_gwei_mean", "number", "mean_base_fee_gwei", "avg_base_fee_gwei",
           "average_base_fee_gwei"),
        _m("gas_used_mean", "number", "mean_gas_used", "avg_gas_used", "average_gas_used"),
    )),
    "transfer_stats": (1, (
        _m("transfer_count", "count", "transfers", "n_transfers", "num_transfers",
           "number_of_transfers"),
        _m("volume_usdc", "number", "volume", "total_volume", "usdc_volume"),
        _m("volume_atomic", "count", "volume_base_units"),
    )),
}  # fmt: skip
#: Response fields that back a fact kind (nib's names), and how many must be present.
KIND_FIELDS: dict[str, tuple[int, tuple[str, ...]]] = {
    kind: (need, tuple(m.name for m in meanings))
    for kind, (need, meanings) in KIND_MEANINGS.items()
}
MAX_EXCERPT_FIELDS = 32
_MAX_VALUE_CHARS = 200
_MAX_TEXT_CHARS = 600
_MAX_DESCRIPTION_CHARS = 300
_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")

OfferType = Literal["http", "mcp"]
"""``http``: a GET or POST resource. ``mcp``: a tool on an MCP server (SSE)."""


def _clean(text: object, limit: int) -> str:
    return _CONTROL.sub(" ", str(text or ""))[:limit].strip()


def declared_kinds(*texts: str) -> tuple[str, ...]:
    """Fact kinds whose terms appear in a seller's declaration (description, tags...)."""
    blob = " ".join(t.lower() for t in texts if t)
    return tuple(k for k, terms in KIND_TERMS.items() if any(t in blob for t in terms))


def output_kinds(extensions: object) -> tuple[str, ...]:
    """The sold fact kinds an offer's declared output backs: its bazaar ``info.output``
    example (field names and typed values) with its schema, matched by meaning
    (:data:`KIND_MEANINGS`), whatever words its description uses."""
    bazaar = extensions.get("bazaar") if isinstance(extensions, Mapping) else None
    info = bazaar.get("info") if isinstance(bazaar, Mapping) else None
    output = info.get("output") if isinstance(info, Mapping) else None
    if not isinstance(output, Mapping):
        return ()
    example, schema = output.get("example"), output.get("schema")
    fields: dict[str, str] = {}
    _flatten(example, "", fields, 0)
    declared = canonical_fields(fields, schema if isinstance(schema, Mapping) else None)
    return backed_kinds(KIND_MEANINGS, declared)


@functools.lru_cache(maxsize=1024)  # ~12 calls a purchase, each a URL parse (httpx)
def seller_of(resource: str) -> str:
    """The seller a resource belongs to: ``scheme://host:port`` of its URL, lower case."""
    return seller_origin(resource)


def allowlisted_sellers(allowlist: Iterable[str]) -> set[str]:
    """The seller origins an allowlist names (its URL entries; 0x entries are recipients),
    read by the allowlist's one parser: a bad entry is refused, never skipped."""
    return {seller_of(entry) for entry in parse_allowlist(allowlist).sellers}


def check_seller(tool: str, url: str, ctx: SellerScope) -> str:
    """The seller of ``url`` when a paid tool may pay it, else a PermanentToolError before
    any request (the allowlist and the task's words do not change during a run): it must
    be allowlisted, and be one the task names when the task names any (a named seller is
    never swapped for another)."""
    seller = seller_of(url)
    allowed = allowlisted_sellers(ctx.allowlist)
    if seller not in allowed:
        raise PermanentToolError(
            f"{tool}: seller {seller} is not on the allowlist of seller origins (allowed: "
            f"{', '.join(sorted(allowed)) or 'none'}); refused before any request. Fix: add "
            f"{seller} to {ALLOWLIST_SETTING} if you trust this seller."
        )
    named = ctx.task_sellers
    if named and seller not in named:
        raise PermanentToolError(
            f"{tool}: the task names the seller{'s' if len(named) > 1 else ''} "
            f"{', '.join(named)}, not {seller}; nib pays only a seller the task names and "
            "never swaps it for another. Fix: buy from the named seller, or drop it from "
            "the task to let nib choose."
        )
    return seller


def check_market(tool: str, resource: str, ctx: SellerScope, book: OfferBook,
                 name: str | None = None) -> None:
    """When the task asks for a seller in the market, a ToolError before any request
    unless discovery listed ``resource`` (``name``: an MCP tool's): a market task never
    falls back to another seller (nib's own paywall included) when the market's cannot be
    bought from; it stops saying why."""
    if not ctx.market_only:
        return
    offer = book.get(resource, name)
    if offer is not None and offer.source not in ("", "402"):
        return  # listed by a discovery API
    raise ToolError(
        f"{tool}: the task asks for a seller in the market, and {resource} is not an offer "
        "discovery listed; nib does not fall back to another seller (its own paywall "
        "included) in place of the market's. Fix: buy one of the offers `discover` lists "
        "(NIB_DISCOVERY_URL), or name the seller in the task."
    )


#: Words naming what kind of market a task means ("the data market", "the x402 market").
_MARKET_KIND = r"(?:(?:x402|data|open|bazaar|discovery|devnet|public|research)[\s-]+)"
#: A market's figures, which are no place to buy ("market cap", "the market price", the
#: "market report" a seller sells).
_MARKET_FIGURE = (r"(?!(?:['’]s)?\s*(?:cap|caps|capitali[sz]ations?|prices?|values?|reports?|"
                  r"data|rates?|shares?|makers?|orders?|sentiment|trends?|volumes?)\b)")
#: How a task asks for a seller in the x402 market: the market as the place to buy ("from
#: the (data) market", "in the x402 market", "on the market", "via the marketplace", "a
#: market seller", "one of the market's sellers", "shop the market"), never a market's
#: figures ("What will the market cap of USDC be?"). Read broadly on purpose: a market task
#: pays only an offer discovery listed, so a wording missed here could pay another seller.
_MARKET_PLACE = re.compile(
    r"\bmarket[\s-]?places?\b"
    r"|\bmarket[\s-]+(?:sellers?|vendors?|offers?|offerings?|listings?|providers?)\b"
    r"|(?:\b(?:the|a|an|this|that|our|its|nib['’]?s)\s+|\b(?:in|from|on|at|via|through|across|"
    rf"into|of|within|using|use)\s+|\b(?={_MARKET_KIND}))"
    rf"{_MARKET_KIND}*market\b{_MARKET_FIGURE}",
    re.IGNORECASE,
)


def asks_for_market(text: str) -> bool:
    """Whether a task's own text asks for a seller in the market (and names none: a
    named seller is the one paid)."""
    return bool(_MARKET_PLACE.search(text or "")) and not sellers_named_in(text)


_URL = re.compile(r"https?://[^\s'\"<>),;]+", re.IGNORECASE)


#: A sentence's closing punctuation after a URL ("... at http://h/tokens?symbol=USDC?").
_CLOSING = ".,;:?!"


def resources_named_in(text: str) -> tuple[str, ...]:
    """The URLs a task's own text names, each exactly as written (its query included, the
    sentence's closing punctuation not), in order, without repeats: every one, those no
    request can reach included (:func:`unrequestable_in` says why), so a task naming one
    is reported, never read as naming nothing. Only the user's task should be fed here;
    URLs read from tool results are data."""
    return tuple(dict.fromkeys(m.group(0).rstrip(_CLOSING) for m in _URL.finditer(text or "")))


def unrequestable_in(text: str) -> tuple[tuple[str, str], ...]:
    """``(url, why)`` for each URL a task's own text names that no request can reach (a
    port out of range, no host, not a URL at all), in order: the task asks for what nib
    cannot buy, so it is refused, never answered from another resource or seller."""
    found: dict[str, str] = {}
    for match in _URL.finditer(text or ""):
        url = match.group(0).rstrip(_CLOSING)
        try:
            seller_url(url, what="URL", example="http://127.0.0.1:8402/tokens?symbol=USDC")
        except ValueError as exc:
            found.setdefault(url, str(exc))
    return tuple(found.items())


def sellers_named_in(text: str) -> tuple[str, ...]:
    """The seller origins a task's own text names (``http(s)://host[:port]...``), in order."""
    return tuple(dict.fromkeys(_named_seller(url) for url in resources_named_in(text)))


def _named_seller(url: str) -> str:
    """The seller of a URL the task names; for one whose port or host httpx cannot read,
    its ``scheme://host:port`` as written, lower case: no requestable URL's seller equals
    it, so the task's choice still binds (no other seller is paid in its place) and the
    refusal names it."""
    try:
        return seller_of(url)
    except Exception:  # httpx.InvalidURL
        scheme, rest = url.split("://", 1)
        return f"{scheme}://{re.split(r'[/?#]', rest, maxsplit=1)[0]}".lower()


@dataclass(frozen=True)
class Offer:
    """One purchasable resource as discovery described it (atomic USDC; text bounded)."""

    resource: str
    type: OfferType
    method: str
    seller: str
    description: str
    price: int | None
    asset: str | None
    network: str | None
    pay_to: str | None
    kinds: tuple[str, ...]
    example: dict[str, object] = field(default_factory=dict)
    tool: str | None = None
    service_name: str | None = None
    source: str = ""
    #: MCP only: the transport the discovery entry names ("streamable-http" or "sse").
    transport: str | None = None

    def as_dict(self) -> dict[str, object]:
        out = asdict(self)
        out["kinds"] = list(self.kinds)
        return out


def _transport(declared: object, resource: str) -> str | None:
    """The MCP transport a discovery entry names (its bazaar ``transport``, else the
    endpoint its resource URL ends in); None when it names none."""
    if declared in MCP_TRANSPORTS:
        return str(declared)
    return split_endpoint(resource)[1]


def offer_from_discovery(item: object, source: str) -> Offer | None:
    """An :class:`Offer` from x402's ``DiscoveryResource`` (bazaar client); None when it
    names no http(s) resource or no exact-scheme requirement."""
    resource = str(getattr(item, "resource", "") or "")
    if not resource.startswith(("http://", "https://")):
        return None
    accepts = [a for a in getattr(item, "accepts", None) or () if isinstance(a, Mapping)]
    req = next((a for a in accepts if a.get("scheme") == "exact"), None)
    if req is None:
        return None
    bazaar = (getattr(item, "extensions", None) or {}).get("bazaar") or {}
    info = bazaar.get("info") if isinstance(bazaar, Mapping) else None
    info_input = (info or {}).get("input") if isinstance(info, Mapping) else None
    info_input = info_input if isinstance(info_input, Mapping) else {}
    kind: OfferType = "mcp" if getattr(item, "type", "") == "mcp" else "http"
    tool = info_input.get("toolName") if kind == "mcp" else None
    example = info_input.get("example" if kind == "mcp" else "body") or info_input.get(
        "queryParams"
    )
    amount = req.get("amount", req.get("maxAmountRequired"))
    description = _clean(getattr(item, "description", ""), _MAX_DESCRIPTION_CHARS)
    tags = [str(t) for t in getattr(item, "tags", None) or ()]
    return Offer(
        resource=resource,
        type=kind,
        method="MCP" if kind == "mcp" else str(info_input.get("method") or "GET").upper(),
        seller=seller_of(resource),
        description=description,
        price=int(amount) if isinstance(amount, str | int) and str(amount).isdigit() else None,
        asset=str(req.get("asset")) if req.get("asset") else None,
        network=str(req.get("network")) if req.get("network") else None,
        pay_to=str(req.get("payTo")) if req.get("payTo") else None,
        kinds=tuple(dict.fromkeys((*declared_kinds(description, " ".join(tags)),
                                   *output_kinds(getattr(item, "extensions", None))))),
        example=dict(example) if isinstance(example, Mapping) else {},
        tool=str(tool) if isinstance(tool, str) else None,
        transport=_transport(info_input.get("transport"), resource) if kind == "mcp" else None,
        service_name=_clean(getattr(item, "service_name", ""), 60) or None,
        source=source,
    )


class OfferBook:
    """The offers a process has seen in discovery, keyed by resource (and tool name)."""

    def __init__(self) -> None:
        self._offers: dict[str, Offer] = {}
        self._lock = threading.Lock()

    @staticmethod
    def key(resource: str, tool: str | None = None) -> str:
        return f"{resource.split('?', 1)[0]}#{tool or ''}"

    def add(self, offers: Iterable[Offer]) -> None:
        with self._lock:
            for offer in offers:
                self._offers[self.key(offer.resource, offer.tool)] = offer

    def get(self, resource: str, tool: str | None = None) -> Offer | None:
        with self._lock:
            return self._offers.get(self.key(resource, tool))

    def declared(self, resource: str, tool: str | None = None) -> tuple[str, ...]:
        """Fact kinds the resource's declaration matches (discovery, or its 402)."""
        offer = self.get(resource, tool)
        return offer.kinds if offer is not None else ()

    def note_declaration(
        self,
        resource: str,
        tool: str | None,
        description: str,
        price: int | None,
        extensions: Mapping[str, object] | None = None,
    ) -> None:
        """Remember what a resource's own 402 declares when discovery did not list it: the
        kinds its description names and the kinds its declared output (bazaar) backs."""
        if self.get(resource, tool) is not None:
            return
        text = _clean(description, _MAX_DESCRIPTION_CHARS)
        self.add(
            [
                Offer(
                    resource=resource.split("?", 1)[0],
                    type="mcp" if tool else "http",
                    method="MCP" if tool else "GET",
                    seller=seller_of(resource),
                    description=text,
                    price=price,
                    asset=None,
                    network=None,
                    pay_to=None,
                    kinds=tuple(dict.fromkeys((*declared_kinds(text), *output_kinds(extensions)))),
                    tool=tool,
                    source="402",
                )
            ]
        )

    def for_kind(self, kind: str) -> list[Offer]:
        """Offers whose declaration matches ``kind``, cheapest first."""
        with self._lock:
            offers = [o for o in self._offers.values() if kind in o.kinds]
        return sorted(offers, key=lambda o: (o.price is None, o.price or 0, o.resource))


def call_inputs(tool: str, args: Mapping[str, object]) -> dict[str, object]:
    """The question a paying call asks (query, JSON body or MCP arguments), so the same
    question can be put to another seller's offer."""
    import httpx

    if tool == "pay_mcp":
        return _mapping(args.get("arguments"))
    if args.get("method") == "POST":
        return _mapping(args.get("body"))
    return dict(httpx.URL(str(args.get("url", ""))).params)


def _mapping(value: object) -> dict[str, object]:
    """A JSON object's copy; an empty dict for anything else (absent, null)."""
    return {str(k): v for k, v in value.items()} if isinstance(value, Mapping) else {}


def offer_call(
    offer: Offer, inputs: Mapping[str, object], kinds: Iterable[str]
) -> tuple[str, dict[str, object]] | None:
    """(tool name, arguments) that put the same question, ``inputs``, to ``offer`` for the
    fact kinds ``kinds``; None when the offer needs an input the question does not give
    (its example would ask something else)."""
    import httpx

    ask = dict(inputs)
    if offer.example and not set(offer.example) <= set(ask):
        return None
    covers = [k for k in kinds if k in offer.kinds]
    if offer.type == "mcp":
        server, _ = split_endpoint(offer.resource)
        args = {"server": server, "tool": offer.tool, "arguments": ask, "covers": covers}
        return "pay_mcp", {**args, **({"transport": offer.transport} if offer.transport else {})}
    if offer.method == "POST":
        return "pay_http", {"url": offer.resource, "method": "POST", "body": ask, "covers": covers}
    url = str(httpx.URL(offer.resource).copy_merge_params({k: str(v) for k, v in ask.items()}))
    return "pay_http", {"url": url, "covers": covers}


# ------------------------------------------------------------------------------ excerpt


def _flatten(value: object, prefix: str, out: dict[str, str], depth: int) -> None:
    if len(out) >= MAX_EXCERPT_FIELDS:
        return
    if isinstance(value, Mapping) and depth < 3:
        for k, v in list(value.items())[:MAX_EXCERPT_FIELDS]:
            _flatten(v, f"{prefix}.{k}" if prefix else str(k), out, depth + 1)
    elif isinstance(value, list) and depth < 3:
        for i, v in enumerate(value[:8]):
            _flatten(v, f"{prefix}[{i}]", out, depth + 1)
    elif value is None or isinstance(value, str | int | float | bool):
        out[_clean(prefix, 80) or "value"] = _clean(
            json.dumps(value) if not isinstance(value, str) else value, _MAX_VALUE_CHARS
        )


class Excerpt(TypedDict, total=False):
    """A bounded excerpt of a purchased response: ``fields`` when ``type`` is ``json``,
    ``text`` when it is ``text``."""

    type: Literal["json", "text"]
    fields: dict[str, str]
    text: str


def excerpt(body: object, text: str = "") -> Excerpt:
    """A bounded, typed excerpt of a purchased response: ``{"type": "json", "fields":
    {dotted.key: value}}`` (at most :data:`MAX_EXCERPT_FIELDS`, values cut to 200 chars)
    or ``{"type": "text", "text": ...}`` (600 chars). Control characters are removed."""
    if isinstance(body, Mapping | list):
        fields: dict[str, str] = {}
        _flatten(body, "", fields, 0)
        return {"type": "json", "fields": fields}
    return {"type": "text", "text": _clean(text, _MAX_TEXT_CHARS)}


_YEAR = re.compile(r"\b(?:1[89]|20)\d\d\b")
_ADDRESS = re.compile(r"^0x[0-9a-fA-F]{40}\Z")
_DECIMAL = re.compile(r"^-?\d+(?:\.\d+)?\Z")
_EMPTY = frozenset({"", "null", "none", "n/a", "unknown", "-"})


def _typed(value: str, type_: FieldType) -> bool:
    """True when ``value`` has the type its field needs (typed field validation)."""
    text = value.strip()
    if text.lower() in _EMPTY:
        return False
    if type_ == "year":
        return bool(_YEAR.search(text))
    if type_ == "count":
        return text.isdigit()
    if type_ == "address":
        return bool(_ADDRESS.match(text))
    if type_ == "number":
        return bool(_DECIMAL.match(text))
    return len(text) <= _MAX_VALUE_CHARS and not _DECIMAL.match(text)


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.rsplit(".", 1)[-1].lower()).strip("_")


def _schema_hints(schema: Mapping[str, object] | None) -> dict[str, str]:
    """Seller field -> nib field, from a declared output schema's property descriptions
    (a hint: used only for a field whose own name says nothing nib knows)."""
    props = (schema or {}).get("properties") if isinstance(schema, Mapping) else None
    out: dict[str, str] = {}
    if not isinstance(props, Mapping):
        return out
    for prop, spec in props.items():
        desc = str(spec.get("description", "")).lower() if isinstance(spec, Mapping) else ""
        words = set(re.findall(r"[a-z]+", desc))
        for _kind, (_need, meanings) in KIND_MEANINGS.items():
            for m in meanings:
                names = {m.name, *m.aliases}
                if any(set(n.split("_")) <= words for n in names):
                    out.setdefault(_norm(str(prop)), m.name)
    return out


def canonical_fields(
    fields: Mapping[str, str], schema: Mapping[str, object] | None = None
) -> dict[str, str]:
    """A response's fields under nib's names (:data:`KIND_MEANINGS`), each value checked
    for its type: by the field's own name first, then the declared schema's hint. Fields
    that mean nothing nib knows, or whose value has the wrong type, are left out."""
    by_name = {
        n: m for _k, (_need, ms) in KIND_MEANINGS.items() for m in ms for n in (m.name, *m.aliases)
    }
    types = {m.name: m.type for _k, (_need, ms) in KIND_MEANINGS.items() for m in ms}
    hints = _schema_hints(schema)
    out: dict[str, str] = {}
    for key, value in fields.items():
        name = _norm(key)
        meaning = by_name.get(name)
        canon = meaning.name if meaning is not None else hints.get(name)
        if canon and canon not in out and _typed(str(value), types[canon]):
            out[canon] = str(value)
    return out


def purchase_facts(
    kinds: Iterable[str], body: object, text: str = "", schema: Mapping[str, object] | None = None
) -> tuple[Excerpt, dict[str, str]]:
    """(excerpt, facts) of a purchased response: the facts are the ``kinds`` its fields
    back (by meaning: nib's field names, a seller's own names, or its declared output
    ``schema``), each valued by the backing fields under nib's names ("issuer=Circle")."""
    cut = excerpt(body, text)
    canon = canonical_fields(cut.get("fields") or {}, schema)
    facts: dict[str, str] = {}
    for kind in backed_kinds(kinds, canon):
        names = set(KIND_FIELDS.get(kind, (1, ()))[1])
        parts = [f"{k}={v}" for k, v in canon.items() if k in names]
        facts[kind] = "; ".join(parts)[:_MAX_TEXT_CHARS]
    return cut, facts


def covered_words(kinds: Iterable[str], facts: Mapping[str, str]) -> str:
    """What an answer covered, by the fact ``kinds`` it could cover: a sheet's fields and
    its digest are values of one fact, never counted as facts of their own."""
    kinds = tuple(kinds)
    covered = [k for k in kinds if k in facts]
    if covered:
        return "covers " + ", ".join(covered)
    if kinds:
        them = "it" if len(kinds) == 1 else "them"
        return f"covers none of {', '.join(kinds)} (its answer does not back {them})"
    return "covers no fact (no catalog or declaration names a fact kind for it)"


def backed_kinds(kinds: Iterable[str], fields: Mapping[str, str]) -> tuple[str, ...]:
    """The fact kinds among ``kinds`` that the fields actually back (by meaning and type)."""
    present = set(canonical_fields(fields))
    out = []
    for kind in kinds:
        need, names = KIND_FIELDS.get(kind, (1, ()))
        if sum(1 for n in names if n in present) >= need:
            out.append(kind)
    return tuple(out)
