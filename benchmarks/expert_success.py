"""Expert and blind-replay success per built-in task over seeded, fully randomized episodes (physics only).

    python benchmarks/expert_success.py [--seeds 50] [--tasks apple_on_scale nest_cups ...]

Prints per task: the expert's success rate, the blind-replay success rate (the actions the expert
commanded on the source seed, replayed open-loop on N new seeds: data whose replay succeeds teaches
nothing a camera is needed for), mean episode length (simulated s), wall time per successful expert
episode, and the most common failure reasons of the expert.
"""

from __future__ import annotations

import argparse
import collections
import time

import numpy as np

from datafarm.library import available_tasks, get_task
from datafarm.policy.controls import ActionReplay
from datafarm.task.package import TaskPackage
from datafarm.task.randomization import RandomizationConfig
from datafarm.task.rollout import EpisodeResult, run_episode


class RecordingExpert:
    """The task's expert, keeping every action it commands (as the rig applied it, clipped to the
    joint limits, as a recorded episode stores it)."""

    def __init__(self, expert) -> None:
        self.expert = expert
        self.actions: list[np.ndarray] = []

    def solve(self, env, skills, params) -> None:
        step = env.step

        def recorded(action):
            report = step(action)
            self.actions.append(report.target.copy())
            return report

        env.step = recorded  # this env only; restored so the rollout's settling wait is not recorded
        try:
            self.expert.solve(env, skills, params)
        finally:
            env.step = step


class BlindReplay:
    """An 'expert' that looks at nothing: it steps through fixed actions (the rollout then holds 0.5 s)."""

    def __init__(self, actions: np.ndarray) -> None:
        self.policy = ActionReplay(actions)

    def solve(self, env, skills, params) -> None:
        self.policy.reset()
        for _ in range(len(self.policy.actions)):
            env.step(self.policy.act({}, env.rig.qpos()))


def recorded_expert_actions(package: TaskPackage, seed: int) -> tuple[np.ndarray, EpisodeResult]:
    """The (T, 14) actions the expert commanded on `seed` (fully randomized), and that episode's result."""
    recording = RecordingExpert(package.load_expert())
    result = run_episode(package, seed, RandomizationConfig(), expert=recording)
    return np.asarray(recording.actions), result


def blind_replay(package: TaskPackage, actions: np.ndarray, seed: int, judge=None) -> EpisodeResult:
    """`actions` replayed open-loop on `seed`'s fully randomized episode, judged by the task's judge."""
    return run_episode(package, seed, RandomizationConfig(), expert=BlindReplay(actions), judge=judge)


def _reason(result: EpisodeResult) -> str:
    return (result.error or result.verdict.reason).split(" (")[0][:60]


def measure(task: str, seeds: int, source_seed: int = 0) -> dict:
    """Expert on seeds 0..N-1 (the source seed's run is recorded); blind replay on N seeds after it."""
    package = get_task(task)
    expert, judge = package.load_expert(), package.load_judge()
    results, started = [], time.perf_counter()
    source: tuple[np.ndarray, EpisodeResult] | None = None
    for seed in range(seeds):
        if seed == source_seed:
            source = recorded_expert_actions(package, seed)
            results.append(source[1])
        else:
            results.append(run_episode(package, seed, RandomizationConfig(), expert=expert, judge=judge))
    wall = time.perf_counter() - started
    actions, source_result = source or recorded_expert_actions(package, source_seed)
    replays = [blind_replay(package, actions, seed, judge) for seed in range(source_seed + 1, source_seed + 1 + seeds)]
    successes = [r for r in results if r.success]
    reasons = collections.Counter(_reason(r) for r in results if not r.success)
    return {
        "task": task,
        "success": len(successes) / len(results),
        "blind": sum(r.success for r in replays) / len(replays),
        "source_ok": source_result.success,
        "length": sum(r.sim_seconds for r in results) / len(results),
        "wall_per_success": wall / max(1, len(successes)),
        "failures": reasons.most_common(2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--tasks", nargs="*", default=None, help="default: every built-in task")
    parser.add_argument("--source-seed", type=int, default=0, help="the seed whose expert actions are replayed")
    args = parser.parse_args()
    print(f"{args.seeds} seeds, full randomization, physics only; blind replay: seed {args.source_seed}'s "
          f"expert actions on seeds {args.source_seed + 1}..{args.source_seed + args.seeds}\n")
    print(f"{'task':<17}{'expert':>8}{'blind':>8}{'episode s':>11}{'wall s/success':>16}  top failures")
    failed_sources = False
    for task in args.tasks or available_tasks():
        row = measure(task, args.seeds, args.source_seed)
        failed_sources |= not row["source_ok"]
        failures = "; ".join(f"{n}x {reason}" for reason, n in row["failures"]) or "-"
        blind = f"{row['blind']:.0%}" + ("" if row["source_ok"] else "*")
        print(f"{row['task']:<17}{row['success']:>8.0%}{blind:>8}{row['length']:>11.1f}"
              f"{row['wall_per_success']:>16.2f}  {failures}", flush=True)
    if failed_sources:
        print("\n* the expert failed on the source seed: its replay is of a failed episode")


if __name__ == "__main__":
    main()
