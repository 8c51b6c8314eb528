"""nib's agent: the loop, its limits and profiles, stop reasons, run store and result.

The model proposes, the judge disposes, tools execute. ``run_task`` runs one research
task to its first stop; ``resume`` continues a run paused for a human decision.
"""

from __future__ import annotations

from agent.config import NibSettings, load_settings
from agent.errors import (
    AgentConfigError,
    AgentError,
    LoopSignal,
    ModelUnavailable,
    ProposalInvalid,
    RunStateError,
    ToolArgsError,
    ToolError,
)
from agent.loop.limits import PROFILES, PROVENANCE, Limits, Profile, default_profile, limits_for
from agent.loop.result import (
    FINISHED_STOPS,
    STOP_REASONS,
    AgentResult,
    EvidenceItem,
    SpendSummary,
    StopReason,
    TokenSummary,
)
from agent.loop.run import Decision, Deps, PendingCall, RunState, resume, run_task
from agent.models.base import Model, ModelReply, ModelRequest, Purpose, Usage
from agent.store import EVENT_TYPES, RunStore
from agent.tools.base import Observation, Quote, Tool, ToolContext, ToolKind, ToolRegistry

__all__ = [
    "AgentConfigError",
    "AgentError",
    "AgentResult",
    "Decision",
    "Deps",
    "EVENT_TYPES",
    "EvidenceItem",
    "FINISHED_STOPS",
    "Limits",
    "LoopSignal",
    "Model",
    "ModelReply",
    "ModelRequest",
    "ModelUnavailable",
    "NibSettings",
    "Observation",
    "PROFILES",
    "PROVENANCE",
    "PendingCall",
    "Profile",
    "ProposalInvalid",
    "Purpose",
    "Quote",
    "RunState",
    "RunStateError",
    "RunStore",
    "STOP_REASONS",
    "SpendSummary",
    "StopReason",
    "TokenSummary",
    "Tool",
    "ToolArgsError",
    "ToolContext",
    "ToolError",
    "ToolKind",
    "ToolRegistry",
    "Usage",
    "default_profile",
    "limits_for",
    "load_settings",
    "resume",
    "run_task",
]
