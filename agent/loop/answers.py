"""Answer lines that read as answers: each checklist item's asked value first, in the unit
asked ("Circle", "0.0317 gwei at block 27"), then how it was reached and its evidence.

A bought sheet is cited, not pasted: an item that asks one field of it ("who issues
USDC?") shows that field; an item that asks for the whole sheet shows a short excerpt and
the evidence id. The same lines complete a model's final text that leaves a covered
value out (an empty, junk or partial summary still carries what the evidence holds).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING

from agent.loop.history import one_line

if TYPE_CHECKING:
    from agent.loop.result import EvidenceItem

__all__ = [
    "asked_value",
    "computed_unit",
    "fit_line",
    "in_unit",
    "item_line",
    "sheet_field",
    "with_covered_values",
    "with_own_unit",
    "with_paid_for_nothing",
]

_VALUE_CHARS = 160
#: A transaction hash or an address, whole (no hex digit after it).
_HEX_ID = re.compile(r"0x(?:[0-9a-fA-F]{64}|[0-9a-fA-F]{40})(?![0-9a-fA-F])")
#: What stands for one while the text around it is shortened (a private-use character).
_STAND_IN = "\ue000"
#: Room for every field of a sheet asked for whole (its statistics, what it contains).
_CONTENTS_CHARS = 600
#: A sheet field's unit, from the word of its name that says it ("base_fee_gwei_mean",
#: "volume_usdc", "block_time_s_mean"); a field naming none (a count, gas) shows none.
_FIELD_UNITS = {"gwei": "gwei", "usdc": "USDC", "s": "s"}
#: A bare number: a unit is added to it only (a value stating its own is shown as stated).
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_PAIR = re.compile(r"(?:^|;\s*)([\w.\[\]]+)=")
#: Fact kinds whose value is an amount of USDC ("1.50 USDC", "0.35 USDC from ...").
_USDC_KINDS = ("usdc_balance", "token_supply", "transfer_max", "usdc_sent_total",
               "usdc_received_total")  # fmt: skip


def fit_line(text: str, limit: int) -> str:
    """``text`` on one line, its words bounded by ``limit`` characters as ``one_line`` bounds
    them, except that a transaction hash or an address is never cut and not counted: the
    other text is shortened instead (outside test 21, Q6: "... in block 10 (tx…" named no
    transaction, in the text answer and in ``--json``'s)."""
    found = _HEX_ID.findall(text)
    if not found:
        return one_line(text, limit)
    if _STAND_IN in text:  # cannot stand in for them: whole, unbounded
        return " ".join(text.split())
    whole = iter(found)
    return re.sub(_STAND_IN, lambda _m: next(whole), one_line(_HEX_ID.sub(_STAND_IN, text), limit))


def sheet_fields(value: str) -> dict[str, str]:
    """``"issuer=Circle; launched=2018"`` as ``{"issuer": "Circle", "launched": "2018"}``
    (a key keeps its last dotted segment)."""
    marks = list(_PAIR.finditer(value))
    out: dict[str, str] = {}
    for n, m in enumerate(marks):
        end = marks[n + 1].start() if n + 1 < len(marks) else len(value)
        out[m.group(1).rsplit(".", 1)[-1].lower()] = value[m.end() : end].strip()
    return out


def sheet_field(value: str | None, field: str) -> str | None:
    """The value of ``field`` in a bought sheet's fact value, or None when it is absent."""
    found = sheet_fields(value or "").get(field.lower())
    return found if found not in (None, "", "null") else None


#: Units an answer may be asked in, per fact kind: (the unit's name, the power of ten from
#: the fact's own unit, whether the tool's result states the value in that unit too). A
#: stated unit is given first on the observed line ("597484432 wei (0.597484432 gwei)");
#: any other (cents, a fee in ether) is computed, on a derived line of its own.
_CONVERSIONS: dict[tuple[str, str], tuple[str, int, bool]] = {
    ("base_fee_gwei", "wei"): ("wei", 9, True),
    ("gas_price_gwei", "wei"): ("wei", 9, True),
    ("base_fee_gwei", "ether"): ("ether", -9, False),
    ("base_fee_gwei", "eth"): ("ETH", -9, False),
    ("gas_price_gwei", "ether"): ("ether", -9, False),
    ("gas_price_gwei", "eth"): ("ETH", -9, False),
    ("eth_balance", "wei"): ("wei", 18, True),
    ("eth_balance", "gwei"): ("gwei", 9, True),
    # A fee is stated in ETH ("0.0000784 ETH (51522 gas at 1.52 gwei)"), a price in gwei.
    ("tx_fee", "gwei"): ("gwei", 9, False),
    ("tx_fee", "wei"): ("wei", 18, False),
    ("tx_gas_price", "wei"): ("wei", 9, False),
    ("tx_gas_price", "eth"): ("ETH", -9, False),
    ("tx_gas_price", "ether"): ("ether", -9, False),
    **{(kind, "atomic"): ("atomic units", 6, kind != "transfer_max") for kind in _USDC_KINDS},
    # 1 USDC = 100 cents: the atomic amount (6 decimals) / 10^4, so a cent may have decimals.
    **{(kind, "cents"): ("cents", 2, False) for kind in _USDC_KINDS},
}
#: The value's number, at its start: "none: no USDC transfers in blocks 5..9" has none.
_LEADING = re.compile(r"\s*(-?\d+(?:\.\d+)?)")


def in_unit(kind: str, unit: str, value: str) -> str | None:
    """``value`` (in the fact's own unit) in ``unit``, exact (a Decimal of the value the
    tool states, shifted by a power of ten; never a float), or None when it has none."""
    conv = _CONVERSIONS.get((kind, unit))
    m = _LEADING.match(value.replace(",", ""))
    if conv is None or m is None:
        return None
    name, power, _stated = conv
    scaled = Decimal(m.group(1)).scaleb(power)
    return f"{scaled.normalize():f} {name}"


#: The unit a fact kind's bare number is in, when it has one (a count has none).
_OWN_UNITS = {"base_fee_gwei": "gwei", "gas_price_gwei": "gwei", "block_gas_used": "gas",
              "block_gas_limit": "gas", "tx_gas_price": "gwei"}  # fmt: skip
#: Block facts shown as the tool states them, then their block: a count (no unit), and a
#: block's fullness, which states its own basis ("0.24% (72390 of 30000000 gas)").
_BLOCK_VALUES = frozenset({"block_tx_count", "block_fullness"})


def with_own_unit(kind: str, value: str) -> str:
    """``value`` with its own unit when the tool states a bare number (a fee in gwei, a
    block's gas used in gas)."""
    unit = _OWN_UNITS.get(kind)
    return f"{value} {unit}" if unit and _NUMBER.fullmatch(value) else value


def _with_field_unit(field: str, value: str) -> str:
    """A bought sheet's ``field`` value with the unit its name says (``_FIELD_UNITS``)
    when the sheet states a bare number: "100.1 USDC" for volume_usdc, "0.96 gwei" for
    base_fee_gwei_mean."""
    units = [_FIELD_UNITS[w] for w in field.lower().split("_") if w in _FIELD_UNITS]
    return f"{value} {units[0]}" if units and _NUMBER.fullmatch(value) else value


def computed_unit(kind: str, unit: str) -> bool:
    """True when ``kind``'s value in ``unit`` is computed here, not stated by its tool."""
    conv = _CONVERSIONS.get((kind, unit))
    return conv is not None and not conv[2]


def _converted(kind: str, unit: str, value: str) -> str | None:
    """``value`` in ``unit`` when its tool states it in that unit too, else None."""
    conv = _CONVERSIONS.get((kind, unit))
    return in_unit(kind, unit, value) if conv is not None and conv[2] else None


#: Kinds whose value is a state of the block read (a token's name or decimals is not):
#: read at the head, their answer names that block.
_CHANGES_WITH_BLOCK = frozenset({"base_fee_gwei", "block_timestamp", "block_gas_used",
                                 "block_gas_limit", "block_tx_count", "block_fullness", "eth_balance",
                                 "usdc_balance", "token_supply", "gas_price_gwei"})


def asked_value(item: Mapping[str, object]) -> str:
    """A covered item's value as the task asked for it (its unit, its field, its block)."""
    value = str(item.get("value") or "")
    kind = item.get("kind")
    given = item.get("params")
    params: Mapping[str, object] = given if isinstance(given, Mapping) else {}
    shown = _asked_value(value, str(kind or ""), params)
    if not params.get("block") and item.get("read_at") and kind in _CHANGES_WITH_BLOCK:
        # Asked of the latest block: the answer names the block it was read at.
        return f"{shown} at block {item['read_at']}, the latest"
    return shown


def _asked_value(value: str, kind: str, params: Mapping[str, object]) -> str:
    field = params.get("field")
    if field:
        got = sheet_field(value, str(field))
        if got is None:
            return fit_line(value, _VALUE_CHARS)
        return _with_field_unit(str(field), got)
    unit = str(params.get("unit") or "")
    converted = _converted(str(kind), unit, value) if unit else None
    if converted is not None:
        own = with_own_unit(str(kind), value)
        block = params.get("block")
        return f"{converted} ({own})" + (f" at block {block}" if block else "")
    if kind in _OWN_UNITS or kind in _BLOCK_VALUES:
        block = params.get("block")
        return with_own_unit(str(kind), value) + (f" at block {block}" if block else "")
    if kind in ("block_timestamp", "tx_time") and value.isdigit():
        # Both clocks, the one asked first: a bare "when" gets the time a reader reads too.
        iso = datetime.fromtimestamp(int(value), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        shown = f"{value} (unix seconds; {iso})"
        if params.get("unit") == "utc":
            shown = f"{iso} ({value} unix seconds)"
        return shown + (f" at block {params['block']}" if params.get("block") else "")
    if kind == "block_number" and params.get("block"):
        return value
    if kind == "transfer_list":
        # Each transfer, whole: the tool lists at most MAX_LISTED_TRANSFERS, and a list cut
        # short would drop transfers at exit 0.
        return " ".join(value.split())
    if kind in ("token_factsheet", "protocol_factsheet", "gas_stats", "transfer_stats"):
        # The sheet asked for whole (its statistics, or what a bought sheet contains):
        # every field, each with the unit its name says (`nib show` has the raw answer).
        fields = sheet_fields(value)
        if fields:
            return fit_line("; ".join(f"{k} {_with_field_unit(k, v)}" for k, v in fields.items()),
                            _CONTENTS_CHARS)
    return fit_line(value, _VALUE_CHARS)


def item_line(item: Mapping[str, object]) -> str:
    """One covered item's answer line: the asked value, then provenance and evidence. A
    condition (a yes/no question about one value) answers yes or no first."""
    text = str(item.get("text") or item.get("kind") or "")
    if item.get("provenance") == "derived":
        value = str(item.get("value"))
        if item.get("kind") == "condition" and value in _VERDICTS:
            value = _VERDICTS[value]
        shown = fit_line(value, _VALUE_CHARS)
        # Its inputs read at one latest block: "(derived at block 7, the latest: ...)".
        at = f" at block {item['read_at']}, the latest" if item.get("read_at") else ""
        return f"{_label_in_unit(text, shown)}: {shown} (derived{at}: {item.get('computation')})"
    shown = asked_value(item)
    params = item.get("params")
    block = params.get("block") if isinstance(params, Mapping) else None
    if block and re.search(rf"\bblock {re.escape(str(block))}\b", text):
        # The label names the block already ("base fee at block 8"): said once.
        shown = shown.replace(f" at block {block}", "", 1)
    label = _label_in_range(_label_in_unit(text, shown), shown, item.get("read_range"))
    return f"{label}: {shown} (observed, evidence {item.get('evidence_id')})"


#: A condition's value as the answer to the yes/no question it is.
_VERDICTS = {"true": "yes", "false": "no"}
#: Blocks ``first``..``last`` as a label or a value may already name them.
_RANGE_SAID = r"\bblocks?\s+{0}\s*(?:\.\.|to|through|-|–|and)\s*{1}\b"


def _label_in_range(label: str, shown: str, read_range: object) -> str:
    """``label`` naming the blocks its value was read over ("USDC transfer count in the last
    20 blocks (blocks 0 to 11)") unless it or the value names them already ("in blocks 4 to
    10", "..., blocks 0..11"): a window in the task's words says which blocks were read
    (outside test 21, Q7, counted "in the last 20 blocks" naming none)."""
    first, sep, last = str(read_range or "").partition("..")
    if not (first.isdigit() and sep and last.isdigit()):
        return label
    said = re.compile(_RANGE_SAID.format(first, last), re.IGNORECASE)
    if said.search(label) or said.search(shown):
        return label
    return f"{label} (blocks {first} to {last})"


#: A unit in a label's parentheses, as a model may write it ("Base fee (gwei)").
_LABEL_UNIT = re.compile(r"\((gwei|wei|ether|eth|usdc|cents|atomic units)\)", re.IGNORECASE)
#: The unit a shown value is stated in first ("400507877 wei (0.4 gwei)": wei).
_SHOWN_UNIT = re.compile(r"\s*-?\d[\d,]*(?:\.\d+)?\s+(gwei|wei|ether|eth|usdc|cents|atomic units)\b",
                         re.IGNORECASE)


def _label_in_unit(label: str, shown: str) -> str:
    """``label`` naming the unit ``shown`` is stated in: a model's "Base fee (gwei)" over a
    value asked in wei would say gwei beside a number of wei (outside test 15, Q4)."""
    said, stated = _LABEL_UNIT.search(label), _SHOWN_UNIT.match(shown)
    if said is None or stated is None or said[1].lower() == stated[1].lower():
        return label
    return f"{label[: said.start(1)]}{stated[1]}{label[said.end(1) :]}"


def _states(answer: str, item: Mapping[str, object]) -> bool:
    """True when ``answer`` already states the item's asked value."""
    shown = asked_value(item)
    core = shown.split(" (", 1)[0].split(" at block", 1)[0]
    core = core.split(" gwei", 1)[0].split(" gas", 1)[0].strip()
    return bool(core) and core.lower() in answer.lower()


def with_covered_values(answer: str, items: Iterable[Mapping[str, object]]) -> str:
    """``answer`` with a line for every covered item whose asked value it does not state
    (a model's empty, junk or partial summary still carries the evidence's values)."""
    extra = [item_line(i) for i in items if i.get("covered") and not _states(answer, i)]
    if not extra:
        return answer
    return "\n".join([answer.rstrip(), *extra]) if answer.strip() else "\n".join(extra)


_PAID_TOOLS = frozenset({"pay_http", "pay_mcp"})


def with_paid_for_nothing(answer: str, evidence: Iterable[EvidenceItem]) -> str:
    """``answer`` with a line for every purchase of the run that delivered no fact and that
    it does not name already: money paid for nothing is said in the answer, never only in
    the evidence (the outside tester's S03 paid 0.005 USDC for nothing, unmentioned)."""
    extra = []
    for ev in evidence:
        if ev.tool not in _PAID_TOOLS or ev.cost_usdc <= 0 or ev.facts:
            continue
        what = re.split(r":\s*\d+ facts?\b", ev.summary)[0]
        if what in answer or f"evidence {ev.id})" in answer:
            continue
        extra.append(f"a purchase that delivered nothing: {ev.summary} (evidence {ev.id})")
    return "\n".join([answer, *extra]) if extra else answer
