"""Model providers: the protocol (``base``) and the deterministic scripted double."""

from __future__ import annotations

from agent.models.base import Model, ModelReply, ModelRequest, Purpose, Usage

__all__ = ["Model", "ModelReply", "ModelRequest", "Purpose", "Usage"]
