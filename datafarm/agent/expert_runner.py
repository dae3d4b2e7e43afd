"""Run agent-written experts on seeds inside the bubblewrap sandbox.

`sandboxed_expert_runner(root)` gives the callback the expert author's `run_expert` tool calls: it
starts `python -m datafarm.agent.expert_runner ROOT SEEDS OUT` in the sandbox (no network,
read-only system, writes only to ROOT/trials), which runs root/expert/expert.py judged by
root/judge/judge.py and writes the statistics the tool returns.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from datafarm.agent.sandbox import SandboxLimits, run_python_in_sandbox
from datafarm.agent.tools import ExpertRunner, in_process_expert_runner
from datafarm.paths import REPO_ROOT


def sandboxed_expert_runner(root: Path, limits: SandboxLimits | None = None) -> ExpertRunner:
    root = Path(root)

    def run(seeds: list[int]) -> dict[str, Any]:
        trials = root / "trials"
        trials.mkdir(parents=True, exist_ok=True)
        out = trials / "result.json"
        out.unlink(missing_ok=True)
        result = run_python_in_sandbox(
            Path(__file__), workdir=trials, args=[str(root), json.dumps(seeds), str(out)],
            readable=[REPO_ROOT, root / "scene", root / "expert", root / "judge"],
            limits=limits or SandboxLimits(wall_seconds=60.0 + 30.0 * len(seeds), memory_bytes=4 << 30),
            env={"PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false"},
        )
        if not result.ok or not out.exists():
            return {"seeds": seeds, "successes": 0, "success_rate": 0.0,
                    "error": f"the sandboxed run failed ({result.violation or result.returncode}): {result.stderr[-2000:]}"}
        return json.loads(out.read_text())

    return run


def main(argv: list[str]) -> None:
    root, seeds, out = Path(argv[0]), json.loads(argv[1]), Path(argv[2])
    stats = in_process_expert_runner(root)(seeds)  # we are inside the sandbox here
    out.write_text(json.dumps(stats, default=str))


if __name__ == "__main__":
    main(sys.argv[1:])
