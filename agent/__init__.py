"""nib's agent: the loop, its limits and profiles, stop reasons, run store and result.

The model proposes, the judge disposes, tools execute. ``run_task`` runs one research
task to its first stop; ``resume`` continues a run paused for a human decision.

The names below are imported on first use (chain.lazy).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from chain.lazy import exports

if TYPE_CHECKING:
    from agent.config import (
        NibSettings,
        load_settings,
    )
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
    from agent.loop.limits import (
        PROFILES,
        PROVENANCE,
        Limits,
        Profile,
        default_profile,
        limits_for,
    )
    from agent.loop.result import (
        FINISHED_STOPS,
        STOP_REASONS,
        AgentResult,
        EvidenceItem,
        SpendSummary,
        StopReason,
        TokenSummary,
    )
    from agent.loop.run import (
        Decision,
        Deps,
        PendingCall,
        RunState,
        resume,
        run_task,
    )
    from agent.models.base import (
        Model,
        ModelReply,
        ModelRequest,
        Purpose,
        Usage,
    )
    from agent.store import (
        EVENT_TYPES,
        RunStore,
    )
    from agent.tools.base import (
        Observation,
        Quote,
        Tool,
        ToolContext,
        ToolKind,
        ToolRegistry,
    )

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

#: Where each exported name lives.
_HOMES = {
    "AgentConfigError": "agent.errors",
    "AgentError": "agent.errors",
    "AgentResult": "agent.loop.result",
    "Decision": "agent.loop.run",
    "Deps": "agent.loop.run",
    "EVENT_TYPES": "agent.store",
    "EvidenceItem": "agent.loop.result",
    "FINISHED_STOPS": "agent.loop.result",
    "Limits": "agent.loop.limits",
    "LoopSignal": "agent.errors",
    "Model": "agent.models.base",
    "ModelReply": "agent.models.base",
    "ModelRequest": "agent.models.base",
    "ModelUnavailable": "agent.errors",
    "NibSettings": "agent.config",
    "Observation": "agent.tools.base",
    "PROFILES": "agent.loop.limits",
    "PROVENANCE": "agent.loop.limits",
    "PendingCall": "agent.loop.run",
    "Profile": "agent.loop.limits",
    "ProposalInvalid": "agent.errors",
    "Purpose": "agent.models.base",
    "Quote": "agent.tools.base",
    "RunState": "agent.loop.run",
    "RunStateError": "agent.errors",
    "RunStore": "agent.store",
    "STOP_REASONS": "agent.loop.result",
    "SpendSummary": "agent.loop.result",
    "StopReason": "agent.loop.result",
    "TokenSummary": "agent.loop.result",
    "Tool": "agent.tools.base",
    "ToolArgsError": "agent.errors",
    "ToolContext": "agent.tools.base",
    "ToolError": "agent.errors",
    "ToolKind": "agent.tools.base",
    "ToolRegistry": "agent.tools.base",
    "Usage": "agent.models.base",
    "default_profile": "agent.loop.limits",
    "limits_for": "agent.loop.limits",
    "load_settings": "agent.config",
    "resume": "agent.loop.run",
    "run_task": "agent.loop.run",
}


__getattr__ = exports(__name__, _HOMES, globals())
