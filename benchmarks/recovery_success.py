"""Expert success on recovery episodes, per task and disturbance kind (physics only).

    python benchmarks/recovery_success.py [--seeds 50] [--tasks apple_on_scale ...]

Every seed is a recovery episode of one kind (`recovery_fraction` 1, only that kind): the arm pushed off
its path, or the object taken away at the grasp (datafarm/task/recovery.py). Prints per task and kind:
how many episodes the disturbance was applied in (a push waits for a moment when nothing is handled;
a misgrasp needs a grasp), expert success among those, the mean disturbance distance, and the most
common failures.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses

import numpy as np

from datafarm.library import available_tasks, get_task
from datafarm.task.randomization import RandomizationConfig
from datafarm.task.rollout import run_episode


def measure(task: str, kind: str, seeds: int) -> dict:
    package = get_task(task)
    package = dataclasses.replace(package, info=package.info.model_copy(update={"recovery": [kind]}))
    expert, judge = package.load_expert(), package.load_judge()
    config = RandomizationConfig(recovery_fraction=1.0)
    applied = [r for r in (run_episode(package, seed, config, expert=expert, judge=judge) for seed in range(seeds))
               if r.recovery]
    failures = collections.Counter((r.error or r.verdict.reason).split(" (")[0][:60] for r in applied if not r.success)
    return {"applied": len(applied), "success": sum(r.success for r in applied),
            "distance": float(np.mean([r.recovery["distance_m"] for r in applied])) if applied else float("nan"),
            "failures": failures.most_common(2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--tasks", nargs="*", default=None, help="default: every built-in task that declares recovery")
    args = parser.parse_args()
    tasks = [t for t in (args.tasks or available_tasks()) if get_task(t).info.recovery]
    print(f"expert success on recovery episodes, {args.seeds} seeds per task and kind, physics only\n")
    print(f"{'task':<18}{'kind':<10}{'applied':>9}{'success':>9}{'mean m':>8}  top failures")
    for task in tasks:
        for kind in get_task(task).info.recovery:
            row = measure(task, kind, args.seeds)
            rate = row["success"] / row["applied"] if row["applied"] else float("nan")
            failures = "; ".join(f"{n}x {reason}" for reason, n in row["failures"]) or "-"
            print(f"{task:<18}{kind:<10}{row['applied']:>5}/{args.seeds:<3}{rate:>9.0%}{row['distance']:>8.3f}  {failures}",
                  flush=True)


if __name__ == "__main__":
    main()
