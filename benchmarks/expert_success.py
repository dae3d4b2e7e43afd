"""Expert success per built-in task over seeded, fully randomized episodes (physics only).

    python benchmarks/expert_success.py [--seeds 50] [--tasks apple_on_scale nest_cups ...]

Prints per task: success rate, mean episode length (simulated s), wall time per successful episode,
and the most common failure reasons.
"""

from __future__ import annotations

import argparse
import collections
import time

from datafarm.library import available_tasks, get_task
from datafarm.task.randomization import RandomizationConfig
from datafarm.task.rollout import run_episode


def measure(task: str, seeds: int) -> dict:
    package = get_task(task)
    expert, judge = package.load_expert(), package.load_judge()
    results, started = [], time.perf_counter()
    for seed in range(seeds):
        results.append(run_episode(package, seed, RandomizationConfig(), expert=expert, judge=judge))
    wall = time.perf_counter() - started
    successes = [r for r in results if r.success]
    reasons = collections.Counter((r.error or r.verdict.reason).split(" (")[0][:70] for r in results if not r.success)
    return {
        "task": task,
        "success": len(successes) / len(results),
        "length": sum(r.sim_seconds for r in results) / len(results),
        "wall_per_success": wall / max(1, len(successes)),
        "failures": reasons.most_common(2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--tasks", nargs="*", default=None, help="default: every built-in task")
    args = parser.parse_args()
    tasks = args.tasks or available_tasks()
    print(f"expert success over {args.seeds} seeds, full randomization, physics only\n")
    print(f"{'task':<18}{'success':>9}{'episode s':>11}{'wall s/success':>16}  top failures")
    for task in tasks:
        row = measure(task, args.seeds)
        failures = "; ".join(f"{n}x {reason}" for reason, n in row["failures"]) or "-"
        print(f"{row['task']:<18}{row['success']:>9.0%}{row['length']:>11.1f}{row['wall_per_success']:>16.2f}  {failures}")


if __name__ == "__main__":
    main()
