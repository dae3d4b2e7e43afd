"""Inside the sandbox: the expert's worker simulates episodes, the judge's worker judges traces.

`python -m datafarm.task.isolated_worker expert` answers {"op": "simulate", ...} requests: it runs the
expert on a seed (datafarm.task.rollout.simulate_episode) and saves the trace, and the recorded episode
when asked, into its writable folder; it never sees the judge. `... judge` answers {"op": "judge", ...}:
it loads the judge and a saved trace and replies with the verdict; it never sees the expert. The host
side is datafarm.task.isolation. Anything an agent's code raises becomes a reply, never a dead worker.
"""

from __future__ import annotations

import importlib.util
import sys
import traceback
from pathlib import Path
from typing import Any

import numpy as np

from datafarm.agent.sandbox_worker import serve
from datafarm.task.trace import Trace


class _DoNothing:
    """The contract's negative control: an expert that does nothing."""

    @staticmethod
    def solve(env, skills, params):
        return None


def _failure(error: BaseException) -> dict[str, Any]:
    return {"failure": f"{type(error).__name__}: {error}",
            "traceback": "".join(traceback.format_exc().splitlines(True)[-12:])}


def _package(scene_dir: Path, expert_file: Path | None):
    from datafarm.scene.spec import load_scene_spec
    from datafarm.task.package import TaskPackage, load_params, load_task_info

    info = load_task_info(scene_dir / "task.yaml")
    params = load_params(scene_dir / "params.yaml")
    return TaskPackage(scene_dir, info, load_scene_spec(scene_dir / "scene.yaml"), params, expert_file, None)


def simulate(job: dict[str, Any]) -> dict[str, Any]:
    from datafarm.sim.config import RigConfig
    from datafarm.task.randomization import RandomizationConfig
    from datafarm.task.rollout import simulate_episode

    try:
        expert_file = Path(job["expert_file"]) if job.get("expert_file") else None
        package = _package(Path(job["scene_dir"]), expert_file)
        randomization = RandomizationConfig.model_validate(job["randomization"]) if job.get("randomization") else None
        rig_config = RigConfig.model_validate(job["rig_config"]) if job.get("rig_config") else None
        episode = simulate_episode(package, int(job["seed"]), randomization, rig_config, job.get("record_dir"),
                                   job.get("wall_limit"), None if expert_file else _DoNothing())
        episode.trace.save(job["trace_path"])
    except Exception as error:  # the expert would not even load, or broke the simulator: a rejected episode
        return _failure(error)
    return {"task": episode.task, "seed": episode.seed, "steps": episode.steps, "sim_seconds": episode.sim_seconds,
            "wall_seconds": episode.wall_seconds, "error": episode.error, "traceback": episode.traceback,
            "sample": episode.sample, **_memory_peaks()}


def _memory_peaks() -> dict[str, int]:
    """This worker's peak address space and resident memory so far (sizing its limits)."""
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    return {"vm_peak_bytes": int(status["VmPeak"].split()[0]) * 1024, "rss_peak_bytes": int(status["VmHWM"].split()[0]) * 1024}


def judge(job: dict[str, Any]) -> dict[str, Any]:
    try:
        path = Path(job["judge_file"])
        spec = importlib.util.spec_from_file_location("datafarm_judge_isolated", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        verdict = module.judge(Trace.load(job["trace_path"]), job.get("params") or {})
        return {"checks": {str(k): bool(v) for k, v in verdict.checks.items()},
                "values": {str(k): float(np.asarray(v)) for k, v in verdict.values.items()},
                "reason": str(verdict.reason)}
    except Exception as error:
        return _failure(error)


def main(argv: list[str]) -> None:
    role = argv[0] if argv else ""
    if role == "expert":
        import datafarm.task.rollout  # noqa: F401  (SAPIEN's start-up, paid before the ready line)

        serve(simulate)
    elif role == "judge":
        serve(judge)
    else:
        raise SystemExit(f"usage: python -m datafarm.task.isolated_worker expert|judge (got {argv})")


if __name__ == "__main__":
    main(sys.argv[1:])
