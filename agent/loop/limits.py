"""Every loop threshold in one place: its default, and where the default comes from.

Budgets bound a run (steps, wall clock, spend, tokens); guards stop a run that is
alive but going nowhere. Profiles are named sets of both; the default profile
follows where the model runs (ADR 0058: local endpoint -> ``local-guarded``, hosted
-> ``cost-optimized``) and an explicit profile or flag always wins.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Literal, get_args

from pydantic import TypeAdapter

from agent.errors import AgentConfigError
from judge.spend_bound import spend_bound

__all__ = [
    "PROFILES",
    "PROVENANCE",
    "RENAMED",
    "Limits",
    "Profile",
    "RunProfile",
    "default_profile",
    "limits_for",
    "run_limits",
    "within_task_bound",
]

Profile = Literal["cost-optimized", "quality-first", "local-guarded"]
"""``cost-optimized``: hosted models, where tokens are the scarce resource: the Dr. Nib
envelope. ``quality-first``: more steps, time and tokens for hard tasks on a strong model.
``local-guarded``: local models, where tokens are free but weak models churn: a larger
envelope paired with tight progress guards (ADR 0058's "verify plus a tight guard")."""

RunProfile = Profile | Literal["custom"]
"""The profile a run records: the name of the profile whose values it runs with, or
``custom`` when the user overrode one of that profile's values (a flag, a ``[limits]``
key, a ``NIB_LIMITS__*`` variable, a task's own spend cap) so that no profile names them."""


@dataclass(frozen=True)
class Limits:
    """Budgets and guard thresholds for one run. Money is atomic USDC; time is seconds."""

    # Budgets: hard envelopes.
    max_steps: int = 6
    wall_clock_s: float = 600.0
    spend_cap_atomic: int = 1_000_000
    max_tokens: int = 120_000
    # Guards: progress detectors.
    max_consecutive_failures: int = 3
    duplicate_nudges: int = 1
    novelty_window: int = 3
    novelty_similarity: float = 0.9
    streak_length: int = 4
    oscillation_window: int = 6
    max_consecutive_skips: int = 3
    churn_steps: int = 0
    max_failed_proposals: int = 2
    malformed_retries: int = 1
    replan_every: int = 3
    # Shape of a turn.
    checklist_max_items: int = 5
    batch_max_calls: int = 3
    # Inputs to the judge (it owns the decision; these are the run's envelope).
    per_call_cap_atomic: int = 250_000
    approval_threshold_atomic: int = 500_000
    # A seller's whole response to one request (headers and body), within the wall clock.
    response_deadline_s: float = 30.0
    # Output reserved per model call when projecting the token budget.
    reply_reserve_tokens: int = 512

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise AgentConfigError(f"limit {f.name}={value!r}: expected a number.")
            if value < 0 or (value == 0 and f.name not in ZERO_OK):
                raise AgentConfigError(
                    f"limit {f.name}={value!r} is not allowed; expected a positive number. "
                    f"Fix: set {f.name} to a value > 0, or leave it out for the profile's "
                    f"own ({_profile_values(f.name)})."
                )

    def as_dict(self) -> dict[str, int | float]:
        return asdict(self)

    @classmethod
    def from_saved(cls, saved: Mapping[str, object]) -> Limits:
        """The limits a paused run saved (``as_dict``), each field checked; a renamed limit
        is read under its new name (RENAMED), a name since retired (eth_price_usdc) is
        left out."""
        known = {f.name for f in fields(cls)}
        current = {RENAMED.get(k, k): v for k, v in saved.items()}
        return TypeAdapter(cls).validate_python({k: v for k, v in current.items() if k in known})


#: Limits renamed since runs were saved and config files written (old name -> name): an
#: amount in atomic USDC ends ``_atomic`` (``_usdc`` is whole USDC, as in eth_price_usdc).
#: A paused run, a ``[limits]`` key or a ``NIB_LIMITS__*`` variable under the old name
#: still reads (tests/agent/test_limits.py::test_a_renamed_limit_still_reads_everywhere).
RENAMED: dict[str, str] = {
    "spend_cap_usdc": "spend_cap_atomic",
    "per_call_cap_usdc": "per_call_cap_atomic",
    "approval_threshold_usdc": "approval_threshold_atomic",
}


#: Unless set, the per-call cap is the spend cap / PER_CALL_SHARE and the approval
#: threshold the spend cap / APPROVAL_SHARE (see limits_for).
PER_CALL_SHARE, APPROVAL_SHARE = 4, 2

ZERO_OK = {"duplicate_nudges", "malformed_retries", "approval_threshold_atomic", "churn_steps"}

#: Where each default comes from. "Dr. Nib" is the reference agent loop (seeds), "ADR 0058"
#: the loop-policy decision record, "lesson" the agent-loop lesson; "heuristic" marks values
#: tuned by hand and to be re-tuned from recorded stop reasons.
PROVENANCE: dict[str, str] = {
    "max_steps": "eval traces (nib eval, offline, 65 tasks, 2026-12-01): healthy runs took "
    "2 steps at p95 (3 at most), so 6 keeps 3x headroom; Dr. Nib harness default: research loops run deeper than support bots",
    "wall_clock_s": "Dr. Nib operational ceiling (10 min)",
    "spend_cap_atomic": "Dr. Nib: $1 per task, sandbox + chain spend (USDC and gas)",
    "max_tokens": "Dr. Nib production envelope: 120k tokens in+out",
    "max_consecutive_failures": "Dr. Nib: 3 consecutive failures, escalate, don't spiral",
    "duplicate_nudges": "lesson: nudge once on a repeated call, stop if it happens again",
    "novelty_window": "heuristic: 3 near-identical observations in a row add nothing",
    "novelty_similarity": "heuristic: token-set Jaccard >= 0.9 counts as near-identical",
    "streak_length": "heuristic: the same tool succeeding 4 times in a row, covering nothing new, is churn",
    "oscillation_window": "lesson: keep the last handful of fingerprints; flag a cycle",
    "churn_steps": "ADR 0058: the divergence guard is eval-gated, so off (0) for hosted "
    "models until eval traces of one exist; local-guarded sets it from traces (below)",
    "max_consecutive_skips": "heuristic: 3 skipped proposals in a row means the model is stuck",
    "max_failed_proposals": "Dr. Nib: two failed proposals in a row stop the run",
    "malformed_retries": "Dr. Nib: one minimal-context retry on malformed JSON",
    "replan_every": "Dr. Nib: re-plan from the trajectory every 3rd step",
    "checklist_max_items": "Dr. Nib: up to 5 bare measurable facts",
    "batch_max_calls": "Dr. Nib: up to 3 independent free calls in one batch",
    "per_call_cap_atomic": "heuristic: no single call may take more than a quarter of the cap",
    "approval_threshold_atomic": "heuristic: calls above half the task cap need a human",
    "response_deadline_s": "heuristic: the read timeout pay_http had per read (30 s), now "
    "for a seller's whole response; a slow drip of one byte every few seconds held a run "
    "164 s under the per-read timeout (issue 28)",
    "reply_reserve_tokens": "heuristic: room for one proposal reply when projecting tokens",
}

_LOCAL_GUARDED = Limits(
    # ADR 0058: local generation is free, so time and correctness are the constraints;
    # a weak model churns, so the progress guards are tighter than the hosted default.
    max_steps=10,
    wall_clock_s=1200.0,
    max_tokens=400_000,
    max_consecutive_failures=2,
    novelty_window=2,
    streak_length=3,
    max_consecutive_skips=2,
    # Eval traces (nib eval, offline, 65 tasks, 2026-12-01): the churn streak of the 64
    # healthy runs was 0 at p95 and at most; 3 = p95 + a margin of the three non-covering
    # steps a healthy market run can take by design (a discovery, a purchase from a
    # seller that over-claims, one retried failure); 2 stopped the market test's runs.
    churn_steps=3,
)

PROFILES: dict[Profile, Limits] = {
    "cost-optimized": Limits(),
    "quality-first": Limits(max_steps=12, wall_clock_s=1200.0, max_tokens=300_000, streak_length=5),
    "local-guarded": _LOCAL_GUARDED,
}


def _profile_values(name: str) -> str:
    """``name``'s value in each profile: "cost-optimized 6, quality-first 12, ..."."""
    return ", ".join(f"{p} {getattr(limits, name):g}" for p, limits in PROFILES.items())


def default_profile(model_local: bool) -> Profile:
    """The profile for a model by where it runs (ADR 0058's execution-context proxy)."""
    return "local-guarded" if model_local else "cost-optimized"


def limits_for(
    profile: str | None = None, *, model_local: bool = False, **overrides: float | None
) -> tuple[Profile, Limits]:
    """Resolve a profile name (or the default for the model) plus explicit overrides.

    ``overrides`` with value None are ignored, so unset flags fall through to the profile.
    """
    if profile is None:
        name: Profile = default_profile(model_local)
    elif profile in get_args(Profile):
        name = profile  # type: ignore[assignment]
    else:
        raise AgentConfigError(
            f"profile {profile!r} is unknown; expected one of: {', '.join(get_args(Profile))}. "
            "Fix: pick one of those or leave the profile unset to choose by model location.",
            source="profile",
        )
    known = {f.name for f in fields(Limits)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        renamed = "".join(f" ({k} is now {RENAMED[k]})" for k in unknown if k in RENAMED)
        raise AgentConfigError(
            f"unknown limit(s) {', '.join(unknown)}{renamed}; expected some of: "
            f"{', '.join(sorted(known))}."
        )
    chosen = {k: v for k, v in overrides.items() if v is not None}
    cap = chosen.get("spend_cap_atomic", PROFILES[name].spend_cap_atomic)
    # Unless set, the per-call cap and the approval threshold follow the spend cap (a
    # quarter and a half of it, PROVENANCE): a 5 USDC task may buy a 1.25 USDC fact sheet.
    chosen.setdefault("per_call_cap_atomic", cap // PER_CALL_SHARE)
    chosen.setdefault("approval_threshold_atomic", cap // APPROVAL_SHARE)
    # asdict + the overrides, not replace(**chosen): the fields mix int and float, so a
    # name-keyed dict has no one static type; __post_init__ checks each value, as before.
    return name, Limits(**(asdict(PROFILES[name]) | chosen))


def run_limits(
    profile: str | None, limits: Limits | None, *, model_local: bool
) -> tuple[RunProfile, Limits]:
    """The profile a run records and the limits it runs with.

    ``profile`` is the profile applied (None: the default for where the model runs) and
    ``limits`` the values resolved from it with any overrides (None: the profile's own).
    The run records the profile by name when its values are that profile's, an override
    equal to the profile's own value included, and ``custom`` only when an override
    changed one of them."""
    name, own = limits_for(profile, model_local=model_local)
    if limits is None:
        return name, own
    return (name if limits == own else "custom"), limits


def within_task_bound(limits: Limits, task: str) -> Limits:
    """``limits`` with the spend cap lowered to the bound the task's own words set on its
    spending ("don't spend more than 0.20 USDC", judge/spend_bound.py), whatever the model
    proposes; never raised (a bound above the cap leaves the cap)."""
    bound = spend_bound(task)
    if bound is None or bound.atomic >= limits.spend_cap_atomic:
        return limits
    return replace(limits, spend_cap_atomic=bound.atomic)
