"""A deterministic model double that replays scripted replies, per purpose.

Tests and benchmarks drive the real loop with it. Replies may be strings, dicts
(sent as JSON), exceptions (raised, e.g. ModelUnavailable for fault tests) or
callables of the request. Token usage is counted with agent.loop.tokens (estimated).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence

from agent.jsonvalues import as_list, as_object
from agent.loop.tokens import count_messages, count_text
from agent.models.base import ModelReply, ModelRequest, Purpose, Usage

__all__ = ["DEFAULT_REPLIES", "Reply", "ScriptedModel"]

Reply = str | Mapping[str, object] | BaseException | Callable[[ModelRequest], object]
"""A scripted reply: text, a JSON object (sent as JSON), an exception (raised) or a
callable of the request returning one of those."""

#: What a purpose answers once its script runs out. ``propose`` has no default: a test
#: that runs past its script fails loudly instead of silently changing behaviour.
DEFAULT_REPLIES: dict[str, Reply] = {
    "checklist": {"items": []},
    "replan": "Continue with the first uncovered checklist item.",
    "synthesize": lambda req: _synthesis(req),
    "lesson": "1",
}


def _synthesis(request: ModelRequest) -> str:
    evidence = [as_object(e) for e in as_list(request.context.get("evidence"))]
    if not evidence:
        return "No evidence was gathered."
    return "; ".join(f"{e['summary']} [{e['id']}]" for e in evidence)


class ScriptedModel:
    """Replays ``replies`` per purpose (a mapping purpose -> list) or via one callable.

    ``calls`` records every request; ``usage`` totals the estimated tokens.
    """

    def __init__(
        self,
        replies: Mapping[str, Sequence[Reply]] | Callable[[ModelRequest], object],
        *,
        name: str = "scripted",
        local: bool = False,
        defaults: Mapping[str, Reply] | None = None,
    ) -> None:
        self.name = name
        self.local = local
        self._fn = replies if callable(replies) else None
        self._queues: dict[str, list[Reply]] = (
            {} if callable(replies) else {k: list(v) for k, v in replies.items()}
        )
        self._defaults = dict(DEFAULT_REPLIES if defaults is None else defaults)
        self.calls: list[ModelRequest] = []
        self.input_tokens = 0
        self.output_tokens = 0

    def calls_for(self, purpose: Purpose) -> list[ModelRequest]:
        return [c for c in self.calls if c.purpose == purpose]

    def _next(self, request: ModelRequest) -> Reply:
        if self._fn is not None:
            return self._fn
        queue = self._queues.get(request.purpose)
        if queue:
            return queue.pop(0)
        if request.purpose in self._defaults:
            return self._defaults[request.purpose]
        raise RuntimeError(
            f"ScriptedModel ran out of {request.purpose!r} replies after "
            f"{len(self.calls_for(request.purpose)) - 1}; add more to the script."
        )

    async def complete(self, request: ModelRequest) -> ModelReply:
        self.calls.append(request)
        scripted = self._next(request)
        reply = (
            scripted(request)
            if callable(scripted) and not isinstance(scripted, BaseException)
            else scripted
        )
        if isinstance(reply, BaseException):
            raise reply
        text = reply if isinstance(reply, str) else json.dumps(reply)
        usage = Usage(count_messages(request.messages), count_text(text), estimated=True)
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        return ModelReply(text=text, usage=usage)
