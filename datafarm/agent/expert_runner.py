"""Run agent-written experts on seeds for their author, inside the sandboxes, judged by a judge it never sees.

`sandboxed_expert_runner(root)` gives the callback the expert author's `run_expert` tool calls: each
call simulates root/expert/expert.py on the seeds in the expert's sandbox (root/judge/ masked) and
judges each trace in the judge's own sandbox (datafarm.task.isolation), then returns only what the
author may learn (datafarm.task.isolation.expert_feedback): success rate, its own errors and
tracebacks with any judge text cut, and the names of the checks that failed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from datafarm.agent.tools import ExpertRunner


def sandboxed_expert_runner(root: Path, hidden: Sequence[Path] = (), wall_limit: float = 120.0) -> ExpertRunner:
    """The run_expert callback for an author whose files are root/scene, root/expert, root/judge.

    `hidden` are further paths the sandboxes must not read (the workspace around root); the
    sandboxes write only under root/trials.
    """
    root = Path(root)

    def run(seeds: list[int]) -> dict[str, Any]:
        from datafarm.task.isolation import IsolatedRollouts, expert_feedback
        from datafarm.task.package import load_task_package

        judge_file = root / "judge" / "judge.py"
        package = load_task_package(root / "scene", root / "expert" / "expert.py", judge_file)  # YAML only
        with IsolatedRollouts(package, root / "trials", hidden=hidden) as rollouts:
            results = [rollouts.run(seed, wall_limit=wall_limit) for seed in seeds]
        return expert_feedback(results, judge_file)

    return run
