"""What sandboxing the expert and the judge costs: seconds per episode in-process vs sandboxed.

    .venv/bin/python benchmarks/sandbox_overhead.py [--task apple_on_scale] [--seeds 0 1 2 3 4] [--record-seeds 3]

Physics-only (the seed search) and recorded (cameras, lavapipe) episodes of one task, the same seeds
both ways: in this process (datafarm.task.rollout.run_episode, as the farm ran before) and through
datafarm.task.isolation.IsolatedRollouts (expert in sandbox A, judge in sandbox B, long-lived
workers). Prints the start-up the workers pay once, the steady per-episode times, what a fresh
sandbox per episode would cost instead, the workers' memory peaks, and whether the episodes match.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from datafarm.library import get_task
from datafarm.task.isolation import IsolatedRollouts
from datafarm.task.rollout import run_episode


def _timed(function, *args, **kwargs):
    started = time.perf_counter()
    result = function(*args, **kwargs)
    return result, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="apple_on_scale")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--record-seeds", type=int, nargs="*", default=[3])
    args = parser.parse_args()
    package = get_task(args.task)
    work = Path(tempfile.mkdtemp(prefix="sandbox-overhead-"))

    run_episode(package, args.seeds[0])  # warm this process (imports, first scene) like a farm mid-run
    here = {seed: _timed(run_episode, package, seed) for seed in args.seeds}
    here_rec = {seed: _timed(run_episode, package, seed, record_dir=work / f"here-{seed}") for seed in args.record_seeds}

    started = time.perf_counter()
    with IsolatedRollouts(package, work / "sandboxes") as rollouts:
        first, first_seconds = _timed(rollouts.run, args.seeds[0])
        there, outside_simulation = {}, []
        for seed in args.seeds:
            there[seed] = _timed(rollouts.run, seed)
            outside_simulation.append(there[seed][1] - rollouts.last_reply["wall_seconds"])  # IPC, trace, judge
        physics_peak = dict(rollouts.last_reply)
        there_rec = {seed: _timed(rollouts.run, seed, record_dir=work / f"there-{seed}") for seed in args.record_seeds}
        record_peak = dict(rollouts.last_reply)
        starts = rollouts.expert.starts + rollouts.judge.worker.starts
    whole = time.perf_counter() - started
    # a fresh pair of sandboxes per episode (no long-lived worker): what amortising saves
    with IsolatedRollouts(package, work / "one-shot") as one_shot:
        _, one_shot_seconds = _timed(one_shot.run, args.seeds[0])

    same = all(np.array_equal(here[s][0].trace.qpos, there[s][0].trace.qpos) and
               here[s][0].verdict.checks == there[s][0].verdict.checks for s in args.seeds)
    same_rec = all(np.array_equal(here_rec[s][0].trace.qpos, there_rec[s][0].trace.qpos) for s in args.record_seeds)
    physics_here = statistics.mean(t for _, t in here.values())
    physics_there = statistics.mean(t for _, t in there.values())
    startup = first_seconds - physics_there

    print(f"task {args.task}; physics seeds {args.seeds}; recorded seeds {args.record_seeds}")
    print(f"{'':44s}{'in-process':>12s}{'sandboxed':>12s}{'overhead':>10s}")
    print(f"{'physics-only episode (s, mean)':44s}{physics_here:12.2f}{physics_there:12.2f}"
          f"{physics_there / physics_here - 1:10.0%}")
    if args.record_seeds:
        rec_here = statistics.mean(t for _, t in here_rec.values())
        rec_there = statistics.mean(t for _, t in there_rec.values())
        print(f"{'recorded episode, 3 cameras (s, mean)':44s}{rec_here:12.2f}{rec_there:12.2f}"
              f"{rec_there / rec_here - 1:10.0%}")
    print(f"per sandboxed physics episode, time outside the simulation (requests, trace copy, judge; s): "
          f"{statistics.mean(outside_simulation):.3f} mean, {max(outside_simulation):.3f} max")
    print(f"worker start-up, both sandboxes, paid once (s): {startup:.2f} ({starts} starts for "
          f"{len(args.seeds) + 1 + len(args.record_seeds)} episodes, {whole:.1f} s in all)")
    print(f"one episode in fresh sandboxes, start-up included (s): {one_shot_seconds:.2f}")
    print(f"expert worker peaks: physics {physics_peak.get('vm_peak_bytes', 0) / 2**30:.2f} GiB address space, "
          f"{physics_peak.get('rss_peak_bytes', 0) / 2**30:.2f} GiB resident; after recording "
          f"{record_peak.get('vm_peak_bytes', 0) / 2**30:.2f} / {record_peak.get('rss_peak_bytes', 0) / 2**30:.2f} GiB")
    print(f"same episodes (qpos and checks) in-process and sandboxed: physics {same}, recorded {same_rec}")
    print(f"first sandboxed episode accepted: {first.success}")


if __name__ == "__main__":
    main()
