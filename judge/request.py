"""The request the judge rules on: one money-moving call and everything weighed for it
(amounts in atomic units), and the run's earlier calls it carries. Built by the agent,
read by the judge, and bound to a task's registered limits by ``judge.tasks.bind``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import NamedTuple

from judge.errors import JudgeRequestInvalid
from judge.fingerprint import is_fingerprint
from judge.wire import wire_list, wire_object

__all__ = ["MAX_NAMES", "MAX_NAME_CHARS", "WIRE_NAMES", "CallRecord", "PaidCallRequest"]

#: The most fact kinds or checklist items a request names in each of ``missing``,
#: ``covered`` and ``tool_facts`` (a checklist holds at most a handful), and the longest
#: each may be (a checklist item's text is at most 200 characters): what a verdict's
#: record, and the outcomes held for it (judge.held), can hold per verdict.
MAX_NAMES = 32
MAX_NAME_CHARS = 200

#: The money limits' names on the judge's wire and in its tables -> the fields' names. A
#: field in atomic USDC ends ``_atomic`` (as agent.loop.limits.Limits says); the wire and
#: the stored columns keep the names a judge service or database of an earlier version
#: reads, and a body under either name is read (tests/judge/test_judge_tasks.py).
WIRE_NAMES: dict[str, str] = {
    "spend_cap": "spend_cap_atomic",
    "per_call_cap": "per_call_cap_atomic",
    "approval_threshold": "approval_threshold_atomic",
}


class CallRecord(NamedTuple):
    """One earlier call of the run: which tool, whether it worked, what it covered, cost."""

    tool: str
    ok: bool
    covered: tuple[str, ...] = ()
    cost: int = 0


def _nonneg_int(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise JudgeRequestInvalid(
            f"found {name}={value!r}; expected an int >= 0 in atomic units; "
            f"fix: pass {name} as an int (USDC has 6 decimals: 1 USDC = 1_000_000)."
        )


@dataclass(frozen=True)
class PaidCallRequest:
    """Everything the judge weighs for one money-moving call (amounts in atomic units).

    ``missing`` / ``covered`` are the checklist items still open / already matched;
    ``tool_facts`` the fact kinds the tool declares it can provide. Items and facts
    match by :func:`~judge.calibration.fact_key` ("base fee gwei" == "base_fee_gwei").
    ``checklist_size`` defaults to ``len(missing) + len(covered)``.
    ``known_recipients``: when given (a direct transfer), the only addresses this call may
    pay (the ones the task names or the user allowlisted), compared case-insensitively;
    any other recipient is refused. ``None`` (the default, and x402 purchases whose
    sellers are allowlisted by URL) skips the check.
    ``seller`` names who is paid for the data (an x402 seller's origin): p is then kept
    per (tool at seller, fact kind) and starts at ``NEW_SELLER_PRIOR`` unless coverage
    is declared. ``alternatives`` are other quoted offers for the same missing items:
    the judge rules on the one with the highest EV and names the others in its reason.
    """

    tool: str
    args: Mapping[str, object] = field(hash=False)
    call_fingerprint: str
    payload_fingerprint: str
    price: int
    asset: str
    recipient: str
    chain_id: int
    remaining_budget: int
    balance: int
    per_call_cap_atomic: int
    spend_cap_atomic: int
    approval_threshold_atomic: int | None = None
    missing: tuple[str, ...] = ()
    covered: tuple[str, ...] = ()
    tool_facts: tuple[str, ...] = ()
    declared_coverage: Decimal | None = None
    history: tuple[CallRecord, ...] = ()
    checklist_size: int | None = None
    known_recipients: tuple[str, ...] | None = None
    seller: str | None = None
    alternatives: tuple[PaidCallRequest, ...] = ()
    task_id: str | None = None
    payload: Mapping[str, object] | None = field(default=None, hash=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("missing", "covered", "tool_facts", "alternatives"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        for name in ("missing", "covered", "tool_facts"):
            names = getattr(self, name)
            if len(names) > MAX_NAMES or any(
                not isinstance(n, str) or len(n) > MAX_NAME_CHARS for n in names
            ):
                raise JudgeRequestInvalid(
                    f"found {name} of {len(names)} entries (the longest "
                    f"{max((len(str(n)) for n in names), default=0)} characters); expected at "
                    f"most {MAX_NAMES} fact kinds or checklist items of at most "
                    f"{MAX_NAME_CHARS} characters each; fix: name the task's own items (a "
                    "checklist holds a few), each as its kind."
                )
        for alt in self.alternatives:
            if not isinstance(alt, PaidCallRequest) or alt.alternatives:
                raise JudgeRequestInvalid(
                    f"found an alternative {type(alt).__name__} "
                    f"{'with alternatives of its own' if isinstance(alt, PaidCallRequest) else ''}; "
                    "expected PaidCallRequest offers without nested alternatives; fix: list "
                    "every offer once, on the proposed call."
                )
        if self.known_recipients is not None:
            if isinstance(self.known_recipients, str) or not all(
                isinstance(a, str) for a in self.known_recipients
            ):
                raise JudgeRequestInvalid(
                    f"found known_recipients={self.known_recipients!r}; expected a list of "
                    "0x addresses or None; fix: pass the addresses as a tuple of strings."
                )
            object.__setattr__(self, "known_recipients", tuple(self.known_recipients))
        object.__setattr__(
            self,
            "history",
            tuple(CallRecord(*h) if not isinstance(h, CallRecord) else h for h in self.history),
        )
        if isinstance(self.declared_coverage, float):
            raise JudgeRequestInvalid(
                f"found declared_coverage={self.declared_coverage!r} (float); expected a "
                "Decimal or decimal string; fix: declare coverage as Decimal('0.8')."
            )
        if self.declared_coverage is not None:
            object.__setattr__(self, "declared_coverage", Decimal(self.declared_coverage))
        for name in (
            "price", "remaining_budget", "balance", "per_call_cap_atomic", "spend_cap_atomic"
        ):
            _nonneg_int(name, getattr(self, name))
        if self.approval_threshold_atomic is not None:
            _nonneg_int("approval_threshold_atomic", self.approval_threshold_atomic)
        if isinstance(self.chain_id, bool) or not isinstance(self.chain_id, int):
            raise JudgeRequestInvalid(
                f"found chain_id={self.chain_id!r}; expected an int; fix: pass e.g. 31337."
            )
        if self.checklist_size is not None:
            _nonneg_int("checklist_size", self.checklist_size)
        for name in ("call_fingerprint", "payload_fingerprint"):
            if not is_fingerprint(getattr(self, name)):
                raise JudgeRequestInvalid(
                    f"found {name}={getattr(self, name)!r}; expected 0x + 64 lower-case hex; "
                    "fix: compute it with judge.fingerprint."
                )
        cov = self.declared_coverage
        if cov is not None and not (cov.is_finite() and 0 <= cov <= 1):
            raise JudgeRequestInvalid(
                f"found declared_coverage={cov}; expected a probability in [0, 1]; "
                "fix: fix the tool's declared coverage."
            )

    def to_wire(self) -> dict[str, object]:
        """JSON-ready dict (the service's request body)."""
        return {
            "tool": self.tool,
            "args": dict(self.args),
            "call_fingerprint": self.call_fingerprint,
            "payload_fingerprint": self.payload_fingerprint,
            "price": self.price,
            "asset": self.asset,
            "recipient": self.recipient,
            "chain_id": self.chain_id,
            "remaining_budget": self.remaining_budget,
            "balance": self.balance,
            # The wire keeps the names a judge service of an earlier version reads (WIRE_NAMES).
            "per_call_cap": self.per_call_cap_atomic,
            "spend_cap": self.spend_cap_atomic,
            "approval_threshold": self.approval_threshold_atomic,
            "missing": list(self.missing),
            "covered": list(self.covered),
            "tool_facts": list(self.tool_facts),
            "declared_coverage": (
                None if self.declared_coverage is None else str(self.declared_coverage)
            ),
            "history": [list(h[:2]) + [list(h.covered), h.cost] for h in self.history],
            "checklist_size": self.checklist_size,
            # Sent only when set, so a judge service that predates the field still parses.
            **(
                {"known_recipients": list(self.known_recipients)}
                if self.known_recipients is not None
                else {}
            ),
            **({"seller": self.seller} if self.seller is not None else {}),
            **({"task_id": self.task_id} if self.task_id is not None else {}),
            **({"payload": dict(self.payload)} if self.payload is not None else {}),
            **(
                {"alternatives": [a.to_wire() for a in self.alternatives]}
                if self.alternatives
                else {}
            ),
        }

    @classmethod
    def from_wire(cls, data: Mapping[str, object]) -> PaidCallRequest:
        """Parse :meth:`to_wire` output; raises JudgeRequestInvalid on bad fields."""
        try:
            fields = {WIRE_NAMES.get(k, k): v for k, v in data.items()}
            if fields.get("declared_coverage") is not None:
                fields["declared_coverage"] = Decimal(str(fields["declared_coverage"]))
            fields["history"] = tuple(
                _call_record(h) for h in wire_list("history", fields.get("history", ()))
            )
            fields["alternatives"] = tuple(
                cls.from_wire(wire_object("alternative", a))
                for a in wire_list("alternatives", fields.get("alternatives", ()))
            )
            # Wire values: __post_init__ checks every money, fingerprint and list field.
            return cls(**fields)  # type: ignore[arg-type]
        except JudgeRequestInvalid:
            raise
        except (TypeError, ValueError, ArithmeticError) as exc:
            raise JudgeRequestInvalid(
                f"found a malformed paid-call request ({exc}); expected the fields of "
                "judge.request.PaidCallRequest; fix: send PaidCallRequest.to_wire()."
            ) from exc


def _call_record(entry: object) -> CallRecord:
    """One history entry from the wire: ``[tool, ok, covered, cost]``."""
    tool, ok, covered, cost = wire_list("history entry", entry)
    if isinstance(cost, bool) or not isinstance(cost, int | str):
        raise TypeError(f"history cost must be an int, found {cost!r}")
    kinds = tuple(str(k) for k in wire_list("history covered", covered))
    return CallRecord(str(tool), bool(ok), kinds, int(cost))
