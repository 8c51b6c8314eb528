"""Model providers: the protocol, the hosted/local LLM adapters, the offline planner and the
scripted double. ``model_from_config`` picks one from settings (offline when nothing is set)."""

from __future__ import annotations

from agent.models.anthropic import AnthropicModel
from agent.models.base import Model, ModelReply, ModelRequest, Purpose, Usage
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
