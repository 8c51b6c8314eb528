"""Model providers: the protocol, the hosted/local LLM adapters, the offline planner and the
scripted double. ``model_from_config`` picks one from settings (offline when nothing is set).

The names below are imported on first use (chain.lazy).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from chain.lazy import exports

if TYPE_CHECKING:
    from agent.models.anthropic import AnthropicModel
    from agent.models.base import (
        Model,
        ModelReply,
        ModelRequest,
        Purpose,
        Usage,
    )
    from agent.models.factory import model_from_config
    from agent.models.offline import OfflinePlanner
    from agent.models.openai_compat import OpenAICompatModel
    from agent.models.scripted import ScriptedModel

__all__ = [
    "AnthropicModel",
    "Model",
    "ModelReply",
    "ModelRequest",
    "OfflinePlanner",
    "OpenAICompatModel",
    "Purpose",
    "ScriptedModel",
    "Usage",
    "model_from_config",
]

#: Where each exported name lives.
_HOMES = {
    "AnthropicModel": "agent.models.anthropic",
    "Model": "agent.models.base",
    "ModelReply": "agent.models.base",
    "ModelRequest": "agent.models.base",
    "OfflinePlanner": "agent.models.offline",
    "OpenAICompatModel": "agent.models.openai_compat",
    "Purpose": "agent.models.base",
    "ScriptedModel": "agent.models.scripted",
    "Usage": "agent.models.base",
    "model_from_config": "agent.models.factory",
}


__getattr__ = exports(__name__, _HOMES, globals())
