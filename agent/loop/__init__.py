"""The run: composed turn steps, limits and profiles, progress detectors, state, result,
checklist, history and lessons. ``agent.loop.run`` holds ``run_task`` and ``resume``."""
