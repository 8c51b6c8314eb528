"""``nib run`` with a scripted model: the same composition root, task registration and
confinement as the command (agent/cli/commands/runs.py ``run_cmd``), against the devnet and
the services ``nib devnet up`` started, but the model's replies come from the config, so a
test can have a run propose a call the offline planner never makes (a paid MCP tool).

Usage: NIB_HOME=... python scripted_nib_run.py CONFIG_JSON, where CONFIG_JSON is
``{"task": ..., "replies": {purpose: [reply, ...]}}`` (agent.models.scripted.ScriptedModel);
prints the run's AgentResult as JSON on its last line.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid


def main(config: dict[str, object]) -> str:
    from agent.cli.runtime import build_runtime
    from agent.config import load_settings
    from agent.loop.run import run_task
    from agent.models.scripted import ScriptedModel

    settings = load_settings()
    replies = config["replies"]
    assert isinstance(replies, dict)
    rt = build_runtime(settings, model=ScriptedModel(replies))
    _, limits = settings.resolve_limits(model_local=False)
    task, run_id = str(config["task"]), uuid.uuid4().hex[:12]
    rt.register_task(run_id, task, limits)  # the judge service holds the limits
    rt.confine()  # before the first model call, as nib run does
    print(rt.first_line(), file=sys.stderr)
    result = asyncio.run(run_task(task, rt.deps(limits=limits), run_id=run_id))
    return result.model_dump_json()


if __name__ == "__main__":
    print(main(json.loads(sys.argv[1])))
